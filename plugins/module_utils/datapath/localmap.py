# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host-local map of the eBPF egress program (mn_local4 / mn_local6): computed from live routes.

`mn_veth_ingress` must hand a workload's packet to the host stack when the host itself would not
send it out of a fabric NIC: a local or broadcast address of the host (any interface, incl. lo
and non-fabric interfaces), another workload on the host (its container addresses and task IP
are host routes via its veths), a management network, an unreachable/blackhole route. Instead of
a full `bpf_fib_lookup` per packet the program does one LPM lookup in a mirror of what the
stack consults for a packet arriving on a workload veth (the role's rules: pref 0 `lookup local`,
pref 1100 `lookup main suppress_prefixlength 0`, pref 1101 `lookup 1100+k`):

* every entry of the local table -> LOCAL_STACK (local, broadcast, anycast, multicast, ...);
* every main-table route with prefix length >= 1: via a fabric NIC or `throw` -> LOCAL_FWD,
  anything else (another device, blackhole, unreachable, prohibit, local, lwt encap) ->
  LOCAL_STACK; a prefix with several routes is LOCAL_STACK if any of them is;
* an entry inside a local-table prefix is LOCAL_STACK (the local table is consulted first);
* LOCAL_FWD entries are kept only where they carve a hole into a LOCAL_STACK prefix (not in the
  map = LOCAL_FWD), so a host with many NIC routes does not fill the map;
* link-local and multicast destinations never reach the lookup (the program passes them before)
  and are left out.

The mirror is exact only for the rule set above. `rules_ok` rejects other policy rules that could
match a workload's packet before pref 1101 (fwmark, l3mdev, other tables, ...); then, and when a
family needs more than MAX_ENTRIES entries, the loader and the watcher clear CFG_USE_LOCAL_MAP and
the program falls back to the full lookup per packet (correct, ~165 ns a packet slower).

Pure standard library (no Ansible, no relative imports): the host_datapath role installs a copy
of this file next to the NIC watcher, which keeps the map in sync with address/route/rule events.
"""

from __future__ import annotations

import ipaddress
import struct

MAPS = ("mn_local4", "mn_local6")
MAX_ENTRIES = 4096          # = MN_LOCAL_MAX in multinic_datapath.c (per family)
LOCAL_STACK = 1
LOCAL_FWD = 2
CFG_USE_LOCAL_MAP = 1
RULE_PREF_NIC = 1101        # spec.RULE_PREF_NIC: rules after it cannot matter
_SKIP_NETS = ("169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32", "fe80::/10", "ff00::/8")
_SKIP = [ipaddress.ip_network(n) for n in _SKIP_NETS]
_STACK_TYPES_MAIN = ("blackhole", "unreachable", "prohibit", "local", "broadcast", "anycast",
                     "multicast", "nat")


def _net(dst, family):
    if dst in ("default", "0.0.0.0/0", "::/0"):
        return ipaddress.ip_network("0.0.0.0/0" if family == 4 else "::/0")
    return ipaddress.ip_network(dst, strict=False)


def _skip(net):
    return any(net.version == s.version and net.subnet_of(s) for s in _SKIP)


def _devs(route):
    if "nexthops" in route:
        return [n.get("dev") for n in route["nexthops"]]
    return [route.get("dev")]


def main_verdict(route, nic_names):
    """LOCAL_FWD / LOCAL_STACK for one main-table route (iproute2 JSON)."""
    rtype = route.get("type", "unicast")
    if rtype == "throw":
        return LOCAL_FWD
    if rtype in _STACK_TYPES_MAIN or route.get("encap"):
        return LOCAL_STACK
    devs = _devs(route)
    if devs and all(d in nic_names for d in devs):
        return LOCAL_FWD
    return LOCAL_STACK


def entries(local_routes, main_routes, family, nic_names):
    """{ip_network: verdict} for one family (local and main table JSON of that family)."""
    nic_names = set(nic_names)
    local = {}
    for r in local_routes:
        net = _net(r.get("dst", "default"), family)
        if not _skip(net):
            local[net] = LOCAL_STACK
    main = {}
    for r in main_routes:
        net = _net(r.get("dst", "default"), family)
        if net.prefixlen == 0 or _skip(net):
            continue   # suppress_prefixlength 0: the main default route is not used for workloads
        v = main_verdict(r, nic_names)
        main[net] = LOCAL_STACK if LOCAL_STACK in (v, main.get(net)) else v
    out = dict(local)
    plens = _plens(local)
    for net, v in main.items():
        if net not in out:
            out[net] = LOCAL_STACK if _inside(net, local, plens) else v
    stack = set(n for n, v in out.items() if v == LOCAL_STACK)
    plens = _plens(stack)
    return dict((n, v) for n, v in out.items() if v == LOCAL_STACK or _inside(n, stack, plens))


def _plens(nets):
    return sorted(set(n.prefixlen for n in nets))


def _inside(net, nets, plens):
    """Is net strictly inside one of nets (one family; plens = their distinct prefix lengths)?"""
    for plen in plens:
        if plen >= net.prefixlen:
            break
        if net.supernet(new_prefix=plen) in nets:
            return True
    return False


def verdict_of(table, addr):
    """What the program decides for addr given entries() (tests): longest prefix wins."""
    ip = ipaddress.ip_address(addr)
    best = None
    for net, v in table.items():
        if net.version == ip.version and ip in net and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, v)
    return best[1] if best else LOCAL_FWD


def rules_ok(rules, veth_names):
    """(ok, reason): can entries() mirror what the rules give a packet arriving on a workload veth?

    rules: iproute2 JSON of one family's `ip rule show`. Rules from pref RULE_PREF_NIC on never
    matter (the veth's own table has a default route); a rule bound to another input interface
    or to an output interface cannot match; the local-table rule must come first."""
    veth_names = set(veth_names)
    seen_local = False
    for r in sorted(rules, key=lambda x: x.get("priority", 0)):
        pref = r.get("priority", 0)
        if pref >= RULE_PREF_NIC:
            break
        iif = r.get("iif")
        table = str(r.get("table", ""))
        if iif and iif not in veth_names:
            continue
        if r.get("oif"):
            continue
        selectors = set(r) - {"priority", "src", "table", "iif", "suppress_prefixlen", "flags", "protocol"}
        if not iif and not selectors and r.get("src", "all") == "all" and table == "local" \
                and "suppress_prefixlen" not in r:
            seen_local = True
            continue
        if iif in veth_names and table == "main" and r.get("suppress_prefixlen") == 0 and not selectors \
                and r.get("src", "all") == "all":
            if not seen_local:
                return False, "rule %s: the local-table rule does not come first" % pref
            continue
        return False, "policy rule %s (%s) may match workload traffic before pref %d" % (
            pref, " ".join("%s=%s" % kv for kv in sorted(r.items()) if kv[0] != "priority"), RULE_PREF_NIC)
    if not seen_local:
        return False, "no `lookup local` rule before pref %d" % RULE_PREF_NIC
    return True, "ok"


def key_bytes(net):
    """LPM key: u32 prefix length (host order) + address (network order)."""
    return struct.pack("<I", net.prefixlen) + net.network_address.packed


def val_bytes(verdict):
    return struct.pack("<I", verdict)


def compute(ip_json, nic_names, veth_names, max_entries=MAX_ENTRIES):
    """Desired map contents from the live host.

    ip_json(args) -> parsed `ip -j <args>` output. Returns
    ({"mn_local4": {key: value}, "mn_local6": {...}}, use_map, reason)."""
    maps = {}
    use_map, reason = True, "ok"
    for family, name in ((4, "mn_local4"), (6, "mn_local6")):
        f = "-%d" % family
        ok, why = rules_ok(ip_json([f, "rule", "show"]), veth_names)
        if not ok and use_map:
            use_map, reason = False, "IPv%d: %s" % (family, why)
        table = entries(ip_json([f, "route", "show", "table", "local"]),
                        ip_json([f, "route", "show", "table", "main"]), family, nic_names)
        if len(table) > max_entries and use_map:
            use_map, reason = False, "IPv%d: %d host-local entries > %d" % (family, len(table), max_entries)
        maps[name] = dict((key_bytes(n), val_bytes(v)) for n, v in table.items())
    if not use_map:
        maps = {"mn_local4": {}, "mn_local6": {}}
    return maps, use_map, reason


def cfg_value(nic_count, use_map):
    return struct.pack("<II", nic_count, CFG_USE_LOCAL_MAP if use_map else 0)


def map_ops(have, want):
    """[(op, key, value)] turning map contents have into want (updates before deletes)."""
    ops = [("update", k, v) for k, v in sorted(want.items()) if have.get(k) != v]
    ops += [("delete", k, None) for k in sorted(set(have) - set(want))]
    return ops
