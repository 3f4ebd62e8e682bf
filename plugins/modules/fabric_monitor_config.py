#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_monitor_config
short_description: Render the monitoring agents' configurations (settings and pinglists) from the plan
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Plans the topology file and renders, for every host of O(hosts), the fabric_monitor agent's configuration
    - its settings (checked) and its pinglist - the hosts of its own rack, one host of every other rack of its zone
    (rotating) and the configured O(targets), each probed from every NIC of the host.
  - Runs on the controller (C(delegate_to localhost), C(run_once)); writes nothing. The fabric_monitor role copies
    each host's configuration to it.
options:
  topology:
    description: Path of the fabric topology file (the inventory's C(multinic_topology_file)).
    type: path
    required: true
  hosts:
    description: GPU hosts to render for (names of the plan).
    type: list
    elements: str
    required: true
  targets:
    description: Extra targets probed from every NIC (storage, anything running the responder).
    type: list
    elements: dict
    default: []
  family:
    description: Address family of the probes.
    type: str
    choices: [ipv4, ipv6]
    default: ipv6
  rotate_rounds:
    description: Rounds between two changes of the probed host of another rack.
    type: int
    default: 10
  settings:
    description: Agent settings (interval, timeout, max_pps, port, metrics_address, metrics_port, textfile,
      events_file, events_max_bytes, event_interval, loss_event_ratio, passive_interval, ...); checked here.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Read-only, same result in check mode.
  diff_mode:
    support: none
    description: Writes nothing.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller.
"""

EXAMPLES = r"""
- name: Render the agents' configurations
  netscale.multinic.fabric_monitor_config:
    topology: "{{ multinic_topology_file }}"
    hosts: "{{ ansible_play_hosts }}"
    targets: [{name: storage1, ipv6: "fd00:5::10", ipv4: 198.19.5.10}]
    settings: {interval: 1.0, max_pps: 100}
  delegate_to: localhost
  run_once: true
  register: cfg
"""

RETURN = r"""
configs:
  description: Per host, the agent's configuration (C(settings), C(pinglist)).
  returned: always
  type: dict
cost:
  description: Per host, what its probing costs (probes, packets and bytes a second, see docs/monitoring.md).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import agent, pinglist, probe
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topology=dict(type="path", required=True),
            hosts=dict(type="list", elements="str", required=True),
            targets=dict(type="list", elements="dict", default=[]),
            family=dict(type="str", choices=["ipv4", "ipv6"], default="ipv6"),
            rotate_rounds=dict(type="int", default=10),
            settings=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        settings = agent.check_config(p["settings"])
        lists = pinglist.from_plan(load_plan(p["topology"]), p["hosts"], p["targets"], p["family"], p["rotate_rounds"])
    except (MultinicError, ValueError, OSError) as e:
        module.fail_json(msg=str(e))
    configs = {}
    cost = {}
    for name, pl in lists.items():
        configs[name] = {"settings": settings, "pinglist": pl}
        cost[name] = probe.cost(len(pinglist.probe_pairs(pl, 0)), float(settings["interval"]),
                                float(settings["max_pps"]), p["family"])
    module.exit_json(changed=False, configs=configs, cost=cost)


if __name__ == "__main__":
    main()
