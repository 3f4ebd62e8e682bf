# -*- coding: utf-8 -*-
"""Gray-failure matrix and BFD soak on the stack lab (issue 12 items 6 and 7): the real FRR ToR
(bgpd + bfdd, BFD on every host session at the lab inventory's 50 ms x 3), systemd hosts with ExaBGP
sidecars, per-slot bfdd responders and the NIC watcher (gateway probes 50 ms x 3, hold-down 1 s,
dampening). Needs root; builds the lab of tests/e2e/stack/fabric.yml (node names mns-*) and tears it
down (playbooks/lab.yml), also on Ctrl-C. Run it under the shared lock:
flock /tmp/netscale-e2e.lock .venv/bin/python bench/gray_stack.py ...

Matrix (default): for each mode (--modes ebpf,kernel) the lab is built once with the rack-1 hosts
mns-r1-h1 (2 NICs) and mns-r1-h2 (4 NICs) + mns-r1-tor deployed by playbooks/site.yml, tbf 200 Mbit/s on
every NIC and ToR port; then per fault kind (silent, to_host, to_tor, arp_nd, flap_storm) x --runs, on
NIC eth1 (--nic) of mns-r1-h2, injected on its ToR port inside the ToR's namespace:

* 32 flows each way at once from slot 1 (egress container -> storage over IPv6, ingress storage ->
  container over IPv4, iperf3 -P 32 -i 0.2); the fault starts 3 s into the run and stays --hold s
  (the flap storm: 10 flaps in 5 s); the run lasts 4 s more;
* sampled every ~20 ms (two threads): the ToR kernel FIB (is eth1's next hop in the route of slot 1's
  task IPs, both families) and the host's egress set (eBPF: NIC_OUT in the pinned mn_nics map, kernel:
  the per-NIC table routes);
* per run: ToR FIB drop and host egress drop (s after the fault, both families gone / NIC out), which
  side dropped first, back-in times of both after healing (from the heal or from the drop if later),
  the worst receiver-side stall per direction among the zero-byte runs that began once the fault was on
  (by_end received view; stalls that began before it, streams slow to start, are listed apart and the
  whole-run worst is kept too), streams that received 0 bytes
  in the last 1 s of the fault (black-holed; iperf3 interval times taken from the client's start, so
  that window is late by the connection set-up, ~0.1-0.3 s), the egress set's churn (changes of eth1
  from the fault until the end of sampling), then per-NIC shares after both ends have eth1 back: a 3 s
  run of 32 flows egress, then one ingress, one direction at a time so that the links, not the 2 vCPUs,
  are the bottleneck (receiving end: ToR port rx bytes for egress, host NIC rx bytes for ingress);
* a summary per fault x mode: median / max of each figure and how many runs met the issue's bounds
  (ToR FIB and host egress drop <= 0.5 s, worst stall <= 1 s, no black-holed stream, every share
  0.25 +- 0.05 after the heal).

A missing measurement is printed as None and counts as not meeting its bound. Asserts nothing.

--baseline N: per mode, after its faults, N runs of the same traffic with no fault (the stall figure over the
same window): the lab's own stall tail, from the senders' congestion on the shaped links, to read the
fault rows against. --sender-cc ALGO: the storage node's congestion control in the ingress runs (iperf3 -C;
default the lab's, i.e. this machine's net.ipv4.tcp_congestion_control, BBR here); the JSON records both
directions' senders. --detect-ms MS: the ToR's BFD, the host responders' BFD and the NIC watcher's gateway
probes every MS ms x 3 instead of the lab's 50 ms (site.yml extra vars). --trace-senders N: in every fault
run, the storage node's sockets sampled every ~25 ms (ss -tin: bytes_acked, backoff, rto, retrans, lost, cwnd) and the N longest sender-side freezes from 0.2 s
before the fault on kept in the row (``sender_freezes``: the state changes, times from the fault), to tell
a path left broken from retransmissions lost to congestion. The sampler costs CPU on 2 vCPUs: runs with it
explain the matrix, they are not its figures.

Soak (--soak SECONDS --runs 0): one mode (the first of --modes), both rack-1 hosts deployed; with --runs N
the soak runs on the first mode's lab right after its matrix (no rebuild); 32 flows each way
on mns-r1-h2 slot 1 and 8 each way on mns-r1-h1 slot 1 for the whole soak (iperf3 restarted in --chunk s
pieces); BFD session-down counters of the ToR (show bfd peers counters json) and of every host
responder (per slot bfdd, its vty socket under /run/netscale-vipinjector-bfd/slot<s>) and the ToR's BGP
connectionsDropped / connectionsEstablished per host peer, before and after; the NIC watcher's
egress-set changes during the soak (its journal: a NIC taken out is a false alarm here). Prints the totals.
--bfd-gaps: during the soak, every BFD control packet is timed at its receiving end (labkit/bfd_gaps.py:
on the ToR's ports to the rack-1 hosts and on the hosts' NICs, kernel timestamps): the JSON keeps the
gaps of at least 1.5 intervals per session, the output counts those of >= 1.5 (a packet missing), >= 2.25
(two in a row) and >= 3 intervals (the detection time: a session-down) per direction: how close BFD came
to a flap, and on which side. A sniffer without a report, or fewer sessions than the ToR counts, is
reported as such, never as zero gaps.
--bfd-rt PRIO (experiment): the ToR's bfdd and every host responder run SCHED_RR PRIO during the soak.
Every shaped link (host NIC and ToR port) gives BFD control packets and address resolution (ARP, ICMPv6)
a strict-priority band inside its tbf, as a switch port's control-plane queue and a host's fq_codel give
them (labkit.stack_lab.Lab.tbf); --no-control-band: one tail-drop fifo carries everything (the lab before
2026-11-26).

usage: bench/gray_stack.py [--modes ebpf,kernel] [--faults ...] [--runs 10] [--hold 2] [--nic 1]
       [--baseline N] [--sender-cc ALGO] [--detect-ms MS] [--trace-senders N] [--soak 600] [--json PATH]
       | --soak 600 --runs 0 [--modes ebpf] [--chunk 60] [--bfd-gaps] [--no-control-band] [--json PATH]
       | --markdown RESULT.json... (the docs table from saved runs; no lab)
"""
import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time


HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from labkit import bfd_gaps as BG  # noqa: E402
from labkit import gray_stack as GS  # noqa: E402
from labkit import stack_lab as M  # noqa: E402

HOST, OTHER, TOR = "mns-r1-h2", "mns-r1-h1", "mns-r1-tor"
HOSTS = [OTHER, HOST]
FLOWS = 32
LEAD = 3.0
TAIL = 4.0
STORM = (10, 5.0)
BOUND_DROP, BOUND_STALL, SHARE_TOL = 0.5, 1.0, 0.05
# iperf3's time axis starts once all 64 connections are up: 0.1-0.7 s after the clients were spawned
# on this machine (under load). Stalls that began more than STALL_SLACK before the fault's spawn-relative
# time are charged to the start (a lost SYN: the 1 s initial RTO), the others to the fault. With LEAD
# 3 s the two are apart: start stalls begin in the first ~0.5 s, fault stalls after ~2.3 s.
STALL_SLACK = 1.5
BOUND_KEYS = ("tor_drop", "host_drop", "stall", "blackholed", "shares")
SAMPLERS = []
# congestion control of the storage node's sending sockets in the ingress runs (iperf3 -C); None: the lab
# namespace's default, which is this machine's (BBR here, see lab-notes); set by --sender-cc
SENDER_CC = [None]
# --detect-ms MS: BFD (ToR and host responders) and the watcher's gateway probes every MS ms x 3
DETECT_MS = [None]
# BFD, ARP and ICMPv6 in a strict-priority band of every shaped link (labkit.stack_lab); --no-control-band
CONTROL_BAND = [True]
# --trace-senders N: sample the storage node's TCP senders in every fault run and keep the N longest freezes
TRACE_SENDERS = [0]


def build(mode):
    """Lab + site.yml (rack 1 hosts + ToR) in ``mode``, tbf 200 Mbit/s; returns the M.Lab."""
    os.makedirs(M.WORK, exist_ok=True)
    M.lab_teardown()
    M.lab_build()
    lab = M.Lab()
    t0 = time.monotonic()
    M.site("--limit", ",".join([TOR] + HOSTS), "-e", "host_datapath_ebpf=%s" % ("true" if mode == "ebpf" else "false"),
           *timer_vars(DETECT_MS[0]))
    print("%s: lab built and site.yml deployed in %.0f s" % (mode, time.monotonic() - t0), flush=True)
    for h in HOSTS:
        lab.tbf(h, "200mbit", control_band=CONTROL_BAND[0])
    return lab


def timer_vars(ms):
    """site.yml extra vars that run the ToR's BFD, the host responders' BFD and the NIC watcher's
    gateway probes every ``ms`` ms (x 3); none for the lab's own settings (lab.yml: 50 ms x 3)."""
    if not ms:
        return []
    lab_vars = M.lab_vars()
    tor = dict(lab_vars["tor_bgp_options"])
    tor["bfd"] = dict(tor.get("bfd") or {}, interval_ms=ms, multiplier=3)
    host_bfd = dict(lab_vars["vipinjector_bfd"], interval_ms=ms, multiplier=3)
    return ["-e", json.dumps({"tor_bgp_options": tor, "vipinjector_bfd": host_bfd,
                              "host_datapath_detection": {"interval_ms": ms, "multiplier": 3}})]


# ---- traffic -----------------------------------------------------------------------------------
class Ports(object):
    def __init__(self, base=5600, span=300):
        self.base, self.span, self.n = base, span, 0

    def take(self):
        self.n = (self.n + 1) % self.span
        return self.base + self.n


def iperf_server(lab, port, interval):
    """iperf3 server on the storage node reporting every ``interval`` s (its intervals are the receiving
    end's view of egress runs; without -i they would be 1 s long)."""
    ns = "--net=/run/netns/%s" % lab.netns("mns-storage")
    p = lab.spawn(["nsenter", ns, "--", "iperf3", "-s", "-1", "--json", "-i", str(interval), "-p", str(port)],
                  stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        if M.sh(["nsenter", ns, "--", "ss", "-Hltn", "sport = :%d" % port], check=False).stdout.strip():
            return p
        time.sleep(0.05)
    raise RuntimeError("iperf3 server on port %d did not listen" % port)


def iperf_start(lab, host, fam, port, flows, seconds, reverse, interval):
    srv = iperf_server(lab, port, interval)
    dst = M.STO6 if fam == "ipv6" else M.STO4
    argv = ["iperf3", "-c", dst, "-p", str(port), "-P", str(flows), "-t", str(seconds), "-i", str(interval),
            "--json", "--get-server-output"] + (["-R"] if reverse else [])
    if reverse and SENDER_CC[0]:
        argv += ["-C", SENDER_CC[0]]   # the server (storage node) sends: iperf3 passes -C on to it
    return srv, lab.spawn(lab.in_slot(host, 1, argv))


def iperf_finish(srv, cli, seconds):
    out, err = cli.communicate(timeout=seconds + 60)
    try:
        srv.wait(10)
    except Exception:  # pylint: disable=broad-except
        srv.kill()
    try:
        res = json.loads(out)
    except ValueError:
        return {"error": "no JSON: %s %s" % (out[-300:], err[-300:])}
    return res


def pair(lab, host, ports, seconds, flows=FLOWS, interval=0.2):
    """32 flows each way at once (egress IPv6, ingress IPv4 -R). Returns ({egress, ingress: iperf3 JSON},
    monotonic time the clients were spawned)."""
    s1, c1 = iperf_start(lab, host, "ipv6", ports.take(), flows, seconds, False, interval)
    s2, c2 = iperf_start(lab, host, "ipv4", ports.take(), flows, seconds, True, interval)
    t = time.monotonic()
    res = {}
    th = threading.Thread(target=lambda: res.__setitem__("ingress", iperf_finish(s2, c2, seconds)))
    th.start()
    res["egress"] = iperf_finish(s1, c1, seconds)
    th.join(seconds + 90)
    return res, t


def tor_rx(lab, host):
    port_nic = dict((n["tor_port"], n["name"]) for n in lab.hosts[host]["nics"])
    out = {}
    for li in json.loads(M.sh(["ip", "-n", lab.netns(lab.tor_of(host)), "-j", "-s", "link", "show"]).stdout):
        if li["ifname"] in port_nic:
            out[port_nic[li["ifname"]]] = li["stats64"]["rx"]["bytes"]
    return out


def shares_after(lab, host, ports, seconds=3):
    """Per-NIC shares at the receiving end of a short run of 32 flows, one direction at a time (egress
    IPv6, then ingress IPv4): the four links are then the bottleneck, and a NIC's share says whether it
    carries a full link again. Both directions at once, the 2 vCPUs were the bottleneck and the shares
    followed the flow counts the hash gave each NIC (see docs/performance.md)."""
    out = {}
    for d, fam, reverse, counter in (("egress", "ipv6", False, lambda: tor_rx(lab, host)),
                                     ("ingress", "ipv4", True, lambda: lab.nic_bytes(host, "rx"))):
        b0 = counter()
        srv, cli = iperf_start(lab, host, fam, ports.take(), FLOWS, seconds, reverse, 1.0)
        res = iperf_finish(srv, cli, seconds)
        b1 = counter()
        if "error" in res:
            out[d] = None
            continue
        sh, total = M.shares(b0, b1)
        out[d] = dict((k, round(v, 4)) for k, v in sorted(sh.items())) if total else None
    return out


def fault_stalls(view, t_from):
    """(worst stall s, [(start, length) of stalls >= 0.4 s that began before t_from]) at the receiver:
    the worst counts only zero-byte runs that began at or after ``t_from`` (iperf3 time), so a stream
    slow to start (a lost SYN under 64 new flows: 1 s initial RTO) before the fault is not charged to it."""
    runs = M.stalls(view, min_s=0.0)
    worst = max([ln for st, ln in runs if st >= t_from - 1e-6] or [0.0])
    return round(worst, 2), [(st, ln) for st, ln in runs if st < t_from - 1e-6 and ln >= 0.4]


def received_views(results):
    """{direction: receiving end's iperf3 report or None}."""
    out = {}
    for d, r in results.items():
        if not r or "error" in r:
            out[d] = None
            continue
        try:
            out[d] = M.DH.receiver_view(r, reverse=(d == "ingress"))
        except AssertionError:
            out[d] = None
    return out


def blackholed(view, t0, t1):
    """Streams with 0 bytes in every interval inside [t0, t1] (iperf3 time), None if no interval fits."""
    per, seen = {}, False
    for iv in view.get("intervals", []):
        for s in iv["streams"]:
            if s["start"] >= t0 - 1e-6 and s["end"] <= t1 + 1e-6:
                seen = True
                per[s["socket"]] = per.get(s["socket"], 0) + s["bytes"]
    return sum(1 for v in per.values() if v == 0) if seen else None


# ---- one run -----------------------------------------------------------------------------------
def bfd_up(lab, host):
    """Every BFD session of the ToR on the host's ports is up (right after a deploy they may still be
    coming up: a fault then can only be found by the host, or by the BGP hold timer)."""
    # by peer address: the kernel-mode hosts' sessions are multihop, without an interface
    addrs = set(a for s in lab.hosts[host]["slots"] for sn in s["nics"] for a in sn["address"].values())
    peers = [p for p in json.loads(lab.x(lab.tor_of(host), ["vtysh", "-c", "show bfd peers json"]).stdout or "[]")
             if p.get("peer") in addrs]
    return bool(peers) and all(p.get("status") == "up" for p in peers)


def all_in(lab, view):
    try:
        ts = GS.tor_state(lab, HOST)
        return (all(all(v.values()) for v in ts.values()) and all(view.egress_set().values())
                and bfd_up(lab, HOST))
    except (RuntimeError, ValueError):
        return False


def wait_all_in(lab, view, timeout=60.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if all_in(lab, view):
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


def one_run(lab, view, mode, kind, k, hold, ports):
    nic = lab.hosts[HOST]["nics"][k]["name"]
    ready = wait_all_in(lab, view)
    row = {"mode": mode, "kind": kind, "nic": nic, "ready_wait_s": ready}
    tor_s = GS.Sampler(lambda: GS.tor_state(lab, HOST))
    host_s = GS.Sampler(view.egress_set)
    SAMPLERS[:] = [tor_s, host_s]   # halted by the caller also when this run raises
    tor_s.start()
    host_s.start()
    senders = None
    if TRACE_SENDERS[0]:
        senders = GS.SenderSampler(lab.netns("mns-storage"), M.STO4)
        SAMPLERS.append(senders)
        senders.start()
    fault_len = STORM[1] if kind == "flap_storm" else hold
    seconds = int(math.ceil(LEAD + fault_len + TAIL))
    traffic = {}
    th = threading.Thread(target=lambda: traffic.update(zip(("res", "t"), pair(lab, HOST, ports, seconds))))
    th.start()
    time.sleep(LEAD)
    t_fault = time.monotonic()
    try:
        if kind == "flap_storm":
            row["storm_offsets"] = GS.flap_storm(lab, HOST, k, *STORM)
        else:
            GS.set_fault(lab, HOST, k, kind)
            time.sleep(max(0.0, t_fault + hold - time.monotonic()))
    finally:
        if kind != "flap_storm":
            GS.set_fault(lab, HOST, k, kind, on=False)
    t_heal = time.monotonic()
    # both ends have the NIC back (or 40 s)
    deadline = t_heal + 40.0
    while time.monotonic() < deadline:
        ts = tor_s.samples[-1] if tor_s.samples else None
        hs = host_s.samples[-1] if host_s.samples else None
        if ts and hs and ts[0] > t_heal and hs[0] > t_heal and GS.tor_in(ts[1], nic) is True and hs[1].get(nic):
            break
        time.sleep(0.05)
    th.join(seconds + 120)
    time.sleep(0.1)
    t_end = time.monotonic()
    if senders is not None:
        row["sender_freezes"] = GS.freezes(senders.finish(), t_fault, TRACE_SENDERS[0])
    tsam, hsam = tor_s.finish(), host_s.finish()
    tor_ser = GS.series(tsam, lambda s: GS.tor_in(s, nic))
    host_ser = GS.series(hsam, lambda s: s.get(nic))
    row["tor_drop"] = GS.first(tor_ser, t_fault, False)
    row["host_drop"] = GS.first(host_ser, t_fault, False)
    # per family: seconds until that family's next hop left the ToR FIB
    row["tor_drop_by_family"] = dict((f, GS.first(GS.series(tsam, lambda s, f=f: s[f][nic]), t_fault, False))
                                     for f in ("ipv4", "ipv6"))
    for side, ser, drop in (("tor", tor_ser, row["tor_drop"]), ("host", host_ser, row["host_drop"])):
        if drop is None:
            row[side + "_back"] = None
        else:
            t_from = max(t_heal, t_fault + drop)
            b = GS.first(ser, t_from, True)
            row[side + "_back"] = (t_from + b - t_heal) if b is not None else None
    d = [(row["tor_drop"], "tor"), (row["host_drop"], "host")]
    d = [x for x in d if x[0] is not None]
    row["first_side"] = min(d)[1] if d else None
    row["host_churn"] = GS.changes(host_ser, t_fault, t_end)
    row["tor_churn"] = GS.changes(tor_ser, t_fault, t_end)
    row["sample_gap_max"] = {"tor": GS.gaps(tsam, t_fault, t_heal), "host": GS.gaps(hsam, t_fault, t_heal)}
    row["sampler_errors"] = {"tor": tor_s.errors[-3:], "host": host_s.errors[-3:]}
    row["fault_s"] = t_heal - t_fault
    views = received_views(traffic.get("res", {}))
    row["stall"], row["blackholed"], row["traffic_error"] = {}, {}, {}
    t_sp = traffic.get("t", t_fault - LEAD)
    for dname in ("egress", "ingress"):
        v = views.get(dname)
        r = traffic.get("res", {}).get(dname)
        if v is None:
            row["stall"][dname] = row["blackholed"][dname] = None
            row["traffic_error"][dname] = (r or {}).get("error", "missing")
            continue
        # the fault starts (t_fault - t_sp) s after the clients were spawned; iperf3's time axis starts
        # after the connection set-up (see STALL_SLACK)
        row["stall"][dname], before = fault_stalls(v, t_fault - t_sp - STALL_SLACK)
        row.setdefault("stall_whole_run", {})[dname] = round(M.max_stall(v), 2)
        row.setdefault("stalls_before_fault", {})[dname] = before
        row["blackholed"][dname] = blackholed(v, t_heal - t_sp - 1.0, t_heal - t_sp)
        row["stalls_ge_0.4"] = row.get("stalls_ge_0.4", {})
        row["stalls_ge_0.4"][dname] = M.stalls(v)[:10]
        row.setdefault("mbit", {})[dname] = round(r["end"]["sum_received"]["bits_per_second"] / 1e6, 1)
    wait_all_in(lab, view, timeout=30.0)
    row["shares_after"] = shares_after(lab, HOST, ports)
    row["bounds"] = bounds(row, len(lab.hosts[HOST]["nics"]))
    return row


def baseline_run(lab, view, mode, hold, ports):
    """The same traffic as a fault run (LEAD + hold + TAIL s, 32 flows each way) with no fault: the lab's own
    stall tail (sender congestion on the shaped links), to read the fault rows against."""
    row = {"mode": mode, "kind": "none", "ready_wait_s": wait_all_in(lab, view), "stall": {}, "stalls_ge_0.4": {},
           "mbit": {}, "traffic_error": {}}
    res, dummy = pair(lab, HOST, ports, int(math.ceil(LEAD + hold + TAIL)))
    views = received_views(res)
    for dname in ("egress", "ingress"):
        v = views.get(dname)
        if v is None:
            row["stall"][dname] = None
            row["traffic_error"][dname] = (res.get(dname) or {}).get("error", "missing")
            continue
        # the window a fault run charges to its fault: from LEAD - STALL_SLACK s on (iperf3 time)
        row["stall"][dname], dummy = fault_stalls(v, LEAD - STALL_SLACK)
        row["stalls_ge_0.4"][dname] = M.stalls(v)[:10]
        row["mbit"][dname] = round(res[dname]["end"]["sum_received"]["bits_per_second"] / 1e6, 1)
    row["stall_ok"] = all(row["stall"][d] is not None and row["stall"][d] <= BOUND_STALL for d in ("egress", "ingress"))
    return row


def baseline_summary(rows, echo=True):
    out = []
    for mode in sorted(set(r["mode"] for r in rows)):
        rs = [r for r in rows if r["mode"] == mode]
        s = {"mode": mode, "runs": len(rs), "stall_egress": med_max(r["stall"]["egress"] for r in rs),
             "stall_ingress": med_max(r["stall"]["ingress"] for r in rs),
             "over_bound": sum(1 for r in rs if not r["stall_ok"])}
        out.append(s)
        if echo:
            print("no fault   %-6s %4d | worst stall eg %s, in %s s (median/max) | runs with a stall > %.0f s or "
                  "missing: %d" % (mode, len(rs), s["stall_egress"], s["stall_ingress"], BOUND_STALL, s["over_bound"]))
    sys.stdout.flush()
    return out


def failed_row(mode, kind, nic, exc):
    """A run that raised: every figure missing (None), no bound met."""
    r = {"mode": mode, "kind": kind, "nic": nic, "error": "%s: %s" % (type(exc).__name__, exc),
         "tor_drop": None, "host_drop": None, "tor_back": None, "host_back": None, "first_side": None,
         "stall": {"egress": None, "ingress": None}, "blackholed": {"egress": None, "ingress": None},
         "shares_after": {}, "host_churn": None, "tor_churn": None}
    r["bounds"] = bounds(r, 4)
    print("%s %s: run failed: %s" % (kind, mode, r["error"][:2000]), flush=True)
    return r


def bounds(row, n):
    def le(v, b):
        return v is not None and v <= b
    sh = row.get("shares_after") or {}
    share_ok = all(sh.get(d) is not None and len(sh[d]) == n and all(abs(x - 1.0 / n) <= SHARE_TOL for x in sh[d].values())
                   for d in ("egress", "ingress"))
    out = {"tor_drop": le(row["tor_drop"], BOUND_DROP), "host_drop": le(row["host_drop"], BOUND_DROP),
           "stall": all(le(row["stall"].get(d), BOUND_STALL) for d in ("egress", "ingress")),
           "blackholed": all(row["blackholed"].get(d) == 0 for d in ("egress", "ingress")),
           "shares": share_ok}
    out["all"] = all(out.values())
    return out


def fmt(v, p="%.2f"):
    return "None" if v is None else p % v


def line(r, i):
    sh = r["shares_after"]
    nic = r["nic"]
    return ("%-10s %-6s run %2d: ToR FIB drop %s s, host egress drop %s s (first: %s), back ToR %s / host %s s, "
            "worst stall eg %s / in %s s, black-holed eg %s / in %s, shares after heal %s eg %s / in %s, churn host %d "
            "ToR %d, bounds %s" % (
                r["kind"], r["mode"], i, fmt(r["tor_drop"]), fmt(r["host_drop"]), r["first_side"], fmt(r["tor_back"]),
                fmt(r["host_back"]), fmt(r["stall"]["egress"], "%.1f"), fmt(r["stall"]["ingress"], "%.1f"),
                r["blackholed"]["egress"], r["blackholed"]["ingress"], nic,
                fmt((sh.get("egress") or {}).get(nic), "%.3f"), fmt((sh.get("ingress") or {}).get(nic), "%.3f"),
                r["host_churn"] or 0, r["tor_churn"] or 0, "".join("+" if r["bounds"][b] else "-" for b in BOUND_KEYS)))


def med_max(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "None"
    return "%.2f/%.2f" % (statistics.median(xs), max(xs))


def summary(rows, echo=True):
    groups = {}
    for r in rows:
        groups.setdefault((r["kind"], r["mode"]), []).append(r)
    pr = print if echo else (lambda *a, **k: None)
    pr("\nfault      mode   runs | ToR drop s  host drop s | ToR back s  host back s | stall eg s  stall in s | "
       "blackholed max eg/in | eth1 share eg min/max, in min/max | churn max | first side | missing drop ToR/host "
       "| met: ToR host stall bh shares ALL")
    out = []
    for (kind, mode), rs in sorted(groups.items(), key=lambda x: (GS.FAULTS.index(x[0][0]), x[0][1])):
        nic = rs[0]["nic"]
        she = [(r["shares_after"].get("egress") or {}).get(nic) for r in rs]
        shi = [(r["shares_after"].get("ingress") or {}).get(nic) for r in rs]

        def mm(xs):
            xs = [x for x in xs if x is not None]
            return "%.3f/%.3f" % (min(xs), max(xs)) if xs else "None"

        def mx(xs):
            xs = [x for x in xs if x is not None]
            return max(xs) if xs else None
        firsts = {}
        for r in rs:
            firsts[r["first_side"]] = firsts.get(r["first_side"], 0) + 1
        met = dict((b, sum(1 for r in rs if r["bounds"][b])) for b in BOUND_KEYS + ("all",))
        s = {"kind": kind, "mode": mode, "runs": len(rs),
             "tor_drop": med_max(r["tor_drop"] for r in rs), "host_drop": med_max(r["host_drop"] for r in rs),
             "tor_back": med_max(r["tor_back"] for r in rs), "host_back": med_max(r["host_back"] for r in rs),
             "stall_egress": med_max(r["stall"]["egress"] for r in rs),
             "stall_ingress": med_max(r["stall"]["ingress"] for r in rs),
             "blackholed_max": (mx(r["blackholed"]["egress"] for r in rs), mx(r["blackholed"]["ingress"] for r in rs)),
             "share_egress": mm(she), "share_ingress": mm(shi),
             "churn_max": mx(r["host_churn"] for r in rs), "first_side": firsts,
             "missing_drop": (sum(1 for r in rs if r["tor_drop"] is None), sum(1 for r in rs if r["host_drop"] is None)),
             "met": met}
        out.append(s)
        pr("%-10s %-6s %4d | %-10s  %-11s | %-10s  %-11s | %-10s  %-10s | %-20s | %-33s | %9s | %-10s | %-20s | %s" % (
            kind, mode, len(rs), s["tor_drop"], s["host_drop"], s["tor_back"], s["host_back"], s["stall_egress"],
            s["stall_ingress"], "%s/%s" % s["blackholed_max"], "%s, %s" % (s["share_egress"], s["share_ingress"]),
            s["churn_max"], ",".join("%s:%d" % (k, v) for k, v in sorted(firsts.items(), key=str)),
            "%d/%d" % s["missing_drop"], " ".join("%d" % met[b] for b in BOUND_KEYS + ("all",))))
    sys.stdout.flush()
    return out


def save(path, data):
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, path)


def matrix(a, data):
    ports = Ports()
    for mode in a.modes.split(","):
        lab = build(mode)
        try:
            view = GS.HostView(lab, HOST, mode)
            print("%s: egress set now %s" % (mode, view.egress_set()), flush=True)
            failed_in_row = 0
            for kind in a.faults.split(","):
                for i in range(a.runs):
                    try:
                        r = one_run(lab, view, mode, kind, a.nic, a.hold, ports)
                    except Exception as e:  # pylint: disable=broad-except  # a failed run is reported as missing
                        r = failed_row(mode, kind, lab.hosts[HOST]["nics"][a.nic]["name"], e)
                        failed_in_row += 1
                        if failed_in_row >= 3:
                            raise RuntimeError("3 runs in a row failed, stopping (last: %s)" % r["error"])
                    else:
                        failed_in_row = 0
                    finally:
                        for smp in SAMPLERS:
                            smp.finish()
                        GS.clear_faults(lab, HOST)
                        lab.close()
                    r["run"] = i + 1
                    data["runs"].append(r)
                    print(line(r, i + 1), flush=True)
                    for f in r.get("sender_freezes") or []:
                        steps = "; ".join("%+.3f backoff %s cwnd %s" % (x["t"], x["backoff"], x["cwnd"]) for x in f["steps"])
                        print("  sender %s frozen %.2f s from %+.2f s: %s" % (f["peer"], f["freeze_s"], f["from_s"], steps),
                              flush=True)
                    save(a.json, data)
            for i in range(a.baseline):
                try:
                    r = baseline_run(lab, view, mode, a.hold, ports)
                finally:
                    lab.close()
                r["run"] = i + 1
                data.setdefault("baseline", []).append(r)
                print("no fault   %-6s run %2d: worst stall eg %s / in %s s" % (
                    mode, i + 1, fmt(r["stall"]["egress"], "%.1f"), fmt(r["stall"]["ingress"], "%.1f")), flush=True)
                save(a.json, data)
            if a.soak and mode == a.modes.split(",")[0]:
                # the soak on the same lab (no rebuild), after the matrix of the first mode
                GS.clear_faults(lab, HOST)
                wait_all_in(lab, view)
                soak_on(lab, mode, a, data)
        finally:
            lab.close()
            try:
                GS.clear_faults(lab, HOST)
            except Exception:  # pylint: disable=broad-except
                pass
    data["summary"] = summary(data["runs"])
    if data.get("baseline"):
        data["baseline_summary"] = baseline_summary(data["baseline"])
    save(a.json, data)


# ---- soak --------------------------------------------------------------------------------------
def soak(a, data):
    mode = a.modes.split(",")[0]
    lab = build(mode)
    try:
        soak_on(lab, mode, a, data)
    finally:
        lab.close()


def soak_on(lab, mode, a, data):
    ports = Ports(base=6000)
    capture = None
    try:
        host_slots = [(h, s["slot"]) for h in HOSTS for s in lab.hosts[h]["slots"]]
        time.sleep(2.0)
        tor0, bgp0 = GS.tor_bfd_counters(lab, TOR), GS.tor_bgp_summary(lab, TOR)
        host0 = dict(("%s/slot%d" % hs, GS.host_bfd_counters(lab, *hs)) for hs in host_slots)
        interval_ms = data["detection_ms_x3"]
        if a.bfd_rt:
            data["bfd_rt"] = GS.bfd_realtime(lab, TOR, HOSTS, a.bfd_rt)
            print("SCHED_RR %d: %s" % (a.bfd_rt, data["bfd_rt"]), flush=True)
        capture = GS.BfdGapCapture(lab, TOR, HOSTS, 1.5 * interval_ms) if a.bfd_gaps else None
        t0, t0_epoch = time.monotonic(), time.time()
        chunks = []
        while time.monotonic() - t0 < a.soak - 0.5:
            sec = max(1, int(min(a.chunk, a.soak - (time.monotonic() - t0))))
            procs = []
            for host, flows in ((HOST, FLOWS), (OTHER, 8)):
                for fam, rev in (("ipv6", False), ("ipv4", True)):
                    f = fam if host == HOST else ("ipv4" if fam == "ipv6" else "ipv6")
                    procs.append(("%s %s %s" % (host, f, "ingress" if rev else "egress"),
                                  iperf_start(lab, host, f, ports.take(), flows, sec, rev, 10)))
            res = {}
            for name, (srv, cli) in procs:
                r = iperf_finish(srv, cli, sec)
                res[name] = r.get("error") or round(r["end"]["sum_received"]["bits_per_second"] / 1e6, 1)
            lab.close()
            chunks.append({"seconds": sec, "mbit": res})
            print("soak %s: %4.0f s  %s" % (mode, time.monotonic() - t0, res), flush=True)
        dur = time.monotonic() - t0
        gaps = capture.stop() if capture else None
        capture = None
        tor1, bgp1 = GS.tor_bfd_counters(lab, TOR), GS.tor_bgp_summary(lab, TOR)
        host1 = dict(("%s/slot%d" % hs, GS.host_bfd_counters(lab, *hs)) for hs in host_slots)
        watcher = {}
        for h in HOSTS:
            try:
                watcher[h] = [[round(t - t0_epoch, 3), nic, what, why] for t, nic, what, why in GS.watcher_changes(lab, h, t0_epoch)]
            except Exception as e:  # pylint: disable=broad-except  # reported as missing, never as no change
                watcher[h] = None
                print("  NIC watcher journal of %s: %s" % (h, e), flush=True)
        host_addrs = set(n["address"][f] for h in HOSTS for s in lab.hosts[h]["slots"] for n in s["nics"]
                         for f in ("ipv4", "ipv6"))

        def downs(c0, c1):
            if c0 is None or c1 is None:
                return None
            return dict((k, c1[k].get("session-down", 0) - c0.get(k, {}).get("session-down", 0)) for k in c1)
        tor_d = downs(tor0, tor1)
        tor_d = dict((k, v) for k, v in tor_d.items() if k.split("|")[0] in host_addrs)
        host_d = dict((k, downs(host0[k], host1[k])) for k in host0)
        bgp_d = dict((p, {"dropped": (bgp1[p][1] or 0) - (bgp0.get(p, (0, 0, None))[1] or 0),
                          "established": (bgp1[p][0] or 0) - (bgp0.get(p, (0, 0, None))[0] or 0), "state": bgp1[p][2]})
                     for p in bgp1 if p in host_addrs)
        tor_total = sum(tor_d.values())
        host_total = None if any(v is None for v in host_d.values()) else sum(sum(v.values()) for v in host_d.values())
        bgp_drops = sum(v["dropped"] for v in bgp_d.values())
        not_up = [k for k, p in tor1.items() if k.split("|")[0] in host_addrs and p.get("status") not in (None, "up")]
        res = {"mode": mode, "started_epoch": round(t0_epoch, 3), "seconds": round(dur, 1), "chunks": chunks, "tor_bfd_sessions": len(tor_d),
               "tor_bfd_down": tor_d, "tor_bfd_down_total": tor_total, "host_bfd_down": host_d,
               "host_bfd_sessions": sum(len(v) for v in host1.values() if v),
               "host_bfd_down_total": host_total, "bgp": bgp_d, "bgp_dropped_total": bgp_drops,
               "bgp_peers": len(bgp_d), "watcher_changes": watcher,
               "watcher_out_total": None if None in watcher.values() else sum(
                   1 for v in watcher.values() for c in v if c[2] == "out")}
        if gaps is not None:
            res["bfd_interval_ms"] = interval_ms
            res["bfd_gaps"] = gaps
            res["bfd_gaps_missing"] = [n for side in gaps.values() for n, r in side.items() if r is None]
            at_hosts = [gaps["host"][h] for h in HOSTS]
            at_tor = gaps["tor"][TOR]
            res["bfd_gaps_summary"] = {
                "host -> ToR (at the ToR)": None if at_tor is None else BG.summarize(at_tor, interval_ms),
                "ToR -> host (at the hosts)": None if None in at_hosts else BG.summarize(
                    dict((k, v) for r in at_hosts for k, v in r.items()), interval_ms)}
        data["soak"] = res
        save(a.json, data)
        print("\nsoak %s: %.0f s loaded (%s: 32+32 flows, %s: 8+8 flows, tbf 200 Mbit/s per NIC)" % (mode, dur, HOST, OTHER))
        print("  BFD session-down events: ToR %s over %d host sessions; host responders %s over %d sessions" % (
            tor_total, len(tor_d), host_total, res["host_bfd_sessions"]))
        print("  BGP host sessions on the ToR: %d peers, connectionsDropped +%d, connectionsEstablished +%d" % (
            len(bgp_d), bgp_drops, sum(v["established"] for v in bgp_d.values())))
        if not_up:
            print("  counters entries not up at the end: %s" % not_up)
        print("  NIC watcher: %s NICs taken out of an egress set during the soak%s" % (
            "NO REPORT (journal not readable)," if res["watcher_out_total"] is None else res["watcher_out_total"],
            "".join("; %s: %s" % (h, [c[:3] for c in v if c[2] == "out"]) for h, v in watcher.items() if v)))
        print("  per-slot responder counters missing: %s" % [k for k, v in host1.items() if v is None])
        for way, sm in sorted(res.get("bfd_gaps_summary", {}).items()):
            if sm is None:
                print("  BFD packets %s: NO REPORT (a sniffer died or printed nothing)" % way)
                continue
            if sm["sessions"] != len(tor_d):
                print("  BFD packets %s: %d sessions seen, the ToR counts %d: the rest were silent all along"
                      % (way, sm["sessions"], len(tor_d)))
            print("  BFD packets %s: %d sessions, %d packets; gaps of >= 1.5 intervals (a packet missing) %d, "
                  ">= 2.25 (two) %d, >= 3 (detection time) %d; largest %.2f intervals of %d ms"
                  % (way, sm["sessions"], sm["packets"], sm["gaps_ge_1_5x"], sm["gaps_ge_2_25x"], sm["gaps_ge_3x"],
                     sm["max_gap_x"], interval_ms))
        if res.get("bfd_gaps_missing"):
            print("  BFD gap sniffers without a report: %s" % res["bfd_gaps_missing"])
    finally:
        if capture:
            capture.stop()
        lab.close()


NAMES = {"silent": "silent loss both ways", "to_host": "one-way ToR -> host", "to_tor": "one-way host -> ToR",
         "arp_nd": "ARP/ND replies lost", "flap_storm": "flap storm 10 in 5 s"}


def markdown(paths):
    """The docs table (per fault x mode) from one or more --json files."""
    rows, base = [], []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        rows += d.get("runs", [])
        base += d.get("baseline", [])
    print("| fault | mode | ToR FIB drop s | host egress drop s | first to drop (ToR/host) | back in ToR s | back in host s "
          "| worst stall eg / in s | black-holed streams eg / in (max) | eth1 share after heal eg / in (min-max) "
          "| churn (max) | runs meeting ToR / host / stall / no black hole / shares / all |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summary(rows, echo=False) if rows else []:
        f = s["first_side"]
        print("| %s | %s | %s | %s | %d / %d | %s | %s | %s / %s | %s / %s | %s / %s | %s | %s of %d |" % (
            NAMES[s["kind"]], s["mode"], s["tor_drop"], s["host_drop"], f.get("tor", 0), f.get("host", 0),
            s["tor_back"], s["host_back"], s["stall_egress"], s["stall_ingress"], s["blackholed_max"][0],
            s["blackholed_max"][1], s["share_egress"].replace("/", "-"), s["share_ingress"].replace("/", "-"),
            s["churn_max"], " / ".join(str(s["met"][b]) for b in BOUND_KEYS + ("all",)), s["runs"]))
    if base:
        print("\n| no fault (same traffic) | runs | worst stall eg / in s (median/max) | runs with a stall > 1 s |")
        print("|---|---|---|---|")
        for s in baseline_summary(base, echo=False):
            print("| %s | %d | %s / %s | %d |" % (
                s["mode"], s["runs"], s["stall_egress"], s["stall_ingress"], s["over_bound"]))


def main():
    if sys.argv[1:2] == ["--markdown"]:
        markdown(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--modes", default="ebpf,kernel")
    ap.add_argument("--faults", default=",".join(GS.FAULTS))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--hold", type=float, default=2.0, help="seconds a loss fault stays on")
    ap.add_argument("--nic", type=int, default=1, help="NIC index of mns-r1-h2 to fault")
    ap.add_argument("--soak", type=float, default=0,
                    help="loaded soak of this many seconds: alone with --runs 0, else on the first mode's lab after its matrix")
    ap.add_argument("--chunk", type=int, default=60, help="iperf3 run length during the soak")
    ap.add_argument("--baseline", type=int, default=0,
                    help="per mode, after its faults: this many runs of the same traffic with no fault")
    ap.add_argument("--sender-cc", default=None,
                    help="congestion control of the storage node's senders in the ingress runs (iperf3 -C); "
                         "default: the lab namespaces' (this machine's net.ipv4.tcp_congestion_control)")
    ap.add_argument("--trace-senders", type=int, default=0, metavar="N",
                    help="sample the storage node's TCP senders (ss -tin, ~25 ms) in every fault run and keep the N "
                         "longest freezes with their retransmission timeouts (costs CPU: explains, does not count)")
    ap.add_argument("--detect-ms", type=int, default=None, metavar="MS",
                    help="BFD on the ToR and the host responders and the watcher's gateway probes every MS ms x 3 "
                         "(default: the lab's, inventories/lab/group_vars/all/lab.yml: 50 ms)")
    ap.add_argument("--bfd-gaps", action="store_true",
                    help="in the soak, time every BFD control packet at its receiving end (ToR ports, host NICs) "
                         "and report the gaps of >= 1.5, >= 2.25 and >= 3 intervals per direction")
    ap.add_argument("--no-control-band", dest="control_band", action="store_false",
                    help="one tail-drop fifo per shaped link for everything, BFD and ARP/ND included; default: BFD, ARP "
                         "and ICMPv6 in a strict-priority band inside every link's tbf (a switch port's control-plane queue)")
    ap.add_argument("--bfd-rt", type=int, default=0, metavar="PRIO",
                    help="experiment: in the soak, SCHED_RR PRIO for the ToR's bfdd and the hosts' BFD responders")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    DETECT_MS[0] = a.detect_ms
    CONTROL_BAND[0] = a.control_band
    SENDER_CC[0] = a.sender_cc
    TRACE_SENDERS[0] = a.trace_senders
    for k in a.faults.split(","):
        if k not in GS.FAULTS:
            ap.error("--faults: %r is not one of %s" % (k, ",".join(GS.FAULTS)))

    def term(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, term)
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        machine_cc = f.read().strip()
    data = {"argv": sys.argv, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": [],
            "sender_cc": {"ingress (storage node)": a.sender_cc or machine_cc, "egress (container)": machine_cc},
            "detection_ms_x3": a.detect_ms or M.lab_vars()["tor_bgp_options"]["bfd"]["interval_ms"],
            "control_band": a.control_band}
    try:
        if a.soak and a.runs == 0:
            soak(a, data)
        else:
            matrix(a, data)
    finally:
        save(a.json, data)
        M.lab_teardown(check=False)


if __name__ == "__main__":
    main()
