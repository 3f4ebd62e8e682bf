# -*- coding: utf-8 -*-
"""Live datapath tests on namespaces (prefix mnd): spread, host-local, failover, both modes.

Figures asserted on observed state: NIC byte counters, iperf3 per-stream intervals, the host's
forwarding counters and the eBPF program's own counters.
"""
import json
import os
import threading
import time

import pytest

from labkit import dp_harness as H

MODES = ["ebpf", "kernel"]
FLOWS = 32
RUN = 8
# NIC failure: the suite runs one case per fault kind, the two kinds on different modes (each mode covered);
# bench/nic_failure_matrix.py sets MULTINIC_FAULT_MATRIX=1 for every kind x mode, repeated.
NIC_FAILURE_CASES = ([(k, m) for k in ("admin", "carrier") for m in MODES] if os.environ.get("MULTINIC_FAULT_MATRIX")
                     else [("admin", "ebpf"), ("carrier", "kernel")])


def apply(host, mode):
    out = host.core("apply", ebpf=(mode == "ebpf"))
    again = host.core("apply", ebpf=(mode == "ebpf"))
    assert again["changes"] == [], "second run must change nothing: %s" % again["changes"]
    return out


def iperf(fab, host, dst, port, seconds=RUN, reverse=False, interval=1.0):
    srv = fab.iperf_server(fab.sto, port, interval=interval)
    argv = ["iperf3", "-c", dst, "-p", str(port), "-P", str(FLOWS), "-t", str(seconds), "-i", str(interval),
            "--json", "--get-server-output"] + (["-R"] if reverse else [])
    cli = fab.spawn(host.slot_ns(1), argv)
    out, err = cli.communicate(timeout=seconds + 30)
    srv.wait(10)
    res = json.loads(out)
    assert "error" not in res, res.get("error")
    return res


def check_spread(host, before, after, tol=0.05):
    sh, total = H.shares(before, after)
    n = len(host.nics)
    assert total > 0
    for nic, s in sh.items():
        assert abs(s - 1.0 / n) <= tol, "NIC %s share %.3f, expected %.3f +- %.2f (all: %s)" % (
            nic, s, 1.0 / n, tol, {k: round(v, 3) for k, v in sh.items()})
    return sh


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hostname,fam,reverse", [
    ("lab-r1-h2", "ipv6", False),   # 4 NICs, egress (container -> storage), IPv6
    ("lab-r1-h2", "ipv4", True),    # 4 NICs, ingress (storage -> container), IPv4
    ("lab-r1-h1", "ipv4", False),   # 2 NICs, egress, IPv4
])
def test_spread(fabric, mode, hostname, fam, reverse):
    host = fabric.host(hostname)
    apply(host, mode)
    dst = H.STO6 if fam == "ipv6" else H.STO4
    direction = "rx" if reverse else "tx"
    fwd0 = host.nstat_forward()
    st0 = host.bpf_stats()
    b0 = host.nic_bytes(direction)
    res = iperf(fabric, host, dst, 5201, reverse=reverse)
    b1 = host.nic_bytes(direction)
    fwd = host.nstat_forward() - fwd0
    sh = check_spread(host, b0, b1)
    bps = res["end"]["sum_received"]["bits_per_second"] / 1e6
    n = len(host.nics)
    print("%s %s %s %s: %.0f Mbit/s over %d NICs, shares %s, forwarded %d" % (
        mode, hostname, fam, "ingress" if reverse else "egress", bps, n,
        {k: round(v, 3) for k, v in sorted(sh.items())}, fwd))
    assert bps >= 0.9 * n * 190, "aggregate %.0f Mbit/s below 0.9 x %d x 190" % (bps, n)
    if mode == "ebpf":
        st = host.bpf_stats()
        key = "in_redirect" if reverse else "out_redirect"
        assert st[key] - st0.get(key, 0) > 10000, st
        assert fwd < 200, "eBPF path: host forwarded %d datagrams" % fwd
    else:
        assert fwd > 10000, "kernel path: host forwarding counters did not move (%d)" % fwd


@pytest.mark.parametrize("mode", MODES)
def test_host_local(fabric, mode):
    """Container <-> its own host still works (the programs leave host-local traffic to the stack)."""
    host = fabric.host("lab-r1-h2")
    apply(host, mode)
    ns = host.slot_ns(1)
    st0 = host.bpf_stats()
    for nic in host.data["nics"]:
        for fam in ("ipv4", "ipv6"):
            p = H.sh(["nsenter", "--net=/run/netns/" + ns, "ping", "-c", "1", "-W", "2",
                      nic["address"][fam]], check=False)
            assert p.returncode == 0, "container -> host %s: %s" % (nic["address"][fam], p.stdout + p.stderr)
    for fam in ("ipv4", "ipv6"):
        p = H.sh(["nsenter", "--net=/run/netns/" + host.ns, "ping", "-c", "1", "-W", "2", host.task_ip(fam)],
                 check=False)
        assert p.returncode == 0, "host -> container task IP %s: %s" % (host.task_ip(fam), p.stdout)
    # TCP from the container to a server in the host namespace
    srv = fabric.spawn(host.ns, ["iperf3", "-s", "-p", "5301", "-1"])
    time.sleep(0.3)
    cli = fabric.spawn(ns, ["iperf3", "-c", host.data["nics"][2]["address"]["ipv6"], "-p", "5301", "-t", "1",
                            "--json"])
    out, dummy = cli.communicate(timeout=30)
    srv.wait(10)
    assert json.loads(out)["end"]["sum_received"]["bytes"] > 0
    if mode == "ebpf":
        assert host.bpf_stats()["out_local"] > st0.get("out_local", 0)


def _flap(fabric, host, kind, k, t_down, t_up, events):
    nic = host.nics[k]
    time.sleep(t_down)
    events.append(("down", time.time()))
    if kind == "admin":
        H.sh(["ip", "-n", host.ns, "link", "set", nic, "down"])
    else:  # carrier loss on the host NIC: the ToR side goes away
        H.sh(["ip", "-n", fabric.tor, "link", "set", host.tor_port(k), "down"])
    time.sleep(t_up - t_down)
    events.append(("up", time.time()))
    if kind == "admin":
        H.sh(["ip", "-n", host.ns, "link", "set", nic, "up"])
    else:
        H.sh(["ip", "-n", fabric.tor, "link", "set", host.tor_port(k), "up"])
        fabric.tor_routes(host)   # what BGP re-announces once the session is back


@pytest.mark.parametrize("kind,mode", NIC_FAILURE_CASES, ids=["%s-%s" % c for c in NIC_FAILURE_CASES])
def test_nic_failure(fabric, mode, kind):
    """32 flows each way; NIC eth1 fails at 3 s and returns at 6 s: no stream stalls > 1 s,
    and after the return eth1 carries its share again (restored without a re-run: watcher)."""
    host = fabric.host("lab-r1-h2")
    apply(host, mode)
    host.start_watcher()
    try:
        results = {}

        def run(name, dst, port, reverse):
            results[name] = iperf(fabric, host, dst, port, seconds=10 if port < 5220 else RUN, reverse=reverse,
                                  interval=0.2)

        events = []
        threads = [threading.Thread(target=run, args=("egress", H.STO6, 5211, False)),
                   threading.Thread(target=run, args=("ingress", H.STO4, 5212, True)),
                   threading.Thread(target=_flap, args=(fabric, host, kind, 1, 3.5, 6.5, events))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        # per stream, where the bytes arrive (H.by_end: the sender's view counts socket writes)
        received, sent = H.by_end(results)
        stalls = dict((k, H.max_stall(v)) for k, v in received.items())
        print("%s %s: worst stream stall at the receiver %s; stalls >= 0.4 s (start, length): %s; sender-side "
              "view (socket writes, not asserted): %s" % (
                  mode, kind, stalls, dict((k, H.stalls(v)) for k, v in received.items()),
                  dict((k, H.max_stall(v)) for k, v in sent.items())))
        for k, v in stalls.items():
            assert v <= 1.0, "%s: a stream stalled %.1f s" % (k, v)
        if mode == "ebpf" and kind == "admin":
            assert host.bpf_stats()["out_failover"] > 0
        # recovery: eth1's share is back (proxy entries, table routes re-applied by the watcher). Measured
        # up to twice: a miss dumps what the host had (routes of eth1's table, neighbours, the watcher's
        # log) and is printed, then measured again; two misses fail. Recovery time is not asserted here.
        time.sleep(1.0)
        misses = []
        for attempt in (1, 2):
            missed = _recovery_shares(fabric, host, run)
            if not missed:
                break
            misses.append(missed)
            print("after recovery, attempt %d: %s\n%s" % (attempt, missed, _diagnostics(host)))
        assert len(misses) < 2, "eth1 did not carry its share after recovery: %s" % misses
    finally:
        host.stop_watcher()


def _recovery_shares(fabric, host, run):
    """One measurement per direction (one at a time: iperf3 3.12 drives all streams from one thread, and
    on a loaded 2-core machine two concurrent clients starve some egress streams). Returns the misses."""
    missed = []
    tx0 = host.nic_bytes("tx")
    run("egress", H.STO6, 5221, False)
    tx1 = host.nic_bytes("tx")
    rx0 = host.nic_bytes("rx")
    run("ingress", H.STO4, 5222, True)
    rx1 = host.nic_bytes("rx")
    for label, b0, b1 in (("egress", tx0, tx1), ("ingress", rx0, rx1)):
        sh, dummy = H.shares(b0, b1)
        print("after recovery %s shares %s" % (label, {k: round(v, 3) for k, v in sorted(sh.items())}))
        if abs(sh["eth1"] - 0.25) > 0.05:
            missed.append("%s: eth1 share %.3f" % (label, sh["eth1"]))
    return missed


def _diagnostics(host):
    out = []
    for argv in (["-6", "route", "show", "table", "all", "dev", "eth1"],
                 ["-4", "route", "show", "table", "all", "dev", "eth1"],
                 ["-6", "route", "show", "table", "1101"], ["neigh", "show", "dev", "eth1"],
                 ["-d", "link", "show", "eth1"]):
        p = H.sh(["ip", "-n", host.ns] + argv, check=False)
        out.append("$ ip %s\n%s%s" % (" ".join(argv), p.stdout, p.stderr))
    try:
        with open(host.dir + "/watcher.log") as f:
            out.append("watcher.log (tail):\n" + "".join(f.readlines()[-20:]))
    except OSError as e:
        out.append("watcher.log: %s" % e)
    return "\n".join(out)
