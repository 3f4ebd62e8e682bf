# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring agent's pinglist: whom each host probes, rendered from the plan (pure, unit-tested).

A host probes, from every one of its NICs (each probe pinned to that NIC):

* every other host of its own rack (target label: that host's name);
* one host of every other rack of its zone (target label: the rack's name); which host of that rack
  is probed rotates every ``rotate_rounds`` rounds, each prober starting at its own offset so that the
  hosts of a rack do not all probe the same peer;
* the configured targets (storage, anything that runs the responder; target label: their name).

Local NIC ``i`` probes the target's NIC ``i mod n`` (``n``: the target's NIC count, or its list of
addresses), so the NICs of a pair of hosts are paired index by index and a fault on one host NIC (or
its cable or ToR port) shows on that NIC's probes, not on every path of the host.

The target label is a host name, a rack name or a configured target name: bounded by the plan, never a
per-probe value. Series per host: NICs x (hosts of the rack - 1 + racks of the zone - 1 + targets).
"""

from __future__ import annotations

import ipaddress
import zlib

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError

VERSION = 1
FAMILIES = ("ipv4", "ipv6")


class PinglistError(MultinicError, ValueError):
    """Bad input to the pinglist renderer (names the field, the value and the fix)."""


def _addr(value, field):
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise PinglistError("%s: %r is not an IP address; fix: give an IPv4 or IPv6 address" % (field, value))


def _nic_addresses(host, family):
    out = []
    for nic in sorted(host["nics"], key=lambda n: int(n["index"])):
        value = (nic.get("address") or {}).get(family)
        if not value:
            raise PinglistError("host %s NIC %s: no %s address in the plan; fix: set fabric_monitor_family to a "
                                "family every host has" % (host["name"], nic.get("name"), family))
        out.append(_addr(value, "host %s NIC %s" % (host["name"], nic.get("name"))))
    return out


def check_targets(targets, family):
    """Configured targets -> [{"name", "addresses"}]. Each: {"name": str, "ipv4"/"ipv6": address or
    list of addresses (one per NIC of the target)}."""
    out = []
    seen = set()
    for i, t in enumerate(targets or []):
        field = "fabric_monitor_targets[%d]" % i
        if not isinstance(t, dict) or not t.get("name"):
            raise PinglistError("%s: %r has no name; fix: give {name: storage1, %s: <address>}" % (field, t, family))
        name = str(t["name"])
        if name in seen:
            raise PinglistError("%s: name %r is used twice; fix: give every target its own name" % (field, name))
        seen.add(name)
        value = t.get(family)
        if not value:
            raise PinglistError("%s (%s): no %s address; fix: add %s: <address> or change fabric_monitor_family"
                                % (field, name, family, family))
        values = value if isinstance(value, (list, tuple)) else [value]
        out.append({"name": name, "addresses": [_addr(v, "%s.%s" % (field, family)) for v in values]})
    return out


def rotation_offset(host_name):
    """Stable per-host start offset of the zone rotation."""
    return zlib.crc32(host_name.encode("utf-8")) & 0xFFFF


def render(hosts, host_name, targets=(), family="ipv6", rotate_rounds=10):
    """The pinglist of ``host_name``. ``hosts``: plan host dicts (``FabricPlan.host_data``: name, rack,
    zone, nics[index, name, address{ipv4, ipv6}]) of at least this host's zone; ``targets``: configured
    targets (:func:`check_targets` input)."""
    if family not in FAMILIES:
        raise PinglistError("fabric_monitor_family: %r; fix: use one of %s" % (family, ", ".join(FAMILIES)))
    if int(rotate_rounds) < 1:
        raise PinglistError("fabric_monitor_rotate_rounds: %r; fix: use an integer >= 1" % (rotate_rounds,))
    by_name = dict((h["name"], h) for h in hosts)
    me = by_name.get(host_name)
    if me is None:
        raise PinglistError("host %s: not in the plan; fix: add it to the topology file and re-plan, or run the "
                            "role only on group gpu_hosts" % host_name)
    zone_hosts = sorted((h for h in hosts if h["zone"] == me["zone"]), key=lambda h: (h["rack"], h["name"]))
    out_targets = []
    for h in zone_hosts:
        if h["rack"] == me["rack"] and h["name"] != host_name:
            out_targets.append({"name": h["name"], "kind": "rack",
                                "candidates": [{"host": h["name"], "addresses": _nic_addresses(h, family)}]})
    racks = {}
    for h in zone_hosts:
        if h["rack"] != me["rack"]:
            racks.setdefault(h["rack"], []).append({"host": h["name"], "addresses": _nic_addresses(h, family)})
    for rack in sorted(racks):
        out_targets.append({"name": rack, "kind": "zone", "candidates": racks[rack]})
    for t in check_targets(targets, family):
        if t["name"] in set(x["name"] for x in out_targets):
            raise PinglistError("fabric_monitor_targets: name %r is also a host or rack of the plan; fix: rename "
                                "the target" % t["name"])
        out_targets.append({"name": t["name"], "kind": "target",
                            "candidates": [{"host": t["name"], "addresses": t["addresses"]}]})
    nics = []
    for nic in sorted(me["nics"], key=lambda n: int(n["index"])):
        nics.append({"name": nic["name"], "index": int(nic["index"]),
                     "address": _addr((nic.get("address") or {}).get(family), "host %s NIC %s" % (host_name, nic["name"])),
                     "gateway": (nic.get("gateway") or {}).get(family)})
    return {"version": VERSION, "host": host_name, "rack": me["rack"], "zone": me["zone"], "family": family,
            "rotate_rounds": int(rotate_rounds), "offset": rotation_offset(host_name), "nics": nics,
            "targets": out_targets}


def from_plan(plan, names, targets=(), family="ipv6", rotate_rounds=10):
    """{host name: pinglist} for ``names`` from a :class:`FabricPlan` (only their zones are expanded)."""
    topo = plan.topo
    wanted = set(names)
    known = set(h.name for h in topo.hosts)
    missing = sorted(wanted - known)
    if missing:
        raise PinglistError("hosts %s: not in the plan of fabric %s; fix: add them to the topology file and "
                            "re-plan, or limit the play to group gpu_hosts" % (", ".join(missing), topo.name))
    zones = set(h.parent.parent.name for h in topo.hosts if h.name in wanted)
    data = [plan.host_data(h) for h in topo.hosts if h.parent.parent.name in zones]
    return dict((n, render(data, n, targets, family, rotate_rounds)) for n in sorted(wanted))


def pick(target, round_no, offset):
    """The candidate a zone target probes in round ``round_no`` (rack and storage targets have one)."""
    cands = target["candidates"]
    if len(cands) == 1:
        return cands[0]
    return cands[(round_no + offset) % len(cands)]


def probe_pairs(pinglist, round_no):
    """[(local NIC dict, target name, target host, address)] probed in round ``round_no`` (every NIC to
    every target; the rotation step is ``round_no // rotate_rounds``)."""
    step = round_no // max(1, int(pinglist.get("rotate_rounds", 1)))
    out = []
    for t in pinglist["targets"]:
        cand = pick(t, step, int(pinglist.get("offset", 0)))
        addrs = cand["addresses"]
        for nic in pinglist["nics"]:
            out.append((nic, t["name"], cand["host"], addrs[int(nic["index"]) % len(addrs)]))
    return out
