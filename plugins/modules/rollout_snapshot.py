# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: rollout_snapshot
short_description: Capture a node's state at detection time (triage) or a comparable state dump
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - V(triage) runs read-only commands and returns their output. GPU hosts (O(kind=host)) - addresses, links with
    counters, routes and rules (all tables), neighbours and proxy entries, tc qdiscs, BPF programs, workload
    namespaces, nstat counters, C(netscale*) units and their journal. FRR boxes (O(kind=frr)) - BGP summary and
    neighbors, routes, running config, link counters, kernel routes, nstat.
  - V(state) with O(kind=frr) (ToRs, spines) returns the running config (keys redacted), addresses, kernel routes of
    all tables, networking sysctls and the C(netscale) sysctl.d files, for comparing a ToR before a change and after
    its restore.
  - V(state) (hosts) returns a normalised dump meant to be compared before and after a change - addresses,
    routes, rules, proxy entries, networking sysctls, tc filters and qdiscs per device, C(netscale*) units and unit
    files, workload namespaces with their addresses and routes. Counters, timers, lifetimes and BPF program ids
    are left out.
  - Nothing is changed.
options:
  profile:
    description: V(triage) or V(state).
    type: str
    choices: [triage, state]
    default: triage
  kind:
    description: Node kind (V(host) GPU host, V(frr) ToR/spine running FRR).
    type: str
    choices: [host, frr]
    default: host
  node:
    description: Name recorded in the result (default the inventory hostname given by the caller).
    type: str
  workload_netns:
    description: Workload namespaces to include in a V(state) dump (default every namespace in C(ip netns)).
    type: list
    elements: str
  compare_to:
    description: >-
      With V(profile=state) - the C(state) of an earlier dump of the same node (for example before a change); the
      result's C(restored_exactly) says whether this dump equals it. Omit for no comparison.
    type: raw
  report:
    description: >-
      Also record the snapshot in the run's report (M(netscale.multinic.rollout_report) V(snapshot) event, done on the
      controller by this module's action plugin, after the capture and also when it failed or the node was
      unreachable) - C(dir) (the report directory) and C(wave). Snapshots taken in parallel are listed in the play's
      host order.
    type: dict
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode (the report, a controller-side artifact, is written too).
  diff_mode:
    support: none
    description: No diff.
  platform:
    support: full
    description: Linux with iproute2; bpftool, nstat, systemd and vtysh are used when present.
    platforms: posix
"""

EXAMPLES = r"""
- name: Snapshot a failing host
  netscale.multinic.rollout_snapshot:
    kind: host
    node: "{{ inventory_hostname }}"
  register: snap

- name: Snapshot a failing host into the run's report (snapshots/<wave>/<node>.json)
  netscale.multinic.rollout_snapshot:
    kind: host
    node: "{{ inventory_hostname }}"
    report: {dir: "{{ rollout_report_dir }}", wave: canary}
  ignore_errors: true
  ignore_unreachable: true

- name: Comparable dump before the change
  netscale.multinic.rollout_snapshot:
    profile: state
  register: before
"""

RETURN = r"""
node:
  description: Node name.
  returned: always
  type: str
kind:
  description: Node kind.
  returned: always
  type: str
time:
  description: Capture time (epoch seconds).
  returned: always
  type: float
commands:
  description: Triage - per command its argv, rc, stdout (parsed when JSON) and stderr.
  returned: profile=triage
  type: dict
state:
  description: State - the normalised dump.
  returned: profile=state
  type: dict
restored_exactly:
  description: State with O(compare_to) - this dump equals the earlier one.
  returned: profile=state and compare_to given
  type: bool
report:
  description: With O(report) - the report's C(status), C(paths), and the event's C(event) and C(summary).
  returned: report given
  type: dict
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.report import snapshot


def _plain(value):
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile=dict(type="str", choices=["triage", "state"], default="triage"),
            kind=dict(type="str", choices=["host", "frr"], default="host"),
            node=dict(type="str"),
            workload_netns=dict(type="list", elements="str"),
            compare_to=dict(type="raw"),
            report=dict(type="dict"),   # recorded by the action plugin on the controller
        ),
        supports_check_mode=True,
    )
    p = module.params

    def run(argv):
        if module.get_bin_path(argv[0]) is None:
            return 127, "", "%s: not installed" % argv[0]
        return module.run_command(argv)

    res = {"changed": False, "node": p["node"] or "", "kind": p["kind"], "profile": p["profile"],
           "time": round(time.time(), 3)}
    if p["profile"] == "state":
        if p["kind"] == "frr":
            res["state"] = snapshot.frr_state_dump(run)
        else:
            res["state"] = snapshot.state_dump(run, p["workload_netns"])
        if p["compare_to"] is not None:
            res["restored_exactly"] = _plain(res["state"]) == _plain(p["compare_to"])
    else:
        res["commands"] = snapshot.capture(run, p["kind"])
    module.exit_json(**res)


if __name__ == "__main__":
    main()
