#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: lab_link
short_description: Set link speed, link state, silent or ARP/ND loss of a lab GPU host NIC, or flap it
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Link speed is a C(tbf) root qdisc at O(speed) on the ToR port (traffic to the host) and/or on the host NIC
    (traffic to the ToR). The lab kernel has no netem or fq; tbf is what emulates a NIC's line rate.
  - Under the tbf, what failure detection runs on - BFD control packets (UDP 3784 and 4784), ARP and ICMPv6
    (neighbour discovery) - gets a strict-priority band and everything else one tail-drop fifo of the tbf's
    own size, as a switch port queues its control plane's packets apart and a host's fq_codel serves sparse
    flows first (O(control_band)). Without it a saturated link drops them with the bulk.
  - Link state sets the host NIC (the ToR sees carrier loss) or the ToR port administratively up or down.
  - Silent loss is an nftables C(netdev) table on the ToR port, never on the host NIC (in eBPF mode the
    host's tc ingress program runs before the netfilter ingress hook and would bypass a drop there) - an
    C(ingress) chain drops what the host sends (C(to_tor)), an C(egress) chain what the ToR sends
    (C(to_host)); the link stays up, so only BGP hold timers, BFD or the host's gateway probes notice it.
  - O(loss_kind=arp_nd) drops only ARP replies and ICMPv6 neighbour advertisements (address resolution
    fails, traffic to already resolved neighbours flows); O(loss_kind=bfd) drops only BFD control packets
    (UDP 3784 and 4784; ARP/ND, BGP and traffic still flow, so only BFD can tell).
  - O(flap_storm) takes the link down and up O(flap_storm.count) times within O(flap_storm.seconds) and leaves
    it up. It is an event, not a state - it always reports changed (check mode - nothing done).
  - Every other setting is idempotent; options left out are not touched.
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
  control_band:
    description:
      - Give BFD control packets, ARP and ICMPv6 a strict-priority band under the tbf (an htb with two
        classes, matched by u32). C(false) - one fifo for everything, as a plain tbf.
      - A speed already set with the other setting is replaced (reports changed).
    type: bool
    default: true
  link:
    description: Administrative state of the NIC (or of the ToR port with O(link_side=tor)).
    type: str
    choices: [up, down]
  link_side:
    description: Which end O(link) and O(flap_storm) act on.
    type: str
    choices: [host, tor]
    default: host
  loss:
    description:
      - C(true) installs the drop (O(loss_direction), O(loss_kind)) and removes any other drop of this NIC,
        C(false) removes every drop of this NIC (also those older releases put on the host NIC).
    type: bool
  loss_direction:
    description:
      - C(both), C(to_tor) (one-way, host to ToR - drop what the host sends, ToR port ingress) or
        C(to_host) (one-way, ToR to host - drop what the ToR sends, ToR port egress).
    type: str
    choices: [both, to_tor, to_host]
    default: both
  loss_kind:
    description: C(all) (silent loss of every packet), C(arp_nd) (ARP replies and ICMPv6 neighbour advertisements only)
      or C(bfd) (BFD control packets only, UDP 3784 and 4784).
    type: str
    choices: [all, arp_nd, bfd]
    default: all
  flap_storm:
    description: Link flaps in a burst (an event); O(link_side) chooses the end (C(tor) - the host sees carrier loss).
    type: dict
    suboptions:
      count:
        description: Number of flaps (down, then up half a period later).
        type: int
        default: 10
      seconds:
        description: Time over which the flaps are spread.
        type: float
        default: 5.0
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

- name: One-way loss, ToR to host only, on eth1
  netscale.multinic.lab_link:
    topology: inventories/lab/fabric.yml
    host: lab-r1-h2
    nic: eth1
    loss: true
    loss_direction: to_host

- name: ARP replies and neighbour advertisements lost on eth3 (both ways)
  netscale.multinic.lab_link:
    topology: inventories/lab/fabric.yml
    host: lab-r1-h2
    nic: eth3
    loss: true
    loss_kind: arp_nd

- name: Flap storm on eth2 (10 flaps in 5 s at the ToR port)
  netscale.multinic.lab_link:
    topology: inventories/lab/fabric.yml
    host: lab-r1-h2
    nic: eth2
    link_side: tor
    flap_storm:
      count: 10
      seconds: 5

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
  description: Result of the loss setting (actions taken, ToR port, direction, kind); a list for O(nic=all).
  returned: when O(loss) is given
  type: raw
flap_storm:
  description: Result of the flap storm (namespace, device, flaps, offsets in seconds of each down/up); a list for O(nic=all).
  returned: when O(flap_storm) is given
  type: raw
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.lab import faults, ops
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
            control_band=dict(type="bool", default=True),
            link=dict(type="str", choices=["up", "down"]),
            link_side=dict(type="str", choices=["host", "tor"], default="host"),
            loss=dict(type="bool"),
            loss_direction=dict(type="str", choices=["both", "to_tor", "to_host"], default="both"),
            loss_kind=dict(type="str", choices=["all", "arp_nd", "bfd"], default="all"),
            flap_storm=dict(type="dict", options=dict(count=dict(type="int", default=10),
                                                      seconds=dict(type="float", default=5.0))),
        ),
        required_one_of=[["speed", "link", "loss", "flap_storm"]],
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
        for key in ("speed", "link", "loss", "flap_storm"):
            if p[key] is None:
                continue
            out = []
            for nic in nics:
                if key == "speed":
                    speed = None if p["speed"].strip().lower() in ("", "none", "off") else p["speed"]
                    out.append(ops.set_speed(lab, p["host"], nic, speed, p["speed_direction"], p["burst"],
                                             p["latency"], check=module.check_mode, control_band=p["control_band"]))
                elif key == "link":
                    out.append(ops.set_link(lab, p["host"], nic, p["link"] == "up", p["link_side"],
                                            check=module.check_mode))
                elif key == "loss":
                    res = faults.set_fault(lab, p["host"], nic, p["loss"], p["loss_direction"], p["loss_kind"],
                                           check=module.check_mode)
                    # drops older releases put on the ToR port / host NIC ingress (mnl_loss_*)
                    legacy = ops.set_loss(lab, p["host"], nic, False, "both", check=module.check_mode)
                    res["actions"] = legacy["actions"] + res["actions"]
                    res["changed"] = res["changed"] or legacy["changed"]
                    out.append(res)
                else:
                    out.append(faults.flap_storm(lab, p["host"], nic, p["flap_storm"]["count"],
                                                 p["flap_storm"]["seconds"], p["link_side"], check=module.check_mode))
            result[key] = out if p["nic"] == "all" else out[0]
    except Exception as e:
        module.fail_json(msg=str(e), **result)
    flat = [x for v in result.values() for x in (v if isinstance(v, list) else [v]) if isinstance(x, dict)]
    result["changed"] = any(x.get("changed") for x in flat)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
