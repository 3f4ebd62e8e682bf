# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Desired host datapath, derived from the planner's host_data (pure, no I/O).

The spec is a plain dict (JSON-serialisable) so it can be stored in the state file and read back
by the NIC watcher. Everything the datapath core creates is named here.
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError

# Link-local gateways seen by every workload on every veth (lab notes: the simpler variant).
GW6 = "fe80::1"
GW4 = "169.254.1.1"
# Policy routing (both modes): per host-side veth, first the main table without its default
# route, then the NIC's own table.
# Sizes of the eBPF program's maps (roles/host_datapath/files/bpf/multinic_datapath.c; a unit test
# keeps them equal): the NIC array, one mn_veth entry per (slot, NIC), and up to four mn_ingress
# entries per (slot, NIC) (its two NIC-subnet addresses and the slot's two task IPs).
EBPF_MAX_NICS = 8
EBPF_VETH_ENTRIES = 1024
EBPF_INGRESS_ENTRIES = 8192
# Egress placement in eBPF mode (issue 14): `hash` keeps the workload's own per-flow choice of veth
# (and so of NIC); `least_loaded` places each new flow on the usable NIC with the fewest active
# flows and pins it in the program's LRU flow table (mn_flows, EGRESS_FLOW_ENTRIES entries,
# preallocated ~1.9 MiB; entries idle EGRESS_FLOW_IDLE_S seconds are dropped). Kernel forwarding
# always hashes.
EGRESS_POLICIES = ("hash", "least_loaded")
EGRESS_DEFAULT = "hash"
EGRESS_FLOW_ENTRIES = 16384
EGRESS_FLOW_IDLE_S = 30
# NUMA preference (issue 14 item 3, eBPF mode, optional): per slot the NICs on the workload's NUMA
# node (mn_numa, one entry per slot, EBPF_NUMA_ENTRIES >= slots since slots x NICs <= 1024).
# least_loaded spills a new flow to a remote NIC when no local NIC is usable or the local NICs are
# saturated: the least loaded usable local NIC has NUMA_SPILL_FLOWS (default) more active flows than
# the least loaded usable remote NIC. hash spills only when no local NIC is usable.
EBPF_NUMA_ENTRIES = 1024
NUMA_SPILL_FLOWS = 4
RULE_PREF_MAIN = 1100
RULE_PREF_NIC = 1101
TABLE_BASE = 1100
METRIC_OWN = 10
METRIC_FALLBACK = 20

# Global sysctls (design section 4), persisted in /etc/sysctl.d and applied.
HOST_SYSCTLS = (
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv6.conf.all.forwarding", "1"),
    ("net.ipv4.fib_multipath_hash_policy", "1"),
    ("net.ipv6.fib_multipath_hash_policy", "1"),
    ("net.ipv4.fib_multipath_use_neigh", "1"),
    ("net.ipv4.conf.all.ignore_routes_with_linkdown", "1"),
    ("net.ipv4.conf.default.ignore_routes_with_linkdown", "1"),
    ("net.ipv6.conf.all.ignore_routes_with_linkdown", "1"),
    ("net.ipv6.conf.default.ignore_routes_with_linkdown", "1"),
    ("net.ipv6.conf.all.keep_addr_on_down", "1"),
    ("net.ipv6.conf.default.keep_addr_on_down", "1"),
    ("net.ipv4.conf.all.rp_filter", "2"),
    ("net.ipv4.conf.default.rp_filter", "2"),
    ("net.ipv4.conf.all.arp_ignore", "1"),
    ("net.ipv4.conf.all.arp_announce", "2"),
    ("net.ipv6.conf.all.proxy_ndp", "1"),
    ("net.ipv4.neigh.default.proxy_delay", "0"),
    ("net.ipv6.neigh.default.proxy_delay", "0"),
)

# Per-NIC sysctls (applied, recorded, restored; not persisted: interface names are not stable
# at early boot, the watcher re-applies them).
NIC_SYSCTLS = (
    ("net.ipv6.conf.{nic}.proxy_ndp", "1"),
    ("net.ipv4.neigh.{nic}.proxy_delay", "0"),
    ("net.ipv6.neigh.{nic}.proxy_delay", "0"),
    ("net.ipv6.conf.{nic}.ignore_routes_with_linkdown", "1"),
    ("net.ipv4.conf.{nic}.ignore_routes_with_linkdown", "1"),
    # A NIC that comes back up re-runs DAD on its link-local address; while it is tentative the
    # kernel sends no neighbour solicitation, so the ToR gateway cannot be resolved and egress
    # flows stalled 1.4-2.6 s (TCP backoff). Fabric NICs are point-to-point with planned addresses.
    ("net.ipv6.conf.{nic}.accept_dad", "0"),
    # A NIC that comes back up resolves its ToR gateway at once (traffic is waiting). The first
    # request can go unanswered (lab, veth ToR port: 5 of 12 link-ups; in the captured ones no reply
    # left the port, likely sent before its queue was re-activated after carrier-on) and the default
    # 1 s retransmit then black-holed the flows of that NIC for 0.8-2.0 s. 100 ms on point-to-point
    # fabric links costs at most 10 requests/s while a gateway is unreachable.
    ("net.ipv4.neigh.{nic}.retrans_time_ms", "100"),
    ("net.ipv6.neigh.{nic}.retrans_time_ms", "100"),
)

# Host end of each veth (gone with the veth, never restored).
VETH_SYSCTLS = (
    ("net.ipv4.conf.{veth}.proxy_arp", "1"),
    ("net.ipv4.neigh.{veth}.proxy_delay", "0"),
    ("net.ipv6.conf.{veth}.keep_addr_on_down", "1"),
    ("net.ipv4.conf.{veth}.rp_filter", "2"),
)

# Inside every workload namespace.
NETNS_SYSCTLS = (
    ("net.ipv4.fib_multipath_hash_policy", "1"),
    ("net.ipv6.fib_multipath_hash_policy", "1"),
    ("net.ipv6.conf.all.keep_addr_on_down", "1"),
    ("net.ipv6.conf.default.keep_addr_on_down", "1"),
    ("net.ipv6.conf.all.accept_dad", "0"),
    ("net.ipv6.conf.default.accept_dad", "0"),
    ("net.ipv4.conf.all.rp_filter", "2"),
    ("net.ipv4.conf.default.rp_filter", "2"),
)

IFNAMSIZ = 15


class DatapathInputError(MultinicError):
    """The plan or the options cannot describe a datapath for this host. Nothing was changed."""


def veth_name(slot, nic_name):
    return "ms%d-%s" % (slot, nic_name)


def _addr(block, family, field, path):
    if not isinstance(block, dict):
        raise DatapathInputError("%s: expected a mapping with ipv6/ipv4 keys, got %r. Fix: pass the "
                                 "planner's host_data (multinic_host) unchanged." % (path, block))
    value = block.get(family)
    if value is None:
        return None
    try:
        if "/" in str(value):
            ipaddress.ip_network(value, strict=False)
        else:
            ipaddress.ip_address(value)
    except ValueError:
        raise DatapathInputError("%s.%s: %r is not an %s address. Fix: re-run the planner; do not "
                                 "edit multinic_host by hand." % (path, family, value, field))
    return str(value)


def build_spec(host, netns_names=None, ebpf=True, table_base=TABLE_BASE, rule_pref=RULE_PREF_MAIN, mptcp=False,
               numa=None, mptcp_families=None):
    """Turn the planner's host_data into the datapath spec.

    netns_names: optional {slot_number: netns_name} override (tests run several simulated hosts
    in one machine namespace and need unique names); production uses the plan's names.
    mptcp: MPTCP mode, one subflow per NIC in every slot (datapath/mptcp.py).
    mptcp_families: optional subset of the host's planned families (["ipv4"], ["ipv6"]) that MPTCP
    mode serves; None = every planned family (see mptcp_families_spec()).
    numa: optional NUMA preference, {"nic_numa": {NIC name: node}, "slot_numa": {slot: node},
    "spill_flows": int} (see numa_spec()).
    """
    if not host or not isinstance(host, dict):
        raise DatapathInputError("multinic_host: the plan has no entry for this host (got %r). Fix: add "
                                 "the host to the topology file and re-plan, or run the role only on "
                                 "hosts of group gpu_hosts." % (host,))
    for key in ("name", "nics", "slots"):
        if key not in host:
            raise DatapathInputError("multinic_host.%s: missing from the plan entry of %r. Fix: pass the "
                                     "planner's host_data unchanged." % (key, host.get("name")))
    nics = []
    families = set()
    for i, nic in enumerate(host["nics"]):
        path = "multinic_host.nics[%d]" % i
        name = nic.get("name")
        if not name or not isinstance(name, str):
            raise DatapathInputError("%s.name: missing NIC name (value %r). Fix: name every NIC in the "
                                     "topology file." % (path, name))
        if len(veth_name(99, name)) > IFNAMSIZ:
            raise DatapathInputError("%s.name: %r is too long for the veth name %r (max %d characters). "
                                     "Fix: use NIC names of at most 9 characters." %
                                     (path, name, veth_name(99, name), IFNAMSIZ))
        entry = {"index": int(nic.get("index", i)), "name": name}
        for fam in ("ipv4", "ipv6"):
            addr = _addr(nic.get("address", {}), fam, "address", path + ".address")
            gw = _addr(nic.get("gateway", {}), fam, "gateway", path + ".gateway")
            sub = _addr(nic.get("subnet", {}), fam, "subnet", path + ".subnet")
            if addr and gw and sub:
                families.add(fam)
                entry[fam] = {"address": addr, "gateway": gw,
                              "prefixlen": ipaddress.ip_network(sub).prefixlen}
        nics.append(entry)
    if not nics:
        raise DatapathInputError("multinic_host.nics: %r has no NICs in the plan. Fix: set nics >= 1 in "
                                 "the topology file." % host["name"])
    if [n["index"] for n in nics] != list(range(len(nics))):
        found = [n["index"] for n in nics]
        raise DatapathInputError("multinic_host.nics: indexes %r are not 0..%d in order. Fix: pass the "
                                 "planner's host_data unchanged." % (found, len(nics) - 1))
    slots = []
    for i, slot in enumerate(host["slots"]):
        path = "multinic_host.slots[%d]" % i
        num = int(slot["slot"])
        netns = (netns_names or {}).get(num) or slot.get("netns") or ("mn-slot%d" % num)
        entry = {"slot": num, "netns": netns, "nics": []}
        for fam in ("ipv4", "ipv6"):
            tip = _addr(slot.get("task_ip", {}), fam, "task IP", path + ".task_ip")
            if tip and fam in families:
                entry["task_" + fam] = tip
        by_index = dict((int(n["index"]), n) for n in slot.get("nics", []))
        if sorted(by_index) != [n["index"] for n in nics]:
            raise DatapathInputError("%s.nics: slot %d has addresses for NICs %r but the host has NICs "
                                     "%r. Fix: re-plan." % (path, num, sorted(by_index),
                                                            [n["index"] for n in nics]))
        for nic in nics:
            sn = by_index[nic["index"]]
            v = {"index": nic["index"], "ifname": nic["name"], "veth": veth_name(num, nic["name"])}
            for fam in ("ipv4", "ipv6"):
                a = _addr(sn.get("address", {}), fam, "address", "%s.nics[%d].address" % (path, nic["index"]))
                if a and fam in nic:
                    v[fam] = a
            entry["nics"].append(v)
        slots.append(entry)
    if ebpf:
        _check_ebpf_limits(host["name"], len(nics), len(slots))
    out = {
        "host": host["name"],
        "ebpf": bool(ebpf),
        "mptcp": bool(mptcp),
        "families": sorted(families),
        "nics": nics,
        "slots": slots,
        "table_base": int(table_base),
        "rule_pref": int(rule_pref),
        "gw4": GW4,
        "gw6": GW6,
    }
    mptcp_fams = mptcp_families_spec(host["name"], sorted(families), mptcp_families)
    if mptcp_fams is not None:
        out["mptcp_families"] = mptcp_fams  # absent: every planned family (the spec of earlier releases)
    if numa:
        out["numa"] = numa_spec(nics, slots, **numa)
    return out


def mptcp_families_spec(host_name, planned, value):
    """The ``mptcp_families`` field: None (every planned family) or a sorted subset of ``planned``.

    Leaving a family out gives the slot namespace room for the backup endpoint of the task IP (the
    kernel holds 8 MPTCP endpoints per namespace, a 4-NIC dual-stack slot needs all 8 for its
    container addresses); that family's connections then use one path (ECMP-hashed), like plain TCP."""
    if value is None:
        return None
    fix = ("Fix: list the families MPTCP should serve, a subset of the families planned for the host (%s), "
           "e.g. host_datapath_mptcp_families: [ipv4], or leave it unset (null) for all of them."
           % (", ".join(planned) or "none"))
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise DatapathInputError("mptcp_families: %r is not a list. %s" % (value, fix))
    if not value:
        raise DatapathInputError("mptcp_families: %r is empty. %s" % (list(value), fix))
    for fam in value:
        if fam not in ("ipv4", "ipv6"):
            raise DatapathInputError("mptcp_families: %r is not an address family (ipv4 or ipv6). %s" % (fam, fix))
        if fam not in planned:
            raise DatapathInputError("mptcp_families: %r is not planned for host %s (planned: %s). %s"
                                     % (fam, host_name, ", ".join(planned) or "none", fix))
    return sorted(set(value))


def _numa_node(value, field):
    """A NUMA node number >= 0, or None for unknown (-1, None)."""
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isdigit() or text == "-1"):
        raise DatapathInputError("%s: %r is not a NUMA node. Fix: give a node number (0, 1, ...) or -1 for "
                                 "unknown." % (field, value))
    node = int(text)
    return node if node >= 0 else None


def numa_spec(nics, slots, nic_numa=None, slot_numa=None, spill_flows=None):
    """The NUMA preference of a host (pure): NIC nodes (facts from
    /sys/class/net/<nic>/device/numa_node, overridden per NIC by nic_numa), the workload's node per
    slot (slot_numa) and per slot the mask of its local NICs.

    A slot gets a preference (an mn_numa entry) only when its node is known and some, but not all,
    NICs are on it; otherwise every NIC is equal, as without this option.
    Raises DatapathInputError naming field, value and fix for unknown NICs/slots and bad numbers."""
    names = [n["name"] for n in nics]
    nums = [int(s["slot"]) for s in slots]
    nic_numa = nic_numa or {}
    slot_numa = slot_numa or {}
    if not isinstance(nic_numa, dict):
        raise DatapathInputError("host_datapath_nic_numa: %r is not a mapping. Fix: give {NIC name: NUMA node}, "
                                 "e.g. {eth0: 0, eth1: 1}." % (nic_numa,))
    if not isinstance(slot_numa, dict):
        raise DatapathInputError("host_datapath_slot_numa: %r is not a mapping. Fix: give {slot number: NUMA "
                                 "node}, e.g. {1: 0, 2: 1}." % (slot_numa,))
    for name in nic_numa:
        if name not in names:
            raise DatapathInputError("host_datapath_nic_numa: %r is not a NIC of this host's plan (%s). Fix: use the "
                                     "plan's NIC names." % (name, ", ".join(names)))
    nodes = {}
    for name in names:
        nodes[name] = _numa_node(nic_numa.get(name), "host_datapath_nic_numa.%s" % name)
    by_slot = {}
    for key, value in slot_numa.items():
        try:
            num = int(key)
        except (TypeError, ValueError):
            num = None
        if num not in nums:
            raise DatapathInputError("host_datapath_slot_numa: %r is not a task slot of this host's plan (%s). Fix: "
                                     "use the plan's slot numbers." % (key, ", ".join(str(n) for n in nums)))
        by_slot[num] = _numa_node(value, "host_datapath_slot_numa.%s" % key)
    if spill_flows is None:
        spill_flows = NUMA_SPILL_FLOWS
    if isinstance(spill_flows, bool) or not isinstance(spill_flows, int) or not 0 <= spill_flows <= 1 << 20:
        raise DatapathInputError("host_datapath_numa_spill_flows: %r is not a flow count. Fix: give an integer "
                                 ">= 0 (default %d; 0 spreads over all NICs as soon as the local ones lead)."
                                 % (spill_flows, NUMA_SPILL_FLOWS))
    masks = {}
    for num in nums:
        node = by_slot.get(num)
        if node is None:
            continue
        mask = sum(1 << n["index"] for n in nics if nodes[n["name"]] == node)
        if mask and mask != (1 << len(nics)) - 1:
            masks[str(num)] = mask
    return {"nic_nodes": dict((k, -1 if v is None else v) for k, v in nodes.items()),
            "slot_nodes": dict((str(k), -1 if v is None else v) for k, v in sorted(by_slot.items())),
            "spill_flows": spill_flows, "local_masks": masks}


def _check_ebpf_limits(name, nic_count, slot_count):
    """The eBPF datapath's maps are sized at build time: refuse a host that does not fit, before
    anything is changed, instead of writing past an array (the topology allows up to 16 NICs)."""
    fix = ("Fix: deploy this host with host_datapath_ebpf: false (kernel forwarding has no such limit), "
           "or plan fewer NICs or task slots for it.")
    if nic_count > EBPF_MAX_NICS:
        raise DatapathInputError("multinic_host.nics: host %s has %d NICs; the eBPF datapath supports at most %d "
                                 "(mn_nics). %s" % (name, nic_count, EBPF_MAX_NICS, fix))
    if slot_count * nic_count > EBPF_VETH_ENTRIES:
        raise DatapathInputError("multinic_host.slots: host %s has %d slots x %d NICs = %d veths; the eBPF datapath "
                                 "holds at most %d (mn_veth). %s" % (name, slot_count, nic_count,
                                                                     slot_count * nic_count, EBPF_VETH_ENTRIES, fix))
    if 4 * slot_count * nic_count > EBPF_INGRESS_ENTRIES:
        raise DatapathInputError("multinic_host.slots: host %s needs %d ingress entries (4 per slot and NIC); the "
                                 "eBPF datapath holds at most %d (mn_ingress). %s"
                                 % (name, 4 * slot_count * nic_count, EBPF_INGRESS_ENTRIES, fix))


def check_egress_policy(policy, ebpf=True):
    """The effective egress policy for a host: 'hash' or 'least_loaded' (kernel forwarding: 'hash').

    Raises DatapathInputError naming the field, the value and the fix for anything else."""
    if policy is None:
        return EGRESS_DEFAULT
    if policy not in EGRESS_POLICIES:
        raise DatapathInputError("host_datapath_egress_policy: %r is not an egress policy. Fix: set %s (the default: "
                                 "the workload's flow hash picks the NIC) or %s (eBPF mode: each new flow goes to "
                                 "the NIC with the fewest active flows)." % (policy, EGRESS_POLICIES[0],
                                                                             EGRESS_POLICIES[1]))
    return policy if ebpf else EGRESS_DEFAULT


def nic_pattern(spec):
    """Default regex for 'NICs found on the host': the plan's NIC name stem plus digits."""
    stems = sorted(set(re.sub(r"\d+$", "", n["name"]) for n in spec["nics"]))
    return "^(%s)\\d+$" % "|".join(re.escape(s) for s in stems)


def check_nics(spec, links, pattern=None):
    """Compare the plan's NICs with the links found. links: list of interface names.

    Returns None or raises DatapathInputError naming what differs.
    """
    names = [n["name"] for n in spec["nics"]]
    missing = [n for n in names if n not in links]
    if missing:
        raise DatapathInputError(
            "multinic_host.nics: NIC(s) %s of the plan not found on host %s (found: %s). Fix: check the "
            "NIC names in the topology file or the host's interface naming." %
            (", ".join(missing), spec["host"], ", ".join(sorted(links)) or "none"))
    rx = re.compile(pattern or nic_pattern(spec))
    found = sorted(link for link in links if rx.match(link))
    if len(found) != len(names):
        raise DatapathInputError(
            "multinic_host.nic_count: the plan has %d NICs for host %s but %d matching %r were found "
            "(%s). Fix: correct 'nics' of this host in the topology file, or set "
            "host_datapath_nic_pattern to match only the fabric NICs." %
            (len(names), spec["host"], len(found), rx.pattern, ", ".join(found)))
    return None
