#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: vipinjector_status
short_description: Read the status of VipInjector instances (sessions, announced prefixes, guard)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Reads the JSON status file each VipInjector helper writes (C(<runtime_dir>/slot<s>/status.json))
    and reports, per slot, the BGP session states, the announced prefixes, the health, drain and guard
    state and the last change. Read-only; use it in health gates with C(until).
options:
  slots:
    description: Task slot numbers to read.
    type: list
    elements: int
    required: true
attributes:
  check_mode:
    support: full
    description: Read-only, same result in check mode.
  diff_mode:
    support: none
    description: Read-only.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with systemd.
extends_documentation_fragment:
  - netscale.multinic.vipinjector_runtime
"""

EXAMPLES = r"""
- name: Wait until every session of every slot is up and the task IPs are announced
  netscale.multinic.vipinjector_status:
    slots: [1, 2]
  register: vip
  until: vip.all_announced
  retries: 30
  delay: 1
"""

RETURN = r"""
instances:
  description: Status per slot (the helper's status JSON, or C(present=false)).
  returned: always
  type: dict
all_up:
  description: Every session of every slot is Established.
  returned: always
  type: bool
all_announced:
  description: Every slot announces its full allocation on every session.
  returned: always
  type: bool
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(slots=dict(type="list", elements="int", required=True),
                           runtime_dir=dict(type="path", default="/run/netscale-vipinjector")),
        supports_check_mode=True,
    )
    out = {}
    all_up = True
    all_ann = True
    for s in module.params["slots"]:
        path = os.path.join(module.params["runtime_dir"], "slot%d" % s, "status.json")
        try:
            with open(path) as f:
                st = json.load(f)
            st["present"] = True
        except (OSError, ValueError) as exc:
            st = {"present": False, "error": str(exc), "sessions": []}
        sessions = st.get("sessions") or []
        up = bool(sessions) and all(x.get("state") == "up" for x in sessions)
        ann = up and all(sorted(x.get("announced") or []) == sorted(st.get("allocation") or [])
                         for x in sessions)
        st["all_up"] = up
        st["all_announced"] = ann
        all_up = all_up and up
        all_ann = all_ann and ann
        out[str(s)] = st
    module.exit_json(changed=False, instances=out, all_up=all_up, all_announced=all_ann)


if __name__ == "__main__":
    main()
