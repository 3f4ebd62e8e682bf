# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Policy options: defaults, merging and validation (every problem collected, none echoed secret)."""

from __future__ import annotations

import copy
import ipaddress
import re

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.error import TorPolicyError

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
    # TCP-MD5 on the ToR<->spine sessions: required | optional | off. The key of every session of a
    # spine is md5_keys[<spine name>] (vault), rendered on both ends (ToR uplink, spine downlink).
    "uplink_md5": "optional",
    # BFD on every host session (a peer per (slot, NIC), answered by the bfdd beside the slot's sidecar,
    # roles/vipinjector): detection interval_ms x multiplier instead of the hold timer.
    # check_control_plane_failure: FRR "neighbor X bfd check-control-plane-failure" (the C-bit: a BFD
    # down from a control-plane-dependent peer also flushes graceful-restart stale routes).
    # multihop_hosts: hosts on the kernel-forwarding datapath (host_datapath_ebpf false; the tor_bgp role fills
    # it in): the host decrements the TTL of the BFD packets, which single-hop BFD (RFC 5881) discards, so their
    # peer-groups use ebgp-multihop (hop_limit.hops) and bgpd asks bfdd for multihop BFD (RFC 5883, UDP 4784),
    # answered by the slot's responder with vipinjector_bfd.multihop.
    "bfd": {"enabled": False, "profile": "multinic-hosts", "interval_ms": 100, "multiplier": 3,
            "check_control_plane_failure": True, "multihop_hosts": []},
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


def _merge(base, over):
    out = copy.deepcopy(base)
    for key, value in (over or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def compose(options, spine_networks=None, bfd_multihop_hosts=None):
    """The options a fabric's ToRs are rendered with: the spine networks and the multihop-BFD hosts of the
    fabric under the user's ``options``, which win key by key (``options.bfd.enabled`` keeps the multihop
    hosts; ``options.spine_networks`` replaces the fabric's per family). The ``tor_bgp`` role and the
    rollout's change-scope check both render through ``tor_render``, which composes here, so the scope check
    compares the text the role would write."""
    base = {}
    if spine_networks:
        base["spine_networks"] = spine_networks
    if bfd_multihop_hosts is not None:
        base["bfd"] = {"multihop_hosts": list(bfd_multihop_hosts)}
    return _merge(base, options or {})


def multihop_hosts(hosts_ebpf):
    """The hosts whose sessions need multihop BFD: those on the kernel datapath. ``hosts_ebpf``: [(host,
    host_datapath_ebpf value or None when unset)] in inventory order; unset means eBPF (the host_datapath
    role's default)."""
    return [h for h, ebpf in hosts_ebpf if ebpf is not None and not ebpf]


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


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_tor_options(opts, caps, platform, rack):
    """Every problem of resolved options ``opts`` for a ToR of ``platform`` serving ``rack``."""
    problems = []
    _check_maximum_paths(opts, caps, platform, rack, problems)
    _check_timers(opts, problems)
    _check_hop_limit(opts, caps, platform, problems)
    _check_modes(opts, problems)
    _check_bfd(opts, problems)
    _check_maximum_prefix(opts, problems)
    _check_spine_networks(opts, problems)
    return problems


def _check_maximum_paths(opts, caps, platform, rack, problems):
    mp = opts["maximum_paths"]
    widest = max([h["nic_count"] for h in rack["hosts"]] or [1])
    need = max(DESIGN_MIN_PATHS, widest)
    if not is_int(mp) or mp < need:
        problems.append(InputProblem(
            "options.maximum_paths", mp,
            "maximum-paths must be an integer >= %d (design minimum %d; widest host in rack %s has %d NICs)"
            % (need, DESIGN_MIN_PATHS, rack["name"], widest),
            "set maximum_paths to at least %d" % need))
    elif mp > caps["max_ecmp"]:
        problems.append(InputProblem("options.maximum_paths", mp,
                                     "platform %s programs at most %d next hops" % (platform, caps["max_ecmp"]),
                                     "set maximum_paths between %d and %d" % (need, caps["max_ecmp"])))


def _check_timers(opts, problems):
    t = opts["timers"]
    if not isinstance(t, dict) or not is_int(t.get("keepalive")) or not is_int(t.get("hold")) \
            or t["keepalive"] < 1 or t["hold"] < 3 or t["hold"] < 3 * t["keepalive"]:
        problems.append(InputProblem("options.timers", t, "keepalive/hold must be integers, hold >= 3 x keepalive",
                                     "use {keepalive: 3, hold: 9}"))


def _check_hop_limit(opts, caps, platform, problems):
    hl = opts["hop_limit"]
    mode = hl.get("mode") if isinstance(hl, dict) else None
    if mode not in HOP_MODES:
        problems.append(InputProblem("options.hop_limit.mode", mode, "unknown hop-limit mode",
                                     "use one of: %s" % ", ".join(HOP_MODES)))
    elif mode == "ttl-security" and not caps["gtsm"]:
        problems.append(InputProblem("options.hop_limit.mode", mode, "platform %s has no GTSM" % platform,
                                     "use mode: multihop"))
    hops = hl.get("hops") if isinstance(hl, dict) else None
    if not is_int(hops) or not 1 <= hops <= 254:
        problems.append(InputProblem("options.hop_limit.hops", hops, "must be an integer 1..254",
                                     "use 2: sidecar -> host forwarding -> ToR"))


def _check_modes(opts, problems):
    for name in ("md5", "uplink_md5"):
        if opts[name] not in MD5_MODES:
            problems.append(InputProblem("options.%s" % name, opts[name], "unknown MD5 mode",
                                         "use one of: %s" % ", ".join(MD5_MODES)))
    if opts["ipv4_transport"] not in ("ipv6", "ipv4"):
        problems.append(InputProblem("options.ipv4_transport", opts["ipv4_transport"], "unknown transport",
                                     "use ipv6 (IPv4 NLRI over the IPv6 session) or ipv4 (separate sessions)"))


def _check_bfd(opts, problems):
    b = opts["bfd"]
    if not isinstance(b, dict) or not isinstance(b.get("enabled"), bool):
        problems.append(InputProblem("options.bfd.enabled", b, "must be a boolean", "use bfd: {enabled: true}"))
    else:
        for key in sorted(set(b) - set(DEFAULT_OPTIONS["bfd"])):
            problems.append(InputProblem("options.bfd.%s" % key, b[key], "unknown BFD option",
                                         "use one of: %s" % ", ".join(sorted(DEFAULT_OPTIONS["bfd"]))))
    if isinstance(b, dict) and b.get("enabled") is True:
        if not is_int(b.get("interval_ms")) or not 10 <= b["interval_ms"] <= 60000:
            problems.append(InputProblem("options.bfd.interval_ms", b.get("interval_ms"), "must be 10..60000",
                                         "use 100 (x3 = 300 ms detection)"))
        if not is_int(b.get("multiplier")) or not 2 <= b["multiplier"] <= 255:
            problems.append(InputProblem("options.bfd.multiplier", b.get("multiplier"), "must be 2..255", "use 3"))
        if not isinstance(b.get("check_control_plane_failure"), bool):
            problems.append(InputProblem("options.bfd.check_control_plane_failure", b.get("check_control_plane_failure"),
                                         "must be a boolean", "use true (FRR: bfd check-control-plane-failure)"))
        mh = b.get("multihop_hosts")
        if not isinstance(mh, list) or not all(isinstance(x, str) and x for x in mh):
            problems.append(InputProblem("options.bfd.multihop_hosts", mh, "must be a list of host names",
                                         "list the hosts on the kernel datapath (the tor_bgp role does), or []"))
        if not isinstance(b.get("profile"), str) or not _NAME_OK.match(b["profile"]):
            problems.append(InputProblem("options.bfd.profile", b.get("profile"), "must be a simple name",
                                         "use letters, digits, '-', '_'"))


def _check_maximum_prefix(opts, problems):
    mx = opts["maximum_prefix"]
    if mx is not None and (not is_int(mx) or mx < 1):
        problems.append(InputProblem("options.maximum_prefix", mx, "must be null (auto) or a positive integer",
                                     "leave it null (auto: 1 per family where accepted routes are counted, 1 + headroom where received routes are)"))
    for key in ("maximum_prefix_headroom", "maximum_prefix_restart_minutes"):
        if not is_int(opts[key]) or opts[key] < 0:
            problems.append(InputProblem("options.%s" % key, opts[key], "must be an integer >= 0",
                                         "use the default %r" % DEFAULT_OPTIONS[key]))
    th = opts["maximum_prefix_threshold"]
    if th is not None and (not is_int(th) or not 1 <= th <= 100):
        problems.append(InputProblem("options.maximum_prefix_threshold", th, "must be null (auto) or 1..100",
                                     "leave it null, or use 75"))


def _check_spine_networks(opts, problems):
    for v in ("ipv4", "ipv6"):
        for i, p in enumerate((opts["spine_networks"] or {}).get(v) or []):
            try:
                ipaddress.ip_network(p)
            except ValueError:
                problems.append(InputProblem("options.spine_networks.%s[%d]" % (v, i), p, "not a prefix",
                                             "use a CIDR prefix such as fd00:5::/64"))


def check_md5_keys(opts, rack, md5_keys, problems):
    """The usable TCP-MD5 key per host of ``rack`` ({host: key}); problems are appended."""
    names = [(h["name"], "host %s (rack %s)" % (h["name"], rack["name"])) for h in rack["hosts"]]
    return _usable_keys(opts["md5"], "md5", names, md5_keys, problems)


def check_uplink_md5_keys(opts, spines, md5_keys, problems, device):
    """The usable TCP-MD5 key per spine ({spine: key}) of the ToR<->spine sessions of ``device``."""
    return _usable_keys(opts["uplink_md5"], "uplink_md5",
                        [(s, "the sessions between %s and spine %s" % (device, s)) for s in spines],
                        md5_keys, problems)


def _usable_keys(mode, option, names, md5_keys, problems):
    if md5_keys is None:
        md5_keys = {}
    if not isinstance(md5_keys, dict):
        problems.append(InputProblem("md5_keys", "<%s>" % type(md5_keys).__name__,
                                     "must be a mapping host name -> key", "use {<host>: <key from vault>}"))
        return {}
    keys = {}
    for name, what in names:
        key = md5_keys.get(name)
        if mode == "off":
            continue
        if key in (None, ""):
            if mode == "required":
                problems.append(InputProblem(
                    "md5_keys.%s" % name, None,
                    "options.%s is 'required' but %s have no TCP-MD5 key" % (option, what)
                    if option == "uplink_md5" else
                    "options.%s is 'required' but %s has no TCP-MD5 key" % (option, what),
                    "add md5_keys['%s'] (from vault), or set options.%s to 'optional'" % (name, option)))
            continue
        key = str(key)
        # The value is never echoed: only its length.
        if len(key) > 80 or any(c.isspace() for c in key) or not key.isprintable():
            problems.append(InputProblem("md5_keys.%s" % name, "<%d characters>" % len(key),
                                         "TCP-MD5 key must be 1..80 printable characters without spaces",
                                         "generate a new key without whitespace (e.g. openssl rand -hex 20)"))
            continue
        keys[name] = key
    return keys
