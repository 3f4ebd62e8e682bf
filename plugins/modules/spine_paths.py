#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: spine_paths
short_description: A ToR's paths to the other racks' aggregates, per spine (spine drain checks)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on a ToR (FRR), read only. For each aggregate of O(view) it reads the BGP paths (C(show bgp <af> unicast
    <prefix> json)) and the FIB (C(show ip[v6] route <prefix> json)), and the sessions (C(show bgp neighbors
    json)), in one vtysh call, and maps each path and next hop to its spine by the neighbor addresses of O(view).
  - O(expect=none) returns the C(observation) only (C(playbooks/drain.yml) hands it to
    C(netscale.multinic.drain_budget), whose rule C(spine_coverage) refuses a spine drain unless the other spines
    carry every aggregate).
  - O(expect=drained) waits up to O(timeout) seconds until, for every aggregate, O(spine)'s paths are neither
    selected nor in the FIB and another spine's are; O(expect=undrained) until O(spine)'s path is selected and in
    the FIB again (back in the ECMP). It fails, with what it saw, when that does not happen; a vtysh failure is
    never a pass.
options:
  view:
    description: This ToR's part of the C(spine_view) of C(netscale.multinic.drain_budget) (C(spine_view.tors[<tor>])).
    type: dict
    required: true
  spine:
    description: The spine being drained or undrained (needed unless O(expect=none)).
    type: str
  expect:
    description: What to wait for.
    type: str
    choices: [none, drained, undrained]
    default: none
  timeout:
    description: Seconds to wait for O(expect).
    type: float
    default: 30
  interval:
    description: Seconds between observations.
    type: float
    default: 0.5
attributes:
  check_mode:
    support: full
    description: Read only; the same in check mode.
  diff_mode:
    support: none
    description: Read only.
  platform:
    support: full
    description: A ToR running FRR.
    platforms: posix
extends_documentation_fragment:
  - netscale.multinic.frr_target
"""

EXAMPLES = r"""
- name: The drained spine's paths are out on this ToR, the aggregates still reachable
  netscale.multinic.spine_paths:
    view: "{{ drain_decision.spine_view.tors[item] }}"
    spine: spine2
    expect: drained
  delegate_to: "{{ item }}"
  loop: "{{ drain_decision.spine_view.tors | list }}"
"""

RETURN = r"""
observation:
  description: >-
    C({sessions: {<address>: established}, routes: {<aggregate>: {paths: [{peer, valid, selected, gshut}],
    fib: [<next hop>]}}}).
  returned: always
  type: dict
verdict:
  description: >-
    O(expect) other than none - C({ok, reasons, prefixes: {<aggregate>: {selected, fib}}, attempts,
    elapsed}), spines by name.
  returned: when expect is not none
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.frr.apply import FrrTarget  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import spine_drain  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec=dict(
            view=dict(type="dict", required=True),
            spine=dict(type="str"),
            expect=dict(type="str", choices=["none", "drained", "undrained"], default="none"),
            timeout=dict(type="float", default=30.0),
            interval=dict(type="float", default=0.5),
            vty_socket=dict(type="path"),
            bindir=dict(type="path", default="/usr/bin"),
        ),
        required_if=[("expect", "drained", ["spine"]), ("expect", "undrained", ["spine"])],
        supports_check_mode=True,
    )
    p = module.params
    target = FrrTarget(bindir=p["bindir"], vty_socket=p["vty_socket"])
    try:
        view = spine_drain.check_view(p["view"])
        if p["spine"] is not None and p["spine"] not in view["uplinks"]:
            raise spine_drain.SpineDrainError("spine=%r: not a spine this ToR peers with (%s). Fix: name a spine of "
                                              "the zone." % (p["spine"], ", ".join(sorted(view["uplinks"]))))
        if p["expect"] == "none":
            module.exit_json(changed=False, observation=spine_drain.observe(module.run_command, target, view))
        v = spine_drain.wait(module.run_command, target, view.get("tor", "this ToR"), view, p["spine"], p["expect"],
                             timeout=p["timeout"], interval=p["interval"])
    except MultinicError as exc:
        module.fail_json(msg="spine_paths: %s" % exc)
    obs = v.pop("observation")
    if not v["ok"]:
        module.fail_json(msg="spine_paths: %s not confirmed after %.1f s (%d observations): %s" % (
            p["expect"], v["elapsed"], v["attempts"], "; ".join(v["reasons"])), observation=obs, verdict=v)
    module.exit_json(changed=False, observation=obs, verdict=v)


if __name__ == "__main__":
    main()
