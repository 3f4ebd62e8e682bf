# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Platforms: a capability entry here plus a template set under ``templates/tor/<set>/``."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.error import TorPolicyError

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


def platform_capabilities(platform, path, device, fix_hint=""):
    """The capability entry of ``platform``; an unknown platform is a TorPolicyError at ``path``."""
    caps = PLATFORMS.get(platform)
    if caps is None:
        raise TorPolicyError([InputProblem(
            path, platform, "unknown platform",
            "use one of: %s%s" % (", ".join(sorted(PLATFORMS)), fix_hint))], device)
    return caps
