# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change a running lab in place when only its GPU hosts changed.

A topology change that adds or removes GPU hosts, or changes a host's NICs, touches nothing else:
the ToRs start with their uplink policy only, so their FRR configs do not depend on the hosts. The
build compares each node's hash (``LabSpec.node_hashes``) with the one recorded in the state file;
when every box (spine, ToR, storage) is unchanged and every process of the unchanged nodes is alive,
only the changed hosts are torn down (their processes by PID, cgroups, NIC links, namespace name,
directory) and the new ones built and wired. Every other node keeps its processes and state (the lab
test compares their PIDs and ``ip`` dumps before and after). Anything else (a rack, a spine, the image,
dead processes) rebuilds the whole lab, as does ``rebuild: true``.
"""

from __future__ import annotations

import dataclasses
import os
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab import nodes, wiring
from ansible_collections.netscale.multinic.plugins.module_utils.lab import teardown as teardown_steps
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import State
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name


@dataclasses.dataclass
class HostChange:
    remove: list     # host names whose objects go (gone from the topology, or changed)
    add: list        # host dicts of the spec to build (new, or changed)
    unchanged: list  # node names left alone


def hosts_only(lab, data, reasons):
    """A HostChange when the difference between the running lab and the spec is GPU hosts only,
    else None (the caller rebuilds everything)."""
    if data.get("status") != "ready" or "node_hashes" not in data:
        return None
    if any(not r.startswith(("topology, plan or templates changed", "node ")) for r in reasons):
        return None   # dead processes, a failed build: rebuild
    old, new = data["node_hashes"], lab.spec.node_hashes()
    kinds = dict((n, nd.get("kind")) for n, nd in data.get("nodes", {}).items())
    want_kinds = dict(lab.spec.node_list())
    changed = set(n for n in set(old) | set(new) if old.get(n) != new.get(n))
    for n in changed:
        if kinds.get(n, want_kinds.get(n)) != "gpu_host" or want_kinds.get(n, "gpu_host") != "gpu_host":
            return None
    if set(kinds) != set(old):
        return None   # the state's nodes and its hashes disagree: do not guess
    remove = sorted(n for n in changed if n in old)
    add = [h for h in lab.spec.hosts if h["name"] in changed]
    return HostChange(remove=remove, add=add, unchanged=sorted(n for n in new if n not in changed))


def _owned(lab, r, name):
    """Does state record r belong to GPU host `name`?"""
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


def apply(lab, data, change):
    t0 = time.monotonic()
    lab.state = State(lab.fabric, lab.state_root, data)
    lab.log("lab: changing GPU hosts only (remove %s, add %s); %d nodes untouched" % (
        change.remove or "none", [h["name"] for h in change.add] or "none", len(change.unchanged)))
    removed = []
    lab.state.set(status="building")
    for name in change.remove:
        records = [r for r in lab.state.data["resources"] if _owned(lab, r, name)]
        work = teardown_steps.remove_resources(lab, records)
        if work.problems:
            lab.state.set(status="failed", error="; ".join(work.problems))
            raise LabError("removing host %s: %s" % (name, "; ".join(work.problems)))
        lab.state.drop(name, records)
        removed.extend(work.removed)
    if change.add:
        try:
            rootfs = lab.state.data.get("image_rootfs")
            if not rootfs or not os.path.isdir(rootfs):
                raise LabError("the lab's image %r is gone; rebuild the lab (rebuild: true)" % rootfs)
            t1 = time.monotonic()
            nodes.start_hosts(lab, rootfs, change.add)
            t2 = time.monotonic()
            wiring.wire_hosts(lab, change.add)
            lab.timings.update(hosts=round(t2 - t1, 2), links=round(time.monotonic() - t2, 2))
        except BaseException as e:
            # the hosts started so far are recorded; the next build sees a failed lab and rebuilds it
            lab.state.set(status="failed", error=str(e))
            raise
    lab.timings["change"] = round(time.monotonic() - t0, 2)
    lab.state.set(status="ready", plan_hash=lab.spec.plan_hash(), node_hashes=lab.spec.node_hashes(),
                  timings=lab.timings)
    return {"changed": True, "state_file": lab.state.path, "nodes": lab.state.data["nodes"],
            "timings": lab.timings, "removed": removed, "incremental": {
                "removed_hosts": change.remove, "added_hosts": [h["name"] for h in change.add],
                "unchanged_nodes": change.unchanged}}
