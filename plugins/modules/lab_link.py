#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: lab_link
short_description: Set link speed, link state or silent loss of a lab GPU host NIC
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Link speed is a C(tbf) root qdisc at O(speed) on the ToR port (traffic to the host) and/or on the host NIC
    (traffic to the ToR). The lab kernel has no netem or fq; tbf is what emulates a NIC's line rate.
  - Link state sets the host NIC (the ToR sees carrier loss) or the ToR port administratively up or down.
  - Silent loss is an nftables C(netdev) table with an ingress chain of policy drop on the ToR port and/or
    the host NIC; the link stays up, so only BGP hold timers or BFD notice it.
  - Every setting is idempotent; options left out are not touched.
options:
  host:
    description: GPU host (inventory name).
    type: str
    required: true
  nic:
    description: NIC name (C(eth1)), index (C(1)) or C(all) (every NIC of the host; results become lists).
    type: str
    required: true
  speed:
    description:
      - Line rate in tc units (C(200mbit), C(1gbit)). C(none) or an empty string removes the limit.
    type: str
  speed_direction:
    description: C(both), C(to_host) (ToR port egress only) or C(to_tor) (host NIC egress only).
    type: str
    choices: [both, to_host, to_tor]
    default: both
  burst:
    description: tbf burst.
    type: str
    default: 256kb
  latency:
    description: tbf latency.
    type: str
    default: 20ms
  link:
    description: Administrative state of the NIC (or of the ToR port with O(link_side=tor)).
    type: str
    choices: [up, down]
  link_side:
    description: Which end O(link) acts on.
    type: str
    choices: [host, tor]
    default: host
  loss:
    description: C(true) drops everything silently, C(false) removes the drop.
    type: bool
  loss_direction:
    description: C(both), C(to_tor) (drop what the host sends, at the ToR port) or C(to_host).
    type: str
    choices: [both, to_tor, to_host]
    default: both
attributes:
  check_mode:
    support: full
    description: Reports what would change.
notes:
  - The lab must be running (M(netscale.multinic.lab_fabric)).
extends_documentation_fragment:
  - netscale.multinic.lab_node
"""

EXAMPLES = r"""
- name: 200 Mbit/s on every NIC of lab-r1-h2, both directions
  netscale.multinic.lab_link:
    topology: inventories/lab/fabric.yml
    host: lab-r1-h2
    nic: all
    speed: 200mbit

- name: Silent loss on eth1
  netscale.multinic.lab_link:
    topology: inventories/lab/fabric.yml
    host: lab-r1-h2
    nic: eth1
    loss: true

- name: Take eth2 down
  netscale.multinic.lab_link:
    topology: inventories/lab/fabric.yml
    host: lab-r1-h2
    nic: eth2
    link: down
"""

RETURN = r"""
speed:
  description: Result of the speed setting (actions taken, rate in bit/s); a list of them for O(nic=all).
  returned: when O(speed) is given
  type: raw
link:
  description: Result of the link setting (namespace, device, up); a list for O(nic=all).
  returned: when O(link) is given
  type: raw
loss:
  description: Result of the loss setting (actions taken); a list for O(nic=all).
  returned: when O(loss) is given
  type: raw
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import NODE_ARGUMENT_SPEC, open_lab


def main():
    module = AnsibleModule(
        argument_spec=dict(
            NODE_ARGUMENT_SPEC,
            host=dict(type="str", required=True),
            nic=dict(type="str", required=True),
            speed=dict(type="str"),
            speed_direction=dict(type="str", choices=["both", "to_host", "to_tor"], default="both"),
            burst=dict(type="str", default="256kb"),
            latency=dict(type="str", default="20ms"),
            link=dict(type="str", choices=["up", "down"]),
            link_side=dict(type="str", choices=["host", "tor"], default="host"),
            loss=dict(type="bool"),
            loss_direction=dict(type="str", choices=["both", "to_tor", "to_host"], default="both"),
        ),
        required_one_of=[["speed", "link", "loss"]],
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False)
    try:
        lab = open_lab(p["topology"], state_root=p["state_root"])
        if p["nic"] == "all":
            nics = [n["name"] for n in ops.nic_ref(lab, p["host"], 0)[0]["nics"]]
        else:
            nics = [p["nic"]]
        for key in ("speed", "link", "loss"):
            if p[key] is None:
                continue
            out = []
            for nic in nics:
                if key == "speed":
                    speed = None if p["speed"].strip().lower() in ("", "none", "off") else p["speed"]
                    out.append(ops.set_speed(lab, p["host"], nic, speed, p["speed_direction"], p["burst"],
                                             p["latency"], check=module.check_mode))
                elif key == "link":
                    out.append(ops.set_link(lab, p["host"], nic, p["link"] == "up", p["link_side"],
                                            check=module.check_mode))
                else:
                    out.append(ops.set_loss(lab, p["host"], nic, p["loss"], p["loss_direction"],
                                            check=module.check_mode))
            result[key] = out if p["nic"] == "all" else out[0]
    except Exception as e:
        module.fail_json(msg=str(e), **result)
    flat = [x for v in result.values() for x in (v if isinstance(v, list) else [v]) if isinstance(x, dict)]
    result["changed"] = any(x.get("changed") for x in flat)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
