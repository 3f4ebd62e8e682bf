# -*- coding: utf-8 -*-
"""Which topology changes the lab applies in place (GPU hosts only) and which rebuild it."""

from __future__ import annotations

import types

from ansible_collections.netscale.multinic.plugins.module_utils.lab import incremental

CHANGED = "topology, plan or templates changed since the build"


def _lab(new_hashes, kinds, hosts):
    spec = types.SimpleNamespace(node_hashes=lambda: dict(new_hashes), node_list=lambda: list(kinds.items()),
                                 hosts=[{"name": h, "rack": "r1"} for h in hosts],
                                 racks=[{"name": "r1", "tor": {"name": "tor1"}}])
    return types.SimpleNamespace(spec=spec)


def _data(old_hashes, kinds):
    return {"status": "ready", "node_hashes": dict(old_hashes),
            "nodes": dict((n, {"kind": k}) for n, k in kinds.items() if n in old_hashes)}


OLD = {"s1": "a", "tor1": "b", "st": "c", "h1": "d", "h2": "e"}
KINDS = {"s1": "spine", "tor1": "tor", "st": "storage", "h1": "gpu_host", "h2": "gpu_host"}


def test_added_host_is_built_alone():
    kinds = dict(KINDS, h3="gpu_host")
    lab = _lab(dict(OLD, h3="f"), kinds, ["h1", "h2", "h3"])
    ch = incremental.in_place_change(lab, _data(OLD, KINDS), [CHANGED, "node h3 missing"])
    assert ch.remove == [] and [h["name"] for h in ch.add] == ["h3"]
    assert ch.unchanged == ["h1", "h2", "s1", "st", "tor1"]


def test_removed_and_reshaped_hosts():
    kinds = dict((k, v) for k, v in KINDS.items() if k != "h2")
    lab = _lab({"s1": "a", "tor1": "b", "st": "c", "h1": "D"}, kinds, ["h1"])
    ch = incremental.in_place_change(lab, _data(OLD, KINDS), [CHANGED])
    assert ch.remove == ["h1", "h2"] and [h["name"] for h in ch.add] == ["h1"]


def test_rack_added_builds_its_tor_and_hosts_and_reloads_the_spine():
    kinds = dict(KINDS, tor2="tor", h3="gpu_host")
    lab = _lab(dict(OLD, s1="A", tor2="x", h3="y"), kinds, ["h1", "h2", "h3"])
    lab.spec.racks = [{"name": "r1", "tor": {"name": "tor1"}}, {"name": "r2", "tor": {"name": "tor2"}}]
    lab.spec.hosts = [{"name": "h1", "rack": "r1"}, {"name": "h2", "rack": "r1"}, {"name": "h3", "rack": "r2"}]
    ch = incremental.in_place_change(lab, _data(OLD, KINDS), [CHANGED, "node tor2 missing", "node h3 missing"])
    assert ch.add_tors == ["tor2"] and ch.remove_tors == [] and ch.reload_spines == ["s1"]
    assert [h["name"] for h in ch.add] == ["h3"] and ch.remove == []
    assert ch.unchanged == ["h1", "h2", "st", "tor1"]


def test_changed_tor_takes_its_hosts_with_it():
    lab = _lab(dict(OLD, tor1="B"), KINDS, ["h1", "h2"])
    lab.spec.racks = [{"name": "r1", "tor": {"name": "tor1"}}]
    lab.spec.hosts = [{"name": "h1", "rack": "r1"}, {"name": "h2", "rack": "r1"}]
    data = _data(OLD, KINDS)
    for h in ("h1", "h2"):
        data["nodes"][h]["rack"] = "r1"
    ch = incremental.in_place_change(lab, data, [CHANGED])
    assert ch.remove_tors == ["tor1"] == ch.add_tors and ch.remove == ["h1", "h2"]
    assert [h["name"] for h in ch.add] == ["h1", "h2"]


def test_storage_or_spine_set_change_dead_process_or_old_state_rebuilds():
    assert incremental.in_place_change(_lab(dict(OLD, st="C"), KINDS, ["h1", "h2"]), _data(OLD, KINDS), [CHANGED]) is None
    more_spines = dict(KINDS, s2="spine")
    assert incremental.in_place_change(_lab(dict(OLD, s2="x"), more_spines, ["h1", "h2"]), _data(OLD, KINDS),
                                       [CHANGED, "node s2 missing"]) is None
    lab = _lab(dict(OLD, h1="D"), KINDS, ["h1", "h2"])
    assert incremental.in_place_change(lab, _data(OLD, KINDS), [CHANGED, "process h2/init (pid 9) is gone"]) is None
    no_hashes = _data(OLD, KINDS)
    del no_hashes["node_hashes"]
    assert incremental.in_place_change(lab, no_hashes, [CHANGED]) is None
    failed = dict(_data(OLD, KINDS), status="failed")
    assert incremental.in_place_change(lab, failed, [CHANGED]) is None
