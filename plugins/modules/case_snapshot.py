#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: case_snapshot
short_description: Snapshots of the devices of a monitoring case - which nodes, their files and the case's index
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the controller, in three steps of C(playbooks/case_snapshot.yml); the snapshot itself is
    C(netscale.multinic.rollout_snapshot) (triage, read-only) on each node.
  - O(step=targets) checks the case against the fabric's plan and returns the nodes to snapshot for its scope - nic
    and host cases the host and its ToR, tor the ToR and its rack's hosts, uplink the ToR and the spine (the zone's
    spines when the case names none), spine the spine and its zone's ToRs, zone the zone's spines, agent the host
    only. A node already snapshot (ok) in an earlier index of the case is kept, not taken again, unless O(force).
    Writes nothing.
  - O(step=node) writes one node's snapshot, C(<case_dir>/<node>.json), redacted (C(writing.redact) - config forms of
    a key and secret-named fields), mode 0600 in 0700 directories, and returns its index entry - C(ok), or failed
    with the reason (unreachable, the module failed, no command succeeded).
  - O(step=index) writes C(<case_dir>/index.json) - the case id, scope and root cause, C(taken_at) and per node its
    file, ok or failed with the reason; every target once (a node without a result is failed, never left out) - and
    returns C(complete). C(case_snapshot.yml) fails after it when the snapshot is partial, keeping the files it got.
  - Bad input (a case without a scope, an unknown scope kind, a host, ToR or spine the plan does not know) fails
    naming the field, the value and the fix, and writes nothing. The logic is
    C(plugins/module_utils/remediate/case_snapshot.py).
options:
  step:
    description: V(targets) - the nodes and the case's directory; V(node) - write one node's file; V(index) - write
      the index.
    type: str
    choices: [targets, node, index]
    default: targets
  case:
    description: O(step=targets) - the case, as the rulebook passes it (C({"case" {...}}), the case event) or bare
      (a line of the case file without C(state)).
    type: raw
  topology:
    description: O(step=targets) - the fabric's topology file (the inventory's source, C(multinic_topology_file)).
    type: path
  dir:
    description: O(step=targets) - the snapshots' directory on the controller; the case's files go to
      C(<dir>/<fabric>/<case id with / as +>/).
    type: path
  inventory:
    description: O(step=targets) - the inventory's host names (C(groups['all'])); a target outside it is recorded
      failed (it cannot be reached). Unset - not checked.
    type: list
    elements: str
  force:
    description: O(step=targets) - take every node again, also those an earlier index of the case has ok.
    type: bool
    default: false
  plan:
    description: O(step=node) and O(step=index) - the C(plan) that O(step=targets) returned.
    type: dict
  target:
    description: O(step=node) - the node, one element of the plan's C(take).
    type: dict
  result:
    description: O(step=node) - the registered result of C(netscale.multinic.rollout_snapshot) on the node (unreachable
      and failed results included); null when its task did not run.
    type: raw
  entries:
    description: O(step=index) - the entries O(step=node) returned, one per node taken (null for a node without one).
    type: list
    elements: raw
    default: []
attributes:
  check_mode:
    support: full
    description: Reads the plan and the earlier index and builds every record; writes nothing.
  diff_mode:
    support: partial
    description: O(step=index) - the index before and after. A node's file is evidence, written once per node - no
      diff.
  platform:
    support: full
    description: The controller.
    platforms: posix
"""

EXAMPLES = r"""
- name: Nodes to snapshot for a case
  netscale.multinic.case_snapshot:
    step: targets
    case: "{{ case_snapshot_case }}"
    topology: "{{ multinic_topology_file }}"
    dir: /srv/netscale/reports/cases
    inventory: "{{ groups['all'] }}"
  register: snap_plan

- name: One node's file (on the controller)
  netscale.multinic.case_snapshot:
    step: node
    plan: "{{ hostvars['localhost'].snap_plan.plan }}"
    target: "{{ item }}"
    result: "{{ node_snapshot }}"
  delegate_to: localhost

- name: The case's index
  netscale.multinic.case_snapshot:
    step: index
    plan: "{{ snap_plan.plan }}"
    entries: "{{ entries }}"
  register: snap_index
"""

RETURN = r"""
plan:
  description: O(step=targets) - C(case) (id, scope, root cause), C(fabric), C(case_dir), C(index_path), C(taken_at),
    C(targets) (every node of the scope - C(node), C(kind) host or frr, C(role) host, tor or spine, C(file)), C(take)
    (the targets to snapshot now), C(kept) (entries of an earlier run), C(not_in_inventory).
  returned: step=targets
  type: dict
take:
  description: O(step=targets) - the targets to snapshot now (the plan's C(take)).
  returned: step=targets
  type: list
  elements: dict
entry:
  description: O(step=node) - the node's index entry - C(node), C(kind), C(role), C(file), C(ok), C(reason),
    C(taken_at), C(commands_failed).
  returned: step=node
  type: dict
path:
  description: The file written (or that would be) - the node's file, or the index.
  returned: step=node or step=index
  type: str
index:
  description: O(step=index) - the index record written.
  returned: step=index
  type: dict
complete:
  description: O(step=index) - every node has its snapshot.
  returned: step=index
  type: bool
summary:
  description: One line - how many nodes were snapshot, and which are missing and why.
  returned: always
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import read_topology_file
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import case_snapshot as cs
from ansible_collections.netscale.multinic.plugins.module_utils.writing import read_text

REQUIRED = {"targets": ("case", "topology", "dir"), "node": ("plan", "target"), "index": ("plan",)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            step=dict(type="str", choices=["targets", "node", "index"], default="targets"),
            case=dict(type="raw"),
            topology=dict(type="path"),
            dir=dict(type="path"),
            inventory=dict(type="list", elements="str"),
            force=dict(type="bool", default=False),
            plan=dict(type="dict"),
            target=dict(type="dict"),
            result=dict(type="raw"),
            entries=dict(type="list", elements="raw", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    missing = [k for k in REQUIRED[p["step"]] if p[k] is None]
    if missing:
        module.fail_json(msg="case_snapshot step=%s: %s missing. Fix: set %s (nothing was written)." % (
            p["step"], ", ".join(missing), ", ".join(missing)))
    now = round(time.time(), 3)
    try:
        if p["step"] == "targets":
            topo = load_topology(read_topology_file(p["topology"]), source=p["topology"])
            fabric = budget.FabricView.from_topology(topo)
            snap = cs.plan(p["case"], fabric, topo.name, p["dir"], now, force=p["force"], inventory=p["inventory"])
            text = "case %s (%s): %d node(s) to snapshot, %d kept from an earlier run, %d outside the inventory" % (
                snap["case"]["id"], snap["case"]["scope"]["kind"], len(snap["take"]), len(snap["kept"]),
                len(snap["not_in_inventory"]))
            module.exit_json(changed=False, plan=snap, take=snap["take"], summary=text)
        if p["step"] == "node":
            target = p["target"]
            if target not in p["plan"].get("take", []):
                module.fail_json(msg="target: %r is not one of the plan's nodes to take. Fix: loop over the plan's "
                                 "take (nothing was written)." % (target.get("node") if isinstance(target, dict)
                                                                  else target,))
            body, entry = cs.node_entry(target, p["result"], now)
            path = os.path.join(p["plan"]["case_dir"], target["file"])
            changed = cs.write_json(path, body, check_mode=module.check_mode)
            module.exit_json(changed=changed, entry=entry, path=path, summary="%s: %s" % (
                target["node"], "ok" if entry["ok"] else "FAILED, %s" % entry["reason"]))
        idx = cs.index(p["plan"], p["entries"])
        before = read_text(p["plan"]["index_path"]) or ""
        changed = cs.write_json(p["plan"]["index_path"], idx, check_mode=module.check_mode)
        result = dict(changed=changed, index=idx, complete=idx["complete"], path=p["plan"]["index_path"],
                      summary=cs.summary(idx))
        if module._diff and changed:
            result["diff"] = {"before_header": p["plan"]["index_path"], "after_header": p["plan"]["index_path"],
                              "before": before, "after": cs.render(idx)}
        module.exit_json(**result)
    except (MultinicError, OSError, KeyError, TypeError) as exc:
        module.fail_json(msg="case_snapshot step=%s: %s" % (p["step"], exc))


if __name__ == "__main__":
    main()
