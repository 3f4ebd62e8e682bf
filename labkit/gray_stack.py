# -*- coding: utf-8 -*-
"""Gray-failure helpers for the stack lab (tests/e2e/stack: real FRR ToR with BFD, systemd hosts with
sidecars, BFD responders and the NIC watcher). Used by bench/gray_stack.py.

* faults on a host NIC's ToR port inside the ToR's network namespace (the nft tables of
  plugins/module_utils/lab/faults.py; never on the host NIC: the eBPF tc ingress program runs before
  the netfilter ingress hook there), flap storm by setting the ToR port down/up;
* what the ToR's kernel forwards: is the NIC's next hop in the ToR's BGP route of a task IP;
* the host's egress set as the datapath holds it: eBPF mode the NIC_OUT bit of the pinned mn_nics map
  (bpftool inside the host node's mount namespace), kernel mode the per-NIC table routes (own default
  route, and member of the other tables' fallback multipath route);
* a sampler thread recording one of these every ~20 ms;
* BFD / BGP counters of the ToR and of the host's per-slot responders (soak), and the BFD control
  packets' inter-arrival gaps at both receiving ends (``BfdGapCapture``, labkit/bfd_gaps.py);
* the storage node's TCP senders sampled (``ss -tin``) and their freezes, with the retransmission
  timeouts in them (bench/gray_stack.py --trace-senders: what a receiver stall is made of).
"""
import json
import os
import re
import select
import subprocess
import sys
import threading
import time

from labkit import ensure_collection_importable
from labkit import gray as G
from labkit import stack_lab

ensure_collection_importable()

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as dspec  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import faults  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run_command  # noqa: E402

FAULTS = ("silent", "to_host", "to_tor", "arp_nd", "flap_storm")
BFD_RUN_DIR = "/run/netscale-vipinjector-bfd"   # plugins/module_utils/vipinjector/bfd.py DEFAULTS runtime_dir


def run(argv, check=True, timeout=30, input_text=None):
    """The lab's command runner (module_utils/lab/proc.run_command); failures raise RuntimeError."""
    return run_command(argv, check=check, error=RuntimeError, tail=1000, timeout=timeout, input=input_text)


# ---- faults ------------------------------------------------------------------------------------
def set_fault(lab, host, k, kind, on=True):
    """Install (on) or remove the fault tables of NIC k's ToR port. kind: silent / to_host / to_tor / arp_nd."""
    tor_ns = lab.netns(lab.tor_of(host))
    port = lab.hosts[host]["nics"][k]["tor_port"]
    tables = run(["ip", "netns", "exec", tor_ns, "nft", "list", "tables", "netdev"]).stdout.splitlines()
    existing = [line.split()[2] for line in tables if line.startswith("table netdev")]
    direction = {"silent": "both", "to_host": "to_host", "to_tor": "to_tor", "arp_nd": "both"}[kind]
    add, delete = faults.plan(port, on, direction, "arp_nd" if kind == "arp_nd" else "all", existing)
    for t in delete:
        run(["ip", "netns", "exec", tor_ns, "nft", "delete", "table", "netdev", t])
    if add:
        run(["ip", "netns", "exec", tor_ns, "nft", "-f", "-"], input_text="".join(add[t] for t in sorted(add)))


def clear_faults(lab, host):
    """Every fault table of the host's ToR ports removed and the ports up (cleanup, also after errors)."""
    tor_ns = lab.netns(lab.tor_of(host))
    for n in lab.hosts[host]["nics"]:
        tables = run(["ip", "netns", "exec", tor_ns, "nft", "list", "tables", "netdev"], check=False).stdout.splitlines()
        for t in faults.ours(n["tor_port"], [line.split()[2] for line in tables if line.startswith("table netdev")]):
            run(["ip", "netns", "exec", tor_ns, "nft", "delete", "table", "netdev", t], check=False)
        run(["ip", "-n", tor_ns, "link", "set", n["tor_port"], "up"], check=False)


def flap_storm(lab, host, k, count=10, seconds=5.0):
    """``count`` flaps of NIC k's ToR port within ``seconds`` (carrier loss on the host NIC), ending up."""
    tor_ns = lab.netns(lab.tor_of(host))
    dev = lab.hosts[host]["nics"][k]["tor_port"]
    return faults.run_schedule(faults.flap_schedule(count, seconds),
                               lambda up: run(["ip", "-n", tor_ns, "link", "set", dev, "up" if up else "down"]))


# ---- observed state ----------------------------------------------------------------------------
def tor_state(lab, host, slot=1):
    """{family: {NIC name: its next hop in the ToR kernel's route of the slot's task IP}}; a next hop
    flagged dead/linkdown counts as absent."""
    tor_ns = lab.netns(lab.tor_of(host))
    port_nic = dict((n["tor_port"], n["name"]) for n in lab.hosts[host]["nics"])
    out = {}
    for fam, flag in (("ipv4", "-4"), ("ipv6", "-6")):
        prefix = lab.task_ip(host, fam, slot)
        if "/" not in prefix:
            prefix += "/32" if fam == "ipv4" else "/128"
        routes = json.loads(run(["ip", "-n", tor_ns, flag, "-j", "route", "show", "exact", prefix]).stdout or "[]")
        have = dict((name, False) for name in port_nic.values())
        for r in routes:
            if r.get("protocol") not in (None, "bgp"):
                continue
            for nh in r.get("nexthops") or [r]:
                if nh.get("dev") in port_nic and not set(nh.get("flags", [])) & {"dead", "linkdown"}:
                    have[port_nic[nh["dev"]]] = True
        out[fam] = have
    return out


def tor_in(state, nic):
    """The NIC's next hop in the ToR FIB: True in both families, False in neither, None if they differ."""
    v = set(state[f][nic] for f in state)
    return v.pop() if len(v) == 1 else None


class HostView(object):
    """The host's egress set as its datapath holds it (eBPF: mn_nics pin; kernel: per-NIC tables)."""

    def __init__(self, lab, host, mode):
        self.lab, self.host, self.mode = lab, host, mode
        self.nics = lab.hosts[host]["nics"]
        self.pin = None
        if mode == "ebpf":
            p = run(lab.nsx(host) + ["sh", "-c", "ls -d /sys/fs/bpf/netscale-multinic/v-*/maps/mn_nics"], check=False)
            pins = sorted(p.stdout.split())
            if not pins:
                raise RuntimeError("%s: no pinned mn_nics map (eBPF datapath not loaded?): %s" % (host, p.stderr))
            self.pin = pins[-1]
            # all the node's namespaces (pid and its /proc too: bpftool reads /proc/self/fd links)
            self.prefix = lab.nsx(host)

    def egress_set(self):
        out = {}
        if self.mode == "ebpf":
            import struct
            dump = json.loads(run(self.prefix + ["bpftool", "-j", "map", "dump", "pinned", self.pin]).stdout)
            flags = {}
            for e in dump:
                idx = struct.unpack("<I", bytes(int(x, 16) for x in e["key"]))[0]
                flags[idx] = struct.unpack(health.NIC_VAL, bytes(int(x, 16) for x in e["value"]))[1]
            for n in self.nics:
                out[n["name"]] = not flags.get(n["index"], 0) & health.NIC_OUT
            return out
        routes = json.loads(run(["ip", "-n", self.lab.netns(self.host), "-4", "-j", "route", "show", "table", "all"]).stdout)
        tables = {}
        for r in routes:
            if r.get("dst") == "default" and str(r.get("table", "")).isdigit():
                tables.setdefault(int(r["table"]), []).append(r)
        for n in self.nics:
            own = tables.get(dspec.TABLE_BASE + n["index"], [])
            ok = any(r.get("metric") == dspec.METRIC_OWN and r.get("dev") == n["name"] for r in own)
            other = [m for m in self.nics if m["index"] != n["index"]][0]
            fb = [r for r in tables.get(dspec.TABLE_BASE + other["index"], []) if r.get("metric") == dspec.METRIC_FALLBACK]
            devs = set(nh.get("dev") for r in fb for nh in r.get("nexthops", [r]))
            out[n["name"]] = ok and n["name"] in devs
        return out


# the sampler thread of the datapath harness's gray helpers (a probe every ~20 ms, dated at its end)
Sampler = G.Sampler


def series(samples, key):
    """[(t, value)] of ``key(state)`` at every sample."""
    return [(t, key(s)) for t, s in samples]


def first(ser, t0, want, t1=None):
    """Seconds from t0 to the first sample at/after t0 (and before t1) whose value is ``want``; None if none."""
    for t, v in ser:
        if t >= t0 and (t1 is None or t <= t1) and v == want:
            return t - t0
    return None


def changes(ser, t0, t1):
    """Number of value changes between t0 and t1."""
    n, last = 0, None
    for t, v in ser:
        if t < t0:
            last = v
            continue
        if t > t1:
            break
        if last is not None and v != last:
            n += 1
        last = v
    return n


def gaps(samples, t0, t1):
    """Largest gap (s) between consecutive samples within [t0, t1] (sampling resolution actually reached)."""
    ts = [t for t, dummy in samples if t0 <= t <= t1]
    return max((b - a for a, b in zip(ts, ts[1:])), default=None)


# ---- counters (soak) ---------------------------------------------------------------------------
def tor_bfd_counters(lab, tor):
    out = json.loads(lab.x(tor, ["vtysh", "-c", "show bfd peers counters json"]).stdout or "[]")
    return dict(("%s|%s" % (p.get("peer"), p.get("local", "")), p) for p in out)


def host_bfd_counters(lab, host, slot):
    d = os.path.join(BFD_RUN_DIR, "slot%d" % slot)
    p = lab.x(host, ["vtysh", "--vty_socket", d, "-d", "bfdd", "-c", "show bfd peers counters json"], check=False)
    if p.returncode != 0:
        p = lab.x(host, ["vtysh", "--vty_socket", d, "-c", "show bfd peers counters json"], check=False)
    if p.returncode != 0:
        return None
    try:
        out = json.loads(p.stdout or "[]")
    except ValueError:
        return None
    return dict(("%s|%s" % (x.get("peer"), x.get("local", "")), x) for x in out)


def tor_bgp_summary(lab, tor):
    """{peer: (connectionsEstablished, connectionsDropped, state)} over both families of the ToR's bgpd."""
    js = json.loads(lab.x(tor, ["vtysh", "-c", "show bgp summary json"]).stdout or "{}")
    out = {}
    for fam in js.values():
        if not isinstance(fam, dict):
            continue
        for peer, p in (fam.get("peers") or {}).items():
            out[peer] = (p.get("connectionsEstablished"), p.get("connectionsDropped"), p.get("state"))
    return out


# ---- the storage node's TCP senders (--trace-senders) --------------------------------------------
SENDER_PERIOD = 0.025
SENDER_FIELDS = ("backoff", "rto", "retrans", "lost", "unacked", "cwnd", "bytes_acked")


def parse_ss(text, local_part):
    """{peer: {field: value}} of the established sockets whose local address contains ``local_part``."""
    out = {}
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line[:1] in "\t ":
            continue
        cols = line.split()
        if len(cols) < 4 or local_part not in cols[2]:
            continue
        kv = dict(re.findall(r"(\w+):(\S+)", lines[i + 1]))
        out[cols[3]] = dict((k, kv.get(k, "0" if k == "backoff" else None)) for k in SENDER_FIELDS)
    return out


class SenderSampler(threading.Thread):
    """``ss -tin`` of a node's established sockets every ~25 ms: (monotonic time, parse_ss()) samples."""

    def __init__(self, netns, local_part):
        threading.Thread.__init__(self, daemon=True)
        self.netns, self.local_part = netns, local_part
        self.samples, self.stop = [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            p = subprocess.run(["ip", "netns", "exec", self.netns, "ss", "-Htin", "state", "established"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, check=False)
            self.samples.append((t, parse_ss(p.stdout, self.local_part)))
            time.sleep(max(0.0, SENDER_PERIOD - (time.monotonic() - t)))

    def finish(self):
        self.stop.set()
        self.join(10)
        return self.samples


def freezes(samples, t_fault, top, min_acked=1e6):
    """The ``top`` longest bytes_acked freezes that began from 0.2 s before the fault on, with the state
    changes (backoff, retrans, bytes_acked) of that flow over the freeze, times from the fault."""
    per = {}
    for t, socks in samples:
        for peer, st in socks.items():
            per.setdefault(peer, []).append((t - t_fault, st))
    found = []
    for peer, seq in per.items():
        if int(seq[-1][1].get("bytes_acked") or 0) < min_acked:
            continue   # iperf3's control connection, or a flow that never got going
        best, start, last, prev_t = (0.0, None), None, None, None
        for t, st in seq:
            acked = int(st.get("bytes_acked") or 0)
            if t >= -0.2 and last is not None and acked == last:
                start = prev_t if start is None else start
                if t - start > best[0]:
                    best = (t - start, start)
            else:
                start = None
            last, prev_t = acked, t
        if best[1] is not None:
            found.append((best[0], best[1], peer))
    found.sort(reverse=True)
    out = []
    for length, start, peer in found[:top]:
        steps, key = [], None
        for t, st in per[peer]:
            if start - 0.05 <= t <= start + length + 0.1:
                k = (st.get("backoff"), st.get("retrans"), st.get("bytes_acked"))
                if k != key:
                    steps.append(dict([("t", round(t, 3))] + [(f, st.get(f)) for f in SENDER_FIELDS]))
                key = k
        out.append({"peer": peer, "freeze_s": round(length, 2), "from_s": round(start, 2), "steps": steps})
    return out


WATCHER_UNIT = "netscale-multinic-watcher.service"
WATCHER_CHANGE = re.compile(r"^(\d+(?:\.\d+)?) .*egress set: (\S+) (OUT|back IN) \((.*)\)$")


def parse_watcher_changes(text):
    """[(epoch, nic, "out" | "in", reason)] from ``journalctl -o short-unix`` lines of the NIC watcher."""
    out = []
    for line in text.splitlines():
        m = WATCHER_CHANGE.match(line.strip())
        if m:
            out.append((float(m.group(1)), m.group(2), "out" if m.group(3) == "OUT" else "in", m.group(4)))
    return out


def watcher_changes(lab, host, since_epoch):
    """The NIC watcher's egress-set changes on ``host`` since ``since_epoch`` (its journal). Raises when the
    journal holds no line of the watcher's own start, so a journal that does not capture it is never read
    as 'no change'."""
    text = lab.x(host, ["journalctl", "--no-pager", "-u", WATCHER_UNIT, "-o", "short-unix"]).stdout
    if "gray-failure detection" not in text:
        raise RuntimeError("%s: the journal of %s has no start line of the watcher" % (host, WATCHER_UNIT))
    return [c for c in parse_watcher_changes(text) if c[0] >= since_epoch]


class BfdGapCapture(object):
    """labkit/bfd_gaps.py sniffers for a soak: on the ToR, its ports to ``hosts`` (BFD host -> ToR, after
    the host NIC's queue and the link); on each host, its NICs (BFD ToR -> host, after the ToR port's
    queue). Started before the load, stopped (SIGTERM, by PID) after it; ``stop`` returns the reports."""

    def __init__(self, lab, tor, hosts, keep_ms):
        self.procs = {}
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        where = [("tor", tor, [n["tor_port"] for h in hosts for n in lab.hosts[h]["nics"]])]
        where += [("host", h, [n["name"] for n in lab.hosts[h]["nics"]]) for h in hosts]
        try:
            for side, node, ifaces in where:
                p = subprocess.Popen(["ip", "netns", "exec", lab.netns(node), sys.executable, "-m", "labkit.bfd_gaps",
                                      "--keep-ms", str(keep_ms)] + ifaces, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, universal_newlines=True, env=env, start_new_session=True)
                self.procs[(side, node)] = p
                # a sniffer that neither starts nor fails must not hang the bench
                line = p.stdout.readline().strip() if select.select([p.stdout], [], [], 10.0)[0] else "(no reply in 10 s)"
                if line != "ready":
                    p.kill()
                    raise RuntimeError("BFD gap sniffer on %s did not start: %s %s"
                                       % (node, line, p.stderr.read()[-500:]))
        except Exception:
            self.stop()
            raise

    def stop(self):
        """{"tor": {tor: report}, "host": {host: report}}; a sniffer that printed nothing reports None."""
        out = {"tor": {}, "host": {}}
        for (side, node), p in self.procs.items():
            if p.poll() is None:
                p.terminate()
            try:
                stdout = p.communicate(timeout=10)[0]
            except subprocess.TimeoutExpired:
                p.kill()
                stdout = p.communicate()[0]
            try:
                out[side][node] = json.loads(stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                out[side][node] = None
        self.procs = {}
        return out


def bfd_realtime(lab, tor, hosts, priority):
    """Experiment (bench --bfd-rt): SCHED_RR ``priority`` for the ToR's bfdd (its PID from the lab state)
    and every host's per-slot BFD responder (the unit's MainPID, inside the host's namespaces). Returns
    [(node, what, pid)] as set; raises if one cannot be found, so a run never claims what it did not do."""
    with open(stack_lab.STATE) as f:
        pid = json.load(f)["nodes"][tor]["daemons"]["bfdd"]
    run(["chrt", "-r", "-p", str(priority), str(pid)])
    done = [(tor, "bfdd", pid)]
    for h in hosts:
        for s in lab.hosts[h]["slots"]:
            unit = "netscale-vipinjector-bfd@%d.service" % s["slot"]
            main = lab.x(h, ["systemctl", "show", "-p", "MainPID", "--value", unit]).stdout.strip()
            if not main.isdigit() or main == "0":
                raise RuntimeError("%s: %s has no main PID (%r)" % (h, unit, main))
            lab.x(h, ["chrt", "-r", "-p", str(priority), main])
            done.append((h, unit, int(main)))
    return done
