# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change a running lab in place when only GPU hosts and racks changed.

The build compares each node's hash (``LabSpec.node_hashes``) with the one recorded in the state
file. A GPU host added, removed or re-shaped (NICs) touches nothing else: the ToRs start with their
uplink policy only, so their FRR configs do not depend on the hosts. A rack added or removed adds or
removes a ToR box (with its hosts and spine links) and changes the spines' configs, which are given
in place with frr-reload.py (no daemon restart, the other sessions stay up). When every process of
the unchanged nodes is alive, only the changed nodes are torn down (their processes by PID, cgroups,
links, namespace name, directory) and the new ones built, wired and started. Every other node keeps
its processes and state (the lab test compares their PIDs and ``ip`` dumps before and after).
Anything else (the storage node, a spine added or removed, the image, dead processes) rebuilds the
whole lab, as does ``rebuild: true``.
"""

from __future__ import annotations

import dataclasses
import os
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab import nodes, routing, wiring
from ansible_collections.netscale.multinic.plugins.module_utils.lab import teardown as teardown_steps
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import State
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name


@dataclasses.dataclass
class InPlaceChange:
    remove: list     # host names whose objects go (gone from the topology, or changed)
    add: list        # host dicts of the spec to build (new, or changed)
    unchanged: list  # node names left alone
    remove_tors: list = dataclasses.field(default_factory=list)   # ToR boxes that go (rack gone or changed)
    add_tors: list = dataclasses.field(default_factory=list)      # ToR boxes to build
    reload_spines: list = dataclasses.field(default_factory=list)  # spines given their new config in place


def in_place_change(lab, data, reasons):
    """A InPlaceChange when the running lab can follow the spec in place - GPU hosts, racks (a ToR with
    its hosts) and the spines' configs changed, nothing else - else None (the caller rebuilds)."""
    if data.get("status") != "ready" or "node_hashes" not in data:
        return None
    if any(not r.startswith(("topology, plan or templates changed", "node ")) for r in reasons):
        return None   # dead processes, a failed build: rebuild
    old, new = data["node_hashes"], lab.spec.node_hashes()
    nodes_old = data.get("nodes", {})
    if set(nodes_old) != set(old):
        return None   # the state's nodes and its hashes disagree: do not guess
    kinds = dict((n, nd.get("kind")) for n, nd in nodes_old.items())
    kinds.update(dict(lab.spec.node_list()))
    changed = set(n for n in set(old) | set(new) if old.get(n) != new.get(n))
    spines = sorted(n for n in changed if kinds[n] == "spine")
    if any(kinds[n] not in ("gpu_host", "tor", "spine") for n in changed) or any(
            n not in old or n not in new for n in spines):
        return None   # storage changed, a spine came or went: rebuild
    tors = sorted(n for n in changed if kinds[n] == "tor")
    # a rebuilt ToR takes its rack's hosts with it (their NIC links end on it)
    racks = set(r["name"] for r in lab.spec.racks if r["tor"]["name"] in tors)
    for n, nd in nodes_old.items():
        if nd.get("kind") == "gpu_host" and nd.get("rack") in racks:
            changed.add(n)
    for h in lab.spec.hosts:
        if h["rack"] in racks:
            changed.add(h["name"])
    hosts = set(n for n in changed if kinds[n] == "gpu_host")
    return InPlaceChange(remove=sorted(n for n in hosts if n in old),
                         add=[h for h in lab.spec.hosts if h["name"] in hosts],
                         unchanged=sorted(n for n in new if n not in changed),
                         remove_tors=[n for n in tors if n in old], add_tors=[n for n in tors if n in new],
                         reload_spines=spines)


def _owned(lab, r, name):
    """Does state record r belong to node `name` (a GPU host, or a ToR once its hosts are gone)?"""
    ns = netns_name(name)
    if r.get("node") == name:
        return True
    if r["type"] == "netns":
        return r["name"] == ns
    if r["type"] == "link":   # records of builds before links carried their node
        return ns in (r.get("netns"), r.get("peer_netns"))
    if r["type"] == "cgroup":
        return (r["path"] + "/").startswith(lab.cg_dir(name) + "/")
    if r["type"] in ("dir", "mount"):
        return (r["path"] + "/").startswith(lab.node_dir(name) + "/")
    return False


def _remove_node(lab, name, removed):
    records = [r for r in lab.state.data["resources"] if _owned(lab, r, name)]
    work = teardown_steps.remove_resources(lab, records)
    if work.problems:
        lab.state.set(status="failed", error="; ".join(work.problems))
        raise LabError("removing %s: %s" % (name, "; ".join(work.problems)))
    lab.state.drop(name, records)
    removed.extend(work.removed)


def apply(lab, data, change):
    t0 = time.monotonic()
    lab.state = State(lab.fabric, lab.state_root, data)
    lab.log("lab: changing in place: hosts (remove %s, add %s), ToRs (remove %s, add %s), spines reloaded %s; "
            "%d nodes untouched" % (change.remove or "none", [h["name"] for h in change.add] or "none",
                                    change.remove_tors or "none", change.add_tors or "none",
                                    change.reload_spines or "none", len(change.unchanged)))
    removed = []
    lab.state.set(status="building")
    for name in change.remove + change.remove_tors:   # hosts first: their links end on the ToRs
        _remove_node(lab, name, removed)
    try:
        t1 = time.monotonic()
        if change.add_tors:
            nodes.start_boxes(lab, set(change.add_tors))
        if change.add:
            rootfs = lab.state.data.get("image_rootfs")
            if not rootfs or not os.path.isdir(rootfs):
                raise LabError("the lab's image %r is gone; rebuild the lab (rebuild: true)" % rootfs)
            nodes.start_hosts(lab, rootfs, change.add)
        t2 = time.monotonic()
        wiring.wire_hosts(lab, change.add, change.add_tors)
        t3 = time.monotonic()
        if change.add_tors:
            routing.start_frr(lab, set(change.add_tors))
        for spine in change.reload_spines:
            routing.reload_frr(lab, spine)
        if change.add_tors or change.reload_spines:
            routing.wait_bgp(lab)
        lab.timings.update(nodes=round(t2 - t1, 2), links=round(t3 - t2, 2), frr=round(time.monotonic() - t3, 2))
    except BaseException as e:
        # what was started is recorded; the next build sees a failed lab and rebuilds it
        lab.state.set(status="failed", error=str(e))
        raise
    lab.timings["change"] = round(time.monotonic() - t0, 2)
    lab.state.set(status="ready", plan_hash=lab.spec.plan_hash(), node_hashes=lab.spec.node_hashes(),
                  timings=lab.timings)
    return {"changed": True, "state_file": lab.state.path, "nodes": lab.state.data["nodes"],
            "timings": lab.timings, "removed": removed, "incremental": {
                "removed_hosts": change.remove, "added_hosts": [h["name"] for h in change.add],
                "removed_tors": change.remove_tors, "added_tors": change.add_tors,
                "reloaded_spines": change.reload_spines, "unchanged_nodes": change.unchanged}}
