# -*- coding: utf-8 -*-
"""Which topology changes the lab applies in place (GPU hosts only) and which rebuild it."""

from __future__ import annotations

import types

from ansible_collections.netscale.multinic.plugins.module_utils.lab import incremental

CHANGED = "topology, plan or templates changed since the build"


def _lab(new_hashes, kinds, hosts):
    spec = types.SimpleNamespace(node_hashes=lambda: dict(new_hashes), node_list=lambda: list(kinds.items()),
                                 hosts=[{"name": h} for h in hosts])
    return types.SimpleNamespace(spec=spec)


def _data(old_hashes, kinds):
    return {"status": "ready", "node_hashes": dict(old_hashes),
            "nodes": dict((n, {"kind": k}) for n, k in kinds.items() if n in old_hashes)}


OLD = {"s1": "a", "tor1": "b", "st": "c", "h1": "d", "h2": "e"}
KINDS = {"s1": "spine", "tor1": "tor", "st": "storage", "h1": "gpu_host", "h2": "gpu_host"}


def test_added_host_is_built_alone():
    kinds = dict(KINDS, h3="gpu_host")
    lab = _lab(dict(OLD, h3="f"), kinds, ["h1", "h2", "h3"])
    ch = incremental.hosts_only(lab, _data(OLD, KINDS), [CHANGED, "node h3 missing"])
    assert ch.remove == [] and [h["name"] for h in ch.add] == ["h3"]
    assert ch.unchanged == ["h1", "h2", "s1", "st", "tor1"]


def test_removed_and_reshaped_hosts():
    kinds = dict((k, v) for k, v in KINDS.items() if k != "h2")
    lab = _lab({"s1": "a", "tor1": "b", "st": "c", "h1": "D"}, kinds, ["h1"])
    ch = incremental.hosts_only(lab, _data(OLD, KINDS), [CHANGED])
    assert ch.remove == ["h1", "h2"] and [h["name"] for h in ch.add] == ["h1"]


def test_box_change_dead_process_or_old_state_rebuilds():
    assert incremental.hosts_only(_lab(dict(OLD, tor1="B"), KINDS, ["h1", "h2"]), _data(OLD, KINDS), [CHANGED]) is None
    new_rack = dict(KINDS, tor2="tor")
    assert incremental.hosts_only(_lab(dict(OLD, tor2="x"), new_rack, ["h1", "h2"]), _data(OLD, KINDS),
                                  [CHANGED, "node tor2 missing"]) is None
    lab = _lab(dict(OLD, h1="D"), KINDS, ["h1", "h2"])
    assert incremental.hosts_only(lab, _data(OLD, KINDS), [CHANGED, "process h2/init (pid 9) is gone"]) is None
    no_hashes = _data(OLD, KINDS)
    del no_hashes["node_hashes"]
    assert incremental.hosts_only(lab, no_hashes, [CHANGED]) is None
    failed = dict(_data(OLD, KINDS), status="failed")
    assert incremental.hosts_only(lab, failed, [CHANGED]) is None
