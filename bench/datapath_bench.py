# -*- coding: utf-8 -*-
"""Host datapath benchmark (needs root; builds its own namespaces with prefix mnd, removes them).

1. Aggregate throughput with 16 flows (container -> storage, IPv4 and IPv6 alternately) over 1, 2
   and 4 tbf-limited NICs (200 Mbit/s each), eBPF path: per-NIC byte shares and Jain's index.
2. CPU cost per Gbit of the eBPF path vs the kernel-forwarding path without tbf: machine-wide
   busy jiffies from /proc/stat over the run divided by the Gbit moved (noisy on a shared machine:
   repeat with --repeat and read the spread).
Prints figures; asserts nothing.  usage: bench/datapath_bench.py [--seconds 8] [--repeat 2]
"""
import argparse
import copy
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/e2e/datapath"))
import harness as H  # noqa: E402


def one_nic(data):
    d = copy.deepcopy(data)
    d["name"] = "bench-1nic"
    d["nics"] = d["nics"][:1]
    for s in d["slots"]:
        s["nics"] = s["nics"][:1]
    return d


def busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)   # busy (minus idle, iowait), total


def run(fab, host, dst, flows, seconds, port):
    srv = fab.iperf_server(fab.sto, port)
    b0, c0 = host.nic_bytes("tx"), busy()
    cli = fab.spawn(host.slot_ns(1), ["iperf3", "-c", dst, "-p", str(port), "-P", str(flows), "-t", str(seconds),
                                      "--json"])
    out, dummy = cli.communicate(timeout=seconds + 30)
    srv.wait(10)
    c1, b1 = busy(), host.nic_bytes("tx")
    res = json.loads(out)
    mbit = res["end"]["sum_received"]["bits_per_second"] / 1e6
    sh, total = H.shares(b0, b1)
    return mbit, sh, total, (c1[0] - c0[0], c1[1] - c0[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    plan = H.lab_plan()
    print("== throughput, 16 flows, tbf 200 Mbit/s per NIC, eBPF path ==")
    single = None
    for name in ("bench-1nic", "lab-r1-h1", "lab-r1-h2"):
        # one fabric per host: the 1-NIC variant reuses lab-r1-h2's addresses
        fab = H.Fabric(hosts=(name,), tbf="200mbit", host_data={"bench-1nic": one_nic(plan["lab-r1-h2"])})
        try:
            h = fab.host(name)
            h.core("apply", ebpf=True)
            for i, dst in enumerate((H.STO4, H.STO6)[:args.repeat]):
                mbit, sh, dummy, dummy = run(fab, h, dst, 16, args.seconds, 5401 + i)
                n = len(h.nics)
                if n == 1 and single is None:
                    single = mbit
                print("%d NIC(s) %s: %.0f Mbit/s (%.2f x one NIC)  shares %s  Jain %.4f" % (
                    n, "v4" if dst == H.STO4 else "v6", mbit, mbit / (single or mbit),
                    " ".join("%s=%.1f%%" % (k, 100 * v) for k, v in sorted(sh.items())), H.jain(sh.values())))
        finally:
            fab.close()
    print("== CPU per Gbit without tbf, 4 NICs, 16 flows IPv4 (machine-wide /proc/stat busy jiffies) ==")
    fab = H.Fabric(hosts=("lab-r1-h2",), tbf=None)
    try:
        h = fab.host("lab-r1-h2")
        hz = os.sysconf("SC_CLK_TCK")
        for rep in range(args.repeat):
            for mode in ("ebpf", "kernel"):
                h.core("apply", ebpf=(mode == "ebpf"))
                mbit, dummy, total, (b, t) = run(fab, h, H.STO4, 16, args.seconds, 5501)
                gbit = total * 8 / 1e9
                print("%s run %d: %.0f Mbit/s, %.2f Gbit moved, %.2f CPU-s busy, %.3f CPU-s per Gbit" % (
                    mode, rep + 1, mbit, gbit, b / float(hz), b / float(hz) / gbit))
    finally:
        fab.close()


if __name__ == "__main__":
    main()
