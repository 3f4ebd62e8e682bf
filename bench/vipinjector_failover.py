# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""VipInjector benchmarks on the mnv harness (root; real FRR ToR, real ExaBGP + helper).

Prints (never asserts on time):
  1. start -> full ECMP width in the ToR kernel FIB (IPv4 and IPv6), per run;
  2. NIC link down (ToR port loses carrier) -> that next hop leaves the FIB (FIB polled ~every 1 ms
     over netlink from inside the ToR namespace);
  3. silent loss (nftables netdev ingress drop on the ToR port) -> next hop leaves the FIB (hold timer);
  4. drain file -> withdrawn, removed -> back; SIGTERM -> withdrawn;
  5. UDP probe of 32 flows ToR -> task IP during a NIC link down: loss on flows that were on the
     surviving NICs (target 0) and on the failed NIC's flows.

Usage: sudo .venv/bin/python bench/vipinjector_failover.py [--runs 3] [--skip-silent]
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
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e", "vipinjector"))

from mnv_harness import Harness, sh  # noqa: E402

# Poller run inside the ToR namespace: prints the time (monotonic) at which the route's width
# reaches the target. netlink dump every ~1 ms.
POLLER = r"""
import socket, struct, sys, time, json, subprocess
dst, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
from pyroute2 import IPRoute
fam = socket.AF_INET6 if ':' in dst else socket.AF_INET
ipr = IPRoute()
plen = 128 if ':' in dst else 32
def width():
    n = 0
    for r in ipr.route('dump', family=fam, table=254):
        if r['dst_len'] != plen or r.get_attr('RTA_DST') != dst:
            continue
        if r.get_attr('RTA_MULTIPATH'):
            n = len(r.get_attr('RTA_MULTIPATH'))
        elif r.get_attr('RTA_GATEWAY'):
            n = 1
    return n
print('ready', flush=True)
sys.stdin.readline()
t0 = time.monotonic(); polls = 0
while time.monotonic() - t0 < timeout:
    polls += 1
    if width() == want:
        print(json.dumps({'t': time.monotonic(), 'polls': polls}), flush=True); break
    time.sleep(0.001)
else:
    print(json.dumps({'t': None, 'polls': polls}), flush=True)
"""

RECEIVER = r"""
import socket, sys, struct, json, time, select
addr, port, dur = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 8, 1)  # IP_PKTINFO
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((addr, port))
flows = {}
print('ready', flush=True)
end = time.monotonic() + dur
while time.monotonic() < end:
    r, _, _ = select.select([s], [], [], 0.2)
    if not r:
        continue
    data, anc, _, src = s.recvmsg(64, 256)
    ifindex = None
    for lvl, typ, d in anc:
        if lvl == socket.IPPROTO_IP and typ == 8:
            ifindex = struct.unpack('I', d[:4])[0]
    seq = struct.unpack('!I', data[:4])[0]
    f = flows.setdefault(src[1], {'seqs': [], 'ifs': []})
    f['seqs'].append(seq); f['ifs'].append(ifindex)
print(json.dumps(flows), flush=True)
"""

SENDER = r"""
import socket, sys, struct, time
dst, port, nflows, pps, dur, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
socks = []
for i in range(nflows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('0.0.0.0', base + i)); socks.append(s)
gap = 1.0 / pps; seq = 0; t0 = time.monotonic(); nxt = t0
while time.monotonic() - t0 < dur:
    for s in socks:
        try:
            s.sendto(struct.pack('!I', seq), (dst, port))
        except OSError:
            pass
    seq += 1; nxt += gap
    d = nxt - time.monotonic()
    if d > 0:
        time.sleep(d)
print(seq, flush=True)
"""


def ns_py(ns, code, *args, stdin=None):
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code] + [str(a) for a in args],
                            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def timed_width(h, dst, want, action, timeout=20.0, label=""):
    """Start a 1 ms poller in the ToR namespace, run action(), return seconds until width == want."""
    p = ns_py(h.tor, POLLER, dst, want, timeout, stdin=True)
    assert p.stdout.readline().strip() == "ready"
    p.stdin.write("go\n")
    p.stdin.flush()
    t_act = time.monotonic()
    action()
    out = json.loads(p.stdout.readline())
    p.wait(5)
    t = (out["t"] - t_act) if out["t"] else None
    sys.stderr.write("  [%s -> width %d] %s (%d polls)\n" % (dst, want, "%.1f ms" % (1000 * t) if t is not None
                                                             else "not reached", out["polls"]))
    return t, out["polls"]


def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    return "min %.1f ms, median %.1f ms, max %.1f ms (n=%d)" % (1000 * min(xs), 1000 * statistics.median(xs),
                                                                1000 * max(xs), len(xs))


def run(args):
    res = {"start_v4": [], "start_v6": [], "linkdown": [], "linkup": [], "silent": [], "drain": [],
           "undrain": [], "sigterm": []}
    with Harness(tag="bench") as h:
        h.build()
        h.start_frr()
        h.settle(1.5)
        v4, v6 = h.task_ip(1), h.task_ip(1, "ipv6")
        n = h.n
        for dummy in range(args.runs):
            h.write_instance(1)
            t, _p = timed_width(h, v4, n, lambda: h.start_exabgp(1))
            res["start_v4"].append(t)
            h.wait_width(v6, n, timeout=5)
            # (v6 width reached at the same time within a few ms; measured separately below)
            drain = h.drain_file(1)
            t, _p = timed_width(h, v4, 0, lambda: open(drain, "w").close())
            res["drain"].append(t)
            t, _p = timed_width(h, v4, n, lambda: os.unlink(drain))
            res["undrain"].append(t)
            t, _p = timed_width(h, v4, 0, lambda: h.stop_exabgp(1, signal.SIGTERM))
            res["sigterm"].append(t)
            h.wait_width(v6, 0, timeout=5)
            time.sleep(0.5)
        for dummy in range(args.runs):
            t, _p = timed_width(h, v6, n, lambda: h.start_exabgp(1))
            res["start_v6"].append(t)
            h.wait_width(v4, n, timeout=5)
            h.stop_exabgp(1)
            h.wait_width(v4, 0, timeout=5)
            time.sleep(0.5)
        # NIC link down / up: the ToR port of NIC 1 loses carrier
        h.start_exabgp(1)
        h.wait_width(v4, n, timeout=15)
        port = h.tor_port(1, 1)
        for dummy in range(args.runs):
            t, polls = timed_width(h, v4, n - 1, lambda: sh(["ip", "-n", h.ns[1], "link", "set", "eth1", "down"]))
            res["linkdown"].append(t)
            t, _p = timed_width(h, v4, n, lambda: sh(["ip", "-n", h.ns[1], "link", "set", "eth1", "up"]))
            res["linkup"].append(t)
            time.sleep(1.0)
        # loss during a link down, 32 UDP flows ToR -> task IP
        loss = probe_loss(h, v4, nflows=32, pps=500, dur=4.0)
        # silent loss: drop everything arriving on the ToR port of NIC 1
        if not args.skip_silent:
            for dummy in range(max(1, args.runs - 1)):
                h.wait_width(v4, n, timeout=20)
                time.sleep(1.0)
                nft = "table netdev mnvbench { chain in { type filter hook ingress device %s priority 0; policy drop; }; }" % port
                t, _p = timed_width(h, v4, n - 1, lambda: sh(["ip", "netns", "exec", h.tor, "nft", "-f", "-"],
                                                             input=nft), timeout=30)
                res["silent"].append(t)
                sh(["ip", "netns", "exec", h.tor, "nft", "delete", "table", "netdev", "mnvbench"])
        h.stop_exabgp(1)
    print("VipInjector bench (mnv harness: FRR ToR, %d-NIC container, ExaBGP 5.0.15 + helper, unprivileged)" % n)
    print("  start -> full ECMP width, IPv4 : %s" % fmt(res["start_v4"]))
    print("  start -> full ECMP width, IPv6 : %s" % fmt(res["start_v6"]))
    print("  NIC link down -> out of FIB    : %s" % fmt(res["linkdown"]))
    print("  NIC link up   -> back in FIB   : %s" % fmt(res["linkup"]))
    print("  silent loss   -> out of FIB    : %s  (hold timer 9 s; no BFD in ExaBGP)" % fmt(res["silent"]))
    print("  drain file    -> withdrawn     : %s" % fmt(res["drain"]))
    print("  drain removed -> announced     : %s" % fmt(res["undrain"]))
    print("  SIGTERM       -> withdrawn     : %s" % fmt(res["sigterm"]))
    print("  32 UDP flows, 500 pps each, NIC 1 link down during the probe:")
    print("    flows on surviving NICs: %d, packets lost on them: %d of %d"
          % (loss["surv_flows"], loss["surv_lost"], loss["surv_sent"]))
    print("    flows on the failed NIC: %d, packets lost on them: %d of %d (%.1f ms of traffic per flow)"
          % (loss["fail_flows"], loss["fail_lost"], loss["fail_sent"],
             1000.0 * loss["fail_lost"] / max(1, loss["fail_flows"]) / 500))
    print(json.dumps({"raw_seconds": res, "loss": loss}))


def probe_loss(h, v4, nflows, pps, dur):
    port = 47000
    rx = ns_py(h.ns[1], RECEIVER, v4, port, dur + 2.0)
    assert rx.stdout.readline().strip() == "ready"
    tx = ns_py(h.tor, SENDER, v4, port, nflows, pps, dur, 40000)
    time.sleep(dur / 2)
    sh(["ip", "-n", h.ns[1], "link", "set", "eth1", "down"])
    tx.wait(dur + 5)
    out = json.loads(rx.stdout.readline())
    rx.wait(5)
    sh(["ip", "-n", h.ns[1], "link", "set", "eth1", "up"])
    ifidx = json.loads(sh(["ip", "-n", h.ns[1], "-j", "link", "show", "eth1"]).stdout)[0]["ifindex"]
    sent = int(tx.stdout.read().strip() or 0)
    res = {"surv_flows": 0, "surv_lost": 0, "surv_sent": 0, "fail_flows": 0, "fail_lost": 0, "fail_sent": 0}
    for sport, f in out.items():
        first_if = f["ifs"][0]
        lost = sent - len(set(f["seqs"]))
        key = "fail" if first_if == ifidx else "surv"
        res[key + "_flows"] += 1
        res[key + "_lost"] += lost
        res[key + "_sent"] += sent
    missing = nflows - len(out)
    res["flows_never_received"] = missing
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-silent", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    # SIGTERM/SIGINT unwind through the harness's cleanup (namespaces, processes, temp dir)
    signal.signal(signal.SIGTERM, lambda *dummy: sys.exit(143))
    run(args)


if __name__ == "__main__":
    main()
