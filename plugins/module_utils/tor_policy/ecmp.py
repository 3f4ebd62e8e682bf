# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ECMP hashing with L4 ports, the way each platform configures it."""

from __future__ import annotations


def ecmp_hash(opts, caps):
    out = {"mode": caps["ecmp_hash"], "l4": True}
    if caps["ecmp_hash"] == "sysctl":
        # L4-port hashing, and a NIC whose carrier is gone leaves the forwarding set in the kernel at
        # once (measured < 0.2 ms, 0 packets lost) instead of after bgpd/zebra (~70 ms on FRR 8.4.4:
        # bgpd holds best-path processing 50 ms). bench/vipinjector_failover.py, docs/performance.md.
        out["sysctls"] = {"net.ipv4.fib_multipath_hash_policy": 1, "net.ipv6.fib_multipath_hash_policy": 1,
                          "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
                          "net.ipv4.conf.default.ignore_routes_with_linkdown": 1,
                          "net.ipv6.conf.all.ignore_routes_with_linkdown": 1,
                          "net.ipv6.conf.default.ignore_routes_with_linkdown": 1}
    elif caps["ecmp_hash"] == "load-sharing":
        out["commands"] = list(opts["eos_ecmp_hash_commands"] or caps["ecmp_hash_commands"])
    return out
