#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: lab_daemon
short_description: Kill, start or restart a daemon on a lab node (failure injection)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - On a spine or ToR, acts on an FRR daemon (C(zebra), C(staticd), C(bgpd), C(bfdd)) found by its PID file
    in the node's private C(/var/run/frr). C(kill) sends SIGKILL to that PID. C(start) starts it with the
    node's default paths and applies its part of C(/etc/frr/frr.conf) (C(vtysh -b -d <daemon>)).
    C(restart) stops it (SIGTERM, then SIGKILL) and starts it again.
  - On a GPU host or the storage node, C(kill) sends SIGKILL to the processes of that name inside the node
    (found in the node's cgroup). Services on GPU hosts are systemd units; start them with ansible.builtin.systemd.
  - A killed daemon leaves the lab unhealthy (netscale.multinic.lab_fabric then rebuilds it); a restarted one
    replaces the old PID in the state file.
options:
  node:
    description: Lab node (inventory name).
    type: str
    required: true
  daemon:
    description: Daemon (process) name.
    type: str
    required: true
  action:
    description: What to do.
    type: str
    choices: [kill, start, restart]
    default: kill
attributes:
  check_mode:
    support: full
    description: Reports what would be done.
extends_documentation_fragment:
  - netscale.multinic.lab_node
"""

EXAMPLES = r"""
- name: Restart bgpd on lab-r1-tor
  netscale.multinic.lab_daemon:
    topology: inventories/lab/fabric.yml
    node: lab-r1-tor
    daemon: bgpd
    action: restart

- name: Kill bfdd on lab-r2-tor
  netscale.multinic.lab_daemon:
    topology: inventories/lab/fabric.yml
    node: lab-r2-tor
    daemon: bfdd
"""

RETURN = r"""
old_pid:
  description: PID of the FRR daemon before the action (null when it was not running).
  returned: on spines and ToRs
  type: int
pid:
  description: PID after a start or restart.
  returned: on start and restart
  type: int
killed:
  description: PIDs killed.
  returned: on kill
  type: list
  elements: int
seconds:
  description: Time the restart took (stop, start, config applied).
  returned: on restart
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import NODE_ARGUMENT_SPEC, open_lab


def main():
    module = AnsibleModule(
        argument_spec=dict(
            NODE_ARGUMENT_SPEC,
            node=dict(type="str", required=True),
            daemon=dict(type="str", required=True),
            action=dict(type="str", choices=["kill", "start", "restart"], default="kill"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        lab = open_lab(p["topology"], state_root=p["state_root"])
        result = ops.daemon(lab, p["node"], p["daemon"], p["action"], check=module.check_mode)
    except Exception as e:
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
