# -*- coding: utf-8 -*-
"""Automatic remediation on the lab (issue 30 item 5): monitoring case -> the collection's rulebook
(netscale.multinic.remediate, started by scripts/eda-rulebook.sh) -> the real playbooks/drain.yml and undrain.yml,
under load. A bench, not a CI test: it prints figures and writes them to JSON; it asserts nothing.

Lab: as bench/monitor_lab_matrix.py builds it (its functions, imported): inventories/lab/fabric.yml by
playbooks/lab.yml (Prometheus, FRR exporters, live correlator writing the case file), site.yml in eBPF mode,
the agents by monitor.yml; torn down by playbooks/lab.yml, also on Ctrl-C and SIGTERM. What this bench starts
(iperf3, the counter samplers, each rulebook) is stopped by its own PID (the rulebook by eda-rulebook.sh stop,
which signals the process group of the PID it recorded). Needs root. Run it under the lab lock:
flock /work/lab.lock .venv/bin/python bench/remediation_lab_chain.py [--parts a,b,c,d,e]

Settings chosen for the lab, each an existing option (docs/remediation.md, "Remediation on the lab"):
- the correlator is restarted (monitor_lab_matrix.restart_correlator) with its option --options
  '{"quiet": QUIET}' (120 s; production default 600): a case closes 120 s after its last detection;
- the rulebook's clean window netscale_eda_clean_window 60 s (default 300) and a refused undrain queued again after
  30 s (netscale_eda_undrain_retry, default 300 s), through eda-rulebook.sh --set.
With the defaults, mitigation -> repair is longer by about (600 - 120) + (300 - 60) s.

Parts (--parts, in this order):
  a  the chain, on the real correlator's case file, rulebook in mode auto: --percent (2) % random loss both ways on
     --nic (lab-r2-h1:eth1) under 32 iperf3 flows each way between slot 1 of that host and the storage node
     (monitor_lab_matrix.Load, 0.1 s intervals at the receiving end: the server's for egress, the client's for
     ingress) -> case opened -> drain journaled, ToR ECMP width of slot 1's task IPs N-1 (polled every 0.1 s) ->
     --hold-drained s with the fault on -> fault removed -> case closed -> undrain after the clean window -> width N.
     Per-NIC shares at the receiving end (the host's NIC rx for ingress, the ToR's host ports rx for egress,
     /proc/net/dev of each namespace sampled every 0.1 s) before, during and after the drain; the longest
     zero-byte run of any flow (receiver stall) around the drain, before the fault and while the fault was on.
  b  a 2-NIC host (--small-host, lab-r1-h1): its NIC 0 drained through the rulebook, then its NIC 1 -> refused by
     drain.yml's blast-radius budget; the ToR's routes of the host and its marker before and after compared.
  c  mode approve: a case -> pending, ToR width sampled for --approve-wait s (unchanged) -> playbooks/eda_approve.yml
     -> drained (time approval -> width N-1).
  d  a drain while a rollout holds the fabric's lease (taken as rollout.yml takes it: the lease core,
     rollout/lease.acquire, holder this process) -> refused, nothing changed; the lease released after.
  e  a storm: ten NIC case events in 10 s across rack lab-r2 (its 8 NICs) and lab-r1-h2 (2 NICs), one zone ->
     no more drains than the pre-queue budget (3 per zone per hour, the default), the rest refused and reported.
Parts b-e write case events (the contract's JSON lines) into their own rulebook's case file: ten real NIC faults in
one rack would rightly be merged by the correlator into wider cases (host, ToR), and a second real fault on a 2-NIC
host would give a host case; the drains they start are the real drain.yml on the real lab. Each part has its own
rulebook state and reports directory (the drain journal and the lease: the budgets of one part do not count
another's drains); every drain a part made is undone by undrain.yml (drain_undrain_without_clean_window=true, the
operator's consent) before the next part. Snapshots (case_snapshot.yml on each open case) run in part a as in
production; parts b-e turn them off (netscale_eda_snapshot false) to keep the lab lock short.

--line-rate RATE (e.g. 200mbit; off by default, so the runs without it stay reproducible): a tbf line rate on every
NIC of part a's load host, both ways (the host NIC: host -> ToR; its ToR port: ToR -> host), by the lab module_utils'
lab_link speed (plugins/module_utils/lab/ops.set_speed: tbf rate R burst 256kb latency 20ms with the control band
for BFD, ARP and ICMPv6, the shaping tests/e2e/remediate/test_drain_lab.py's ``lab.tbf(h, "200mbit")`` builds),
set once the lab is up and removed at the end (also on an error, Ctrl-C or SIGTERM) before the teardown. Then the
host's capacity is N x RATE each way and part a reports the throughput received before, during and after the drain
against (N-1)/N (``line_rate``): the iperf3 bytes at the receiving end (the storage node's server for egress, the
host's client for ingress; 0.1 s intervals inside each window) and the receiving NICs' counters (storage eth0 rx,
the host NICs' rx) beside them.

Output: --json (default docs/bench/remediation-lab-<UTC stamp>.json), rewritten after every part, and a summary.
"""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".build"))
sys.path.insert(0, REPO)

from labkit import dp_harness as DH  # noqa: E402  # pylint: disable=wrong-import-position
from ansible_collections.netscale.multinic.bench import monitor_lab_matrix as MM  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import faults as F  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops as LO  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import ttr  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import lease as LEASE  # noqa: E402

WORK = "/tmp/remediation-chain"
MM.WORK = WORK          # monitor_lab_matrix's playbook logs go here
EDA = os.path.join(REPO, "scripts", "eda-rulebook.sh")
INVENTORY_DIR = os.path.join(REPO, "inventories", "lab")
QUIET = 120.0
CLEAN_WINDOW = 60
RETRY = {"interval": 30, "attempts": 20}
FABRIC = "lab"
PARTS = "abcde"
MARKER = "/var/lib/netscale-multinic/admin-drain.json"
log = MM.log


# ---- the plan's view of the lab: slot 1's task IPs, the ToR of a host, its ToR ports -------------------------
class Plan(object):
    def __init__(self, topology):
        import yaml  # pylint: disable=import-outside-toplevel
        with open(topology, encoding="utf-8") as f:
            topo = load_topology(yaml.safe_load(f), topology)
        plan = FabricPlan(topo).allocate()
        self.hosts = dict((h.name, plan.host_data(h)) for h in topo.hosts)
        self.zone = dict((h.name, self.hosts[h.name].get("zone")) for h in topo.hosts)

    def tor(self, host):
        return self.hosts[host]["tor"]

    def task_ips(self, host, slot=1):
        return dict((fam, self.hosts[host]["slots"][slot - 1]["task_ip"][fam].split("/")[0]) for fam in ("ipv4", "ipv6"))

    def nics(self, host):
        return [n["name"] for n in self.hosts[host]["nics"]]

    def tor_ports(self, host):
        return dict((n["tor_port"], n["name"]) for n in self.hosts[host]["nics"])


def tor_routes(plan, host):
    """{family: sorted next hops (gateway@dev)} of slot 1's task IPs in the ToR kernel's BGP routes."""
    ns = netns_name(plan.tor(host))
    out = {}
    for fam, flag in (("ipv4", "-4"), ("ipv6", "-6")):
        ip = plan.task_ips(host)[fam]
        hops = set()
        for r in json.loads(MM.sh(["ip", "-n", ns, flag, "-j", "route", "show", "proto", "bgp"]).stdout or "[]"):
            if r.get("dst") != ip:
                continue
            nhs = r.get("nexthops") or [{"gateway": r.get("gateway"), "dev": r.get("dev")}]
            hops.update("%s@%s" % (n.get("gateway"), n.get("dev")) for n in nhs
                        if "linkdown" not in n.get("flags", []) and "dead" not in n.get("flags", []))
        out[fam] = sorted(hops)
    return out


def width(plan, host):
    r = tor_routes(plan, host)
    return min(len(r["ipv4"]), len(r["ipv6"]))


def wait_width(plan, host, want, timeout, step=0.1):
    """Poll the ToR every ``step`` s until slot 1's width is ``want`` in both families; the time seen, or None."""
    end = time.time() + timeout
    while time.time() < end:
        if MM.safe(lambda: width(plan, host)) == want:
            return time.time()
        time.sleep(step)
    return None


class WidthWatch(threading.Thread):
    """Slot 1's ToR width of ``host`` every 0.1 s for the whole part: the transitions [(time, width)], so that a
    width change the fault made itself (a BFD session lost under the loss) is told apart from the drain's."""

    def __init__(self, plan, host):
        threading.Thread.__init__(self, daemon=True)
        self.plan, self.host = plan, host
        self.samples = []
        self.stop_ev = threading.Event()

    def run(self):
        while not self.stop_ev.is_set():
            w = MM.safe(lambda: width(self.plan, self.host))
            self.samples.append((time.time(), w))
            self.stop_ev.wait(0.1)

    def transitions(self):
        out, last = [], object()
        for t, w in self.samples:
            if w != last:
                out.append((round(t, 2), w))
                last = w
        return out

    def first(self, want, since):
        """The first sample at or after ``since`` with width ``want`` (None: not seen)."""
        return next((t for t, w in self.samples if t >= since and w == want), None)


def drop_counters(plan, host):
    """{ns/dev: [rx dropped, tx dropped, qdisc drops]} of the host's NICs and their ToR ports: what the monitoring
    agent's nic_drops reads (the link's counters) beside what a tbf dropped (its qdisc's)."""
    out = {}
    for ns, devs in ((netns_name(host), plan.nics(host)), (netns_name(plan.tor(host)), list(plan.tor_ports(host)))):
        for li in json.loads(MM.sh(["ip", "-n", ns, "-j", "-s", "link", "show"]).stdout or "[]"):
            if li["ifname"] in devs:
                q = json.loads(MM.sh(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", li["ifname"]], check=False).stdout
                               or "[]")
                root = next((x for x in q if x.get("root")), {})
                out["%s/%s" % (ns, li["ifname"])] = [li["stats64"]["rx"]["dropped"], li["stats64"]["tx"]["dropped"],
                                                     root.get("drops", 0)]
    return out


def drop_delta(c0, c1):
    return dict((k, [b - a for a, b in zip(c0[k], c1[k])]) for k in sorted(c0) if k in c1)


def marker(host):
    p = MM.in_host(host, ["cat", MARKER], check=False)
    return p.stdout if p.returncode == 0 else None


# ---- per-NIC counters, sampled every 0.1 s inside a namespace --------------------------------------------------
SAMPLER = ("import sys, time\n"
           "while True:\n"
           "    t = time.time()\n"
           "    with open('/proc/net/dev') as f:\n"
           "        sys.stdout.write('%r %s\\n' % (t, ' '.join(l.replace(':', ' ').split()[0] + ':' + l.replace(':', ' ')"
           ".split()[1] + ':' + l.replace(':', ' ').split()[9] for l in f.readlines()[2:])))\n"
           "    sys.stdout.flush()\n"
           "    time.sleep(max(0.0, 0.1 - (time.time() - t)))\n")


class Sampler(threading.Thread):
    """/proc/net/dev of namespace ``ns`` every 0.1 s: [(time, {dev: (rx bytes, tx bytes)})] of ``devs``."""

    def __init__(self, ns, devs):
        threading.Thread.__init__(self, daemon=True)
        self.devs = set(devs)
        self.samples = []
        self.proc = subprocess.Popen(["nsenter", "--net=/run/netns/%s" % ns, "--", "/usr/bin/python3", "-c", SAMPLER],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        MM.STARTED.append(self.proc)

    def run(self):
        for line in self.proc.stdout:
            parts = line.split()
            try:
                t = float(parts[0])
                row = {}
                for item in parts[1:]:
                    dev, rx, tx = item.split(":")
                    if dev in self.devs:
                        row[dev] = (int(rx), int(tx))
            except (ValueError, IndexError):
                continue
            self.samples.append((t, row))

    def at(self, t):
        """The last sample at or before ``t``."""
        best = None
        for s in self.samples:
            if s[0] > t:
                break
            best = s
        return best

    def gaps(self, t0, t1):
        ts = [s[0] for s in self.samples if t0 <= s[0] <= t1]
        return round(max((b - a for a, b in zip(ts, ts[1:])), default=0.0), 3)


def shares(sampler, names, t0, t1, field):
    """Per-NIC share and total Mbit/s of ``field`` (0 rx, 1 tx) between t0 and t1 (``names``: dev -> NIC name)."""
    a, b = sampler.at(t0), sampler.at(t1)
    if not a or not b or b[0] <= a[0]:
        return None
    d = dict((names[dev], b[1][dev][field] - a[1][dev][field]) for dev in names if dev in a[1] and dev in b[1])
    tot = float(sum(d.values()))
    return {"shares": dict((k, round(v / tot, 3) if tot else None) for k, v in sorted(d.items())),
            "total_mbit_per_s": round(tot * 8 / (b[0] - a[0]) / 1e6, 1), "seconds": round(b[0] - a[0], 1),
            "longest_sample_gap_s": sampler.gaps(t0, t1)}


def longest_zero_run(sampler, dev, t0, t1, field):
    """Longest stretch (s) in [t0, t1] during which ``dev``'s counter did not move (a whole-NIC stall)."""
    pts = [(t, row[dev][field]) for t, row in sampler.samples if t0 <= t <= t1 and dev in row]
    worst, since = 0.0, None
    for (ta, va), (tb, vb) in zip(pts, pts[1:]):
        if vb == va:
            since = ta if since is None else since
            worst = max(worst, tb - since)
        else:
            since = None
    return round(worst, 2)


# ---- the load, with per-flow receiver stalls ------------------------------------------------------------------
class ChainLoad(MM.Load):
    """monitor_lab_matrix.Load with 0.1 s intervals at both ends; each run keeps the zero-byte runs (>= 0.3 s) of
    every flow at the receiving end, with absolute start times (the run's start plus the interval's offset:
    within ~0.5 s, the connection set-up)."""

    @staticmethod
    def result(direction, res, t0):
        out = MM.Load.result(direction, res, t0)
        try:
            view = DH.receiver_view(res, reverse=(direction == "ingress"))
        except AssertionError as e:
            out["stall_error"] = str(e)[:200]
            return out
        out["max_stall_s"] = round(DH.max_stall(view), 2)
        out["stalls"] = [(round(t0 + off, 1), ln) for off, ln in DH.stalls(view, min_s=0.3)][:200]
        out["intervals"] = len(view.get("intervals", []))
        # the receiving end's bytes of all flows per interval: (absolute start, seconds, bytes); kept in memory only
        out["series"] = [(t0 + iv["sum"]["start"], iv["sum"]["end"] - iv["sum"]["start"], iv["sum"]["bytes"])
                         for iv in view.get("intervals", []) if iv.get("sum")]
        return out


def stalls_between(load, t0, t1):
    """Per direction: the longest receiver stall starting in [t0, t1] (of any flow), the count of stalls >= 1 s, and
    the runs' coverage of the window (a stall in a gap between two runs is not seen)."""
    out = {}
    for d in ("egress", "ingress"):
        found = []
        covered = 0.0
        for r in load.between(t0, t1):
            rec = r.get(d) or {}
            found += [s for s in rec.get("stalls", []) if t0 <= s[0] <= t1]
            if "intervals" in rec:
                covered += max(0.0, min(t1, r["start"] + rec["intervals"] * 0.1) - max(t0, r["start"]))
        out[d] = {"longest_s": max((ln for dummy, ln in found), default=0.0), "over_1s": sum(1 for s in found if s[1] > 1.0),
                  "stalls_over_0_3s": len(found), "covered_s": round(covered, 1), "window_s": round(t1 - t0, 1)}
    return out


def goodput_between(load, t0, t1):
    """Per direction: Mbit/s received by iperf3 at the receiving end (all flows) over the 0.1 s intervals lying
    inside [t0, t1], and the seconds those intervals cover (the gaps between two runs are not counted)."""
    out = {}
    for d in ("egress", "ingress"):
        nbytes, secs = 0, 0.0
        for r in load.between(t0, t1):
            for start, length, b in (r.get(d) or {}).get("series", []):
                if start >= t0 and start + length <= t1:
                    nbytes += b
                    secs += length
        out[d] = {"mbit_per_s": round(nbytes * 8 / secs / 1e6, 1) if secs else None, "covered_s": round(secs, 1),
                  "window_s": round(t1 - t0, 1)}
    return out


# ---- the line rate (--line-rate) -------------------------------------------------------------------------------
def set_line_rate(lab, host, rate):
    """tbf ``rate`` (None: removed) on every NIC of ``host``, both ways, by the lab's lab_link speed (ops.set_speed:
    the host NIC and its ToR port); the actions taken."""
    done = []
    for nic in [n["name"] for h in lab.spec.hosts if h["name"] == host for n in h["nics"]]:
        done += LO.set_speed(lab, host, nic, rate, direction="both")["actions"]
    return done


def line_rate_figures(res, rate_bits, n):
    """The (N-1)/N comparison of part a from its windows' throughput (``res["throughput"]``) and shares."""
    tp = res.get("throughput") or {}
    out = {"rate_mbit_per_s": rate_bits / 1e6, "nics": n, "capacity_mbit_per_s": rate_bits * n / 1e6,
           "capacity_drained_mbit_per_s": rate_bits * (n - 1) / 1e6, "expected_ratio": round((n - 1.0) / n, 3)}
    for d in ("egress", "ingress"):
        row = {}
        for src in ("iperf3", "counters"):
            vals = dict((w, ((tp.get(w) or {}).get(src) or {}).get(d, {}).get("mbit_per_s")) for w in ("before", "drained", "after"))
            row[src] = dict(vals)
            if vals["before"] and vals["drained"] is not None:
                row[src]["ratio_drained_to_before"] = round(vals["drained"] / vals["before"], 3)
            if vals["before"] and vals["after"] is not None:
                row[src]["ratio_after_to_before"] = round(vals["after"] / vals["before"], 3)
            for w in ("before", "drained", "after"):
                cap = rate_bits * ((n - 1) if w == "drained" else n) / 1e6
                if vals[w] is not None:
                    row[src]["%s_of_capacity" % w] = round(vals[w] / cap, 3)
        side = "ingress" if d == "ingress" else "egress"
        row["shares"] = dict((w, ((res.get(key) or {}).get(side) or {}).get("shares"))
                             for w, key in (("before", "before"), ("drained", "during"), ("after", "after")))
        out[d] = row
    return out


# ---- the rulebook ---------------------------------------------------------------------------------------------
class Rulebook(object):
    def __init__(self, name, mode, cases=None, snapshot=True, budget=None):
        # one directory per run of the bench: a rulebook's saved offset and journals never outlive their lab (a
        # stale offset on the new lab's case file reads it from the start, as a rotated file)
        self.dir = os.path.join(WORK, STAMP, "eda-%s" % name)
        self.state = os.path.join(self.dir, "state")
        self.reports = os.path.join(self.dir, "reports")
        self.cases = cases or os.path.join(self.dir, "cases.jsonl")
        self.mode, self.snapshot, self.budget = mode, snapshot, budget
        self.running = False

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        if self.cases.startswith(self.dir):
            open(self.cases, "a", encoding="utf-8").close()
        more = {"netscale_eda_clean_window": CLEAN_WINDOW, "netscale_eda_undrain_retry": RETRY}
        if not self.snapshot:
            more["netscale_eda_snapshot"] = False
        argv = ["bash", EDA, "start", "--cases", self.cases, "--state", self.state, "--inventory", INVENTORY_DIR,
                "--mode", self.mode, "--reports", self.reports, "--set", json.dumps(more)]
        if self.budget:
            argv += ["--budget", json.dumps(self.budget)]
        t0 = time.time()
        p = subprocess.run(argv, cwd=REPO, env=MM.env(), capture_output=True, text=True, timeout=180, check=False)
        self.running = os.path.exists(os.path.join(self.state, "rulebook.pid"))
        if p.returncode != 0:
            raise RuntimeError("eda-rulebook.sh start (%s): rc=%d %s %s"
                               % (self.dir, p.returncode, p.stdout[-1500:], p.stderr[-1500:]))
        log("rulebook %s (mode %s) started in %.1f s: %s" % (self.dir, self.mode, time.time() - t0, p.stdout.strip()))
        return round(time.time() - t0, 1)

    def stop(self):
        if not self.running:
            return None
        p = subprocess.run(["bash", EDA, "stop", "--state", self.state], cwd=REPO, env=MM.env(), capture_output=True,
                           text=True, timeout=60, check=False)
        self.running = False
        return p.stdout.strip()

    def status(self):
        return eda_journal.summary(self.journal())

    def journal(self):
        return eda_journal.read(os.path.join(self.state, eda_journal.JOURNAL))

    def write(self, *cases):
        with open(self.cases, "a", encoding="utf-8") as f:
            for c in cases:
                f.write(json.dumps({"case": c}, sort_keys=True) + "\n")

    def decisions(self, case):
        return [r for r in self.journal() if r.get("type") == "decision" and r.get("case") == case]

    def request(self, req):
        return eda_journal.runs(self.journal()).get(req, {})

    def run_done(self, req):
        """The request's last run record once it finished (succeeded or failed), else None."""
        r = self.request(req)
        fin = [x for x in r.get("runs", []) if x["status"] in ("succeeded", "failed")]
        return fin[-1] if fin else None

    def run_time(self, req, status):
        ts = [x["time"] for x in self.request(req).get("runs", []) if x["status"] == status]
        return ts[0] if ts else None

    def drain_records(self):
        """Every record of the part's drain journal(s) (<reports>/drain/<fabric>/drain-journal.jsonl)."""
        out = []
        for path in glob.glob(os.path.join(self.reports, "drain", "*", "drain-journal.jsonl")):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
        return sorted(out, key=lambda r: r.get("time") or 0)

    def drain_decisions(self):
        keep = ("type", "time", "action", "element", "allowed", "ok", "reasons", "automatic", "case")
        return [dict((k, rec.get(k)) for k in keep) for rec in self.drain_records()
                if rec.get("type") in ("decision", "outcome")]

    def log_has(self, text):
        try:
            with open(os.path.join(self.state, "rulebook.log"), encoding="utf-8", errors="replace") as f:
                return text in f.read()
        except OSError:
            return False


def nic_case(plan, cid, host, k, state="open"):
    """A case event of the correlator's shape (monitor.correlate: scope nic = the plan index, nic_number 1-based)."""
    return {"id": cid, "state": state, "root_cause": "NIC %d of %s (bench-written case)" % (k + 1, host),
            "scope": {"kind": "nic", "id": "%s/nic%d" % (host, k + 1), "host": host, "nic": k, "nic_number": k + 1,
                      "tor": plan.tor(host), "spine": None, "zone": plan.zone[host]},
            "detections": 3, "start": round(time.time() - 60, 3), "end": None, "repeats": 0,
            "opened_at": round(time.time(), 3)}


def undrain_by_hand(rb, host, k):
    """undrain.yml as an operator runs it, on the part's own drain journal and lease (skipping the clean window:
    the operator's consent, journaled)."""
    t0 = time.time()
    p, dummy = MM.playbook("-i", MM.TOPOLOGY, os.path.join(REPO, "playbooks", "undrain.yml"), "-e", "drain_scope=nic",
                           "-e", "drain_host=%s" % host, "-e", "drain_nic=%d" % k,
                           "-e", "drain_journal_dir=%s/drain" % rb.reports, "-e", "rollout_report_root=%s" % rb.reports,
                           "-e", "drain_undrain_without_clean_window=true", check=False)
    return {"element": "nic:%s:%d" % (host, k), "rc": p.returncode, "seconds": round(time.time() - t0, 1)}


def wait_run(rb, req, timeout=300):
    return MM.wait_for(lambda: rb.run_done(req), timeout, 0.5)


# ---- part a: the chain ----------------------------------------------------------------------------------------
def part_a(lab, plan, a, samplers, res):
    """The chain; ``samplers``: (host namespace, ToR namespace) counters."""
    watch = WidthWatch(plan, a.nic.split(":")[0])
    watch.start()
    try:
        return chain(lab, plan, a, samplers, res, watch)
    finally:
        watch.stop_ev.set()
        res["width_transitions"] = watch.transitions()


def chain(lab, plan, a, samplers, res, watch):  # pylint: disable=too-many-locals,too-many-statements
    host, nicname = a.nic.split(":")
    dummy, nref = MM.host_nic(lab, a.nic)
    k = nref["index"]
    n = len(plan.nics(host))
    hs, ts = samplers
    host_names = dict((d, d) for d in plan.nics(host))
    tor_names = plan.tor_ports(host)
    res.update(host=host, nic=nicname, nic_index=k, nics=n, quiet_s=QUIET, clean_window_s=CLEAN_WINDOW,
               percent=a.percent)
    res["clean_wait_s"] = MM.wait_clean()
    res["correlator_restart"] = MM.restart_correlator(lab, {"quiet": QUIET})
    rb = Rulebook("a", "auto", cases=MM.CASE_FILE, snapshot=True)
    RULEBOOKS.append(rb)
    res["rulebook_start_s"] = rb.start()
    res["width_before"] = width(plan, host)
    time.sleep(5)
    d0 = MM.safe(lambda: drop_counters(plan, host))
    tb0 = time.time()
    time.sleep(a.baseline)
    tb1 = time.time()
    d1 = MM.safe(lambda: drop_counters(plan, host))
    res["drops_in_baseline"] = {"columns": ["link rx dropped", "link tx dropped", "root qdisc drops"],
                                "delta": drop_delta(d0, d1) if d0 and d1 else None}
    res["before"] = {"ingress": shares(hs, host_names, tb0, tb1, 0), "egress": shares(ts, tor_names, tb0, tb1, 0)}
    WINDOWS["before"] = (tb0, tb1)
    log("a: before: %s" % json.dumps(res["before"]))

    def heal():
        return F.set_fault(lab, host, nicname, False, "both", "random", percent=a.percent)
    MM.CLEANUP.append(heal)
    t_fault = time.time()
    res["fault_at"] = round(t_fault, 2)
    F.set_fault(lab, host, nicname, True, "both", "random", percent=a.percent)
    log("a: %d %% random loss both ways on %s %s" % (a.percent, host, nicname))
    scope_id = "%s/nic%d" % (host, k + 1)
    hit = MM.wait_for(lambda: [c for c in MM.cases_since(t_fault) if c["kind"] == "nic" and c["scope"]["id"] == scope_id]
                      or None, a.open_timeout, 1.0)
    others = [(c["id"], c["kind"], c["scope"]["id"]) for c in MM.cases_since(t_fault)]
    res["cases_after_fault"] = others
    if not hit:
        res["outcome"] = "no nic case within %d s" % a.open_timeout
        res["evidence"] = MM.evidence(lab, [host], t_fault)
        log("a: MISS: %s" % others)
        return rb
    case = hit[0]
    cid = case["id"]
    res["case"] = {"id": cid, "opened_at": case["opened_at"], "detect_s": case["detect_s"], "root_cause": case["root_cause"]}
    log("a: case %s opened after %.1f s" % (cid, case["detect_s"]))
    req = actions.request_id(cid)
    # the drain's run first (a BFD flap under the loss could narrow the ToR's width by itself), then the width
    MM.wait_for(lambda: rb.run_time(req, "started"), a.drain_timeout, 0.2)

    def journaled(action):
        return next((r["time"] for r in rb.drain_records() if r.get("type") == "decision" and r.get("action") == action
                     and r.get("case") == cid and r.get("allowed")), None)
    t_dec = MM.wait_for(lambda: journaled("drain"), a.drain_timeout, 0.2)
    t_width = None
    if t_dec is not None and wait_width(plan, host, n - 1, 60):
        time.sleep(0.3)
        t_width = watch.first(n - 1, t_dec)
    res["drain"] = {"request": req, "width_n_minus_1_at": t_width, "decisions": rb.decisions(cid),
                    "run": rb.request(req).get("runs"), "snapshot": [r for r in rb.journal() if r.get("type") == "snapshot"]}
    if t_width is None:
        res["outcome"] = "no drain within %d s" % a.drain_timeout
        res["rulebook_status"] = rb.status()
        log("a: no drain: %s" % res["rulebook_status"])
        return rb
    res["drain"]["run_started_at"] = rb.run_time(req, "started")
    res["drain"]["decision_at"] = t_dec
    res["drain"]["tor_routes"] = tor_routes(plan, host)
    log("a: ToR width %d after %.1f s from the case" % (n - 1, t_width - case["opened_at"]))
    time.sleep(5)
    td0 = time.time()
    time.sleep(max(10.0, a.hold_drained - 5))
    td1 = time.time()
    wait_run(rb, req, 60)
    res["drain"]["run"] = rb.request(req).get("runs")
    res["drain"]["drain_journal"] = rb.drain_decisions()
    start = res["drain"]["run_started_at"] or case["opened_at"]
    WINDOWS["fault_before_drain"] = (t_fault, start)
    WINDOWS["around_drain"] = (start - 2, t_width + 10)
    WINDOWS["drained"] = (td0, td1)
    res["during"] = {"ingress": shares(hs, host_names, td0, td1, 0), "egress": shares(ts, tor_names, td0, td1, 0),
                     "egress_host_tx": shares(hs, host_names, td0, td1, 1),
                     "drained_nic_counter_still_s": {
                         "ingress": longest_zero_run(hs, nicname, td0, td1, 0),
                         "egress": longest_zero_run(ts, nref["tor_port"], td0, td1, 0)}}
    log("a: during: %s" % json.dumps(res["during"]))
    t_heal = time.time()
    heal()
    MM.CLEANUP.remove(heal)
    res["healed_at"] = round(t_heal, 2)
    log("a: fault removed")

    def closed():
        return [c for c in MM.case_lines() if c["id"] == cid and c.get("state") == "closed"] or None
    got = MM.wait_for(closed, QUIET + a.close_slack, 2.0)
    t_closed = time.time() if got else None
    res["closed_seen_at"] = t_closed
    if got:
        log("a: case closed %.0f s after the heal" % (t_closed - t_heal))
    ureq = actions.undrain_request_id(cid)
    t_udec = MM.wait_for(lambda: journaled("undrain"), CLEAN_WINDOW + RETRY["interval"] * 4 + 120 if got else 10, 0.5)
    t_back = None
    if t_udec is not None and wait_width(plan, host, n, 60):
        time.sleep(0.3)
        t_back = watch.first(n, t_udec)
    res["undrain"] = {"request": ureq, "width_n_at": t_back, "decision_at": t_udec, "runs": rb.request(ureq).get("runs"),
                      "decisions": [r for r in rb.journal() if r.get("request") == ureq and r.get("type") == "decision"]}
    if t_back is None:
        res["outcome"] = "no undrain"
        res["rulebook_status"] = rb.status()
        log("a: no undrain: %s" % res["rulebook_status"])
        return rb
    log("a: undrained %.0f s after the case closed" % (t_back - (t_closed or t_back)))
    time.sleep(8)
    ta0 = time.time()
    time.sleep(a.after)
    ta1 = time.time()
    wait_run(rb, ureq, 60)
    res["undrain"]["runs"] = rb.request(ureq).get("runs")
    res["undrain"]["drain_journal"] = rb.drain_decisions()[-3:]
    WINDOWS["around_undrain"] = (t_back - 10, t_back + 10)
    WINDOWS["after"] = (ta0, ta1)
    res["after"] = {"ingress": shares(hs, host_names, ta0, ta1, 0), "egress": shares(ts, tor_names, ta0, ta1, 0),
                    "width": width(plan, host)}
    res["width_transitions"] = watch.transitions()
    res["figures"] = {
        "detect_s": case["detect_s"],
        "detection_to_mitigation_s": round(t_width - case["opened_at"], 1),
        "detection_to_drain_decision_s": round(t_dec - case["opened_at"], 1),
        "detection_to_drain_run_started_s": round(start - case["opened_at"], 1) if res["drain"]["run_started_at"] else None,
        "mitigation_to_repair_s": round(t_back - t_width, 1),
        "fault_removed_to_case_closed_s": round(t_closed - t_heal, 1) if t_closed else None,
        "case_closed_to_undrained_s": round(t_back - t_closed, 1) if t_closed else None,
        "fault_removed_to_undrained_s": round(t_back - t_heal, 1)}
    last = [c for c in MM.case_lines() if c["id"] == cid][-1]
    res["ttr"] = MM.safe(lambda: ttr.rows([last], rb.drain_records(), time.time()))   # the project's own figures
    res["outcome"] = "chain complete"
    log("a: figures %s" % res["figures"])
    return rb


# ---- parts b-e: case events written into the rulebook's own case file ------------------------------------------
def part_b(plan, a, res):
    host = a.small_host
    rb = Rulebook("b", "auto", snapshot=False)
    RULEBOOKS.append(rb)
    res["rulebook_start_s"] = rb.start()
    c0, c1 = "bench-b-%s-nic0" % STAMP, "bench-b-%s-nic1" % STAMP
    rb.write(nic_case(plan, c0, host, 0))
    first = wait_run(rb, actions.request_id(c0))
    res["first"] = {"case": c0, "run": first, "width": width(plan, host)}
    log("b: first NIC of %s: %s, ToR width %s" % (host, first and first["status"], res["first"]["width"]))
    before = (tor_routes(plan, host), marker(host))
    rb.write(nic_case(plan, c1, host, 1))
    second = wait_run(rb, actions.request_id(c1))
    time.sleep(2)
    after = (tor_routes(plan, host), marker(host))
    res["second"] = {"case": c1, "decisions": rb.decisions(c1), "run": second, "width": width(plan, host),
                     "tor_routes_unchanged": before[0] == after[0], "marker_unchanged": before[1] == after[1],
                     "tor_routes": after[0], "drain_journal_last": rb.drain_decisions()[-1:],
                     "status": rb.status()}
    log("b: second NIC: run %s, ToR unchanged %s, marker unchanged %s, journal %s" % (
        second and second["status"], res["second"]["tor_routes_unchanged"], res["second"]["marker_unchanged"],
        res["second"]["drain_journal_last"]))
    rb.stop()
    if first and first["status"] == "succeeded":
        res["undo"] = undrain_by_hand(rb, host, 0)
        res["undo"]["width"] = wait_width(plan, host, 2, 30) and width(plan, host)
    return rb


def part_c(plan, a, res):
    host, k = a.approve_host, 2
    n = len(plan.nics(host))
    rb = Rulebook("c", "approve", snapshot=False)
    RULEBOOKS.append(rb)
    res["rulebook_start_s"] = rb.start()
    cid = "bench-c-%s" % STAMP
    req = actions.request_id(cid)
    rb.write(nic_case(plan, cid, host, k))
    pending = os.path.join(rb.state, "pending", req + ".json")
    got = MM.wait_for(lambda: os.path.exists(pending), 30, 0.2)
    widths = []
    t_end = time.time() + a.approve_wait
    while time.time() < t_end:
        widths.append(MM.safe(lambda: width(plan, host)))
        time.sleep(0.5)
    res["pending"] = {"file": bool(got), "decisions": rb.decisions(cid), "widths_while_pending": sorted(set(widths)),
                      "samples": len(widths), "seconds": a.approve_wait, "runs_before_approval": rb.request(req).get("runs")}
    log("c: pending %s; ToR width while pending %s" % (bool(got), sorted(set(widths))))
    t0 = time.time()
    # an inventory naming localhost makes Ansible discover its Python (here a pyenv shim that fails): the venv's
    p, secs = MM.playbook("-i", "localhost,", os.path.join(REPO, "playbooks", "eda_approve.yml"),
                          "-e", "ansible_python_interpreter=%s" % sys.executable,
                          "-e", "netscale_eda_state_dir=%s" % rb.state, "-e", "eda_request=%s" % req, check=False)
    t_w = wait_width(plan, host, n - 1, 180)
    res["approved"] = {"eda_approve_rc": p.returncode, "eda_approve_s": secs, "width_n_minus_1_after_s":
                       round(t_w - t0, 1) if t_w else None, "run": wait_run(rb, req, 60), "decisions": rb.decisions(cid)}
    log("c: approved (rc %d); drained %s s after the approval" % (p.returncode, res["approved"]["width_n_minus_1_after_s"]))
    rb.stop()
    if t_w:
        res["undo"] = undrain_by_hand(rb, host, k)
        res["undo"]["width"] = wait_width(plan, host, n, 30) and width(plan, host)
    return rb


def part_d(plan, a, res):
    host, k = a.approve_host, 1
    rb = Rulebook("d", "auto", snapshot=False)
    RULEBOOKS.append(rb)
    res["rulebook_start_s"] = rb.start()
    lease_dir = os.path.join(rb.reports, "journal", "leases")
    os.makedirs(lease_dir, exist_ok=True)
    member = LEASE.make_member("bench-rollout-%s" % STAMP, "rollout.yml", pid=os.getpid())
    taken = LEASE.acquire(lease_dir, FABRIC, member)
    key = LEASE.member_key(member)
    res["lease"] = {"action": taken["action"], "path": taken["path"], "holder": member["rollout_id"]}
    try:
        before = (tor_routes(plan, host), marker(host))
        cid = "bench-d-%s" % STAMP
        rb.write(nic_case(plan, cid, host, k))
        run = wait_run(rb, actions.request_id(cid))
        time.sleep(2)
        after = (tor_routes(plan, host), marker(host))
        res["drain"] = {"case": cid, "decisions": rb.decisions(cid), "run": run, "tor_routes_unchanged": before[0] == after[0],
                        "marker_unchanged": before[1] == after[1], "width": width(plan, host),
                        "refusal_in_rulebook_log": rb.log_has("another job holds this fabric's lease"),
                        "drain_journal": rb.drain_decisions(), "status": rb.status()}
        log("d: drain during the lease: run %s, ToR unchanged %s, refusal logged %s" % (
            run and run["status"], res["drain"]["tor_routes_unchanged"], res["drain"]["refusal_in_rulebook_log"]))
    finally:
        res["lease"]["release"] = LEASE.release(lease_dir, FABRIC, key)["action"]
    rb.stop()
    return rb


def part_e(plan, a, res):
    rb = Rulebook("e", "auto", snapshot=False)
    RULEBOOKS.append(rb)
    res["rulebook_start_s"] = rb.start()
    order = [("lab-r2-h1", 0), ("lab-r2-h2", 1), ("lab-r1-h2", 2), ("lab-r2-h1", 1), ("lab-r2-h2", 2),
             ("lab-r2-h1", 2), ("lab-r2-h2", 3), ("lab-r2-h1", 3), ("lab-r2-h2", 0), ("lab-r1-h2", 3)]
    ids = []
    t0 = time.time()
    for i, (host, k) in enumerate(order):
        cid = "bench-e-%s-%02d" % (STAMP, i)
        ids.append((cid, host, k))
        rb.write(nic_case(plan, cid, host, k))
        time.sleep(1.0)
    res["written_in_s"] = round(time.time() - t0, 1)

    def decided():
        return all(rb.decisions(c) for c, dummy, dummy2 in ids) or None
    MM.wait_for(decided, 60, 0.5)
    queued = [(c, h, k) for c, h, k in ids if any(d.get("outcome") == "queued" for d in rb.decisions(c))]
    for c, dummy, dummy2 in queued:
        wait_run(rb, actions.request_id(c), 240)
    outcomes = {}
    for c, dummy, dummy2 in ids:
        o = (rb.decisions(c) or [{}])[0].get("outcome")
        outcomes[o] = outcomes.get(o, 0) + 1
    drained = [(h, k) for h, k in set((h, k) for dummy, h, k in ids)
               if marker(h) and str(k) in (json.loads(marker(h)).get("nics") or {})]
    res.update(cases=len(ids), decisions=outcomes, queued=list(queued),
               runs=dict((c, (rb.run_done(actions.request_id(c)) or {}).get("status")) for c, dummy, dummy2 in queued),
               refused_reasons=sorted(set(r for c, dummy, dummy2 in ids for d in rb.decisions(c)
                                          if d.get("outcome") == "refused" for r in (d.get("reasons") or [])))[:5],
               reported_in_log=sum(1 for c, dummy, dummy2 in ids if rb.log_has(c)),
               drained_now=sorted(drained), widths=dict((h, width(plan, h)) for h in ("lab-r2-h1", "lab-r2-h2", "lab-r1-h2")),
               drain_journal=rb.drain_decisions(), status=rb.status())
    log("e: %d cases: decisions %s; drain runs %s; drained now %s" % (len(ids), outcomes, res["runs"], res["drained_now"]))
    rb.stop()
    res["undo"] = [undrain_by_hand(rb, h, k) for h, k in sorted(drained)]
    return rb


def all_agents_up():
    u = MM.safe(MM.agents_up)
    return u if u and all(v == 1 for v in u.values()) else None


RULEBOOKS = []
WINDOWS = {}          # part a: name -> (t0, t1) of the receiver stalls read once the load's runs ended
STAMP = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--nic", default="lab-r2-h1:eth1", help="part a: HOST:NIC faulted (the load runs on HOST)")
    ap.add_argument("--percent", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=60, help="seconds of each iperf3 run of the load")
    ap.add_argument("--baseline", type=float, default=30.0)
    ap.add_argument("--hold-drained", type=float, default=40.0, help="part a: seconds the fault stays on once drained")
    ap.add_argument("--after", type=float, default=30.0)
    ap.add_argument("--open-timeout", type=float, default=240.0)
    ap.add_argument("--drain-timeout", type=float, default=240.0)
    ap.add_argument("--close-slack", type=float, default=150.0)
    ap.add_argument("--small-host", default="lab-r1-h1")
    ap.add_argument("--approve-host", default="lab-r2-h2")
    ap.add_argument("--approve-wait", type=float, default=20.0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--line-rate", default=None, help="part a: a tbf line rate (e.g. 200mbit) on every NIC of the load "
                    "host, both ways (lab_link speed), removed at the end; off by default")
    a = ap.parse_args()
    try:
        rate_bits = LO.rate_bits(a.line_rate) if a.line_rate else None
    except Exception as e:  # pylint: disable=broad-except  # LabError: the message names the fix
        ap.error("--line-rate: %s" % e)
    keys = [k for k in a.parts.split(",") if k]
    for k in keys:
        if k not in PARTS:
            ap.error("--parts: %r is not one of %s" % (k, ",".join(PARTS)))
    a.json = a.json or os.path.join(REPO, "docs", "bench", "remediation-lab-%s.json" % STAMP)
    os.makedirs(WORK, exist_ok=True)

    def term(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, term)
    data = {"argv": sys.argv, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "flows_each_way": MM.FLOWS,
            "commit": MM.sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], check=False).stdout.strip(),
            "settings": {"correlator_quiet_s": QUIET, "clean_window_s": CLEAN_WINDOW, "undrain_retry": RETRY,
                         "line_rate": a.line_rate, "line_rate_bits": rate_bits},
            "parts": {}}
    load = None
    shaped = None         # (lab, host) while the line rate is on
    try:
        data["build_s"] = MM.build("ebpf")
        lab = open_lab(MM.TOPOLOGY)
        plan = Plan(MM.TOPOLOGY)
        data["agents_up"] = MM.wait_for(all_agents_up, 120)
        if "a" in keys:
            host = a.nic.split(":")[0]
            if rate_bits:
                shaped = (lab, host)
                data["line_rate_set"] = set_line_rate(lab, host, a.line_rate)
                log("a: line rate %s on every NIC of %s, both ways (%d tc changes)"
                    % (a.line_rate, host, len(data["line_rate_set"])))
            storage = Sampler(netns_name(lab.spec.storage_name), ["eth0"])
            samplers = (Sampler(netns_name(host), plan.nics(host)), Sampler(netns_name(plan.tor(host)), plan.tor_ports(host)))
            for s in samplers + (storage,):
                s.start()
            load = ChainLoad(lab, host, "ebpf", a.chunk, interval=0.1, server_interval=0.1)
            load.start()
            time.sleep(15)
            res = data["parts"]["a"] = {}
            try:
                rb = part_a(lab, plan, a, samplers, res)
                res["rulebook_status"] = rb.status()
            except Exception as e:  # pylint: disable=broad-except  # recorded, the bench goes on
                res["error"] = "%s: %s" % (type(e).__name__, e)
                log("a: ERROR %s" % e)
            for rb in RULEBOOKS:
                rb.stop()
            last = max((w[1] for w in WINDOWS.values()), default=0)
            MM.wait_for(lambda: any(r["start"] + r.get("seconds", 0) >= last for r in load.runs) or None, a.chunk + 45, 2)
            res["stalls"] = dict((name, stalls_between(load, *w)) for name, w in sorted(WINDOWS.items()))
            log("a: receiver stalls %s" % json.dumps(res["stalls"]))
            res["throughput"] = {}
            for name in ("before", "drained", "after"):
                if name not in WINDOWS:
                    continue
                w = WINDOWS[name]
                eg, ig = shares(storage, {"eth0": "eth0"}, w[0], w[1], 0), shares(samplers[0], dict(
                    (d, d) for d in plan.nics(host)), w[0], w[1], 0)
                res["throughput"][name] = {"iperf3": goodput_between(load, *w), "counters": {
                    "egress": {"mbit_per_s": eg and eg["total_mbit_per_s"], "where": "storage eth0 rx"},
                    "ingress": {"mbit_per_s": ig and ig["total_mbit_per_s"], "where": "host NICs rx"}}}
            if rate_bits:
                res["line_rate"] = line_rate_figures(res, rate_bits, len(plan.nics(host)))
            log("a: throughput %s" % json.dumps(res["throughput"]))
            load.stop()
            data["load"] = MM.load_figures(load.runs)
            data["load_runs"] = [dict((k, v) for k, v in r.items() if k not in ("egress", "ingress")) for r in load.runs]
            data["load_runs_max_stall"] = [(r["start"], (r.get("egress") or {}).get("max_stall_s"),
                                            (r.get("ingress") or {}).get("max_stall_s")) for r in load.runs]
            load = None
            for s in samplers + (storage,):
                MM.stop_proc(s.proc)
            if shaped:
                data["line_rate_removed"] = set_line_rate(lab, host, None)
                shaped = None
            MM.save(a.json, data)
        for k, fn in (("b", part_b), ("c", part_c), ("d", part_d), ("e", part_e)):
            if k not in keys:
                continue
            res = data["parts"][k] = {}
            try:
                rb = fn(plan, a, res)
                res["rulebook_status"] = rb.status()
            except Exception as e:  # pylint: disable=broad-except  # recorded, the bench goes on
                res["error"] = "%s: %s" % (type(e).__name__, e)
                log("%s: ERROR %s" % (k, e))
            for rb in RULEBOOKS:
                rb.stop()
            MM.save(a.json, data)
    finally:
        for undo in list(MM.CLEANUP):
            try:
                undo()
            except Exception as e:  # pylint: disable=broad-except
                log("cleanup: %s" % e)
        if shaped:
            try:
                data["line_rate_removed"] = set_line_rate(shaped[0], shaped[1], None)
            except Exception as e:  # pylint: disable=broad-except
                log("cleanup: line rate: %s" % e)
        for rb in RULEBOOKS:
            try:
                rb.stop()
            except Exception as e:  # pylint: disable=broad-except
                log("cleanup: rulebook %s: %s" % (rb.dir, e))
        if load is not None:
            load.stop()
        for p in list(MM.STARTED):
            MM.stop_proc(p)
        MM.save(a.json, data)
        p, secs = MM.teardown()
        log("lab torn down (rc=%d, %.0f s); JSON: %s" % (p.returncode, secs, a.json))
    print(json.dumps({"a": (data["parts"].get("a") or {}).get("figures"),
                      "a_line_rate": (data["parts"].get("a") or {}).get("line_rate"),
                      "outcomes": dict((k, v.get("outcome") or v.get("error") or "done") for k, v in data["parts"].items())},
                     indent=1))


if __name__ == "__main__":
    main()
