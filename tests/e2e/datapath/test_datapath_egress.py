# -*- coding: utf-8 -*-
"""Egress placement (issue 12 item 4, issue 14 item 1) on the namespace lab, 4-NIC host lab-r1-h2.

* least_loaded, 4 greedy TCP flows: one per NIC (Jain's index of the bytes the ToR ports received).
* a failed NIC's flows spread over all survivors: with many UDP flows (hash policy, eBPF and kernel
  forwarding), and with 32 rate-limited TCP flows re-placed by least_loaded.
Shares are taken where the bytes arrive (the ToR's port of each NIC); the workload's own veth
counters say which veth (= which NIC under hash) the workload picked.
"""
import json
import subprocess
import threading
import time

import pytest

from labkit import dp_harness as H
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bpf as bpfmod

HOST = "lab-r1-h2"
FAILED = 1   # index of the NIC taken down


def apply(host, mode="ebpf", policy=None):
    opts = {"egress_policy": policy} if policy else {}
    out = host.core("apply", ebpf=(mode == "ebpf"), **opts)
    again = host.core("apply", ebpf=(mode == "ebpf"), **opts)
    assert again["changes"] == [], "second run must change nothing: %s" % again["changes"]
    return out


def tor_rx(fab, host, field="bytes"):
    """{NIC name: rx counter of its ToR port} (what the ToR received from that NIC)."""
    ports = dict((host.tor_port(k), nic) for k, nic in enumerate(host.nics))
    out = {}
    for link in json.loads(H.sh(["ip", "-n", fab.tor, "-j", "-s", "link", "show"]).stdout):
        if link["ifname"] in ports:
            out[ports[link["ifname"]]] = link["stats64"]["rx"][field]
    return out


def workload_tx(host, field="packets", slot=1):
    """{NIC name: tx counter of the workload's veth for that NIC} (the workload's own choice)."""
    out = {}
    for link in json.loads(H.sh(["ip", "-n", host.slot_ns(slot), "-j", "-s", "link", "show"]).stdout):
        if link["ifname"] in host.nics:
            out[link["ifname"]] = link["stats64"]["tx"][field]
    return out


def delta(a, b):
    return dict((k, b[k] - a[k]) for k in b)


def egress_load(host):
    return bpfmod.Bpf(H.bpfmod_runner(), host.bpffs).egress_load()


def nic_down(fab, host, k):
    H.sh(["ip", "-n", host.ns, "link", "set", host.nics[k], "down"])


def nic_up_and_reapply(fab, host, mode, policy=None):
    """Bring the NIC back and re-apply (admin down deleted its proxy entries and table routes)."""
    H.sh(["ip", "-n", host.ns, "link", "set", host.nics[FAILED], "up"])
    opts = {"egress_policy": policy} if policy else {}
    host.core("apply", ebpf=(mode == "ebpf"), **opts)


def test_least_loaded_places_four_flows_on_four_nics(fabric):
    host = fabric.host(HOST)
    apply(host, "ebpf")   # hash first: switching the policy is one map entry, shown in check mode
    check = host.core("check", ebpf=True, egress_policy="least_loaded")
    assert check["changes"] == ["bpf map entries (1)"], check["changes"]
    apply(host, "ebpf", "least_loaded")
    st0 = host.bpf_stats()
    b0 = tor_rx(fabric, host)
    srv = fabric.iperf_server(fabric.sto, 5231)
    cli = fabric.spawn(host.slot_ns(1), ["iperf3", "-c", H.STO6, "-p", "5231", "-P", "4", "-t", "4", "--json"])
    out, err = cli.communicate(timeout=40)
    srv.wait(10)
    res = json.loads(out)
    assert "error" not in res, res.get("error")
    b1 = tor_rx(fabric, host)
    sh, total = H.shares(b0, b1)
    j = H.jain(delta(b0, b1).values())
    st = host.bpf_stats()
    print("least_loaded 4 flows: shares %s, Jain %.4f, %.0f Mbit/s, placed %d" % (
        {k: round(v, 3) for k, v in sorted(sh.items())}, j, res["end"]["sum_received"]["bits_per_second"] / 1e6,
        st["out_placed"] - st0.get("out_placed", 0)))
    assert st["out_placed"] - st0.get("out_placed", 0) >= 5, "control + 4 data connections placed: %s" % st
    assert j >= 0.98, "Jain %.4f < 0.98, shares %s" % (j, sh)
    for nic, s in sh.items():
        assert abs(s - 0.25) <= 0.03, "NIC %s share %.3f (all %s)" % (nic, s, sh)
    # the connections ended (the workload's FIN, or the server's RST seen on NIC ingress): no NIC
    # still counts an active flow
    deadline = time.time() + 2
    while any(egress_load(host).values()) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(egress_load(host).values()), "active flows left after close: %s" % egress_load(host)


UDP_SENDER = r"""
import resource, socket, sys
n, fam, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 64, n + 64))
af = socket.AF_INET6 if fam == "ipv6" else socket.AF_INET
socks = []
for i in range(n):
    s = socket.socket(af, socket.SOCK_DGRAM)
    s.bind(("::" if fam == "ipv6" else "0.0.0.0", 0))
    socks.append(s)
for line in sys.stdin:                # one round per line: one datagram from every socket
    for s in socks:
        s.sendto(b"x" * 64, (dst, 9))
    print("sent", flush=True)
"""
UDP_FLOWS = 4096


@pytest.mark.parametrize("mode,fam", [("ebpf", "ipv6"), ("ebpf", "ipv4"), ("kernel", "ipv6"), ("kernel", "ipv4")])
def test_failed_nic_flows_spread_over_all_survivors(fabric, mode, fam):
    """Hash policy: NIC 1 down, 4096 UDP flows (one datagram each, twice). The flows the workload
    hashed onto NIC 1's veth must reach the ToR through every survivor in equal parts (1/3 each,
    +-0.06: about 4 standard deviations of a fair split of ~1024 flows; the old "next NIC" choice
    gave 1/4, 1/2, 1/4), and the second round must take exactly the same NICs (stable per flow)."""
    host = fabric.host(HOST)
    apply(host, mode)
    dst = H.STO6 if fam == "ipv6" else H.STO4
    nic_down(fabric, host, FAILED)
    try:
        p = fabric.spawn(host.slot_ns(1), ["python3", "-c", UDP_SENDER, str(UDP_FLOWS), fam, dst],
                         stdin=subprocess.PIPE)
        rounds = []
        for dummy in range(2):
            w0, t0 = workload_tx(host), tor_rx(fabric, host, "packets")
            p.stdin.write("go\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "sent", p.stderr.read() if p.poll() is not None else "sender"
            time.sleep(0.3)   # the last datagrams leave the tbf queues
            rounds.append((delta(w0, workload_tx(host)), delta(t0, tor_rx(fabric, host, "packets"))))
        p.stdin.close()
        p.wait(10)
    finally:
        nic_up_and_reapply(fabric, host, mode)
    failed = host.nics[FAILED]
    for i, (wl, tor) in enumerate(rounds):
        moved = wl[failed]
        extra = dict((n, tor[n] - wl[n]) for n in host.nics if n != failed)
        part = dict((n, v / float(moved)) for n, v in extra.items())
        total = float(sum(tor.values()))
        shares = dict((n, tor[n] / total) for n in host.nics)
        print("%s %s round %d: workload per veth %s, ToR received %s, NIC %s's %d flows went %s" % (
            mode, fam, i + 1, wl, tor, failed, moved, {k: round(v, 3) for k, v in sorted(part.items())}))
        assert sum(wl.values()) >= UDP_FLOWS and moved > UDP_FLOWS / 8, wl
        assert tor[failed] <= 10, "the down NIC still carried %d packets" % tor[failed]
        for n, v in part.items():
            assert abs(v - 1.0 / 3) <= 0.06, "%s: survivor %s got %.3f of the failed NIC's flows (all %s)" % (
                fam, n, v, part)
        for n in extra:   # issue 12: every survivor within +-1/(2N) of an equal share
            assert abs(shares[n] - 1.0 / 3) <= 1.0 / 8, (n, shares)
    (wl1, tor1), (wl2, tor2) = rounds
    for n in host.nics:
        assert abs(tor2[n] - tor1[n]) <= 4, "flows changed NIC between rounds: %s vs %s" % (tor1, tor2)


def test_least_loaded_replaces_a_failed_nics_flows_evenly(fabric):
    """least_loaded, 32 TCP flows of 4 Mbit/s each (below the NICs' 200 Mbit/s, so bytes follow
    flows): 8 per NIC; NIC 1 fails at 2.5 s; its 8 flows are re-placed 3/3/2, so each survivor is
    within +-1/(2N) of a third (a "next NIC" choice would give one survivor 16 of 32 = 0.5)."""
    host = fabric.host(HOST)
    apply(host, "ebpf", "least_loaded")
    st0 = host.bpf_stats()
    marks = {}

    def sample():
        time.sleep(1.0)
        marks["b0"] = tor_rx(fabric, host)
        time.sleep(1.4)
        marks["b1"] = tor_rx(fabric, host)
        nic_down(fabric, host, FAILED)
        time.sleep(1.0)
        marks["b2"] = tor_rx(fabric, host)
        marks["load_after"] = egress_load(host)
        time.sleep(2.5)
        marks["b3"] = tor_rx(fabric, host)

    srv = fabric.iperf_server(fabric.sto, 5232)
    try:
        t = threading.Thread(target=sample)
        cli = fabric.spawn(host.slot_ns(1), ["iperf3", "-c", H.STO6, "-p", "5232", "-P", "32", "-b", "4M",
                                             "-t", "7", "--json"])
        t.start()
        out, err = cli.communicate(timeout=40)
        t.join(20)
        srv.wait(10)
    finally:
        nic_up_and_reapply(fabric, host, "ebpf", "least_loaded")
    res = json.loads(out)
    assert "error" not in res, res.get("error")
    before, dummy = H.shares(marks["b0"], marks["b1"])
    after, dummy = H.shares(marks["b2"], marks["b3"])
    st = host.bpf_stats()
    print("least_loaded 32 flows x 4 Mbit/s: shares before %s, after NIC %s failed %s, active flows per NIC %s, "
          "re-placed packets %d" % ({k: round(v, 3) for k, v in sorted(before.items())}, host.nics[FAILED],
                                    {k: round(v, 3) for k, v in sorted(after.items())}, marks["load_after"],
                                    st["out_replaced"] - st0.get("out_replaced", 0)))
    for n, s in before.items():
        assert abs(s - 0.25) <= 1.0 / 8, ("before", n, before)
    assert after[host.nics[FAILED]] <= 0.01, after
    for n, s in after.items():
        if n != host.nics[FAILED]:
            assert abs(s - 1.0 / 3) <= 1.0 / 8, "survivor %s share %.3f (all %s)" % (n, s, after)
    assert st["out_replaced"] > st0.get("out_replaced", 0)
    # active flows as the program counts them: none left on the failed NIC, the survivors within one
    # of each other (32 data connections + iperf3's control connection)
    load = marks["load_after"]
    survivors = [load.get(k, 0) for k in range(len(host.nics)) if k != FAILED]
    assert load.get(FAILED, 0) == 0 and sum(survivors) == 33 and max(survivors) - min(survivors) <= 1, load


def _set_links(fab, host, idx, state):
    for k in idx:
        H.sh(["ip", "-n", host.ns, "link", "set", host.nics[k], state])


def _four_flows(fab, host, port, flows=4):
    """``flows`` (4) greedy TCP flows container (slot 1) -> storage, v6, 3 s: ToR-port byte shares."""
    b0 = tor_rx(fab, host)
    srv = fab.iperf_server(fab.sto, port)
    cli = fab.spawn(host.slot_ns(1), ["iperf3", "-c", H.STO6, "-p", str(port), "-P", str(flows), "-t", "3", "--json"])
    out, err = cli.communicate(timeout=40)
    srv.wait(10)
    res = json.loads(out)
    assert "error" not in res, res.get("error")
    sh, total = H.shares(b0, tor_rx(fab, host))
    return sh, res["end"]["sum_received"]["bits_per_second"] / 1e6


@pytest.mark.parametrize("policy", ["hash", "least_loaded"])
def test_numa_preference_local_nics_first_spill_when_down(fabric, policy):
    """NUMA preference (issue 14 item 3): eth0/eth1 on node 0, eth2/eth3 on node 1, slot 1's workload
    on node 0. Greedy TCP flows (hash 16, least_loaded 4): the local NICs carry the traffic (>= 97 % of the bytes at the ToR
    ports; without the preference hash and least_loaded both use all four NICs, see the tests above).
    Both local NICs down: the flows spill to the remote ones. least_loaded with one local NIC down and
    numa_spill_flows 1: the local NIC is saturated as soon as it leads the remote ones by one active
    flow, so the flows spread over the surviving local NIC and the remote ones."""
    host = fabric.host(HOST)
    n = host.nics
    numa = {"nic_numa": {n[0]: 0, n[1]: 0, n[2]: 1, n[3]: 1}, "slot_numa": {"1": 0, "2": 1}, "spill_flows": 4}
    out = host.core("apply", ebpf=True, egress_policy=policy, numa=numa)
    assert host.core("apply", ebpf=True, egress_policy=policy, numa=numa)["changes"] == []
    assert out["changes"], "the preference must change the map"
    local, remote = (n[0], n[1]), (n[2], n[3])
    got = {}
    # hash spreads flows over the local NICs by flow hash: with 4 flows all land on one of them 1 run in 8,
    # with 16 flows 1 in 32,768 (least_loaded places them in turn; its spill case below counts on 4)
    flows = 16 if policy == "hash" else 4
    try:
        sh, rate = _four_flows(fabric, host, 5241, flows)
        got["up"] = sh
        _set_links(fabric, host, (0, 1), "down")
        got["local_down"], rate_down = _four_flows(fabric, host, 5242)
        if policy == "least_loaded":
            _set_links(fabric, host, (0, 1), "up")
            host.core("apply", ebpf=True, egress_policy=policy, numa=dict(numa, spill_flows=1))
            _set_links(fabric, host, (1,), "down")
            got["one_local_spill1"], dummy = _four_flows(fabric, host, 5243)
    finally:
        _set_links(fabric, host, (0, 1), "up")
        host.core("apply", ebpf=True, egress_policy=policy)     # without the preference again
    print("NUMA %s: %s; %.0f Mbit/s all up, %.0f both local down" % (
        policy, dict((k, {x: round(y, 3) for x, y in sorted(v.items())}) for k, v in got.items()), rate, rate_down))
    up = got["up"]
    assert up[local[0]] + up[local[1]] >= 0.97, "local NICs must carry the traffic: %s" % up
    assert min(up[local[0]], up[local[1]]) >= (0.2 if flows == 4 else 0.04), "both local NICs used: %s" % up
    down = got["local_down"]
    assert down[remote[0]] + down[remote[1]] >= 0.97, "no local NIC usable: spill to the remote ones: %s" % down
    if policy == "least_loaded":
        sp = got["one_local_spill1"]
        # 5 placements (control + 4 data): eth0, remote, remote, eth0, remote -> 1 data flow on eth0
        assert sp[local[1]] <= 0.01, sp
        assert sp[remote[0]] >= 0.15 and sp[remote[1]] >= 0.15 and sp[local[0]] >= 0.15, sp
