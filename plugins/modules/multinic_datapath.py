#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: multinic_datapath
short_description: Apply or remove the multi-NIC host datapath (workload namespaces, ECMP, eBPF tc)
description:
  - From the planner's host_data, configures on the host the datapath of design section 4.
    Sysctls (persisted in sysctl.d), per-NIC addresses, one workload network namespace per task
    slot with one veth per NIC, the container's per-NIC addresses and task IP, an ECMP default
    route with the task IP as source, proxy ND/ARP and per-veth policy routing.
  - With I(ebpf=true) tc programs on every NIC ingress (bpf_redirect_peer into the workload)
    and on the host end of every veth (bpf_redirect_neigh out of its NIC, failover to a surviving
    NIC) are loaded from I(bpf_object), pinned under C(<bpffs_root>/netscale-multinic/) and
    attached with clsact at a fixed pref/handle. With I(ebpf=false) the same behaviour comes from
    kernel forwarding; programs are detached.
  - Every item is compared with the live state first; a second run reports changed=false.
    Bad input (plan NIC count differs from the NICs found, NIC missing, no plan for the host)
    fails before any change.
  - I(state=absent) detaches programs, removes pins, namespaces, rules, routes and the addresses
    it added and restores every sysctl recorded in the state file.
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
options:
  host:
    description: The planner's host_data of this host (inventory variable C(multinic_host)).
    type: dict
  state:
    description: present or absent.
    type: str
    choices: [present, absent]
    default: present
  ebpf:
    description: Use the eBPF tc programs; false selects plain kernel forwarding.
    type: bool
    default: true
  mptcp:
    description:
      - MPTCP mode. In every slot namespace MPTCP is enabled with the in-kernel path manager, one
        C(subflow) endpoint per container address (per NIC and family), limits C(subflows) = NIC count
        and C(add_addr_accepted) 0, and a source rule and table per NIC so the subflow of NIC k's
        address leaves on NIC k, in both datapath modes.
      - Applications use it unmodified through C(mptcpize run CMD); the peer must be MPTCP-capable
        (plain TCP peers fall back to one TCP path). At most 8 endpoints per namespace (NIC count x
        address families) and 8 NICs.
      - Set to false on a present datapath, the endpoints, rules and tables are removed and the
        limits and sysctls recorded before the first change are restored.
    type: bool
    default: false
  mptcp_families:
    description:
      - The address families MPTCP mode serves, a subset of the families planned for the host; unset
        (default) means every planned family.
      - For a dual-stack host whose MPTCP traffic (e.g. storage) uses one family. The kernel holds 8
        MPTCP endpoints per namespace; a 4-NIC dual-stack slot needs all 8 for its container
        addresses and gets no C(backup) endpoint for its task IP (the application's first subflow
        then carries data beside the per-NIC ones). With one family it needs 4, and the task IP of
        that family gets the C(backup) endpoint.
      - Connections of the other family get no extra subflow and run over one NIC (ECMP-hashed),
        like plain TCP.
      - Changed on a live datapath, the endpoints, rules and table routes of a family no longer
        served are removed before the missing ones are added.
      - An empty list, an unknown name or a family not planned for the host fails before any change.
    type: list
    elements: str
    choices: [ipv4, ipv6]
  bpf_object:
    description: Compiled object on the host (required when I(ebpf=true)).
    type: path
  nic_pattern:
    description: Regex selecting the fabric NICs when counting NICs found (default from the plan's names).
    type: str
  manage_nic_addresses:
    description: Add missing per-NIC addresses from the plan.
    type: bool
    default: true
  egress_policy:
    description:
      - How the eBPF egress program picks the NIC of a workload's flow.
      - C(hash) (default) keeps the workload's own per-flow choice (its L4 ECMP hash over the veths);
        when that NIC is unusable the flow goes to one of the usable NICs by flow hash, so a failed
        NIC's flows spread evenly over the survivors.
      - C(least_loaded) places each new flow (TCP SYN, first packet of a UDP 5-tuple) from a task IP
        on the usable NIC with the fewest active flows, pins it in an LRU flow table (16384 flows,
        about 1.9 MiB, entries idle 30 s dropped) for its life, and re-places it when its NIC
        becomes unusable. Traffic from a container NIC address (the BGP sidecar) stays on its NIC.
      - Kernel forwarding (I(ebpf=false)) always hashes; C(least_loaded) is then ignored with a warning.
    type: str
    choices: [hash, least_loaded]
    default: hash
  detection:
    description:
      - Gray-failure detection by the NIC watcher (written into the watcher's runtime file).
      - The watcher probes each NIC's gateway (ARP request, or IPv6 neighbour solicitation on a NIC
        without IPv4) every I(interval_ms); a NIC without a reply for I(interval_ms) x I(multiplier),
        with carrier lost, or whose gateway neighbour entry is FAILED leaves the egress set (eBPF - the
        NIC_OUT bit of the mn_nics map; kernel mode - its routes in the per-NIC tables). It returns after
        answering for I(hold_down) seconds, unless dampened (BGP-style penalty per flap).
      - With I(bfd) the watcher also follows the BFD session state of the vipinjector role's per-slot
        responders (FRR bfdd control sockets C(<bfd_dir>/slot<s>/bfdd.sock)) - a NIC whose BFD sessions that
        have been Up are all Down leaves the egress set at once and stays out until one is Up again, then
        the same hold-down and dampening apply. A session that never came up never takes a NIC out.
      - Unset keys take the defaults shown (those of C(plugins/module_utils/datapath/health.py) C(DEFAULTS)).
    type: dict
    suboptions:
      enabled:
        description: Run the detection.
        type: bool
        default: true
      interval_ms:
        description: Probe interval per NIC in milliseconds (10-10000).
        type: int
        default: 100
      multiplier:
        description: Missed probes after which the NIC is dead (1-100).
        type: int
        default: 3
      hold_down:
        description: Seconds a NIC's gateway must answer before the NIC returns to the egress set.
        type: float
        default: 1.0
      penalty:
        description: Penalty added per failure (flap).
        type: int
        default: 1000
      suppress:
        description: Penalty at or above which the NIC is suppressed (kept out).
        type: int
        default: 2000
      reuse:
        description: Penalty below which a suppressed NIC may return (must be below I(suppress)).
        type: int
        default: 1000
      half_life:
        description: Half-life of the penalty in seconds.
        type: float
        default: 2.0
      max_penalty:
        description: Ceiling of the penalty (bounds the suppression to half_life x log2(max_penalty / reuse)).
        type: int
        default: 4000
      bfd:
        description: Follow the BFD session state of the per-slot responders (no responder, no effect).
        type: bool
        default: true
      bfd_dir:
        description:
          - Runtime directory of the vipinjector role's BFD responders, whose control sockets are
            C(<bfd_dir>/slot<s>/bfdd.sock) (the role's C(netscale-vipinjector-bfd@) units use
            C(/run/netscale-vipinjector-bfd)).
        type: path
        default: /run/netscale-vipinjector-bfd
  slot_numa:
    description:
      - NUMA preference (eBPF mode, optional). The NUMA node of each task slot's workload, a mapping
        slot number -> node; -1 or a missing slot = unknown (no preference for it).
      - A slot whose node holds some but not all of the NICs sends its new flows from the task IP out
        of those local NICs. It spills to the other NICs only when no local NIC is usable, or (with
        I(egress_policy=least_loaded)) when the local NICs are saturated, see I(numa_spill_flows).
        Under C(hash) the workload's flows that hash onto a remote NIC go to a local NIC by flow hash.
      - Empty (the default) = no preference. Kernel forwarding ignores it.
    type: dict
    default: {}
  nic_numa:
    description:
      - NUMA node per NIC, a mapping NIC name -> node, overriding what the host reports in
        C(/sys/class/net/<nic>/device/numa_node) (-1 or absent = unknown; virtual NICs report none).
        For labs and for hosts whose firmware reports no node.
    type: dict
    default: {}
  numa_spill_flows:
    description:
      - With I(egress_policy=least_loaded) and I(slot_numa), the local NICs count as saturated, and a
        new flow goes to the least loaded NIC of all, when the least loaded usable local NIC carries at
        least this many active flows more than the least loaded usable remote NIC.
        0 = place on all NICs by load as soon as the local ones carry more.
    type: int
    default: 4
  sysctl_file:
    description: sysctl.d file holding the persisted global sysctls.
    type: path
    default: /etc/sysctl.d/90-netscale-multinic.conf
attributes:
  check_mode:
    support: full
    description: Computes every change and reports it without applying any.
  diff_mode:
    support: full
    description: Lists the changes (addresses, routes, rules, sysctls, programs, map entries) it would make or made.
extends_documentation_fragment:
  - netscale.multinic.datapath_state
"""

EXAMPLES = r"""
- name: Datapath from the plan, eBPF accelerated
  netscale.multinic.multinic_datapath:
    host: "{{ multinic_host }}"
    bpf_object: /usr/lib/netscale-multinic/bpf/multinic_datapath.o

- name: The same with one MPTCP subflow per NIC in every slot (applications run under mptcpize)
  netscale.multinic.multinic_datapath:
    host: "{{ multinic_host }}"
    bpf_object: /usr/lib/netscale-multinic/bpf/multinic_datapath.o
    mptcp: true

- name: MPTCP for IPv4 only on a dual-stack host (room for the backup endpoint of the task IPv4)
  netscale.multinic.multinic_datapath:
    host: "{{ multinic_host }}"
    bpf_object: /usr/lib/netscale-multinic/bpf/multinic_datapath.o
    mptcp: true
    mptcp_families: [ipv4]

- name: Remove it again
  netscale.multinic.multinic_datapath:
    host: "{{ multinic_host }}"
    state: absent
"""

RETURN = r"""
changes:
  description: One line per change made (or, in check mode, that would be made).
  returned: always
  type: list
  elements: str
mode:
  description: C(ebpf) or C(kernel).
  returned: always
  type: str
egress_policy:
  description: The egress policy in effect (C(hash) in kernel mode whatever was asked).
  returned: when state is present
  type: str
numa:
  description:
    - The NUMA preference in effect (C(nic_nodes), C(slot_nodes), C(spill_flows), and C(local_masks), per
      slot with a preference the bit mask of its local NIC indexes); empty without I(slot_numa).
  returned: when state is present
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import core, spec as datapath_spec
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import facts as datapath_facts
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health


def _numa(p):
    """The NUMA preference for build_spec (None without slot_numa): NIC nodes from sysfs, overridden."""
    if not p["slot_numa"]:
        return None
    names = [n.get("name") for n in (p["host"] or {}).get("nics", []) if isinstance(n, dict)]
    nodes = datapath_facts.nic_numa_nodes([n for n in names if n])
    nodes.update(p["nic_numa"] or {})
    return {"nic_numa": nodes, "slot_numa": p["slot_numa"], "spill_flows": p["numa_spill_flows"]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="dict"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            ebpf=dict(type="bool", default=True),
            mptcp=dict(type="bool", default=False),
            mptcp_families=dict(type="list", elements="str", choices=["ipv4", "ipv6"]),
            bpf_object=dict(type="path"),
            nic_pattern=dict(type="str"),
            manage_nic_addresses=dict(type="bool", default=True),
            egress_policy=dict(type="str", choices=list(datapath_spec.EGRESS_POLICIES),
                               default=datapath_spec.EGRESS_DEFAULT),
            slot_numa=dict(type="dict", default={}),
            nic_numa=dict(type="dict", default={}),
            numa_spill_flows=dict(type="int", default=datapath_spec.NUMA_SPILL_FLOWS),
            state_dir=dict(type="path", default="/var/lib/netscale-multinic"),
            sysctl_file=dict(type="path", default="/etc/sysctl.d/90-netscale-multinic.conf"),
            bpffs_root=dict(type="path", default="/sys/fs/bpf"),
            # types and defaults from datapath/health.py (DEFAULTS, the one source; DOCUMENTATION is checked
            # against it by tests/unit/core/test_defaults.py)
            detection=dict(type="dict", options=health.option_spec()),
        ),
        supports_check_mode=True)
    p = module.params
    opts = core.Options(state_dir=p["state_dir"], sysctl_file=p["sysctl_file"], bpffs_root=p["bpffs_root"],
                        bpf_object=p["bpf_object"], nic_pattern=p["nic_pattern"],
                        manage_nic_addresses=p["manage_nic_addresses"], egress_policy=p["egress_policy"],
                        detection=p["detection"])
    try:
        if p["state"] == "absent":
            sp = datapath_spec.build_spec(p["host"], ebpf=p["ebpf"]) if p["host"] else None
            dp = core.Datapath(sp, opts)
            if dp.state is None and sp is None:
                module.exit_json(changed=False, changes=[], mode="absent")
            changes = dp.remove(check_mode=module.check_mode)
        else:
            sp = datapath_spec.build_spec(p["host"], ebpf=p["ebpf"], mptcp=p["mptcp"], numa=_numa(p),
                                          mptcp_families=p["mptcp_families"])
            dp = core.Datapath(sp, opts)
            changes = dp.apply(check_mode=module.check_mode)
    except MultinicError as e:
        module.fail_json(msg=str(e), changes=[])
    diff = {"before": "", "after": "".join("%s\n" % c for c in changes),
            "before_header": "host datapath", "after_header": "changes"}
    extra = {}
    if p["state"] == "present":
        extra["egress_policy"] = datapath_spec.check_egress_policy(p["egress_policy"], p["ebpf"])
        extra["numa"] = sp.get("numa") or {}
        if extra["numa"] and not p["ebpf"]:
            module.warn("slot_numa needs the eBPF datapath; kernel forwarding (ebpf=false) ignores the NUMA "
                        "preference. Fix: unset host_datapath_slot_numa for this host, or host_datapath_ebpf: true.")
        if extra["egress_policy"] != p["egress_policy"]:
            module.warn("egress_policy=%s needs the eBPF datapath; kernel forwarding (ebpf=false) hashes flows "
                        "over the NICs. Fix: set host_datapath_egress_policy: hash for this host, or "
                        "host_datapath_ebpf: true." % p["egress_policy"])
    module.exit_json(changed=bool(changes), changes=changes,
                     mode="absent" if p["state"] == "absent" else ("ebpf" if p["ebpf"] else "kernel"),
                     diff=diff if changes else {}, **extra)


if __name__ == "__main__":
    main()
