# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ToR (and spine) BGP policy model: plan -> structured config -> per-platform text.

Pure Python, no Ansible imports. The model is computed from the planner's ``rack_data(rack)`` and
``spine_data(spine)`` plus a small set of policy options (``DEFAULT_OPTIONS``); templates under
``templates/tor/<template set>/`` turn it into device text. A platform is a capability entry in
``PLATFORMS`` plus a template set; adding one is adding both.

Sessions toward hosts: the BGP speaker is the VipInjector sidecar of every task slot, one session per
NIC, sourced from the container's per-NIC address (``slot.nics[k].address``) toward the ToR gateway of
that NIC. The ToR therefore has one static neighbor per (slot, NIC): the container addresses. By
default IPv6 sessions carry both address families (IPv4 NLRI with IPv4 next hops rides the IPv6
session: half the sessions); ``ipv4_transport: ipv4`` gives separate IPv4 sessions instead.
"""

from __future__ import annotations

import copy
import ipaddress
import os
import re

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, MultinicError

SECRET_PLACEHOLDER = "<redacted>"

# Capability table. ``templates``: template set directory; ``gtsm``: supports TTL security (GTSM) on
# a neighbor; ``bfd_profiles``: named BFD profiles; ``max_prefix_force``: maximum-prefix can count
# routes before policy; ``ecmp_hash``: how L4-port ECMP hashing is configured; ``max_ecmp``: widest
# ECMP group the platform programs; ``live``: deployable by the tor_bgp role (frr-reload.py).
PLATFORMS = {
    "frr": {
        "templates": "frr",
        "description": "FRRouting (Linux ToR, lab)",
        "gtsm": True,
        "multihop": True,
        "bfd_profiles": True,
        # FRR 8.4.4: maximum-prefix counts ACCEPTED routes (pcount) and bgp_update checks it before
        # counting the route being added, so a limit of N tears down at the (N+2)th accepted route.
        # "force" is unusable: bgp_filtered_routes_count() walks the Adj-RIB-In of ALL peers of the
        # table, never resets its "filtered" flag, and needs soft-reconfiguration (measured: without
        # it a flood of 20 rejected routes did not count; with it the 11th of 12 one-route sessions
        # tripped a limit of 10). docs/tor-policy.md has the measurements.
        "max_prefix_force": False,
        "ipv4_nlri_over_ipv6_session": True,
        "ecmp_hash": "sysctl",
        "max_ecmp": 256,
        "static_blackhole": "blackhole",
        # FRR 8.4.4, measured: a peer-group's graceful-restart-disable does not reach its members
        # (they stay "Helper*"); the per-neighbor form works.
        "gr_per_peer_group": False,
        "live": True,
    },
    "sonic": {
        "templates": "frr",
        "description": "SONiC (bgpd is FRR; hashing is the ASIC's, L4 ports included by default)",
        "gtsm": True,
        "multihop": True,
        "bfd_profiles": True,
        "max_prefix_force": False,
        "ipv4_nlri_over_ipv6_session": True,
        "ecmp_hash": "asic-default",
        "max_ecmp": 128,
        "static_blackhole": "blackhole",
        "gr_per_peer_group": False,
        "live": False,
    },
    "eos": {
        "templates": "eos",
        "description": "Arista EOS (rendered and golden-tested; push with arista.eos is optional)",
        "gtsm": True,
        "multihop": True,
        "bfd_profiles": False,
        # maximum-routes counts routes received before inbound policy.
        "max_prefix_force": True,
        "gr_per_peer_group": True,
        "ipv4_nlri_over_ipv6_session": True,
        "ecmp_hash": "load-sharing",
        # Trident-family syntax; Jericho (7280R) platforms hash on L4 ports by default. Override
        # per deployment with options.eos_ecmp_hash_commands.
        "ecmp_hash_commands": [
            "port-channel load-balance trident fields ip source-ip destination-ip source-port destination-port",
        ],
        "max_ecmp": 128,
        "static_blackhole": "Null0",
        # EOS port names (Ethernet<n>) come from the cabling plan: routing policy only.
        "render_interfaces": False,
        "live": False,
    },
}

DESIGN_MIN_PATHS = 8

DEFAULT_OPTIONS = {
    # ECMP: maximum-paths >= max(8, widest host in the rack); multipath-relax always on.
    "maximum_paths": 16,
    "timers": {"keepalive": 3, "hold": 9},
    # Hop limit toward hosts: sessions cross the host (kernel forwarding decrements the hop limit).
    # ttl-security: GTSM, the sidecar sends 255 and the ToR accepts >= 256 - hops.
    # multihop: ebgp-multihop <hops>.
    "hop_limit": {"mode": "ttl-security", "hops": 2},
    # TCP-MD5 per host: required | optional | off. Keys come from md5_keys (vault), never rendered
    # into logs or the structured config.
    "md5": "optional",
    "bfd": {"enabled": False, "profile": "multinic-hosts", "interval_ms": 100, "multiplier": 3},
    # The sidecar connects; the ToR does not dial 1024 container addresses.
    "passive": True,
    # ipv6: IPv4 NLRI (with IPv4 next hops) rides the IPv6 session; ipv4: separate IPv4 sessions.
    "ipv4_transport": "ipv6",
    # maximum-prefix per session and family. null = auto. A session is one slot's sidecar on one
    # NIC and legitimately carries exactly one route per family (its task IP); the per-slot
    # prefix-list accepts nothing else, so on platforms counting accepted routes (FRR) the limit is
    # 1 and a backstop only (FRR 8.4 tears down at limit + 2 accepted, docs/tor-policy.md).
    # Platforms counting before policy (EOS maximum-routes): 1 + headroom, so a handful of stray
    # routes is rejected and a flood trips.
    "maximum_prefix": None,
    "maximum_prefix_headroom": 8,
    # Warning threshold in percent of the limit. null = auto: 100 where the limit is 1 and accepted
    # routes are counted (FRR): 75 % of 1 rounds to 0, and FRR 8.4 then logs "%MAXPFX ... reaches 1"
    # for every session each time its one route is re-evaluated (policy change, soft reconfiguration),
    # measured: every session within seconds of coming up. Otherwise 75.
    "maximum_prefix_threshold": None,
    "maximum_prefix_restart_minutes": 5,
    # Keep the Adj-RIB-In (soft-reconfiguration inbound) so rejected announcements are visible and
    # counted (received - accepted). Cost: rejected routes use ToR memory until withdrawn.
    "adj_rib_in": True,
    "host_communities": ["no-export", "no-advertise"],
    # Interfaces (addresses of the ToR ports, uplinks, loopback) in the rendered config.
    "render_interfaces": True,
    # Extra prefixes the spines originate (e.g. the lab storage network), per family.
    "spine_networks": {"ipv4": [], "ipv6": []},
    "eos_ecmp_hash_commands": None,
    # FRR 8.4: kernel nexthop groups lose a member after link flaps (lab notes): plain multipath.
    "frr_no_kernel_nexthop_groups": True,
}

MD5_MODES = ("required", "optional", "off")
HOP_MODES = ("ttl-security", "multihop")
_NAME_OK = re.compile(r"^[A-Za-z0-9_.:-]+$")


class TorPolicyError(MultinicError):
    """Bad policy input. Carries every problem found."""

    def __init__(self, problems, device=None):
        self.problems = list(problems)
        head = "invalid ToR policy input"
        if device:
            head += " for %s" % device
        lines = ["%s (%d problem%s):" % (head, len(self.problems), "" if len(self.problems) == 1 else "s")]
        lines.extend("  - %s" % p for p in self.problems)
        super(TorPolicyError, self).__init__("\n".join(lines))


def _merge(base, over):
    out = copy.deepcopy(base)
    for key, value in (over or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve_options(options):
    """Defaults merged with the user's options; unknown keys are problems."""
    problems = []
    options = options or {}
    if not isinstance(options, dict):
        raise TorPolicyError([InputProblem("options", options, "must be a mapping",
                                           "pass a dict of policy options (see docs/tor-policy.md)")])
    for key in sorted(set(options) - set(DEFAULT_OPTIONS)):
        problems.append(InputProblem("options.%s" % key, options[key], "unknown policy option",
                                     "use one of: %s" % ", ".join(sorted(DEFAULT_OPTIONS))))
    if problems:
        raise TorPolicyError(problems)
    return _merge(DEFAULT_OPTIONS, options)


def _int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_options(opts, caps, platform, rack, problems):
    mp = opts["maximum_paths"]
    widest = max([h["nic_count"] for h in rack["hosts"]] or [1])
    need = max(DESIGN_MIN_PATHS, widest)
    if not _int(mp) or mp < need:
        problems.append(InputProblem(
            "options.maximum_paths", mp,
            "maximum-paths must be an integer >= %d (design minimum %d; widest host in rack %s has %d NICs)"
            % (need, DESIGN_MIN_PATHS, rack["name"], widest),
            "set maximum_paths to at least %d" % need))
    elif mp > caps["max_ecmp"]:
        problems.append(InputProblem("options.maximum_paths", mp,
                                     "platform %s programs at most %d next hops" % (platform, caps["max_ecmp"]),
                                     "set maximum_paths between %d and %d" % (need, caps["max_ecmp"])))
    t = opts["timers"]
    if not isinstance(t, dict) or not _int(t.get("keepalive")) or not _int(t.get("hold")) \
            or t["keepalive"] < 1 or t["hold"] < 3 or t["hold"] < 3 * t["keepalive"]:
        problems.append(InputProblem("options.timers", t, "keepalive/hold must be integers, hold >= 3 x keepalive",
                                     "use {keepalive: 3, hold: 9}"))
    hl = opts["hop_limit"]
    mode = hl.get("mode") if isinstance(hl, dict) else None
    if mode not in HOP_MODES:
        problems.append(InputProblem("options.hop_limit.mode", mode, "unknown hop-limit mode",
                                     "use one of: %s" % ", ".join(HOP_MODES)))
    elif mode == "ttl-security" and not caps["gtsm"]:
        problems.append(InputProblem("options.hop_limit.mode", mode, "platform %s has no GTSM" % platform,
                                     "use mode: multihop"))
    hops = hl.get("hops") if isinstance(hl, dict) else None
    if not _int(hops) or not 1 <= hops <= 254:
        problems.append(InputProblem("options.hop_limit.hops", hops, "must be an integer 1..254",
                                     "use 2: sidecar -> host forwarding -> ToR"))
    if opts["md5"] not in MD5_MODES:
        problems.append(InputProblem("options.md5", opts["md5"], "unknown MD5 mode",
                                     "use one of: %s" % ", ".join(MD5_MODES)))
    if opts["ipv4_transport"] not in ("ipv6", "ipv4"):
        problems.append(InputProblem("options.ipv4_transport", opts["ipv4_transport"], "unknown transport",
                                     "use ipv6 (IPv4 NLRI over the IPv6 session) or ipv4 (separate sessions)"))
    b = opts["bfd"]
    if not isinstance(b, dict) or not isinstance(b.get("enabled"), bool):
        problems.append(InputProblem("options.bfd.enabled", b, "must be a boolean", "use bfd: {enabled: true}"))
    elif b["enabled"]:
        if not _int(b.get("interval_ms")) or not 10 <= b["interval_ms"] <= 60000:
            problems.append(InputProblem("options.bfd.interval_ms", b.get("interval_ms"), "must be 10..60000",
                                         "use 100 (x3 = 300 ms detection)"))
        if not _int(b.get("multiplier")) or not 2 <= b["multiplier"] <= 255:
            problems.append(InputProblem("options.bfd.multiplier", b.get("multiplier"), "must be 2..255", "use 3"))
        if not isinstance(b.get("profile"), str) or not _NAME_OK.match(b["profile"]):
            problems.append(InputProblem("options.bfd.profile", b.get("profile"), "must be a simple name",
                                         "use letters, digits, '-', '_'"))
    mx = opts["maximum_prefix"]
    if mx is not None and (not _int(mx) or mx < 1):
        problems.append(InputProblem("options.maximum_prefix", mx, "must be null (auto) or a positive integer",
                                     "leave it null (auto: 1 per family where accepted routes are counted, 1 + headroom where received routes are)"))
    for key in ("maximum_prefix_headroom", "maximum_prefix_restart_minutes"):
        if not _int(opts[key]) or opts[key] < 0:
            problems.append(InputProblem("options.%s" % key, opts[key], "must be an integer >= 0",
                                         "use the default %r" % DEFAULT_OPTIONS[key]))
    th = opts["maximum_prefix_threshold"]
    if th is not None and (not _int(th) or not 1 <= th <= 100):
        problems.append(InputProblem("options.maximum_prefix_threshold", th, "must be null (auto) or 1..100",
                                     "leave it null, or use 75"))
    for v in ("ipv4", "ipv6"):
        for i, p in enumerate((opts["spine_networks"] or {}).get(v) or []):
            try:
                ipaddress.ip_network(p)
            except ValueError:
                problems.append(InputProblem("options.spine_networks.%s[%d]" % (v, i), p, "not a prefix",
                                             "use a CIDR prefix such as fd00:5::/64"))


def _check_md5(opts, rack, md5_keys, problems):
    mode = opts["md5"]
    if md5_keys is None:
        md5_keys = {}
    if not isinstance(md5_keys, dict):
        problems.append(InputProblem("md5_keys", "<%s>" % type(md5_keys).__name__,
                                     "must be a mapping host name -> key", "use {<host>: <key from vault>}"))
        return {}
    keys = {}
    for h in rack["hosts"]:
        key = md5_keys.get(h["name"])
        if mode == "off":
            continue
        if key in (None, ""):
            if mode == "required":
                problems.append(InputProblem(
                    "md5_keys.%s" % h["name"], None,
                    "options.md5 is 'required' but host %s (rack %s) has no TCP-MD5 key" % (h["name"], rack["name"]),
                    "add md5_keys['%s'] (from vault), or set options.md5 to 'optional'" % h["name"]))
            continue
        key = str(key)
        # The value is never echoed: only its length.
        if len(key) > 80 or any(c.isspace() for c in key) or not key.isprintable():
            problems.append(InputProblem("md5_keys.%s" % h["name"], "<%d characters>" % len(key),
                                         "TCP-MD5 key must be 1..80 printable characters without spaces",
                                         "generate a new key without whitespace (e.g. openssl rand -hex 20)"))
            continue
        keys[h["name"]] = key
    return keys


def _net(prefix):
    return ipaddress.ip_network(prefix, strict=True)


def _pl_entries(prefixes, bits):
    """Prefix-list entries permitting exactly the host routes inside ``prefixes``."""
    out = []
    seq = 10
    for p in prefixes:
        n = _net(p)
        entry = {"seq": seq, "action": "permit", "prefix": str(n)}
        if n.prefixlen < bits:
            entry["ge"] = bits
        out.append(entry)
        seq += 10
    return out


def _fam_key(version):
    return "ipv%d" % version


def safe_name(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def tor_structured_config(rack, options=None, md5_keys=None, platform=None):
    """Structured ToR config (a dict) for one rack. Raises TorPolicyError listing every problem.

    ``rack``: the planner's ``rack_data(rack)``; ``options``: policy options (see DEFAULT_OPTIONS);
    ``md5_keys``: {host name: key}; ``platform``: overrides ``rack['tor']['platform']``.
    """
    tor = rack["tor"]
    platform = platform or tor.get("platform") or "frr"
    problems = []
    caps = PLATFORMS.get(platform)
    if caps is None:
        raise TorPolicyError([InputProblem(
            "racks[%s].tor.platform" % rack["name"], platform, "unknown platform",
            "use one of: %s (or add a capability entry and a template set)" % ", ".join(sorted(PLATFORMS)))],
            tor.get("name"))
    opts = resolve_options(options)
    _check_options(opts, caps, platform, rack, problems)
    keys = _check_md5(opts, rack, md5_keys, problems)
    if problems:
        raise TorPolicyError(problems, tor.get("name"))

    families = [f for f in ("ipv6", "ipv4") if f in rack["prefix"]]
    v4_over_v6 = opts["ipv4_transport"] == "ipv6" and "ipv6" in families
    rack_prefix = dict(rack["prefix"])
    mp_headroom = opts["maximum_prefix_headroom"]
    counts_received = caps["max_prefix_force"]

    # One session carries exactly one route per family (its slot's task IP). Platforms counting
    # accepted routes (FRR): limit 1, a backstop the exact per-slot lists never let a session
    # reach; platforms counting before policy (EOS maximum-routes): 1 + headroom.
    limit = opts["maximum_prefix"] or (1 + mp_headroom if counts_received else 1)
    threshold = opts["maximum_prefix_threshold"]
    if threshold is None:
        threshold = 100 if (limit == 1 and not counts_received) else 75
    host_groups = []
    neighbor_count = 0
    group_count = 0
    for h in rack["hosts"]:
        hname = safe_name(h["name"])
        # Session transports: which neighbor addresses exist and which families each carries.
        transports = []
        if "ipv6" in families:
            transports.append(("ipv6", ["ipv6", "ipv4"] if (v4_over_v6 and "ipv4" in families) else ["ipv6"]))
        if "ipv4" in families and not v4_over_v6:
            transports.append(("ipv4", ["ipv4"]))
        slots = []
        for slot in h["slots"]:
            sname = "%s-S%d" % (hname, slot["slot"])
            prefix_lists = {}
            route_maps_in = {}
            for fam in families:
                bits = 32 if fam == "ipv4" else 128
                prefix_lists[fam] = {"name": "PL-TASK-%s-%s" % (sname, fam.upper()),
                                     "entries": _pl_entries(["%s/%d" % (slot["task_ip"][fam], bits)], bits)}
                route_maps_in[fam] = "RM-HOST-%s-%s-IN" % (sname, fam.upper())
            groups = []
            for tfam, afs in transports:
                gname = "HOST-%s" % sname if len(transports) == 1 else "HOST-%s-%s" % (sname, tfam.upper())
                members = []
                for nic in slot["nics"]:
                    k = nic["index"]
                    members.append({
                        "address": nic["address"][tfam],
                        "slot": slot["slot"],
                        "nic": k,
                        "gateway": h["nics"][k]["gateway"][tfam],
                        "tor_port": h["nics"][k]["tor_port"],
                        "description": "%s slot%d %s" % (h["name"], slot["slot"], h["nics"][k]["name"]),
                    })
                neighbor_count += len(members)
                groups.append({"name": gname, "transport": tfam, "address_families": afs, "neighbors": members})
            group_count += len(groups)
            slots.append({
                "slot": slot["slot"],
                "netns": slot.get("netns"),
                "task_ip": {fam: slot["task_ip"][fam] for fam in families},
                "prefix_lists": prefix_lists,
                "route_maps_in": route_maps_in,
                "maximum_prefix": {fam: limit for fam in families},
                "peer_groups": groups,
            })
        host_groups.append({
            "host": h["name"],
            "asn": h["asn"],
            "nic_count": h["nic_count"],
            "task_slot_count": h["task_slot_count"],
            "md5_key": keys.get(h["name"]),
            "md5": bool(keys.get(h["name"])),
            "task_ips": {fam: [s["task_ip"][fam] for s in h["slots"]] for fam in families},
            "slots": slots,
        })

    uplinks = []
    for up in tor["uplinks"]:
        for fam in families:
            if fam not in up:
                continue
            uplinks.append({"spine": up["spine"], "address": up[fam]["spine"], "local": up[fam]["tor"],
                            "length": up[fam]["length"], "family": fam, "asn": up["spine_asn"],
                            "interface": up["interface"],
                            "description": "%s %s" % (up["spine"], up["interface"])})

    interfaces = []
    if opts["render_interfaces"] and caps.get("render_interfaces", True):
        lo = tor.get("loopback") or {}
        interfaces.append({"name": "lo", "description": "loopback",
                           "addresses": [("%s/%d" % (lo[f], 32 if f == "ipv4" else 128), f) for f in families if f in lo]})
        for h in rack["hosts"]:
            for nic in h["nics"]:
                addrs = []
                for f in families:
                    length = _net(nic["subnet"][f]).prefixlen
                    addrs.append(("%s/%d" % (nic["gateway"][f], length), f))
                interfaces.append({"name": nic["tor_port"], "description": "%s %s" % (h["name"], nic["name"]),
                                   "addresses": addrs, "host_port": True})
        for up in tor["uplinks"]:
            interfaces.append({"name": up["interface"], "description": "%s" % up["spine"],
                               "addresses": [("%s/%d" % (up[f]["tor"], up[f]["length"]), f)
                                             for f in families if f in up]})

    bfd = dict(opts["bfd"])
    if bfd["enabled"] and not caps["bfd_profiles"]:
        bfd["profile"] = None
    ecmp_hash = {"mode": caps["ecmp_hash"], "l4": True}
    if caps["ecmp_hash"] == "sysctl":
        # L4-port hashing, and a NIC whose carrier is gone leaves the forwarding set in the kernel at
        # once (measured < 0.2 ms, 0 packets lost) instead of after bgpd/zebra (~70 ms on FRR 8.4.4:
        # bgpd holds best-path processing 50 ms). bench/vipinjector_failover.py, docs/performance.md.
        ecmp_hash["sysctls"] = {"net.ipv4.fib_multipath_hash_policy": 1, "net.ipv6.fib_multipath_hash_policy": 1,
                                "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
                                "net.ipv4.conf.default.ignore_routes_with_linkdown": 1,
                                "net.ipv6.conf.all.ignore_routes_with_linkdown": 1,
                                "net.ipv6.conf.default.ignore_routes_with_linkdown": 1}
    elif caps["ecmp_hash"] == "load-sharing":
        ecmp_hash["commands"] = list(opts["eos_ecmp_hash_commands"] or caps["ecmp_hash_commands"])

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
        "rack_prefix": rack_prefix,
        "rack_prefix_lists": {f: {"name": "PL-RACK-%s" % f.upper(),
                                  "prefix": rack_prefix[f], "bits": 32 if f == "ipv4" else 128}
                              for f in families},
        "interfaces": interfaces,
        "host_groups": host_groups,
        "uplinks": uplinks,
        "uplink_groups": {f: "SPINES-%s" % f.upper() for f in families},
        "policy": {
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
        },
        "ecmp_hash": ecmp_hash,
        "counts": {
            "hosts": len(rack["hosts"]),
            "neighbors": neighbor_count,
            "peer_groups": group_count,
            "slots": sum(len(g["slots"]) for g in host_groups),
            "task_routes": sum(h["task_slot_count"] for h in rack["hosts"]) * len(families),
            "uplink_sessions": len(uplinks),
        },
    }


def spine_structured_config(spine, options=None, platform=None):
    """Structured spine config: accepts exactly each ToR's rack aggregate, nothing else."""
    platform = platform or spine.get("platform") or "frr"
    caps = PLATFORMS.get(platform)
    if caps is None:
        raise TorPolicyError([InputProblem(
            "spines[%s].platform" % spine["name"], platform, "unknown platform",
            "use one of: %s" % ", ".join(sorted(PLATFORMS)))], spine["name"])
    opts = resolve_options(options)
    problems = []
    t = opts["timers"]
    if not isinstance(t, dict) or not _int(t.get("keepalive")) or not _int(t.get("hold")):
        problems.append(InputProblem("options.timers", t, "keepalive/hold must be integers",
                                     "use {keepalive: 3, hold: 9}"))
    if not _int(opts["maximum_paths"]) or opts["maximum_paths"] < DESIGN_MIN_PATHS:
        problems.append(InputProblem("options.maximum_paths", opts["maximum_paths"],
                                     "must be an integer >= %d" % DESIGN_MIN_PATHS,
                                     "set maximum_paths to at least %d" % DESIGN_MIN_PATHS))
    if problems:
        raise TorPolicyError(problems, spine["name"])
    families = [f for f in ("ipv6", "ipv4") if f in spine["zone_prefix"]]
    downlinks = []
    racks = []
    for d in spine["downlinks"]:
        rname = safe_name(d["rack"])
        racks.append({"rack": d["rack"], "tor": d["tor"], "asn": d["tor_asn"],
                      "prefix_lists": {f: {"name": "PL-RACK-%s-%s" % (rname, f.upper()),
                                           "prefix": d["rack_prefix"][f]} for f in families},
                      "route_maps_in": {f: "RM-TOR-%s-%s-IN" % (rname, f.upper()) for f in families}})
        for f in families:
            if f not in d:
                continue
            downlinks.append({"rack": d["rack"], "tor": d["tor"], "asn": d["tor_asn"], "family": f,
                              "address": d[f]["tor"], "local": d[f]["spine"], "length": d[f]["length"],
                              "interface": d["interface"],
                              "route_map_in": "RM-TOR-%s-%s-IN" % (rname, f.upper()),
                              "description": "%s %s" % (d["tor"], d["interface"])})
    interfaces = []
    if opts["render_interfaces"] and caps.get("render_interfaces", True):
        lo = spine.get("loopback") or {}
        interfaces.append({"name": "lo", "description": "loopback",
                           "addresses": [("%s/%d" % (lo[f], 32 if f == "ipv4" else 128), f) for f in families if f in lo]})
        for d in spine["downlinks"]:
            interfaces.append({"name": d["interface"], "description": d["tor"],
                               "addresses": [("%s/%d" % (d[f]["spine"], d[f]["length"]), f)
                                             for f in families if f in d]})
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
        "interfaces": interfaces,
        "racks": racks,
        "downlinks": downlinks,
        "downlink_groups": {f: "TORS-%s" % f.upper() for f in families},
        "networks": {f: list((opts["spine_networks"] or {}).get(f) or []) for f in families},
        "policy": {"maximum_paths": opts["maximum_paths"], "timers": dict(opts["timers"]),
                   "frr_no_kernel_nexthop_groups": bool(opts["frr_no_kernel_nexthop_groups"])},
        "counts": {"racks": len(racks), "sessions": len(downlinks)},
    }


def redact(structured):
    """Copy of a structured config without secrets (for intended/structured_configs and logs)."""
    out = copy.deepcopy(structured)
    for g in out.get("host_groups", []):
        if g.get("md5_key"):
            g["md5_key"] = SECRET_PLACEHOLDER
    return out


def fib_size(structured):
    """Routes a ToR holds for its rack at full occupancy (computed, per family).

    host routes: one per task IP; connected: one per host NIC subnet plus uplinks and loopback;
    aggregate: the rack's own blackhole; remote: other racks' aggregates learned from spines.
    """
    out = {}
    for f in structured["families"]:
        host_routes = sum(len(g["task_ips"][f]) for g in structured["host_groups"])
        ports = sum(1 for i in structured["interfaces"] if i.get("host_port")) or \
            sum(g["nic_count"] for g in structured["host_groups"])
        ups = len([u for u in structured["uplinks"] if u["family"] == f])
        out[f] = {"host_routes": host_routes, "host_route_next_hops": sum(
            len(g["task_ips"][f]) * g["nic_count"] for g in structured["host_groups"]),
            "connected": ports + ups + 1, "aggregate": 1}
    return out


# -- rendering --------------------------------------------------------------------------------

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", "tor")


def _jinja_env(template_dir=None):
    import jinja2  # Jinja2 is an Ansible (controller) dependency; imported lazily

    class _DictFirstEnvironment(jinja2.Environment):
        """``x.key`` on a dict looks up the key first (Jinja tries the Python attribute first and
        pays for an AttributeError on every lookup): about half the render time of a rack with
        per-slot peer-groups. Templates here never call dict methods."""

        def getattr(self, obj, attribute):
            if type(obj) is dict:  # pylint: disable=unidiomatic-typecheck
                try:
                    return obj[attribute]
                except KeyError:
                    pass
            return jinja2.Environment.getattr(self, obj, attribute)

    env = _DictFirstEnvironment(
        loader=jinja2.FileSystemLoader(template_dir or TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["ipnet"] = lambda p: str(ipaddress.ip_network(p, strict=False))
    return env


_ENV_CACHE = {}


def render(structured, template_dir=None):
    """Device text for a structured ToR or spine config, with its platform's template set."""
    key = template_dir or TEMPLATE_DIR
    env = _ENV_CACHE.get(key)
    if env is None:
        env = _ENV_CACHE[key] = _jinja_env(template_dir)
    tset = structured["capabilities"]["templates"]
    template = env.get_template("%s/%s.j2" % (tset, structured["kind"]))
    text = template.render(c=structured)
    # Collapse accidental blank-line runs so the golden files stay stable and readable.
    return re.sub(r"\n{3,}", "\n\n", text)


def build_fabric_configs(plan, options=None, md5_keys=None, devices=None, spine_options=None):
    """Structured and rendered configs for every ToR and spine of a plan (or the named ones).

    Returns {device name: {"structured": dict, "text": str, "kind": "tor"|"spine"}}. Errors of every
    device are collected and raised together.
    """
    topo = plan.topo
    want = set(devices) if devices else None
    out = {}
    problems = []
    for rack in topo.racks:
        name = rack.pins["tor_name"]
        if want is not None and name not in want:
            continue
        try:
            sc = tor_structured_config(plan.rack_data(rack), options, md5_keys)
        except TorPolicyError as exc:
            problems.extend(exc.problems)
            continue
        out[name] = {"kind": "tor", "structured": sc, "text": render(sc)}
    sopts = dict(options or {}) if spine_options is None else spine_options
    if spine_options is None:
        lab = getattr(topo, "lab", None) or {}
        storage = lab.get("storage") if isinstance(lab, dict) else None
        if storage and "spine_networks" not in sopts:
            sopts["spine_networks"] = {f: [storage[f]] for f in ("ipv4", "ipv6") if storage.get(f)}
    for spine in topo.spines:
        if want is not None and spine.name not in want:
            continue
        try:
            sc = spine_structured_config(plan.spine_data(spine), sopts)
        except TorPolicyError as exc:
            problems.extend(exc.problems)
            continue
        out[spine.name] = {"kind": "spine", "structured": sc, "text": render(sc)}
    if problems:
        raise TorPolicyError(problems)
    if want is not None:
        missing = sorted(want - set(out))
        if missing:
            raise TorPolicyError([InputProblem("devices", missing, "no ToR or spine of that name in the fabric",
                                               "use names from the topology (ToR: <rack>-tor or racks[].tor.name)")])
    return out
