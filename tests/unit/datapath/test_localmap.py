# -*- coding: utf-8 -*-
"""Unit tests of the host-local map (pure): which destinations the eBPF egress program hands to the stack."""
import ipaddress
import struct

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bpf, localmap as LM

NICS = ["eth0", "eth1"]
VETHS = ["ms1-eth0", "ms1-eth1"]

LOCAL4 = [
    {"type": "local", "dst": "127.0.0.0/8", "dev": "lo"},
    {"type": "local", "dst": "127.0.0.1", "dev": "lo"},
    {"type": "local", "dst": "198.18.0.2", "dev": "eth0"},
    {"type": "broadcast", "dst": "198.18.0.63", "dev": "eth0"},
    {"type": "local", "dst": "198.19.100.7", "dev": "mgmt0"},
    {"type": "local", "dst": "169.254.1.1", "dev": "lo"},
]
MAIN4 = [
    {"dst": "default", "gateway": "198.19.100.1", "dev": "mgmt0"},
    {"dst": "198.18.0.0/26", "dev": "eth0", "protocol": "kernel"},
    {"dst": "198.18.0.64/26", "dev": "eth1", "protocol": "kernel"},
    {"dst": "198.19.100.0/24", "dev": "mgmt0"},
    {"dst": "198.18.0.34", "dev": "ms1-eth0"},
    {"dst": "198.18.0.162", "nexthops": [{"gateway": "198.18.0.34", "dev": "ms1-eth0"},
                                         {"gateway": "198.18.0.98", "dev": "ms1-eth1"}]},
    {"type": "blackhole", "dst": "198.18.200.0/24"},
    # a NIC route nested inside a management prefix: the FIB sends it out of the NIC
    {"dst": "198.19.0.0/16", "dev": "mgmt0"},
    {"dst": "198.19.5.0/24", "gateway": "198.18.0.1", "dev": "eth0"},
    {"type": "throw", "dst": "198.19.6.0/24"},
]


def table4():
    return LM.entries(LOCAL4, MAIN4, 4, NICS)


def test_verdicts_ipv4():
    t = table4()
    stack, fwd = LM.LOCAL_STACK, LM.LOCAL_FWD
    cases = {
        "198.18.0.2": stack,       # the host's own NIC address
        "198.18.0.63": stack,      # subnet broadcast
        "127.0.0.5": stack,        # loopback net
        "198.19.100.7": stack,     # address on a non-fabric interface
        "198.19.100.50": stack,    # management network (route via a non-NIC device)
        "198.18.0.34": stack,      # another workload's container address
        "198.18.0.162": stack,     # a task IP (multipath via veths)
        "198.18.200.9": stack,     # blackhole: the stack drops it, as kernel forwarding would
        "198.19.7.1": stack,       # inside the management /16
        "198.19.5.10": fwd,        # NIC route nested in the /16: hole
        "198.19.6.1": fwd,         # throw: next rule (the NIC table)
        "198.18.0.1": fwd,         # the ToR gateway (connected via a NIC)
        "198.18.0.70": fwd,
        "203.0.113.9": fwd,        # main default via mgmt is suppressed for workloads
    }
    for addr, want in cases.items():
        assert LM.verdict_of(t, addr) == want, addr


def test_nic_routes_kept_only_as_holes():
    t = table4()
    assert ipaddress.ip_network("198.18.0.0/26") not in t
    assert t[ipaddress.ip_network("198.19.5.0/24")] == LM.LOCAL_FWD
    assert ipaddress.ip_network("169.254.1.1/32") not in t   # passed by the program before the lookup


def test_local_table_wins_over_longer_main_routes():
    local = [{"type": "local", "dst": "198.18.5.0/24", "dev": "lo"}]
    main = [{"dst": "198.18.5.128/25", "dev": "eth0"}]
    t = LM.entries(local, main, 4, NICS)
    assert LM.verdict_of(t, "198.18.5.200") == LM.LOCAL_STACK


def test_ipv6():
    local = [{"type": "local", "dst": "::1", "dev": "lo"}, {"type": "local", "dst": "fd00:1::2", "dev": "eth0"},
             {"type": "anycast", "dst": "fd00:1::", "dev": "eth0"},
             {"type": "local", "dst": "fe80::1", "dev": "ms1-eth0"}, {"type": "multicast", "dst": "ff00::/8"}]
    main = [{"dst": "fd00:1::/64", "dev": "eth0"}, {"dst": "fd00:1::22", "dev": "ms1-eth0"},
            {"dst": "fe80::/64", "dev": "eth0"}, {"type": "unreachable", "dst": "default", "dev": "lo"}]
    t = LM.entries(local, main, 6, NICS)
    assert LM.verdict_of(t, "fd00:1::2") == LM.LOCAL_STACK
    assert LM.verdict_of(t, "fd00:1::") == LM.LOCAL_STACK
    assert LM.verdict_of(t, "fd00:1::22") == LM.LOCAL_STACK
    assert LM.verdict_of(t, "::1") == LM.LOCAL_STACK
    assert LM.verdict_of(t, "fd00:1::1") == LM.LOCAL_FWD
    assert LM.verdict_of(t, "fd00:5::10") == LM.LOCAL_FWD
    assert not any(n.is_link_local or n.is_multicast for n in t)


def test_same_prefix_any_stack_route_wins():
    main = [{"dst": "198.18.9.0/24", "dev": "eth0", "metric": 10}, {"dst": "198.18.9.0/24", "dev": "mgmt0", "metric": 20}]
    assert LM.verdict_of(LM.entries([], main, 4, NICS), "198.18.9.1") == LM.LOCAL_STACK


ROLE_RULES = [{"priority": 0, "src": "all", "table": "local"},
              {"priority": 1100, "src": "all", "iif": "ms1-eth0", "table": "main", "suppress_prefixlen": 0},
              {"priority": 1101, "src": "all", "iif": "ms1-eth0", "table": "1100"},
              {"priority": 1100, "src": "all", "iif": "ms1-eth1", "table": "main", "suppress_prefixlen": 0},
              {"priority": 1101, "src": "all", "iif": "ms1-eth1", "table": "1101"},
              {"priority": 32766, "src": "all", "table": "main"},
              {"priority": 32767, "src": "all", "table": "default"}]


def test_rules():
    assert LM.rules_ok(ROLE_RULES, VETHS) == (True, "ok")
    # other input interface / output interface only: cannot match a workload's packet
    assert LM.rules_ok(ROLE_RULES + [{"priority": 10, "src": "all", "iif": "mgmt0", "table": "7"},
                                     {"priority": 11, "src": "all", "oif": "eth0", "table": "8"}], VETHS)[0]
    # anything else before pref 1101 may: fall back to the full lookup
    for extra in ({"priority": 500, "src": "all", "fwmark": "0x3", "table": "7"},
                  {"priority": 1000, "src": "all", "l3mdev": True, "table": "l3mdev"},
                  {"priority": 900, "src": "198.18.0.0/24", "table": "9"},
                  {"priority": 900, "src": "all", "iif": "ms1-eth0", "table": "9"}):
        ok, why = LM.rules_ok(ROLE_RULES + [extra], VETHS)
        assert not ok and str(extra["priority"]) in why
    assert not LM.rules_ok(ROLE_RULES[1:], VETHS)[0]   # no local-table rule first
    # rules after pref 1101 do not matter
    assert LM.rules_ok(ROLE_RULES + [{"priority": 2000, "src": "all", "fwmark": "0x1", "table": "5"}], VETHS)[0]


def fake_ip(tables):
    def ip_json(args):
        fam, what = args[0], args[1]
        if what == "rule":
            return ROLE_RULES
        return tables.get((fam, args[-1]), [])
    return ip_json


def test_compute_encoding_and_bounds():
    maps, use_map, reason = LM.compute(fake_ip({("-4", "local"): LOCAL4, ("-4", "main"): MAIN4}), NICS, VETHS)
    assert use_map and reason == "ok"
    k = struct.pack("<I", 32) + ipaddress.ip_address("198.18.0.2").packed
    assert maps["mn_local4"][k] == struct.pack("<I", LM.LOCAL_STACK)
    assert maps["mn_local6"] == {}
    many = [{"type": "local", "dst": "198.18.%d.%d" % (i // 256, i % 256)} for i in range(LM.MAX_ENTRIES + 1)]
    maps, use_map, reason = LM.compute(fake_ip({("-4", "local"): many}), NICS, VETHS)
    assert not use_map and "4097" in reason and maps == {"mn_local4": {}, "mn_local6": {}}


def test_cfg_flag_order():
    ops = [("mn_cfg", "update", b"k", b"v"), ("mn_local4", "update", b"a", b"b")]
    on = {"mn_cfg": {struct.pack("<I", 0): LM.cfg_value(2, True)}}
    off = {"mn_cfg": {struct.pack("<I", 0): LM.cfg_value(2, False)}}
    assert [o[0] for o in bpf.order_ops(ops, on)] == ["mn_local4", "mn_cfg"]
    assert [o[0] for o in bpf.order_ops(ops, off)] == ["mn_cfg", "mn_local4"]
    want = [("update", b"z", b"3"), ("delete", b"y", None)]
    assert LM.map_ops({b"x": b"1", b"y": b"2"}, {b"x": b"1", b"z": b"3"}) == want
