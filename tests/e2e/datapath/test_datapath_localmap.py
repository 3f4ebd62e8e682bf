# -*- coding: utf-8 -*-
"""Live tests of the eBPF host-local map (mn_local4/6) and its sync by the NIC watcher.

The egress program decides "host-local" with one LPM lookup instead of a full fib lookup per
packet; these tests check on observed state (map dumps, the program's counters, pings) that:
the loader fills the map from the host's addresses and routes (own addresses, other workloads'
container addresses and task IPs), traffic to another workload on the host goes to the stack,
an address / a route / a policy rule added by other software after the load is picked up by the
watcher (latency printed), and unknown policy rules switch the program to the full-lookup fallback.
"""
import ipaddress
import struct
import time

import pytest

from labkit import dp_harness as H
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import localmap as LM

HOST = "lab-r1-h2"
EXTRA4, EXTRA6 = "198.19.77.1", "fd00:77::1"          # "other software" adds these on the host
MGMT4, MGMT6 = "198.19.78.0/24", "fd00:78::/64"        # a non-fabric network behind a management link


@pytest.fixture(scope="module")
def fab():
    f = H.Fabric(hosts=(HOST,), tbf=None)
    try:
        yield f
    finally:
        f.close()


def bpf(host):
    return H.bpfmod.Bpf(H.bpfmod_runner(), host.bpffs)


def table(host, family):
    """{ip_network: verdict} decoded from the pinned map of the current version."""
    b = bpf(host)
    out = {}
    for k, v in b.dump(b.versions()[-1], "mn_local%d" % family).items():
        plen = struct.unpack("<I", k[:4])[0]
        out[ipaddress.ip_network((ipaddress.ip_address(k[4:]), plen))] = struct.unpack("<I", v)[0]
    return out


def verdict(host, addr):
    return LM.verdict_of(table(host, ipaddress.ip_address(addr).version), addr)


def use_map(host):
    b = bpf(host)
    return bool(struct.unpack("<II", b.dump(b.versions()[-1], "mn_cfg")[struct.pack("<I", 0)])[1] & 1)


def ping(ns, addr):
    return H.sh(["nsenter", "--net=/run/netns/" + ns, "ping", "-c", "1", "-W", "2", addr], check=False).returncode


def wait_for(cond, timeout=5.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.002)
    raise AssertionError("condition not met within %.1f s" % timeout)


def test_loader_fills_map(fab):
    host = fab.host(HOST)
    host.core("apply", ebpf=True)
    assert host.core("apply", ebpf=True)["changes"] == []
    assert use_map(host)
    for nic in host.data["nics"]:
        for fam in ("ipv4", "ipv6"):
            assert verdict(host, nic["address"][fam]) == LM.LOCAL_STACK, nic["address"][fam]
            assert verdict(host, nic["gateway"][fam]) == LM.LOCAL_FWD, nic["gateway"][fam]
    for slot in host.data["slots"]:
        for fam in ("ipv4", "ipv6"):
            assert verdict(host, slot["task_ip"][fam]) == LM.LOCAL_STACK
            for sn in slot["nics"]:
                assert verdict(host, sn["address"][fam]) == LM.LOCAL_STACK
    for addr in (H.STO4, H.STO6, "127.0.0.1", "::1"):
        want = LM.LOCAL_FWD if addr in (H.STO4, H.STO6) else LM.LOCAL_STACK
        assert verdict(host, addr) == want, addr
    print("map entries: IPv4 %d, IPv6 %d" % (len(table(host, 4)), len(table(host, 6))))


def test_other_workload_goes_to_stack(fab):
    host = fab.host(HOST)
    host.core("apply", ebpf=True)
    st0 = host.bpf_stats()
    other = host.data["slots"][1]
    for fam in ("ipv4", "ipv6"):
        for addr in [other["task_ip"][fam]] + [sn["address"][fam] for sn in other["nics"]]:
            assert ping(host.slot_ns(1), addr) == 0, "slot 1 -> slot 2 %s" % addr
    st = host.bpf_stats()
    assert st["out_local"] - st0["out_local"] >= 10, st
    # and the fabric still takes the eBPF path
    assert ping(host.slot_ns(1), H.STO4) == 0 and ping(host.slot_ns(1), H.STO6) == 0
    assert host.bpf_stats()["out_redirect"] > st["out_redirect"]


def test_watcher_syncs_changes(fab):
    host = fab.host(HOST)
    host.core("apply", ebpf=True)
    ns = host.ns
    host.start_watcher()
    try:
        figures = {}
        # 1. an address added on lo by other software after the load
        t0 = time.monotonic()
        H.sh(["ip", "-n", ns, "addr", "add", EXTRA4 + "/32", "dev", "lo"])
        H.sh(["ip", "-n", ns, "addr", "add", EXTRA6 + "/128", "dev", "lo", "nodad"])
        wait_for(lambda: verdict(host, EXTRA4) == LM.LOCAL_STACK and verdict(host, EXTRA6) == LM.LOCAL_STACK)
        figures["address added -> in map"] = time.monotonic() - t0
        st0 = host.bpf_stats()
        assert ping(host.slot_ns(1), EXTRA4) == 0 and ping(host.slot_ns(1), EXTRA6) == 0
        assert host.bpf_stats()["out_local"] > st0["out_local"]
        # 2. a management link with a network behind it
        H.sh(["ip", "-n", ns, "link", "add", "mgmt0", "type", "veth", "peer", "name", "mgmt0p"])
        H.sh(["ip", "-n", ns, "link", "set", "mgmt0", "up"])
        t0 = time.monotonic()
        H.sh(["ip", "-n", ns, "route", "add", MGMT4, "dev", "mgmt0"])
        H.sh(["ip", "-n", ns, "-6", "route", "add", MGMT6, "dev", "mgmt0"])
        wait_for(lambda: verdict(host, "198.19.78.9") == LM.LOCAL_STACK and
                 verdict(host, "fd00:78::9") == LM.LOCAL_STACK)
        figures["route added -> in map"] = time.monotonic() - t0
        # 3. an unknown policy rule: fall back to the full lookup; traffic keeps working
        t0 = time.monotonic()
        H.sh(["ip", "-n", ns, "rule", "add", "pref", "500", "fwmark", "0x77", "lookup", "77"])
        wait_for(lambda: not use_map(host))
        figures["rule added -> fallback"] = time.monotonic() - t0
        assert table(host, 4) == {} and table(host, 6) == {}
        st0 = host.bpf_stats()
        assert ping(host.slot_ns(1), EXTRA4) == 0 and ping(host.slot_ns(1), H.STO4) == 0
        assert ping(host.slot_ns(1), H.STO6) == 0
        st = host.bpf_stats()
        assert st["out_local"] > st0["out_local"] and st["out_redirect"] > st0["out_redirect"], st
        t0 = time.monotonic()
        H.sh(["ip", "-n", ns, "rule", "del", "pref", "500"])
        wait_for(lambda: use_map(host) and verdict(host, EXTRA4) == LM.LOCAL_STACK)
        figures["rule removed -> map back"] = time.monotonic() - t0
        # 4. removals leave the map
        t0 = time.monotonic()
        H.sh(["ip", "-n", ns, "addr", "del", EXTRA4 + "/32", "dev", "lo"])
        H.sh(["ip", "-n", ns, "link", "del", "mgmt0"])
        wait_for(lambda: verdict(host, EXTRA4) == LM.LOCAL_FWD and verdict(host, "198.19.78.9") == LM.LOCAL_FWD)
        figures["address/link removed -> out of map"] = time.monotonic() - t0
        H.sh(["ip", "-n", ns, "addr", "del", EXTRA6 + "/128", "dev", "lo"])
        wait_for(lambda: verdict(host, EXTRA6) == LM.LOCAL_FWD)
        print("watcher sync latency (map polled with bpftool, ~10 ms a poll): %s" % ", ".join(
            "%s %.0f ms" % (k, v * 1e3) for k, v in figures.items()))
        # the loader agrees with what the watcher wrote: nothing to change
        assert host.core("apply", ebpf=True)["changes"] == []
    finally:
        host.stop_watcher()
        for argv in (["addr", "del", EXTRA4 + "/32", "dev", "lo"], ["addr", "del", EXTRA6 + "/128", "dev", "lo"],
                     ["link", "del", "mgmt0"], ["rule", "del", "pref", "500"]):
            H.sh(["ip", "-n", ns] + argv, check=False)
