#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: multinic_facts
short_description: NIC, kernel-capability and datapath facts of a multi-NIC host
description:
  - Reads every network interface (name, MAC, speed, link, MTU, driver, PCI address, NUMA node)
    through netlink (pyroute2 when installed, sysfs otherwise) and sysfs.
  - Reports kernel capabilities the datapath needs (BPF syscall, BTF, bpffs mounted, bpftool and
    tc present, IP multipath, MPTCP, netkit) and the current netscale.multinic datapath state,
    including per slot the spoofed packets the datapath dropped (anti-spoofing).
  - Read-only; supports check mode.
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
attributes:
  check_mode:
    support: full
    description: Read-only; same result in check mode.
  diff_mode:
    support: none
    description: Nothing to diff.
extends_documentation_fragment:
  - netscale.multinic.datapath_state
"""

EXAMPLES = r"""
- name: Gather multinic facts
  netscale.multinic.multinic_facts:

- name: Show NIC names and NUMA nodes
  ansible.builtin.debug:
    msg: "{{ ansible_facts.multinic.nics | map(attribute='name') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts under the C(multinic) key.
  returned: always
  type: dict
  contains:
    multinic:
      description: NICs, capabilities and datapath state.
      type: dict
      returned: always
      sample:
        nics:
          - {name: eth0, mac: "02:00:00:00:00:01", mtu: 1500, link: up, speed_mbps: 100000,
             driver: mlx5_core, pci_address: "0000:3b:00.0", numa_node: 0}
        capabilities: {bpf_syscall: true, btf: true, bpffs_mounted: true, multipath: true,
                       mptcp: true, netkit: false}
        state: {configured: true, host: lab-r1-h2, ebpf: true, slots: [mn-slot1, mn-slot2],
                spoof_counter: "ebpf:mn_spoof", spoofed_drops: {mn-slot1: 0, mn-slot2: 12}}
      contains:
        state:
          description:
            - The netscale.multinic datapath deployed on the host (C(configured=false) when none).
            - C(spoofed_drops) maps each slot's namespace to the number of IPv4/IPv6 packets it sent
              from a source that is not its own (not a task IP, container address or link-local
              address) and that the datapath dropped on the host side of its veths. eBPF mode counts
              in the program's C(mn_spoof) map (restarts at 0 when a new program version is loaded),
              kernel mode in the nftables counters C(spoof_slot<N>) of table C(netdev netscale_multinic)
              (kept when the table is rebuilt). A value is null when the counters cannot be read
              (bpftool or nft missing).
            - C(spoof_counter) names where the counts were read (C(ebpf:mn_spoof),
              C(nftables:netdev netscale_multinic)) or is null.
          type: dict
          returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import facts


def main():
    module = AnsibleModule(
        argument_spec=dict(state_dir=dict(type="path", default="/var/lib/netscale-multinic"),
                           bpffs_root=dict(type="path", default="/sys/fs/bpf")),
        supports_check_mode=True)
    data = facts.gather(module.params["state_dir"], module.params["bpffs_root"])
    module.exit_json(changed=False, ansible_facts={"multinic": data})


if __name__ == "__main__":
    main()
