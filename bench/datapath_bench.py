# -*- coding: utf-8 -*-
"""Host datapath benchmark (needs root; builds its own namespaces with prefix mnd, removes them).

1. Aggregate throughput with 16 flows (container -> storage, IPv4 and IPv6 alternately) over 1, 2
   and 4 tbf-limited NICs (200 Mbit/s each), eBPF path: per-NIC byte shares and Jain's index.
2. Cost of the eBPF path vs the kernel-forwarding path without tbf (4-NIC host, container ->
   storage, IPv4), both modes interleaved in one run (A/B/A/B...) to cancel drift:
   * small packets: 16 UDP flows of 100-byte datagrams (iperf3 -u -l 100) at a fixed offered rate
     -> CPU per forwarded packet, and at an unlimited rate -> packets per second delivered;
   * TSO/GSO super-packets: 16 TCP flows -> CPU per Gbit.
   CPU = cpuacct usage of a cgroup (prefix mnm) holding both iperf3 ends (without
   IRQ_TIME_ACCOUNTING the softirq work of veth/tc/forwarding done in their context is charged to
   them) + the ksoftirqd threads' runtime; the machine-wide /proc/stat busy time is printed too
   (it includes other tenants). Packets = NIC TX packet counters of the host namespace.
Prints figures (median and spread); asserts nothing.
usage: bench/datapath_bench.py [--seconds 5] [--repeat 4] [--sections throughput,cost] [--rate 2M] [--alt-src FILE.c] [--abba]
       [--prefix mnm]
"""
import argparse
import copy
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

# the repository root, for labkit (the lab harness shared with tests/e2e)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from labkit import dp_harness as H  # noqa: E402


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


def bpf_stats_fd():
    """BPF_ENABLE_STATS(BPF_STATS_RUN_TIME): run_time_ns/run_cnt are kept while the fd is open
    (reference counted: does not touch the kernel.bpf_stats_enabled sysctl other users may set)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(16)  # union bpf_attr { .enable_stats.type = BPF_STATS_RUN_TIME (0) }
    fd = libc.syscall(321, 32, attr, 16)  # __NR_bpf (x86_64), BPF_ENABLE_STATS
    return fd if fd >= 0 else None


def bpf_progs(host):
    """{program name: (run_time_ns, run_cnt)} of the tc programs attached in the host namespace."""
    ids = set()
    net = json.loads(H.sh(["nsenter", "--net=/run/netns/" + host.ns, "bpftool", "-j", "net", "show"]).stdout)
    for entry in net:
        for att in entry.get("tc", []):
            ids.add(att["id"])
    out = {}
    for pid in ids:
        js = json.loads(H.sh(["bpftool", "-j", "prog", "show", "id", str(pid)]).stdout)
        out[js["name"]] = (js.get("run_time_ns", 0), js.get("run_cnt", 0))
    return out


def cpu_ns(cg):
    """(cgroup cpuacct usage ns, ksoftirqd runtime ns, machine busy ns)."""
    with open(os.path.join(cg, "cpuacct.usage")) as f:
        use = int(f.read())
    soft = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % pid) as f:
                if not f.read().startswith("ksoftirqd/"):
                    continue
            with open("/proc/%s/schedstat" % pid) as f:
                soft += int(f.read().split()[0])
        except OSError:
            continue
    b, dummy = busy()
    return use, soft, b * 1e9 / os.sysconf("SC_CLK_TCK")


def nic_packets(host):
    out = 0
    for link in json.loads(H.sh(["ip", "-n", host.ns, "-j", "-s", "link", "show"]).stdout):
        if link["ifname"] in host.nics:
            out += link["stats64"]["tx"]["packets"]
    return out


def cg_spawn(fab, cg, ns, argv):
    p = subprocess.Popen(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg, "nsenter", "--net=/run/netns/" + ns]
                         + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    fab.procs.append(p)
    return p


def measured(fab, host, cg, port, client_args, seconds):
    """One iperf3 run with both ends in cgroup cg; returns a dict of deltas."""
    srv = cg_spawn(fab, cg, fab.sto, ["iperf3", "-s", "-p", str(port), "-1"])
    time.sleep(0.3)
    g0 = bpf_progs(host)
    p0, b0, c0, t0 = nic_packets(host), sum(host.nic_bytes("tx").values()), cpu_ns(cg), time.monotonic()
    cli = cg_spawn(fab, cg, host.slot_ns(1), ["iperf3", "-c", H.STO4, "-p", str(port), "-t", str(seconds), "--json"]
                   + client_args)
    out, err = cli.communicate(timeout=seconds + 30)
    srv.wait(10)
    p1, b1, c1, t1 = nic_packets(host), sum(host.nic_bytes("tx").values()), cpu_ns(cg), time.monotonic()
    g1 = bpf_progs(host)
    prog = {}
    for name, (ns1, cnt1) in g1.items():
        ns0, cnt0 = g0.get(name, (0, 0))
        if cnt1 > cnt0:
            prog[name] = (ns1 - ns0) / float(cnt1 - cnt0)
    try:
        res = json.loads(out)
    except ValueError:
        raise RuntimeError("iperf3: %s %s" % (out, err))
    return {"packets": p1 - p0, "bytes": b1 - b0, "cg_ns": c1[0] - c0[0], "soft_ns": c1[1] - c0[1],
            "busy_ns": c1[2] - c0[2], "wall": t1 - t0, "prog_ns": prog, "iperf": res["end"].get("sum_received") or res["end"].get("sum")}


def spread(xs, fmt="%.0f"):
    xs = sorted(xs)
    return (fmt + " [" + fmt + " .. " + fmt + "]") % (statistics.median(xs), xs[0], xs[-1])


BPF_LABEL = "roles/host_datapath/files/bpf/multinic_datapath.c"


def pkt_ns(m):
    return (m["cg_ns"] + m["soft_ns"]) / float(max(1, m["packets"]))


def cost(args):
    load0 = os.getloadavg()
    stats_fd = bpf_stats_fd()
    fab = H.Fabric(hosts=("lab-r1-h2",), tbf=None, prefix=args.prefix)
    cg = "/sys/fs/cgroup/cpuacct/%s" % fab.prefix
    os.mkdir(cg)
    objs = {"ebpf": fab.obj}
    for i, src in enumerate(args.alt_src or []):
        objs["ebpf-alt%d" % (i + 1)] = os.path.join(fab.dir, "alt%d.o" % (i + 1))
        H.bpfmod.build_object(src, objs["ebpf-alt%d" % (i + 1)])
    modes = sorted(objs) + ["kernel"]
    res = dict((mode, {"fixed": [], "max": [], "tcp": []}) for mode in modes)
    order = []
    for rep in range(args.repeat):
        order += modes if rep % 2 == 0 or not args.abba else list(reversed(modes))
    try:
        h = fab.host("lab-r1-h2")
        for i, mode in enumerate(order):
            if mode != "kernel":
                fab.obj = objs[mode]
            h.core("apply", ebpf=(mode != "kernel"))
            time.sleep(0.5)
            r = res[mode]
            m = measured(fab, h, cg, 5601, ["-u", "-l", "100", "-b", args.rate, "-P", "16"], args.seconds)
            r["fixed"].append(m)
            m2 = measured(fab, h, cg, 5602, ["-u", "-l", "100", "-b", "0", "-P", "16"], args.seconds)
            r["max"].append(m2)
            m3 = measured(fab, h, cg, 5603, ["-P", "16"], args.seconds)
            r["tcp"].append(m3)
            sys.stderr.write("  %2d %-10s fixed %.0f kpps %.0f ns/pkt (cg %.0f, ksoftirqd %.0f) prog %s | max %.0f kpps"
                             " %.0f ns/pkt | tcp %.0f Mbit/s %.3f CPU-s/Gbit | load %.2f\n" % (
                                 i + 1, mode, m["packets"] / m["wall"] / 1e3, pkt_ns(m), m["cg_ns"] / max(1, m["packets"]),
                                 m["soft_ns"] / max(1, m["packets"]),
                                 " ".join("%s=%.0fns" % kv for kv in sorted(m["prog_ns"].items())) or "-",
                                 m2["packets"] / m2["wall"] / 1e3, pkt_ns(m2), m3["bytes"] * 8 / m3["wall"] / 1e6,
                                 (m3["cg_ns"] + m3["soft_ns"]) / 1e9 / (m3["bytes"] * 8 / 1e9), os.getloadavg()[0]))
    finally:
        fab.close()
        if stats_fd is not None:
            os.close(stats_fd)
        for dummy in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
    load1 = os.getloadavg()
    print("== eBPF vs kernel forwarding, 4-NIC host, container -> storage IPv4, no tbf; %d runs per mode interleaved"
          " (%s), %d s each ==" % (args.repeat, " ".join(order), args.seconds))
    for mode in sorted(objs):
        print("  %s = %s" % (mode, BPF_LABEL if mode == "ebpf" else args.alt_src[int(mode[len("ebpf-alt"):]) - 1]))
    print("load average: start %.2f %.2f %.2f, end %.2f %.2f %.2f (2 vCPUs shared with other jobs)" % (load0 + load1))
    print("CPU = cpuacct of both iperf3 ends (incl. softirq work in their context) + ksoftirqd, per NIC TX packet")
    out = {}
    for mode in modes:
        r = res[mode]
        out[mode] = {
            "fixed_ns_per_pkt": [pkt_ns(m) for m in r["fixed"]],
            "fixed_machine_ns_per_pkt": [m["busy_ns"] / max(1, m["packets"]) for m in r["fixed"]],
            "fixed_kpps": [m["packets"] / m["wall"] / 1e3 for m in r["fixed"]],
            "max_kpps": [m["packets"] / m["wall"] / 1e3 for m in r["max"]],
            "max_ns_per_pkt": [pkt_ns(m) for m in r["max"]],
            "tcp_cpu_s_per_gbit": [(m["cg_ns"] + m["soft_ns"]) / 1e9 / (m["bytes"] * 8 / 1e9) for m in r["tcp"]],
            "tcp_mbit": [m["bytes"] * 8 / m["wall"] / 1e6 for m in r["tcp"]],
            "prog_ns": [m["prog_ns"] for m in r["fixed"]],
        }
        o = out[mode]
        print("%-10s UDP 100 B, %s/flow x16 : %s kpps, CPU %s ns/packet (machine-wide %s)" % (
            mode, args.rate, spread(o["fixed_kpps"], "%.1f"), spread(o["fixed_ns_per_pkt"]),
            spread(o["fixed_machine_ns_per_pkt"])))
        print("%-10s UDP 100 B, unlimited x16: %s kpps delivered, CPU %s ns/packet" % (
            mode, spread(o["max_kpps"], "%.1f"), spread(o["max_ns_per_pkt"])))
        print("%-10s TCP x16 (TSO/GSO)       : %s Mbit/s, %s CPU-s per Gbit" % (
            mode, spread(o["tcp_mbit"]), spread(o["tcp_cpu_s_per_gbit"], "%.3f")))
        for name in sorted(set(k for d in o["prog_ns"] for k in d)):
            print("%-10s   %s run time: %s ns per packet (BPF run_time_ns/run_cnt)" % (
                mode, name, spread([d[name] for d in o["prog_ns"] if name in d])))
    med = dict((k, dict((m, statistics.median(out[m][k])) for m in modes)) for k in out["kernel"] if k != "prog_ns")
    for mode in sorted(objs):
        print("%s vs kernel (medians): CPU/packet %+.1f%%, pps unlimited %+.1f%%, CPU/Gbit TCP %+.1f%%" % (
            mode, 100.0 * (med["fixed_ns_per_pkt"][mode] / med["fixed_ns_per_pkt"]["kernel"] - 1),
            100.0 * (med["max_kpps"][mode] / med["max_kpps"]["kernel"] - 1),
            100.0 * (med["tcp_cpu_s_per_gbit"][mode] / med["tcp_cpu_s_per_gbit"]["kernel"] - 1)))
    # paired per round (every round runs each mode once, close in time): robust to the drift of other tenants
    for mode in sorted(objs):
        for key, label in (("max_ns_per_pkt", "CPU/packet unlimited"), ("fixed_ns_per_pkt", "CPU/packet fixed rate"),
                           ("tcp_cpu_s_per_gbit", "CPU/Gbit TCP")):
            d = [100.0 * (x / y - 1) for x, y in zip(out[mode][key], out["kernel"][key])]
            print("%s vs kernel, paired per round: %s %+.1f%% [%+.1f .. %+.1f], lower in %d of %d rounds" % (
                mode, label, statistics.median(d), min(d), max(d), sum(1 for x in d if x < 0), len(d)))
    print(json.dumps({"load": [load0, load1], "order": order, "results": out}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=4, help="runs per mode (cost) / address families (throughput)")
    ap.add_argument("--sections", default="throughput,cost")
    ap.add_argument("--rate", default="2M", help="iperf3 -b per UDP flow for the fixed-rate run (16 flows)")
    ap.add_argument("--abba", action="store_true", help="order A/B/B/A... instead of A/B/A/B")
    ap.add_argument("--alt-src", action="append", help="another BPF C source to compare (mode ebpf-altN)")
    ap.add_argument("--prefix", default="mnm", help="name prefix of the namespaces, temp dir and cgroup")
    args = ap.parse_args()
    sections = args.sections.split(",")
    if "throughput" in sections:
        throughput(args)
    if "cost" in sections:
        cost(args)


def throughput(args):
    plan = H.lab_plan()
    print("== throughput, 16 flows, tbf 200 Mbit/s per NIC, eBPF path ==")
    single = None
    for name in ("bench-1nic", "lab-r1-h1", "lab-r1-h2"):
        # one fabric per host: the 1-NIC variant reuses lab-r1-h2's addresses
        fab = H.Fabric(hosts=(name,), tbf="200mbit", host_data={"bench-1nic": one_nic(plan["lab-r1-h2"])},
                       prefix=args.prefix)
        try:
            h = fab.host(name)
            h.core("apply", ebpf=True)
            for i, dst in enumerate((H.STO4, H.STO6)[:min(2, args.repeat)]):
                mbit, sh, dummy, dummy = run(fab, h, dst, 16, args.seconds, 5401 + i)
                n = len(h.nics)
                if n == 1 and single is None:
                    single = mbit
                print("%d NIC(s) %s: %.0f Mbit/s (%.2f x one NIC)  shares %s  Jain %.4f" % (
                    n, "v4" if dst == H.STO4 else "v6", mbit, mbit / (single or mbit),
                    " ".join("%s=%.1f%%" % (k, 100 * v) for k, v in sorted(sh.items())), H.jain(sh.values())))
        finally:
            fab.close()


if __name__ == "__main__":
    main()
