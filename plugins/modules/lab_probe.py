#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: lab_probe
short_description: Traffic probe between a lab GPU host (or a namespace on it) and the storage node
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Starts a one-off iperf3 server in the lab's storage node, runs O(flows) parallel iperf3 flows for
    O(duration) seconds from the host itself or from a network namespace inside it (O(netns), e.g. the
    workload namespace C(mn-slot1)), and stops the server by its PID.
  - Reports throughput per direction, each NIC's byte share from the host NICs' counters (tx for C(up),
    rx for C(down)) and Jain's fairness index over the NICs (1.0 = equal shares, 1/N = one NIC carries all).
  - It changes nothing on the lab (changed is always false); it does not run in check mode.
options:
  host:
    description: GPU host (inventory name).
    type: str
    required: true
  netns:
    description: Network namespace inside the host to send from (looked up in the host's own /run/netns).
    type: str
  flows:
    description: Parallel flows.
    type: int
    default: 16
  duration:
    description: Seconds of traffic.
    type: int
    default: 5
  direction:
    description: C(up) host to storage, C(down) storage to host, C(both) at the same time (iperf3 --bidir).
    type: str
    choices: [up, down, both]
    default: both
  family:
    description: Address family of the flows.
    type: str
    choices: [ipv6, ipv4]
    default: ipv6
  port:
    description: iperf3 port; default 5201 + 16 x host index + slot number, so probes of different hosts can run at once.
    type: int
attributes:
  check_mode:
    support: none
    description: Skipped in check mode (it runs traffic).
extends_documentation_fragment:
  - netscale.multinic.lab_node
"""

EXAMPLES = r"""
- name: 32 flows each way from the workload of slot 1 of lab-r1-h2
  netscale.multinic.lab_probe:
    topology: inventories/lab/fabric.yml
    host: lab-r1-h2
    netns: mn-slot1
    flows: 32
    duration: 10
  register: probe

- name: Every NIC carries its share upstream
  ansible.builtin.assert:
    that: probe.up.jain_index > 0.95
"""

RETURN = r"""
target:
  description: Storage address the flows went to.
  returned: always
  type: str
  sample: fd00:5::10
up:
  description: Host-to-storage results.
  returned: when direction is up or both
  type: dict
  contains:
    mbit_per_second:
      description: iperf3 throughput.
      type: float
    nic_bytes:
      description: Bytes sent per host NIC during the probe.
      type: dict
    nic_shares:
      description: Fraction of the bytes per NIC.
      type: dict
    jain_index:
      description: Jain's fairness index of the per-NIC bytes.
      type: float
down:
  description: Storage-to-host results (same fields, from the NICs' rx counters).
  returned: when direction is down or both
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import NODE_ARGUMENT_SPEC, open_lab


def main():
    module = AnsibleModule(
        argument_spec=dict(
            NODE_ARGUMENT_SPEC,
            host=dict(type="str", required=True),
            netns=dict(type="str"),
            flows=dict(type="int", default=16),
            duration=dict(type="int", default=5),
            direction=dict(type="str", choices=["up", "down", "both"], default="both"),
            family=dict(type="str", choices=["ipv6", "ipv4"], default="ipv6"),
            port=dict(type="int"),
        ),
        supports_check_mode=False,
    )
    p = module.params
    try:
        lab = open_lab(p["topology"], state_root=p["state_root"])
        result = ops.probe(lab, p["host"], netns=p["netns"], flows=p["flows"], duration=p["duration"],
                           direction=p["direction"], family=p["family"], port=p["port"])
    except Exception as e:
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
