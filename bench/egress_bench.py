# -*- coding: utf-8 -*-
"""Egress placement benchmark, hash vs least_loaded (issue 12 item 4, issue 14 item 1).

Needs root; builds its own namespaces (prefix mne: a ToR, a storage node, the 4-NIC lab host
lab-r1-h2 with tbf 200 Mbit/s per NIC and ToR port) and removes them. eBPF datapath. The two
policies alternate run by run (A/B/A/B...) so drift of the shared machine hits both alike.

* few:      4 greedy TCP flows, container -> storage (egress, IPv6) and storage -> task IP (ingress,
            IPv4, iperf3 -R): per-NIC byte shares where the bytes arrive (ToR ports for egress, the
            host NICs for ingress) and Jain's index per run.
* failover: 32 TCP flows of 4 Mbit/s each (below the NIC rate, so bytes follow flows), egress IPv6;
            NIC eth1 admin-down at 2.5 s; shares of the survivors from 3.5 s to the end; the issue's
            bound is each survivor within +-1/(2N) = 0.125 of a third.
* spread:   32 greedy TCP flows egress (IPv6): aggregate and shares (the 32-flow figures).
* stall:    (not in the default sections) 32 greedy flows each way, eth1 down at 3.5 s, up at 6.5 s with the
            NIC watcher running: worst per-stream stall at the receiving end, runs // 5 runs per policy.
Prints one line per run and a summary; --json FILE writes every figure. Asserts nothing.
usage: sudo .venv/bin/python bench/egress_bench.py [--runs 10] [--seconds 4] [--sections few,failover,spread,stall]
       [--json FILE]
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

# the repository root, for labkit (the lab harness shared with tests/e2e)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from labkit import dp_harness as H  # noqa: E402

HOST = "lab-r1-h2"
POLICIES = ("hash", "least_loaded")
FAILED = 1


def tor_rx(fab, host):
    ports = dict((host.tor_port(k), nic) for k, nic in enumerate(host.nics))
    out = {}
    for link in json.loads(H.sh(["ip", "-n", fab.tor, "-j", "-s", "link", "show"]).stdout):
        if link["ifname"] in ports:
            out[ports[link["ifname"]]] = link["stats64"]["rx"]["bytes"]
    return out


def received(fab, host, direction):
    """Byte counters where the bytes arrive: the ToR ports (egress) or the host NICs (ingress)."""
    return tor_rx(fab, host) if direction == "egress" else host.nic_bytes("rx")


def iperf(fab, host, port, argv, seconds):
    srv = fab.iperf_server(fab.sto, port)
    cli = fab.spawn(host.slot_ns(1), ["iperf3", "-p", str(port), "-t", str(seconds), "--json"] + argv)
    out, err = cli.communicate(timeout=seconds + 40)
    srv.wait(10)
    res = json.loads(out)
    if "error" in res:
        raise RuntimeError("iperf3: %s" % res["error"])
    return res["end"]["sum_received"]["bits_per_second"] / 1e6


def apply(host, policy):
    host.core("apply", ebpf=True, egress_policy=policy)


def few(fab, host, args, port):
    out = []
    for i in range(args.runs):
        for policy in POLICIES:
            apply(host, policy)
            for direction, dst, rev in (("egress", H.STO6, []), ("ingress", H.STO4, ["-R"])):
                b0 = received(fab, host, direction)
                mbit = iperf(fab, host, port, ["-c", dst, "-P", "4"] + rev, args.seconds)
                b1 = received(fab, host, direction)
                sh, total = H.shares(b0, b1)
                j = H.jain(b1[k] - b0[k] for k in b1)
                rec = {"section": "few", "run": i + 1, "policy": policy, "direction": direction, "mbit": round(mbit, 1),
                       "shares": dict((k, round(v, 4)) for k, v in sorted(sh.items())), "jain": round(j, 4)}
                print(json.dumps(rec), flush=True)
                out.append(rec)
    return out


def failover(fab, host, args, port):
    out = []
    for i in range(args.runs):
        for policy in POLICIES:
            apply(host, policy)
            marks = {}

            def sample():
                time.sleep(2.5)
                H.sh(["ip", "-n", host.ns, "link", "set", host.nics[FAILED], "down"])
                time.sleep(1.0)
                marks["b0"] = tor_rx(fab, host)
                time.sleep(3.0)
                marks["b1"] = tor_rx(fab, host)

            t = threading.Thread(target=sample)
            t.start()
            try:
                mbit = iperf(fab, host, port, ["-c", H.STO6, "-P", "32", "-b", "4M"], 7)
            finally:
                t.join(30)
                H.sh(["ip", "-n", host.ns, "link", "set", host.nics[FAILED], "up"])
                apply(host, policy)   # admin down removed the NIC's proxy entries and table routes
            sh, dummy = H.shares(marks["b0"], marks["b1"])
            surv = dict((k, v) for k, v in sh.items() if k != host.nics[FAILED])
            dev = max(abs(v - 1.0 / 3) for v in surv.values())
            rec = {"section": "failover", "run": i + 1, "policy": policy, "mbit": round(mbit, 1),
                   "shares": dict((k, round(v, 4)) for k, v in sorted(sh.items())), "max_dev": round(dev, 4),
                   "within_bound": dev <= 1.0 / 8}
            print(json.dumps(rec), flush=True)
            out.append(rec)
    return out


def stall(fab, host, args, port):
    """32 greedy flows each way (egress v6, ingress v4 with -R), eth1 admin-down at 3.5 s and up at 6.5 s
    (the NIC watcher restores it), as tests/e2e/datapath/test_datapath_traffic.py::test_nic_failure:
    the worst per-stream stall where the bytes arrive (iperf3 intervals of 0.2 s)."""
    out = []
    host.start_watcher()
    try:
        for i in range(max(1, args.runs // 5)):
            for policy in POLICIES:
                apply(host, policy)
                results = {}

                def run(name, dst, p, rev):
                    srv = fab.iperf_server(fab.sto, p, interval=0.2)
                    cli = fab.spawn(host.slot_ns(1), ["iperf3", "-c", dst, "-p", str(p), "-P", "32", "-t", "10", "-i",
                                                      "0.2", "--json", "--get-server-output"] + (["-R"] if rev else []))
                    o, dummy = cli.communicate(timeout=60)
                    srv.wait(10)
                    results[name] = json.loads(o)

                def flap():
                    time.sleep(3.5)
                    H.sh(["ip", "-n", host.ns, "link", "set", host.nics[FAILED], "down"])
                    time.sleep(3.0)
                    H.sh(["ip", "-n", host.ns, "link", "set", host.nics[FAILED], "up"])

                st0 = host.bpf_stats()
                ts = [threading.Thread(target=run, args=("egress", H.STO6, port, False)),
                      threading.Thread(target=run, args=("ingress", H.STO4, port + 50, True)),
                      threading.Thread(target=flap)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(90)
                rec_by_end, dummy = H.by_end(results)
                st = host.bpf_stats()
                rec = {"section": "stall", "run": i + 1, "policy": policy,
                       "worst_stall_s": dict((k, round(H.max_stall(v), 2)) for k, v in sorted(rec_by_end.items())),
                       "out_replaced": st.get("out_replaced", 0) - st0.get("out_replaced", 0),
                       "out_failover": st.get("out_failover", 0) - st0.get("out_failover", 0)}
                print(json.dumps(rec), flush=True)
                out.append(rec)
                time.sleep(1.0)
                apply(host, policy)
    finally:
        host.stop_watcher()
    return out


def spread(fab, host, args, port):
    out = []
    for i in range(max(1, args.runs // 3)):
        for policy in POLICIES:
            apply(host, policy)
            b0 = tor_rx(fab, host)
            mbit = iperf(fab, host, port, ["-c", H.STO6, "-P", "32"], args.seconds)
            b1 = tor_rx(fab, host)
            sh, dummy = H.shares(b0, b1)
            rec = {"section": "spread", "run": i + 1, "policy": policy, "mbit": round(mbit, 1),
                   "shares": dict((k, round(v, 4)) for k, v in sorted(sh.items())),
                   "jain": round(H.jain(b1[k] - b0[k] for k in b1), 4)}
            print(json.dumps(rec), flush=True)
            out.append(rec)
    return out


def summary(recs):
    lines = []
    for r in recs:
        if r["section"] == "stall":
            lines.append("stall    %-12s run %d: worst stream stall at the receiver %s (re-placed packets %d, failover "
                         "packets %d)" % (r["policy"], r["run"], r["worst_stall_s"], r["out_replaced"], r["out_failover"]))
    for section, key in (("few", "direction"), ("failover", None), ("spread", None)):
        groups = {}
        for r in recs:
            if r["section"] == section:
                groups.setdefault((r["policy"], r.get(key) if key else ""), []).append(r)
        for (policy, sub), rs in sorted(groups.items()):
            mbit = [r["mbit"] for r in rs]
            if section == "failover":
                devs = [r["max_dev"] for r in rs]
                lines.append("%-8s %-12s runs %2d: survivors' worst deviation from 1/3 median %.3f (%.3f-%.3f), within "
                             "+-0.125 in %d of %d; %.0f Mbit/s median" % (
                                 section, policy, len(rs), statistics.median(devs), min(devs), max(devs),
                                 sum(1 for r in rs if r["within_bound"]), len(rs), statistics.median(mbit)))
            else:
                js = [r["jain"] for r in rs]
                lines.append("%-8s %-12s %-7s runs %2d: Jain median %.4f (%.4f-%.4f), >= 0.98 in %d of %d; %.0f Mbit/s "
                             "median (%.0f-%.0f)" % (section, policy, sub, len(rs), statistics.median(js), min(js),
                                                     max(js), sum(1 for j in js if j >= 0.98), len(rs),
                                                     statistics.median(mbit), min(mbit), max(mbit)))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--sections", default="few,failover,spread")
    ap.add_argument("--json", help="write every run's figures to this file")
    args = ap.parse_args()
    fab = H.Fabric(hosts=(HOST,), tbf="200mbit", prefix="mne")
    recs = []
    t0 = time.time()
    try:
        host = fab.host(HOST)
        port = 5400
        for name in args.sections.split(","):
            port += 1
            recs += {"few": few, "failover": failover, "spread": spread, "stall": stall}[name](fab, host, args, port)
    finally:
        fab.close()
    print("\n".join(summary(recs)))
    print("load average %s, %.0f s" % (os.getloadavg(), time.time() - t0))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": recs, "summary": summary(recs)}, f, indent=1)


if __name__ == "__main__":
    main()
