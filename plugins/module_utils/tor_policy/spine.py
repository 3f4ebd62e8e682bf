# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The structured config of one spine: accepts exactly each ToR's rack aggregate, nothing else."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.error import TorPolicyError
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.interfaces import renders_interfaces, spine_interfaces
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.names import families_of, safe_name
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.options import (
    DESIGN_MIN_PATHS, check_uplink_md5_keys, is_int, resolve_options,
)
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.platforms import platform_capabilities
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.prefix_lists import spine_rack_prefix_lists
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.route_maps import spine_rack_route_map_in


def spine_structured_config(spine, options=None, platform=None, md5_keys=None):
    """Structured spine config. ``options``: policy options; ``spine_networks`` are the extra
    prefixes the spine originates; ``md5_keys[<spine name>]``: the TCP-MD5 key of its sessions to
    the ToRs (option ``uplink_md5``)."""
    platform = platform or spine.get("platform") or "frr"
    caps = platform_capabilities(platform, "spines[%s].platform" % spine["name"], spine["name"])
    opts = resolve_options(options)
    _check_spine_options(opts, spine["name"])
    problems = []
    keys = check_uplink_md5_keys(opts, [spine["name"]], md5_keys, problems, "its ToRs")
    if problems:
        raise TorPolicyError(problems, spine["name"])
    families = families_of(spine["zone_prefix"])
    racks = [_rack_filter(d, families) for d in spine["downlinks"]]
    downlinks = _downlinks(spine, families, keys.get(spine["name"]))
    return {
        "kind": "spine",
        "name": spine["name"],
        "hostname": spine["name"],
        "platform": platform,
        "capabilities": dict(caps),
        "asn": spine["asn"],
        "router_id": spine["router_id"],
        "families": families,
        "zone_prefix": dict(spine["zone_prefix"]),
        "interfaces": spine_interfaces(spine, families) if renders_interfaces(opts, caps) else [],
        "racks": racks,
        "downlinks": downlinks,
        "downlink_groups": {f: "TORS-%s" % f.upper() for f in families},
        "networks": {f: list((opts["spine_networks"] or {}).get(f) or []) for f in families},
        "policy": {"maximum_paths": opts["maximum_paths"], "timers": dict(opts["timers"]),
                   "frr_no_kernel_nexthop_groups": bool(opts["frr_no_kernel_nexthop_groups"])},
        "counts": {"racks": len(racks), "sessions": len(downlinks)},
    }


def _check_spine_options(opts, device):
    problems = []
    t = opts["timers"]
    if not isinstance(t, dict) or not is_int(t.get("keepalive")) or not is_int(t.get("hold")):
        problems.append(InputProblem("options.timers", t, "keepalive/hold must be integers",
                                     "use {keepalive: 3, hold: 9}"))
    if not is_int(opts["maximum_paths"]) or opts["maximum_paths"] < DESIGN_MIN_PATHS:
        problems.append(InputProblem("options.maximum_paths", opts["maximum_paths"],
                                     "must be an integer >= %d" % DESIGN_MIN_PATHS,
                                     "set maximum_paths to at least %d" % DESIGN_MIN_PATHS))
    if problems:
        raise TorPolicyError(problems, device)


def _rack_filter(downlink, families):
    """What the spine accepts from one rack's ToR: its aggregate, per family."""
    rname = safe_name(downlink["rack"])
    return {"rack": downlink["rack"], "tor": downlink["tor"], "asn": downlink["tor_asn"],
            "prefix_lists": spine_rack_prefix_lists(rname, downlink["rack_prefix"], families),
            "route_maps_in": {f: spine_rack_route_map_in(rname, f) for f in families}}


def _downlinks(spine, families, md5_key=None):
    out = []
    for d in spine["downlinks"]:
        rname = safe_name(d["rack"])
        for f in families:
            if f not in d:
                continue
            out.append({"rack": d["rack"], "tor": d["tor"], "asn": d["tor_asn"], "family": f,
                        "address": d[f]["tor"], "local": d[f]["spine"], "length": d[f]["length"],
                        "interface": d["interface"],
                        "route_map_in": spine_rack_route_map_in(rname, f),
                        "md5_key": md5_key,
                        "description": "%s %s" % (d["tor"], d["interface"])})
    return out
