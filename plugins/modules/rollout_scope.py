# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: rollout_scope
short_description: Change scope of a rollout - hosts and racks added, removed, changed; ToRs whose rendered config changed
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the controller, read-only. Compares the rack files of the plan on disk (O(plan_dir), read before
    the rollout writes the new plan) with the plan computed from O(topology), host by host (allocation and
    spec - prefixes, NICs, slots, ASNs) and rack by rack.
  - The ToRs in scope are those whose RENDERED config differs from the last rendered copy - O(rendered_written),
    the C(written) list of C(netscale.multinic.tor_render) run in check mode - not those whose plan data changed.
  - With O(mode=changed) the hosts to deploy are the added and changed ones (inventory order), every other host
    and ToR is listed as unchanged. With O(mode=all) (the rollout's default) every host and ToR of the
    inventory is in scope and the diff is only reported.
  - Bad input (unknown mode, ToR names not in the inventory) fails naming the field, the value and the fix.
options:
  mode:
    description: V(all) - every host and ToR (today's rollout); V(changed) - only the change set.
    type: str
    default: changed
    choices: [all, changed]
  plan_dir:
    description: The plan directory on disk (C(intended/<fabric>/plan)); missing = no plan yet, everything is added.
    type: path
    required: true
  topology:
    description: The topology file of this rollout.
    type: path
    required: true
  rendered_written:
    description: Config files C(tor_render) in check mode would write (C(<dest>/configs/<device>.cfg)).
    type: list
    elements: str
    default: []
  hosts:
    description: GPU hosts of the inventory, in order.
    type: list
    elements: str
    default: []
  rack_tors:
    description: ToR of each rack of the inventory (rack -> ToR).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Read-only; the same result in check mode.
  diff_mode:
    support: none
    description: No diff.
  platform:
    support: full
    description: The controller.
    platforms: posix
"""

EXAMPLES = r"""
- name: Change scope (before the new plan is written)
  netscale.multinic.rollout_scope:
    mode: changed
    plan_dir: "{{ rollout_intended_dir }}/{{ fabric_name }}/plan"
    topology: "{{ rollout_topology }}"
    rendered_written: "{{ __render_check.written }}"
    hosts: "{{ groups['gpu_hosts'] }}"
    rack_tors: {lab-r1: lab-r1-tor, lab-r2: lab-r2-tor}
  delegate_to: localhost
  register: rollout_scope_result
"""

RETURN = r"""
scope:
  description: >-
    C(mode); C(hosts) and C(racks) (C(added), C(removed), C(changed), C(unchanged)); C(tors) (C(changed) - the ToR
    policy is applied there, C(unchanged), C(removed) - ToRs of removed racks); C(deploy) (hosts to deploy, inventory
    order); C(untouched) (C(hosts), C(tors)); C(nothing) (true when there is nothing to deploy and no ToR to
    configure); C(message).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.store import dump_yaml, load_yaml, plan_artifacts
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import scope as scope_mod


def new_racks(topology):
    """{rack: data} of the plan of ``topology``, through the plan's own YAML so it compares with files on disk."""
    out = {}
    for rel, data in plan_artifacts(load_plan(topology)):
        if "/racks/" in rel:
            out[data["name"]] = load_yaml(dump_yaml(data))
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", default="changed", choices=list(scope_mod.MODES)),
            plan_dir=dict(type="path", required=True),
            topology=dict(type="path", required=True),
            rendered_written=dict(type="list", elements="str", default=[]),
            hosts=dict(type="list", elements="str", default=[]),
            rack_tors=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        old = scope_mod.read_racks(p["plan_dir"], load_yaml)
        new = new_racks(p["topology"])
        rack_tors = dict((str(k), str(v)) for k, v in p["rack_tors"].items())
        tors = scope_mod.tors_from_written(p["rendered_written"], rack_tors.values())
        result = scope_mod.compute(old, new, tors, p["hosts"], rack_tors, mode=p["mode"])
    except (MultinicError, OSError) as exc:
        module.fail_json(msg="rollout_scope: %s" % exc)
    module.exit_json(changed=False, scope=result)


if __name__ == "__main__":
    main()
