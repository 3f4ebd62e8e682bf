# -*- coding: utf-8 -*-
"""Gray-failure matrix of the host datapath (needs root; builds its own namespaces with prefix mngf,
removes them; run it under the shared lock: flock /tmp/netscale-e2e.lock ...).

For every fault kind (silent loss both ways, one-way ToR -> host, one-way host -> ToR, ARP/ND replies
lost, flap storm of 10 flaps in 5 s) x both modes (eBPF, kernel forwarding) x --runs runs, on the
4-NIC host lab-r1-h2 with the NIC watcher's default detection (100 ms x 3, hold-down 1 s, dampening):

* detection: fault injected (nft on the ToR port / first link-down) -> the NIC out of the host's
  egress set (eBPF: NIC_OUT in mn_nics; kernel: per-NIC table routes), sampled every 20 ms;
* recovery: fault removed (end of the storm) -> the NIC back in the egress set;
* churn: egress-set changes of the NIC during the fault (1 = out once, no flapping);
* with --traffic: the worst receiver-side stall of 32 flows each way (iperf3, 0.2 s intervals),
  the ToR's BFD stood in for by dropping the NIC from its task-IP routes 0.3 s after the fault.

Prints one line per run and a summary (median, max) per fault x mode; asserts nothing.
usage: bench/gray_faults.py [--runs 10] [--faults silent,to_host,to_tor,arp_nd,flap_storm]
       [--modes ebpf,kernel] [--nic 1] [--hold 2.0] [--traffic]
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from labkit import dp_harness as H  # noqa: E402
from labkit import gray as G  # noqa: E402

HOST = "lab-r1-h2"


def iperf(fab, host, dst, port, seconds, reverse):
    srv = fab.iperf_server(fab.sto, port, interval=0.2)
    argv = ["iperf3", "-c", dst, "-p", str(port), "-P", "32", "-t", str(seconds), "-i", "0.2", "--json",
            "--get-server-output"] + (["-R"] if reverse else [])
    out, dummy = fab.spawn(host.slot_ns(1), argv).communicate(timeout=seconds + 30)
    srv.wait(10)
    return json.loads(out)


def one_run(fab, host, mode, kind, k, hold, traffic):
    nic = host.nics[k]
    G.wait_in(host, mode, timeout=15.0)
    rec = G.Recorder(host, mode, period=0.02)
    rec.start()
    results = {}
    threads = []
    lead = 1.0 if traffic else 0.2
    dur = (5.0 if kind == "flap_storm" else hold) + lead + 4.5
    if traffic:
        for name, dst, port, rev in (("egress", H.STO6, 5411, False), ("ingress", H.STO4, 5412, True)):
            t = threading.Thread(target=lambda n=name, d=dst, p=port, r=rev: results.__setitem__(
                n, iperf(fab, host, d, p, int(dur + 0.5), r)))
            t.start()
            threads.append(t)
    time.sleep(lead)
    t_fault = time.monotonic()
    if kind == "flap_storm":
        if traffic:
            threading.Timer(G.TOR_BFD_S, fab.tor_routes, args=(host,), kwargs={"skip": (k,)}).start()
        G.flap_storm(fab, host, k, 10, 5.0)
    else:
        G.set_fault(fab, host, k, kind)
        if traffic:
            time.sleep(G.TOR_BFD_S)
            fab.tor_routes(host, skip=(k,))
        time.sleep(max(0.0, t_fault + hold - time.monotonic()))
        G.set_fault(fab, host, k, kind, on=False)
    t_heal = time.monotonic()
    try:
        G.wait_in(host, mode, timeout=15.0)
        recover = time.monotonic() - t_heal
    except AssertionError:
        recover = None
    if traffic:
        fab.tor_routes(host)
    for t in threads:
        t.join(60)
    samples = rec.finish()
    tr = G.transitions(samples, nic)
    if not [t for t, s in tr if s is False]:
        print("no out sample: %d samples %s..%s, recorder errors %s, last %s" % (
            len(samples), samples[0][0] - t_fault if samples else None, samples[-1][0] - t_fault if samples else None,
            rec.errors[-3:], samples[-1][1] if samples else None))
    outs = [t for t, s in tr if s is False and t >= t_fault]
    row = {"detect": (outs[0] - t_fault) if outs else None,
           "recover": recover if outs else None,
           "churn": len([t for t, s in tr if t_fault <= t <= t_heal])}
    if traffic and sorted(results) == ["egress", "ingress"]:
        received, dummy = H.by_end(results)
        row["stall"] = max(H.max_stall(v) for v in received.values())
    return row


def fmt(v):
    return "-" if v is None else "%.2f" % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--faults", default=",".join(G.FAULTS))
    ap.add_argument("--modes", default="ebpf,kernel")
    ap.add_argument("--nic", type=int, default=1)
    ap.add_argument("--hold", type=float, default=2.0, help="seconds a loss fault stays on")
    ap.add_argument("--traffic", action="store_true", help="32 flows each way, worst receiver stall")
    ap.add_argument("--prefix", default="mngf")
    a = ap.parse_args()
    fab = H.Fabric(hosts=(HOST,), tbf="200mbit" if a.traffic else None, prefix=a.prefix)
    summary = {}
    try:
        host = fab.host(HOST)
        for mode in a.modes.split(","):
            host.core("apply", ebpf=(mode == "ebpf"))
            host.start_watcher()
            G.wait_log(host, "gray-failure detection")
            try:
                for kind in a.faults.split(","):
                    for r in range(a.runs):
                        row = one_run(fab, host, mode, kind, a.nic, a.hold, a.traffic)
                        summary.setdefault((kind, mode), []).append(row)
                        if row["detect"] is None:
                            with open(os.path.join(host.dir, "watcher.log")) as f:
                                print("missed; watcher.log tail:\n" + "".join(f.readlines()[-15:]))
                        print("%-10s %-6s run %2d: detect %s s, recover %s s, churn %d%s" % (
                            kind, mode, r + 1, fmt(row["detect"]), fmt(row["recover"]), row["churn"],
                            (", worst stall %.1f s" % row["stall"]) if "stall" in row else ""))
                        sys.stdout.flush()
            finally:
                host.stop_watcher()
        print("\nfault      mode   runs  detect median/max s  recover median/max s  churn max  missed%s" % (
            "  stall max s" if a.traffic else ""))
        for (kind, mode), rows in sorted(summary.items()):
            det = [x["detect"] for x in rows if x["detect"] is not None]
            rec = [x["recover"] for x in rows if x["recover"] is not None]
            print("%-10s %-6s %4d  %8s / %-8s   %8s / %-8s   %5d  %6d%s" % (
                kind, mode, len(rows), fmt(statistics.median(det) if det else None), fmt(max(det) if det else None),
                fmt(statistics.median(rec) if rec else None), fmt(max(rec) if rec else None),
                max(x["churn"] for x in rows), len(rows) - len(det),
                ("  %.1f" % max(x.get("stall", 0) for x in rows)) if a.traffic else ""))
    finally:
        fab.close()


if __name__ == "__main__":
    main()
