# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""BGP neighbors of a ToR: per task slot a peer-group of its sidecar's sessions (one per NIC), and
the uplinks to the spines.

Sessions toward hosts: the BGP speaker is the VipInjector sidecar of every task slot, one session per
NIC, sourced from the container's per-NIC address (``slot.nics[k].address``) toward the ToR gateway of
that NIC. The ToR therefore has one static neighbor per (slot, NIC): the container addresses. By
default IPv6 sessions carry both address families (IPv4 NLRI with IPv4 next hops rides the IPv6
session: half the sessions); ``ipv4_transport: ipv4`` gives separate IPv4 sessions instead.
"""

from __future__ import annotations

import dataclasses

from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.names import slot_name
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.prefix_lists import slot_prefix_lists
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.route_maps import slot_route_maps_in


@dataclasses.dataclass(frozen=True)
class HostSessionPlan:
    """How host sessions are laid out for one ToR."""

    families: list
    transports: list          # [(transport family, [address families it carries])]
    maximum_prefix: int       # per session and family


def session_transports(families, v4_over_v6):
    """Which neighbor addresses exist and which families each carries."""
    transports = []
    if "ipv6" in families:
        transports.append(("ipv6", ["ipv6", "ipv4"] if (v4_over_v6 and "ipv4" in families) else ["ipv6"]))
    if "ipv4" in families and not v4_over_v6:
        transports.append(("ipv4", ["ipv4"]))
    return transports


def slot_peer_groups(host, slot, transports):
    """One peer-group per transport with the slot's per-NIC container addresses as members."""
    groups = []
    for tfam, afs in transports:
        stem = slot_name(host["name"], slot["slot"])
        gname = "HOST-%s" % stem if len(transports) == 1 else "HOST-%s-%s" % (stem, tfam.upper())
        members = []
        for nic in slot["nics"]:
            k = nic["index"]
            members.append({
                "address": nic["address"][tfam],
                "slot": slot["slot"],
                "nic": k,
                "gateway": host["nics"][k]["gateway"][tfam],
                "tor_port": host["nics"][k]["tor_port"],
                "description": "%s slot%d %s" % (host["name"], slot["slot"], host["nics"][k]["name"]),
            })
        groups.append({"name": gname, "transport": tfam, "address_families": afs, "neighbors": members})
    return groups


def host_group(host, sessions, md5_key):
    """Everything the ToR configures for one host: per slot its prefix-lists, route-maps, limits
    and peer-groups."""
    families = sessions.families
    slots = []
    for slot in host["slots"]:
        slots.append({
            "slot": slot["slot"],
            "netns": slot.get("netns"),
            "task_ip": {fam: slot["task_ip"][fam] for fam in families},
            "prefix_lists": slot_prefix_lists(host, slot, families),
            "route_maps_in": slot_route_maps_in(host, slot, families),
            "maximum_prefix": {fam: sessions.maximum_prefix for fam in families},
            "peer_groups": slot_peer_groups(host, slot, sessions.transports),
        })
    return {
        "host": host["name"],
        "asn": host["asn"],
        "nic_count": host["nic_count"],
        "task_slot_count": host["task_slot_count"],
        "md5_key": md5_key,
        "md5": bool(md5_key),
        "task_ips": {fam: [s["task_ip"][fam] for s in host["slots"]] for fam in families},
        "slots": slots,
    }


def uplinks(tor, families, md5_keys=None):
    """One session per spine and family; ``md5_keys``: {spine: TCP-MD5 key} of the sessions."""
    md5_keys = md5_keys or {}
    out = []
    for up in tor["uplinks"]:
        for fam in families:
            if fam not in up:
                continue
            out.append({"spine": up["spine"], "address": up[fam]["spine"], "local": up[fam]["tor"],
                        "length": up[fam]["length"], "family": fam, "asn": up["spine_asn"],
                        "interface": up["interface"],
                        "md5_key": md5_keys.get(up["spine"]),
                        "description": "%s %s" % (up["spine"], up["interface"])})
    return out
