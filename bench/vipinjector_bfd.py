# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""BFD on the sidecar's sessions (issue 12 item 1) on the mnv harness (root; real FRR ToR with the ToR
policy's config, BFD on: bgpd + bfdd; real ExaBGP + helper; the host-side responder zebra + bfdd in the
slot namespace with the vipinjector.bfd configuration). Prints figures, asserts nothing about time.

1. soak (``--soak SECONDS``, default 600): every BFD session under load -- iperf3 both ways over all four
   NICs (ToR namespace <-> the slot's task IP, 8 + 8 TCP streams, unlimited rate, both vCPUs busy) --
   and the number of BFD down events in that time, from the session-down counters of both ends
   (``show bfd peers counters json``) and the sessions' uptimes;
2. detection (``--runs N``, default 10): silent loss on one ToR port (nftables netdev ingress + egress
   drop, carrier up), time until the ToR kernel FIB drops that next hop (IPv4 and IPv6 task routes, 4 -> 3,
   polled every ~5 ms), and the BGP reset reason; then the loss is removed and the full width awaited.

Usage: sudo flock /tmp/netscale-e2e.lock .venv/bin/python bench/vipinjector_bfd.py [--soak 600] [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from labkit.mnv_harness import Harness, sh  # noqa: E402


def _stats(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    return "min %.3f  median %.3f  max %.3f  (n=%d)" % (min(xs), statistics.median(xs), max(xs), len(xs))


def _counters(h, slot=None):
    d = h.frr_dir if slot is None else h.bfd_dirs[slot]
    r = sh(["vtysh", "--vty_socket", d, "-c", "show bfd peers counters json"])
    return dict((p["peer"], p) for p in json.loads(r.stdout or "[]"))


def _loss(h, port, on):
    if on:
        sh(["ip", "netns", "exec", h.tor, "nft",
            "add table netdev mnvbfd; "
            "add chain netdev mnvbfd in { type filter hook ingress device \"%s\" priority -500; policy drop; }; "
            "add chain netdev mnvbfd out { type filter hook egress device \"%s\" priority -500; policy drop; }"
            % (port, port)])
    else:
        sh(["ip", "netns", "exec", h.tor, "nft", "delete table netdev mnvbfd"], check=False)


def soak(h, seconds, containers, gateways):
    tip = h.task_ip(1)
    procs = []
    try:
        srv = []
        for port in (5301, 5302):
            srv.append(subprocess.Popen(["ip", "netns", "exec", h.ns[1], "iperf3", "-s", "-B", tip, "-p", str(port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs += srv
        time.sleep(0.5)
        t0 = time.monotonic()
        c0, hc0 = _counters(h), _counters(h, 1)
        # ToR -> task IP (ECMP over the four NICs) and back (-R), 8 streams each, no rate limit
        for port, rev in ((5301, []), (5302, ["-R"])):
            procs.append(subprocess.Popen(["ip", "netns", "exec", h.tor, "iperf3", "-c", tip, "-p", str(port), "-P", "8",
                                           "-t", str(int(seconds)), "-J"] + rev,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        outs = [procs[-2].communicate(timeout=seconds + 60)[0], procs[-1].communicate(timeout=seconds + 60)[0]]
        dur = time.monotonic() - t0
        c1, hc1 = _counters(h), _counters(h, 1)
        tor_peers, host_peers = h.bfd_peers(), h.bfd_peers(1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
    rates = []
    for o in outs:
        try:
            rates.append(json.loads(o)["end"]["sum_received"]["bits_per_second"] / 1e9)
        except (ValueError, KeyError):
            rates.append(None)
    downs_tor = dict((a, c1[a]["session-down"] - c0[a]["session-down"]) for a in containers)
    downs_host = dict((g, hc1[g]["session-down"] - hc0[g]["session-down"]) for g in gateways)
    print("soak: %.0f s under load (iperf3 8+8 TCP streams ToR <-> task IP over 4 NICs: %s Gbit/s)"
          % (dur, " / ".join("%.2f" % r if r is not None else "n/a" for r in rates)))
    print("  BFD down events during the soak: ToR %d %s, host %d %s"
          % (sum(downs_tor.values()), downs_tor, sum(downs_host.values()), downs_host))
    print("  session uptimes at the end (s): ToR %s; host %s"
          % ([tor_peers[a].get("uptime") for a in containers], [host_peers[g].get("uptime") for g in gateways]))
    print("  control packets received by the ToR during the soak: %s"
          % [c1[a]["control-packet-input"] - c0[a]["control-packet-input"] for a in containers])
    return sum(downs_tor.values()) + sum(downs_host.values())


def detection(h, runs, containers):
    v4, v6 = h.task_ip(1), h.task_ip(1, "ipv6")
    res = []
    for i in range(runs):
        k = i % 4
        port = h.tor_port(1, k)
        t0 = time.monotonic()
        _loss(h, port, True)
        t = None
        try:
            while time.monotonic() - t0 < 15:
                if len(h.fib_nexthops(v4)) == 3 and len(h.fib_nexthops(v6)) == 3:
                    t = time.monotonic() - t0
                    break
                time.sleep(0.003)
            nb = h.vtysh("show bgp neighbors %s json" % containers[k])[containers[k]]
            reason = nb.get("lastNotificationReason") or nb.get("lastResetDueTo")
        finally:
            _loss(h, port, False)
        back0 = time.monotonic()
        h.wait_width(v4, 4, timeout=30)
        h.wait_width(v6, 4, timeout=10)
        back = time.monotonic() - back0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and h.bfd_peers().get(containers[k], {}).get("status") != "up":
            time.sleep(0.05)
        r = {"run": i + 1, "nic": k, "fib_drop_s": t, "reason": reason, "back_s": back}
        print(json.dumps(r), flush=True)
        res.append(r)
    print("detection, %d runs (silent loss on one ToR port, BFD 100 ms x 3, ToR FIB polled every ~5 ms):" % runs)
    print("  loss -> next hop gone from the ToR FIB (v4+v6): %s" % _stats([r["fib_drop_s"] for r in res]))
    print("  reset reasons: %s" % sorted(set(r["reason"] for r in res)))
    print("  loss removed -> full width again: %s" % _stats([r["back_s"] for r in res]))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--soak", type=float, default=600)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (namespaces, FRR)")
    h = Harness(tag="bb%x" % (os.getpid() & 0xFFF), md5="mnv-bench-key")
    try:
        h.build()
        h.start_frr(bgpd_conf=h.policy_config(bfd={"enabled": True}), bfdd=True)
        h.settle()
        h.write_instance(1)
        h.start_exabgp(1)
        h.wait_width(h.task_ip(1), 4, timeout=20)
        h.wait_width(h.task_ip(1, "ipv6"), 4, timeout=10)
        h.start_bfd_responder(1)
        sd = [s for s in h.host["slots"] if s["slot"] == 1][0]
        containers = dict((n["index"], n["address"]["ipv6"]) for n in sd["nics"])
        gateways = [n["gateway"]["ipv6"] for n in h.host["nics"]]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            peers = h.bfd_peers()
            if all(peers.get(c, {}).get("status") == "up" for c in containers.values()):
                break
            time.sleep(0.1)
        peers = h.bfd_peers()
        up = sum(1 for c in containers.values() if peers.get(c, {}).get("status") == "up")
        print("BFD up on %d/%d sessions" % (up, len(containers)))
        if a.soak > 0:
            soak(h, a.soak, list(containers.values()), gateways)
        if a.runs > 0:
            detection(h, a.runs, containers)
    finally:
        h.close()


if __name__ == "__main__":
    main()
