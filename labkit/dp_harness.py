# -*- coding: utf-8 -*-
"""Namespace harness for the host datapath (prefix mnd): a ToR, a storage node and simulated hosts.

Layout (all in network namespaces created here, removed in close()):
  storage (mnd-<rid>-sto) -- ToR (mnd-<rid>-tor) == host NICs (mnd-<rid>-h<id>, eth0..ethN-1)
The ToR has static ECMP routes for every task IP over the container NIC addresses (what BGP would
install), resolved through the host's proxy ND/ARP; hash policy 1 (L4). Addresses come from the
lab plan (fd00::/8, 198.18.0.0/15). The datapath core runs inside the host namespace through
dp_core_cli.py; bpffs, state dir and sysctl file are per-host under /tmp/mnd-<rid>/.
"""
import json
import os
import shutil
import subprocess
import time
import uuid

import yaml

from labkit import REPO as ROOT, ensure_collection_importable

HERE = os.path.dirname(os.path.abspath(__file__))
ensure_collection_importable()

from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bpf as bpfmod  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import netns as NS  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run_command  # noqa: E402

PY = os.path.join(ROOT, ".venv/bin/python")
BPF_SRC = os.path.join(ROOT, "roles/host_datapath/files/bpf/multinic_datapath.c")
WATCHER = os.path.join(ROOT, "roles/host_datapath/files/netscale-multinic-watcher.py")
STO6, STO4 = "fd00:5::10", "198.19.5.10"
TOR_STO6, TOR_STO4 = "fd00:5::1", "198.19.5.1"


def sh(cmd, check=True, **kw):
    """The lab's command runner (module_utils/lab/proc.run_command); failures raise RuntimeError."""
    return run_command(cmd, check=check, error=RuntimeError, **kw)


def lab_plan():
    with open(os.path.join(ROOT, "inventories/lab/fabric.yml")) as f:
        topo = load_topology(yaml.safe_load(f))
    plan = FabricPlan(topo).allocate()
    return dict((h.name, plan.host_data(h)) for h in topo.hosts)


class Host(object):
    def __init__(self, fab, name, data, idx):
        self.fab = fab
        self.name = name
        self.data = data
        self.ns = "%s-h%d" % (fab.prefix, idx)
        self.tag = "h%d" % idx
        self.dir = os.path.join(fab.dir, self.tag)
        self.bpffs = os.path.join(self.dir, "bpffs")
        self.netns_names = dict((s["slot"], "%s-h%ds%d" % (fab.prefix, idx, s["slot"])) for s in data["slots"])
        self.watcher = None

    @property
    def nics(self):
        return [n["name"] for n in self.data["nics"]]

    def tor_port(self, k):
        return "%s-%d" % (self.tag, k)

    def options(self, **kw):
        o = {"state_dir": os.path.join(self.dir, "state"), "sysctl_file": os.path.join(self.dir, "sysctl.conf"),
             "bpffs_root": self.bpffs, "bpf_object": self.fab.obj}
        o.update(kw)
        return o

    def core(self, action="apply", ebpf=True, host=None, check=True, mptcp=False, numa=None, mptcp_families=None,
             **opts):
        req = {"host": self.data if host is None else host, "netns_names": self.netns_names, "ebpf": ebpf,
               "mptcp": mptcp, "numa": numa, "options": self.options(**opts), "action": action,
               "mptcp_families": mptcp_families}
        path = os.path.join(self.dir, "req.json")
        with open(path, "w") as f:
            json.dump(req, f)
        p = sh(["nsenter", "--net=/run/netns/" + self.ns, PY, os.path.join(HERE, "dp_core_cli.py"), path], check=False)
        try:
            out = json.loads(p.stdout)
        except ValueError:
            raise RuntimeError("dp_core_cli failed: %s %s" % (p.stdout, p.stderr))
        if check and "error" in out:
            raise RuntimeError(out["error"])
        return out

    def slot_ns(self, slot=1):
        return self.netns_names[slot]

    def task_ip(self, fam, slot=1):
        return self.data["slots"][slot - 1]["task_ip"][fam]

    def nic_bytes(self, direction="tx"):
        out = {}
        for l in json.loads(sh(["ip", "-n", self.ns, "-j", "-s", "link", "show"]).stdout):
            if l["ifname"] in self.nics:
                out[l["ifname"]] = l["stats64"][direction]["bytes"]
        return out

    def nstat_forward(self):
        p = sh(["nsenter", "--net=/run/netns/" + self.ns, "nstat", "-a", "-z", "-j",
                "IpForwDatagrams", "Ip6OutForwDatagrams"])
        d = json.loads(p.stdout)["kernel"]
        return d.get("IpForwDatagrams", 0) + d.get("Ip6OutForwDatagrams", 0)

    def bpf_stats(self):
        b = bpfmod.Bpf(bpfmod_runner(), self.bpffs)
        return b.stats()

    def start_watcher(self):
        rt = os.path.join(self.dir, "state", "runtime.json")
        log = open(os.path.join(self.dir, "watcher.log"), "a")
        self.watcher = subprocess.Popen(["nsenter", "--net=/run/netns/" + self.ns, PY, WATCHER, "--runtime", rt],
                                        stdout=log, stderr=subprocess.STDOUT)
        time.sleep(0.5)

    def stop_watcher(self):
        if self.watcher and self.watcher.poll() is None:
            self.watcher.terminate()
            try:
                self.watcher.wait(3)
            except subprocess.TimeoutExpired:
                self.watcher.kill()
        self.watcher = None


def bpfmod_runner():
    from ansible_collections.netscale.multinic.plugins.module_utils.datapath import run
    return run.Runner()


class Fabric(object):
    """hosts: list of lab host names to simulate (e.g. ["lab-r1-h1", "lab-r1-h2"])."""

    def __init__(self, hosts=("lab-r1-h1", "lab-r1-h2"), tbf="200mbit", preassign=("lab-r1-h2",), host_data=None,
                 prefix="mnd"):
        # prefix: name prefix of the namespaces and the temp dir (benchmarks use their own)
        self.rid = uuid.uuid4().hex[:4]
        self.prefix = "%s-%s" % (prefix, self.rid)
        self.dir = "/tmp/%s" % self.prefix
        self.tor = self.prefix + "-tor"
        self.sto = self.prefix + "-sto"
        self.procs = []
        self.mounts = []
        self.namespaces = NS.Namespaces(error=RuntimeError)
        plan = lab_plan()
        plan.update(host_data or {})
        self.hosts = [Host(self, n, plan[n], i + 1) for i, n in enumerate(hosts)]
        os.makedirs(self.dir)
        try:
            self.obj = os.path.join(self.dir, "multinic_datapath.o")
            bpfmod.build_object(BPF_SRC, self.obj)
            self._build(tbf, preassign)
        except Exception:
            self.close()
            raise

    def _ns(self, name):
        self.namespaces.add(name, NS.KEEP_ADDR_ON_DOWN + NS.NO_DAD)

    def _build(self, tbf, preassign):
        self._ns(self.tor)
        self._ns(self.sto)
        sysctl(self.tor, {"net.ipv4.ip_forward": 1, "net.ipv6.conf.all.forwarding": 1,
                          "net.ipv4.fib_multipath_hash_policy": 1, "net.ipv6.fib_multipath_hash_policy": 1,
                          "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
                          "net.ipv6.conf.all.ignore_routes_with_linkdown": 1,
                          "net.ipv4.conf.default.ignore_routes_with_linkdown": 1,
                          "net.ipv6.conf.default.ignore_routes_with_linkdown": 1,
                          "net.ipv4.fib_multipath_use_neigh": 1})
        self.namespaces.veth(self.sto, "sto0", self.tor, "sto", up=False)
        self.namespaces.address(self.sto, "sto0", "%s/64" % STO6)
        self.namespaces.address(self.sto, "sto0", "%s/24" % STO4)
        self.namespaces.address(self.tor, "sto", "%s/64" % TOR_STO6)
        self.namespaces.address(self.tor, "sto", "%s/24" % TOR_STO4)
        ipn(self.sto, "link set sto0 up")
        ipn(self.tor, "link set sto up")
        ipn(self.sto, "route add default via %s" % TOR_STO4)
        ipn(self.sto, "-6 route add default via %s" % TOR_STO6)
        for h in self.hosts:
            os.makedirs(os.path.join(h.dir, "state"))
            os.makedirs(h.bpffs)
            sh(["mount", "-t", "bpf", "bpf", h.bpffs])
            self.mounts.append(h.bpffs)
            self._ns(h.ns)
            for k, nic in enumerate(h.data["nics"]):
                port = h.tor_port(k)
                self.namespaces.veth(h.ns, nic["name"], self.tor, port, up=False)
                ipn(self.tor, "addr add %s/%s dev %s" % (nic["gateway"]["ipv4"], nic["subnet"]["ipv4"].split("/")[1], port))
                ipn(self.tor, "addr add %s/64 dev %s nodad" % (nic["gateway"]["ipv6"], port))
                ipn(self.tor, "link set %s up" % port)
                ipn(h.ns, "link set %s up" % nic["name"])
                if h.name in preassign:
                    ipn(h.ns, "addr add %s/%s dev %s" % (nic["address"]["ipv4"], nic["subnet"]["ipv4"].split("/")[1], nic["name"]))
                    ipn(h.ns, "addr add %s/64 dev %s nodad" % (nic["address"]["ipv6"], nic["name"]))
                if tbf:
                    for ns, dev in ((h.ns, nic["name"]), (self.tor, port)):
                        ipn(ns, "-- tc qdisc add dev %s root tbf rate %s burst 256kb latency 20ms" % (dev, tbf))
            self.tor_routes(h)

    def tor_routes(self, h, skip=()):
        """Static ECMP task-IP routes on the ToR (what BGP installs), minus NIC indexes in skip."""
        for s in h.data["slots"]:
            for fam, f in (("ipv4", "-4"), ("ipv6", "-6")):
                nhs = " ".join("nexthop via %s dev %s" % (sn["address"][fam], h.tor_port(sn["index"]))
                               for sn in s["nics"] if sn["index"] not in skip)
                ipn(self.tor, "%s route replace %s %s" % (f, s["task_ip"][fam], nhs))

    def host(self, name):
        return [h for h in self.hosts if h.name == name][0]

    def spawn(self, ns, argv, **kw):
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen(["nsenter", "--net=/run/netns/" + ns] + argv, universal_newlines=True, **kw)
        self.procs.append(p)
        return p

    def iperf_server(self, ns, port, mptcp=False, interval=1.0):
        # --json: the client's --get-server-output then carries the server's own intervals (receiver_view);
        # its own stdout is not read (a full pipe would block the server before it exits)
        # interval: the client's -i; the server does not learn it from the client, and its intervals are
        # the receiving end's view of an egress run (stalls)
        # mptcp: an unmodified iperf3 made MPTCP-capable by mptcpize (iperf3 3.12 has no --mptcp)
        argv = ["iperf3", "-s", "-p", str(port), "-1", "--json", "-i", str(interval)]
        p = self.spawn(ns, (["mptcpize", "run"] if mptcp else []) + argv, stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        return p

    def mptcp_storage(self, subflows=8):
        """The storage node as an MPTCP peer: it accepts up to ``subflows`` joined subflows per connection
        (the kernel's default limit, 2, would refuse the joins of a 4-NIC host). It has one address, so it
        announces none (no ``signal`` endpoint). Returns the limits as the kernel reports them."""
        if not shutil.which("mptcpize"):
            raise RuntimeError("mptcpize not found (Debian package mptcpize; scripts/setup.sh installs it)")
        sysctl(self.sto, {"net.mptcp.enabled": 1})
        sh(["ip", "-n", self.sto, "mptcp", "limits", "set", "subflows", str(subflows), "add_addr_accepted", "0"])
        return sh(["ip", "-n", self.sto, "mptcp", "limits", "show"]).stdout.strip()

    def close(self):
        for h in self.hosts:
            h.stop_watcher()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        # the slot namespaces the datapath core made, then the harness's own
        self.namespaces.remove(also=[ns for h in self.hosts for ns in h.netns_names.values()])
        for m in self.mounts:
            sh(["umount", m], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def ipn(ns, args):
    argv = ["ip", "-n", ns] + args.split()
    if args.startswith("-- tc"):
        argv = ["tc", "-n", ns] + args.split()[2:]
    sh(argv)


def sysctl(ns, kv):
    NS.sysctl(ns, kv, error=RuntimeError)


def iperf_json(out):
    return json.loads(out)


def receiver_view(result, reverse):
    """The receiving end's iperf3 report: the client's for -R (storage sends), else the server's
    (client run with --get-server-output against a --json server).

    Stalls are measured where the bytes arrive. The sending end's intervals count bytes written
    into the socket, and iperf3 3.12 drives all streams from one thread: on the 2-core lab the
    sender's view showed 0.4-1.0 s "stalls" on dozens of streams in runs with no failure at all,
    while the receiver got bytes on every stream in every 0.2 s interval (2026-11-22, 6 runs)."""
    if reverse:
        return result
    srv = result.get("server_output_json")
    if not srv or not srv.get("intervals"):
        raise AssertionError("iperf3 result has no server intervals (server not run with --json, or the client "
                             "without --get-server-output): %s" % sorted(result))
    mine, theirs = _interval_length(result), _interval_length(srv)
    if mine and theirs and theirs > 1.5 * mine:
        # a server without -i reports every 1 s: a stream's 1 s without bytes would read as exactly the
        # bound and shorter stalls not at all (the tests measured egress so until 2026-11-29)
        raise AssertionError("the receiver (iperf3 server) reported every %.1f s, the client every %.1f s: start "
                             "the server with -i %s so that stalls are measured at the client's resolution"
                             % (theirs, mine, mine))
    return srv


def _interval_length(result):
    """The report's interval (the median length: the last interval of a run is cut short or runs long)."""
    lengths = sorted(iv["streams"][0]["seconds"] for iv in result.get("intervals", []) if iv.get("streams"))
    return lengths[len(lengths) // 2] if lengths else None


def by_end(results):
    """{'egress': run, 'ingress': run (iperf3 -R)} -> (receiver reports, sender reports) per direction.
    Fails when a direction's run is missing (its thread raised), so nothing passes half-measured."""
    assert sorted(results) == ["egress", "ingress"], "an iperf3 run is missing: %s" % sorted(results)
    received = dict((d, receiver_view(r, reverse=(d == "ingress"))) for d, r in results.items())
    sent = dict((d, r.get("server_output_json", {}) if d == "ingress" else r) for d, r in results.items())
    return received, sent


def _duration(result):
    """The run's length as the sender was told (-t), from iperf3 --json; None when absent."""
    return ((result.get("start") or {}).get("test_start") or {}).get("duration") or None


def _zero_runs(result):
    """Per stream, its zero-byte intervals as (start, seconds), time past the run's length left out.

    The receiver's last interval ends when it learns that the test ended, which on a loaded machine
    came 43 ms after the sender stopped (a CI run: 1.043 s "stall" made of a 1.0 s one and the time
    after the last byte could have been sent). Nothing was sent then, so it is not stall time."""
    end_of_run = _duration(result)
    for iv in result.get("intervals", []):
        for s in iv["streams"]:
            seconds = s["seconds"]
            if end_of_run is not None and "start" in s:
                seconds = max(0.0, min(seconds, end_of_run - s["start"]))
            yield s["socket"], s["bytes"], s["start"] if "start" in s else None, seconds


def max_stall(result):
    """Longest run (seconds) of consecutive zero-byte intervals of any stream, from iperf3 --json.

    Rounded to the millisecond: iperf3's interval lengths carry microseconds of timer jitter (five
    empty 0.2 s intervals summed to 1.000019 s in a CI run), while the measure's resolution is the
    interval, so a bound such as "no stall over 1 s" compares whole intervals, not the jitter."""
    worst = 0.0
    runs = {}
    for sid, nbytes, dummy, seconds in _zero_runs(result):
        if nbytes == 0:
            runs[sid] = runs.get(sid, 0.0) + seconds
            worst = max(worst, runs[sid])
        else:
            runs[sid] = 0.0
    return round(worst, 3)


def stalls(result, min_s=0.4):
    """[(start offset s, length s)] of zero-byte runs >= min_s per stream (diagnostics)."""
    out, runs = [], {}
    for sid, nbytes, start, seconds in _zero_runs(result):
        if nbytes == 0:
            st, ln = runs.get(sid, (start, 0.0))
            runs[sid] = (st, ln + seconds)
        else:
            if sid in runs and runs[sid][1] >= min_s:
                out.append((round(runs[sid][0], 1), round(runs[sid][1], 1)))
            runs.pop(sid, None)
    out += [(round(a, 1), round(b, 1)) for a, b in runs.values() if b >= min_s]
    return sorted(out)


def shares(before, after):
    d = dict((k, after[k] - before.get(k, 0)) for k in after)
    tot = float(sum(d.values())) or 1.0
    return dict((k, v / tot) for k, v in d.items()), sum(d.values())


def jain(values):
    values = list(values)
    s = sum(values)
    q = sum(v * v for v in values)
    return (s * s) / (len(values) * q) if q else 0.0
