# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The structured config of one ToR, assembled from the section builders."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy import bgp
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.ecmp import ecmp_hash
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.error import TorPolicyError
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.interfaces import renders_interfaces, tor_interfaces
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.names import families_of
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.options import (
    check_md5_keys, check_tor_options, check_uplink_md5_keys, resolve_options,
)
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.platforms import platform_capabilities
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.prefix_lists import rack_prefix_lists


def tor_structured_config(rack, options=None, md5_keys=None, platform=None):
    """Structured ToR config (a dict) for one rack. Raises TorPolicyError listing every problem.

    ``rack``: the planner's ``rack_data(rack)``; ``options``: policy options (see DEFAULT_OPTIONS);
    ``md5_keys``: {host name: key}; ``platform``: overrides ``rack['tor']['platform']``.
    """
    tor = rack["tor"]
    platform = platform or tor.get("platform") or "frr"
    caps = platform_capabilities(platform, "racks[%s].tor.platform" % rack["name"], tor.get("name"),
                                 " (or add a capability entry and a template set)")
    opts = resolve_options(options)
    problems = check_tor_options(opts, caps, platform, rack)
    keys = check_md5_keys(opts, rack, md5_keys, problems)
    uplink_keys = check_uplink_md5_keys(opts, sorted(set(u["spine"] for u in tor["uplinks"])), md5_keys,
                                        problems, tor.get("name"))
    if problems:
        raise TorPolicyError(problems, tor.get("name"))

    families = families_of(rack["prefix"])
    v4_over_v6 = opts["ipv4_transport"] == "ipv6" and "ipv6" in families
    sessions = bgp.HostSessionPlan(families=families, transports=bgp.session_transports(families, v4_over_v6),
                                   maximum_prefix=_maximum_prefix(opts, caps))
    host_groups = [bgp.host_group(h, sessions, keys.get(h["name"])) for h in rack["hosts"]]
    multihop = set(opts["bfd"].get("multihop_hosts") or []) if opts["bfd"].get("enabled") else set()
    for g in host_groups:
        # hosts on the kernel datapath: multihop BFD, so ebgp-multihop on their peer-groups (bgpd's choice)
        g["bfd_multihop"] = g["host"] in multihop
    uplinks = bgp.uplinks(tor, families, uplink_keys)
    return {
        "kind": "tor",
        "name": tor["name"],
        "hostname": tor["name"],
        "platform": platform,
        "capabilities": dict(caps),
        "rack": rack["name"],
        "zone": rack.get("zone"),
        "asn": tor["asn"],
        "router_id": tor["router_id"],
        "families": families,
        "ipv4_over_ipv6": v4_over_v6 and "ipv4" in families,
        "rack_prefix": dict(rack["prefix"]),
        "rack_prefix_lists": rack_prefix_lists(rack["prefix"], families),
        "interfaces": tor_interfaces(rack, families) if renders_interfaces(opts, caps) else [],
        "host_groups": host_groups,
        "uplinks": uplinks,
        "uplink_groups": {f: "SPINES-%s" % f.upper() for f in families},
        "policy": _policy(opts, caps, sessions.maximum_prefix),
        "ecmp_hash": ecmp_hash(opts, caps),
        "counts": _counts(rack, families, host_groups, uplinks),
    }


def tor_uplinks_config(rack, options=None, platform=None, md5_keys=None):
    """The ToR policy without its host side: the rack aggregate toward the spines and nothing for
    hosts (no host sessions exist). What a ToR runs before the full policy is deployed (the lab).
    ``md5_keys``: only the spines' keys are used (the uplink sessions' TCP-MD5)."""
    return tor_structured_config(dict(rack, hosts=[]), options, md5_keys or {}, platform)


def _maximum_prefix(opts, caps):
    # One session carries exactly one route per family (its slot's task IP). Platforms counting
    # accepted routes (FRR): limit 1, a backstop the exact per-slot lists never let a session
    # reach; platforms counting before policy (EOS maximum-routes): 1 + headroom.
    return opts["maximum_prefix"] or (1 + opts["maximum_prefix_headroom"] if caps["max_prefix_force"] else 1)


def _policy(opts, caps, limit):
    counts_received = caps["max_prefix_force"]
    threshold = opts["maximum_prefix_threshold"]
    if threshold is None:
        threshold = 100 if (limit == 1 and not counts_received) else 75
    bfd = dict(opts["bfd"])
    if bfd["enabled"] and not caps["bfd_profiles"]:
        bfd["profile"] = None
    return {
        "maximum_paths": opts["maximum_paths"],
        "timers": dict(opts["timers"]),
        "hop_limit": dict(opts["hop_limit"]),
        "passive": bool(opts["passive"]),
        "adj_rib_in": bool(opts["adj_rib_in"]),
        "md5": opts["md5"],
        "bfd": bfd,
        "graceful_restart_hosts": False,
        "maximum_prefix_threshold": threshold,
        "maximum_prefix_restart_minutes": opts["maximum_prefix_restart_minutes"],
        "maximum_prefix_force": counts_received,
        "graceful_restart_per_neighbor": not caps["gr_per_peer_group"],
        "host_communities": list(opts["host_communities"]),
        "frr_no_kernel_nexthop_groups": bool(opts["frr_no_kernel_nexthop_groups"]),
    }


def _counts(rack, families, host_groups, uplinks):
    slots = [s for g in host_groups for s in g["slots"]]
    return {
        "hosts": len(rack["hosts"]),
        "neighbors": sum(len(pg["neighbors"]) for s in slots for pg in s["peer_groups"]),
        "peer_groups": sum(len(s["peer_groups"]) for s in slots),
        "slots": len(slots),
        "task_routes": sum(h["task_slot_count"] for h in rack["hosts"]) * len(families),
        "uplink_sessions": len(uplinks),
    }
