# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""VipInjector benchmarks on the mnv harness (root; real FRR ToR, real ExaBGP + helper).

Prints (never asserts on time):
  1. start -> full ECMP width in the ToR kernel FIB (IPv4 and IPv6), per run;
  2. NIC link down (the container's NIC veth set down, so the ToR port loses carrier), per ToR
     variant (--variants): time from the ToR's carrier loss to (a) the ToR kernel no longer
     forwarding over that next hop (route lookups of 8 flows hashed onto it, every ~0.2 ms) and
     (b) zebra removing the next hop (RTM_NEWROUTE event); IPv4 and IPv6, min/median/max;
  3. silent loss (nftables netdev ingress drop on the ToR port) -> next hop leaves the FIB (hold timer);
  4. drain file -> withdrawn, removed -> back; SIGTERM -> withdrawn;
  5. UDP probe of 32 flows ToR -> task IP during a NIC link down: loss on flows that were on the
     surviving NICs (target 0) and on the failed NIC's flows.

Variants: default (GTSM hops 2, as rendered today), linkdown (+ net.ipv{4,6}.conf.{all,default}.
ignore_routes_with_linkdown=1 in the ToR), linkdown-wq (+ zebra "zebra work-queue 1").

Usage: sudo .venv/bin/python bench/vipinjector_failover.py [--runs 3] [--skip-silent]
           [--variants default,linkdown,linkdown-wq] [--failover-only]
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
# the repository root, for labkit (the lab harness shared with tests/e2e)
sys.path.insert(0, os.path.dirname(HERE))

from labkit.mnv_harness import Harness, sh  # noqa: E402

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

# Link-down monitor, run inside the ToR namespace. It sets the container's NIC down itself (over a
# netlink socket opened in the slot namespace) so the request time is exact, then records with
# monotonic timestamps: the ToR port's carrier loss (RTM_NEWLINK event), the first moment route
# lookups of 8 flows that hashed onto that port all avoid it (the kernel no longer forwards over
# the next hop; polled every ~0.2 ms), and zebra's RTM_NEWROUTE with the reduced width.
# Raw netlink: pyroute2's dump parsing costs 3-5 ms a poll.
MONITOR = r"""
import ctypes, json, os, socket, struct, sys, time
port, dst, want, timeout, slot_ns, ifname, action = sys.argv[1:8]
want, timeout = int(want), float(timeout)
fam = socket.AF_INET6 if ':' in dst else socket.AF_INET
dbin = socket.inet_pton(fam, dst)
plen = len(dbin) * 8
pidx = socket.if_nametoindex(port)
RTM_NEWLINK, RTM_NEWROUTE, RTM_DELROUTE, RTM_GETROUTE = 16, 24, 25, 26
IFF_UP, IFF_LOWER_UP = 0x1, 0x10000
libc = ctypes.CDLL(None, use_errno=True)
home = os.open('/proc/self/ns/net', os.O_RDONLY)
other = os.open(slot_ns, os.O_RDONLY)
assert libc.setns(other, 0x40000000) == 0
ctl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
ctl.bind((0, 0))
cidx = socket.if_nametoindex(ifname)
assert libc.setns(home, 0x40000000) == 0
ev = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
ev.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
ev.bind((0, 0x1 | 0x40 | 0x400))
ev.setblocking(False)
q = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
q.bind((0, 0))
seq = [0]
def attr(t, v):
    n = 4 + len(v)
    return struct.pack('HH', n, t) + v + bytes((4 - n % 4) % 4)
def attrs(b, off):
    while off + 4 <= len(b):
        n, t = struct.unpack_from('HH', b, off)
        if n < 4:
            break
        yield t, b[off + 4:off + n]
        off += (n + 3) & ~3
def msgs(b):
    off = 0
    while off + 16 <= len(b):
        n, t = struct.unpack_from('IH', b, off)
        yield t, b[off + 16:off + n]
        off += (n + 3) & ~3
def getroute(sport):
    seq[0] += 1
    body = (struct.pack('BBBBBBBBI', fam, plen, 0, 0, 0, 0, 0, 0, 0) + attr(1, dbin) + attr(27, b'\x11')
            + attr(28, struct.pack('!H', sport)) + attr(29, struct.pack('!H', 47000)))
    q.send(struct.pack('IHHII', 16 + len(body), RTM_GETROUTE, 1, seq[0], 0) + body)
    for t, p in msgs(q.recv(65536)):
        if t == RTM_NEWROUTE:
            for at, av in attrs(p, 12):
                if at == 4:
                    return struct.unpack('I', av)[0]
    return 0
def width(t, p):
    if p[0] != fam or p[1] != plen:
        return None
    d, n, gw = None, 0, False
    for at, av in attrs(p, 12):
        if at == 1:
            d = av
        elif at == 9:
            off = 0
            while off + 8 <= len(av):
                n += 1
                off += (struct.unpack_from('H', av, off)[0] + 3) & ~3
        elif at == 5:
            gw = True
    if d != dbin:
        return None
    return 0 if t == RTM_DELROUTE else (n or (1 if gw else 0))
def set_link(up):
    body = struct.pack('BBHiII', 0, 0, 0, cidx, IFF_UP if up else 0, IFF_UP)
    ctl.send(struct.pack('IHHII', 16 + len(body), RTM_NEWLINK, 1 | 4, 1, 0) + body)
probe = [sp for sp in range(40000, 40512) if getroute(sp) == pidx][:8] if action == 'down' else []
print(json.dumps({'probe_flows': len(probe)}), flush=True)
sys.stdin.readline()
res = {'request': None, 'carrier': None, 'kernel': None, 'fib': None, 'probes': 0}
res['request'] = time.monotonic()
set_link(action == 'up')
while time.monotonic() - res['request'] < timeout:
    try:
        while True:
            b = ev.recv(1 << 16)
            now = time.monotonic()
            for t, p in msgs(b):
                if t == RTM_NEWLINK and res['carrier'] is None:
                    idx, flags = struct.unpack_from('iI', p, 4)
                    if idx == pidx and bool(flags & IFF_LOWER_UP) == (action == 'up'):
                        res['carrier'] = now
                elif t in (RTM_NEWROUTE, RTM_DELROUTE) and res['fib'] is None and width(t, p) == want:
                    res['fib'] = now
    except BlockingIOError:
        pass
    if res['kernel'] is None and probe:
        res['probes'] += 1
        if all(getroute(sp) != pidx for sp in probe):
            res['kernel'] = time.monotonic()
    if res['fib'] and res['carrier'] and (res['kernel'] or not probe):
        break
    time.sleep(0.0002)
print(json.dumps(res), flush=True)
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


def fmt(xs, unit="ms"):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    k = 1000.0 if unit == "ms" else 1.0
    vals = (k * min(xs), unit, k * statistics.median(xs), unit, k * max(xs), unit, len(xs))
    return "min %.1f %s, median %.1f %s, max %.1f %s (n=%d)" % vals


LINKDOWN_SYSCTLS = dict(("net.ipv%s.conf.%s.ignore_routes_with_linkdown" % (f, c), 1)
                        for f in ("4", "6") for c in ("all", "default"))
# variant -> (ToR namespace sysctls, extra zebra.conf lines)
VARIANTS = {
    "default": ({}, ""),
    "linkdown": (LINKDOWN_SYSCTLS, ""),
    "linkdown-wq": (LINKDOWN_SYSCTLS, "zebra work-queue 1\n"),
}


def monitor(h, dst, want, action, timeout=5.0):
    """One link-down/up trial of NIC 1 through MONITOR; returns its JSON (monotonic seconds)."""
    p = ns_py(h.tor, MONITOR, h.tor_port(1, 1), dst, want, timeout, "/run/netns/%s" % h.ns[1], "eth1", action,
              stdin=True)
    try:
        ready = json.loads(p.stdout.readline())
        p.stdin.write("go\n")
        p.stdin.flush()
        out = json.loads(p.stdout.readline())
        p.wait(5)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    out["probe_flows"] = ready["probe_flows"]
    return out


def delta(out, a, b):
    return (out[b] - out[a]) if out.get(a) is not None and out.get(b) is not None else None


def failover(h, runs):
    """NIC-1 link down/up trials, IPv4 and IPv6 alternately; seconds per phase."""
    res = dict((k + fam, []) for k in ("carrier_", "kernel_", "fib_", "req_kernel_", "req_fib_", "up_fib_")
               for fam in ("v4", "v6"))
    n = h.n
    for dummy in range(runs):
        for fam in ("v4", "v6"):
            dst = h.task_ip(1) if fam == "v4" else h.task_ip(1, "ipv6")
            h.wait_width(dst, n, timeout=20)
            time.sleep(0.3)
            out = monitor(h, dst, n - 1, "down")
            res["carrier_" + fam].append(delta(out, "request", "carrier"))
            res["kernel_" + fam].append(delta(out, "carrier", "kernel"))
            res["fib_" + fam].append(delta(out, "carrier", "fib"))
            res["req_kernel_" + fam].append(delta(out, "request", "kernel"))
            res["req_fib_" + fam].append(delta(out, "request", "fib"))
            sys.stderr.write("  [%s down] request->carrier %s, carrier->kernel %s, carrier->zebra %s (%d probes)\n"
                             % (fam, ms(res["carrier_" + fam][-1]), ms(res["kernel_" + fam][-1]),
                                ms(res["fib_" + fam][-1]), out["probes"]))
            time.sleep(0.2)
            out = monitor(h, dst, n, "up", timeout=20.0)
            res["up_fib_" + fam].append(delta(out, "request", "fib"))
            time.sleep(0.5)
    return res


def ms(x):
    return "%.2f ms" % (1000 * x) if x is not None else "n/a"


def general(h, args):
    """Start, drain, SIGTERM and silent-loss figures (ToR variant independent)."""
    res = {"start_v4": [], "start_v6": [], "silent": [], "drain": [], "undrain": [], "sigterm": []}
    v4, v6 = h.task_ip(1), h.task_ip(1, "ipv6")
    n = h.n
    for dummy in range(args.runs):
        h.write_instance(1)
        t, _p = timed_width(h, v4, n, lambda: h.start_exabgp(1))
        res["start_v4"].append(t)
        h.wait_width(v6, n, timeout=5)
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
    h.start_exabgp(1)
    if not args.skip_silent:
        port = h.tor_port(1, 1)
        for dummy in range(max(1, args.runs - 1)):
            h.wait_width(v4, n, timeout=20)
            time.sleep(1.0)
            nft = ("table netdev mnmbench { chain in { type filter hook ingress device %s priority 0; policy drop; }; }"
                   % port)
            t, _p = timed_width(h, v4, n - 1, lambda: sh(["ip", "netns", "exec", h.tor, "nft", "-f", "-"],
                                                         input=nft), timeout=30)
            res["silent"].append(t)
            sh(["ip", "netns", "exec", h.tor, "nft", "delete", "table", "netdev", "mnmbench"])
    return res


def run(args):
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        sys.exit("--variants: unknown %s; choose from %s" % (", ".join(bad), ", ".join(sorted(VARIANTS))))
    load = os.getloadavg()
    gen, per = None, {}
    n = 0
    for i, var in enumerate(variants):
        sysctls, zebra_extra = VARIANTS[var]
        sys.stderr.write("variant %s\n" % var)
        with Harness(tag="b%x%d" % (os.getpid() & 0xff, i), prefix="mnm", tor_sysctls=sysctls) as h:
            h.build()
            h.start_frr(zebra_extra=zebra_extra)
            h.settle(1.5)
            n = h.n
            if i == 0 and not args.failover_only:
                gen = general(h, args)
            else:
                h.write_instance(1)
                h.start_exabgp(1)
            h.wait_width(h.task_ip(1), n, timeout=15)
            h.wait_width(h.task_ip(1, "ipv6"), n, timeout=15)
            res = failover(h, args.runs)
            h.wait_width(h.task_ip(1), n, timeout=20)
            time.sleep(1.0)
            res["loss"] = probe_loss(h, h.task_ip(1), nflows=32, pps=500, dur=4.0)
            h.stop_exabgp(1)
            per[var] = res
    print("(a) = route lookups of 8 flows hashed onto NIC 1 all avoid it (polled ~0.2 ms); (b) = zebra's"
          " RTM_NEWROUTE with width N-1. Negative carrier->(a): the switch happened in the same kernel work"
          " item that emits the carrier event, seen before the event was read.")
    print("VipInjector bench (mnm harness: FRR 8.4.4 ToR with GTSM hops 2, %d-NIC container, ExaBGP 5.0.15 + helper)"
          % n)
    print("  load average at start: %.2f %.2f %.2f (2 vCPUs, shared)" % load)
    if gen:
        print("  start -> full ECMP width, IPv4 : %s" % fmt(gen["start_v4"], "s"))
        print("  start -> full ECMP width, IPv6 : %s" % fmt(gen["start_v6"], "s"))
        print("  silent loss   -> out of FIB    : %s  (hold timer 9 s; no BFD in ExaBGP)" % fmt(gen["silent"], "s"))
        print("  drain file    -> withdrawn     : %s" % fmt(gen["drain"], "s"))
        print("  drain removed -> announced     : %s" % fmt(gen["undrain"], "s"))
        print("  SIGTERM       -> withdrawn     : %s" % fmt(gen["sigterm"], "s"))
    for var in variants:
        r = per[var]
        sysctls, zebra_extra = VARIANTS[var]
        print("  NIC link down, ToR variant %r (%s):" % (var, ", ".join(
            ["%s=%s" % kv for kv in sorted(sysctls.items()) if ".all." in kv[0]] + [zebra_extra.strip()]).strip(", ")
            or "as rendered"))
        for fam in ("v4", "v6"):
            print("    IP%s request -> ToR carrier-loss event          : %s" % (fam, fmt(r["carrier_" + fam])))
            print("    IP%s request -> (a) kernel stops using next hop : %s" % (fam, fmt(r["req_kernel_" + fam])))
            print("    IP%s request -> (b) zebra removes the next hop  : %s" % (fam, fmt(r["req_fib_" + fam])))
            print("    IP%s carrier event -> (a)                       : %s" % (fam, fmt(r["kernel_" + fam])))
            print("    IP%s carrier event -> (b)                       : %s" % (fam, fmt(r["fib_" + fam])))
            print("    IP%s link-up request -> next hop back (BGP)     : %s" % (fam, fmt(r["up_fib_" + fam], "s")))
        loss = r["loss"]
        print("    32 UDP flows x 500 pps, NIC 1 down mid-probe: surviving NICs %d flows, lost %d of %d;"
              " failed NIC %d flows, lost %d of %d (%.1f ms of traffic per flow)"
              % (loss["surv_flows"], loss["surv_lost"], loss["surv_sent"], loss["fail_flows"], loss["fail_lost"],
                 loss["fail_sent"], 1000.0 * loss["fail_lost"] / max(1, loss["fail_flows"]) / 500))
    print(json.dumps({"load": load, "general_seconds": gen, "variants_seconds": per}))


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
    ap.add_argument("--variants", default="default,linkdown,linkdown-wq",
                    help="comma-separated ToR variants: %s" % ", ".join(sorted(VARIANTS)))
    ap.add_argument("--failover-only", action="store_true", help="skip start/drain/SIGTERM/silent-loss figures")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    # SIGTERM/SIGINT unwind through the harness's cleanup (namespaces, processes, temp dir)
    signal.signal(signal.SIGTERM, lambda *dummy: sys.exit(143))
    run(args)


if __name__ == "__main__":
    main()
