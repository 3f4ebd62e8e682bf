# -*- coding: utf-8 -*-
"""Monitoring lab acceptance (issue 29 item 6): faults injected under load on the monitored lab, the cases the
live correlator opens for them, then a fault-free soak under the same load. A bench, not a CI test: it prints
figures and writes them to JSON; it asserts nothing.

Lab: the lab fabric inventories/lab/fabric.yml built by playbooks/lab.yml (with its Prometheus, FRR exporters,
scrape relay, storage responder and live correlator: lab_monitoring), the host stack deployed by
playbooks/site.yml in --mode ebpf or kernel (host_datapath_ebpf; --mode none: no site.yml, the lab as the
e2e monitor tests use it), the agents by playbooks/monitor.yml. Always torn down by playbooks/lab.yml
(every process by the PIDs of the lab state), also on Ctrl-C and SIGTERM; what this bench starts (iperf3) is
killed by its own PIDs. Needs root. Run it under the lab lock:
flock /work/lab.lock .venv/bin/python bench/monitor_lab_matrix.py ...

Load: 32 TCP flows each way between one GPU host (--load-host; its slot 1 with the stack deployed, the host
itself with --mode none) and the storage node: egress over IPv6, ingress over IPv4 (iperf3 -R), in --chunk
second runs restarted back to back for the whole matrix and the soak (a run that hangs on a faulted path is
killed 20 s after its end and the next one starts). Throughput at the receiving end per run: iperf3's
received sums and the byte counters (storage eth0 rx for egress, the host NICs' rx for ingress).

Faults (--faults, in this order; each on a correlator just restarted, see below):
  a  silent loss on one NIC (--nic-fault HOST:NIC): ops.set_loss, nftables drop both ways;
  b  one host losing every NIC (--host-fault HOST): ops.set_loss on each of its NICs;
  c  a ToR failing (--tor-fault TOR): its FRR daemons (zebra, staticd, bgpd, bfdd) killed (ops.daemon kill:
     SIGKILL, the only stop it has), started again after;
  d  loss on one ToR-to-spine link (--uplink-fault TOR[:SPINE]): faults.set_uplink_fault, --uplink-percent %
     random loss both ways on the ToR's uplink port (100: everything dropped);
  e  --percent (2) % random loss on one NIC (--gray-fault HOST:NIC) for --gray-hold (240) s at least: the case
     must open within 120 s;
  f  one NIC flapping three times in ten minutes (--flap-fault HOST:NIC): its ToR port down --flap-down (30) s
     at 0, --flap-period (170) s and twice that (each burst apart by more than repeat_gap, 120 s): one case
     with repeats 3 expected;
  g  the agent killed on one host (--agent-fault HOST): kill -9 of the service's MainPID inside the host, then
     `systemctl stop` at once (Restart=always would start it again after 1 s): an agent case and no network case.
Per fault: its start, the cases opened after it (id, scope, root cause, opened_at, detections, repeats,
absorbed), time to detect (opened_at - start), whether exactly one case of the expected scope opened and no
other network case, detections per case. A fault whose case does not open within --open-timeout (240 s) is a
miss, recorded with the correlator's stats, its log and the agents' last events; the bench goes on.

Correlator between faults: open cases stay open 600 s (quiet) and absorb later detections of their element, so
before each fault (and the soak) the live correlator is restarted: its recorded PID (the lab state,
monitoring/correlator) is sent SIGTERM, then the same command line is started again as lab_monitoring starts it
(its cgroup, recorded in the lab state with the same digest: the module and the teardown see it as theirs); the
restarted correlator closes the cases still open (docs/operations.md, Restart). Not through the module: it would
restart Prometheus, the relay and the storage responder too, right before the fault (restart_correlator).
Before that the bench waits until Prometheus shows no probe lost anywhere for 20 s (the previous fault's paths
are clean), every BGP and BFD session the agents see up and no session or carrier change for 30 s (stack_settled).

Soak (--soak SECONDS, default 1800; 0: none): after the faults, on a restarted correlator, the same load and no
fault: every case opened is counted (expected 0) and kept with its evidence (the agents' probe_loss events of
its hosts around it).

Output: --json (default docs/bench/monitor-lab-<mode>-<UTC stamp>.json), rewritten after every fault, and a
table. usage: bench/monitor_lab_matrix.py [--mode ebpf|kernel|none] [--faults a,b,c,d,e,f,g] [--soak 1800]
       [--load-host lab-r2-h1] [--chunk 60] [--json PATH]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.lab import faults as F  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import monitoring as MON  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import kill, run_command, wait_gone  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name  # noqa: E402

TOPOLOGY = os.path.join(REPO, "inventories", "lab", "fabric.yml")
VENV_BIN = os.path.join(REPO, ".venv", "bin")
WORK = "/tmp/mon-matrix"
STATE = "/run/netscale-multinic/lab/lab/state.json"
MON_DIR = "/run/netscale-multinic/lab/lab/monitoring"
CASE_FILE = MON_DIR + "/cases.jsonl"
CASES = MON_DIR + "/cases.json"
AGENT_PROGRAM = os.path.join(REPO, "roles", "fabric_monitor", "files", "netscale-fabric-monitor.py")
CORRELATOR_PROGRAM = os.path.join(REPO, "roles", "fabric_monitor", "files", "netscale-case-correlator.py")
NETWORK_KINDS = ("nic", "host", "tor", "uplink", "spine", "zone")
FLOWS = 32
FAULTS = "abcdefg"
NAMES = {"a": "silent loss, one NIC", "b": "one host, every NIC silent", "c": "ToR failing (FRR daemons killed)",
         "d": "loss on one ToR-to-spine link", "e": "random loss on one NIC", "f": "NIC flapping 3 times",
         "g": "agent killed on one host"}
STARTED = []          # Popen of every process this bench started (killed by PID at the end)
CLEANUP = []          # callables undoing the fault in progress
CORRELATORS = []      # Popen of the correlators this bench restarted (reaped once stopped)


def log(msg):
    print("%s %s" % (time.strftime("%H:%M:%S", time.gmtime()), msg), flush=True)


def env():
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + ":" + e.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    e["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    e["ANSIBLE_NOCOLOR"] = "1"
    e.setdefault("ANSIBLE_VAULT_PASSWORD_FILE", os.path.join(REPO, ".cache", "lab-vault-password"))
    e.pop("NETSCALE_LAB_FAIL_AT", None)
    return e


def playbook(*args, check=True, timeout=900):
    argv = [os.path.join(VENV_BIN, "ansible-playbook")] + list(args)
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=timeout, check=False)
    with open(os.path.join(WORK, "playbook-%d.log" % int(time.time() * 1000)), "w", encoding="utf-8") as f:
        f.write(" ".join(argv) + "\n" + p.stdout + "\n" + p.stderr)
    if check and p.returncode != 0:
        raise RuntimeError("ansible-playbook %s failed rc=%d\n%s\n%s"
                           % (" ".join(args), p.returncode, p.stdout[-4000:], p.stderr[-2000:]))
    return p, round(time.monotonic() - t0, 1)


def sh(argv, check=True, timeout=60, input_text=None):
    """The lab's command runner (module_utils/lab/proc.run_command); failures raise RuntimeError."""
    return run_command(argv, check=check, error=RuntimeError, tail=1000, timeout=timeout, input=input_text)


def state():
    with open(STATE, encoding="utf-8") as f:
        return json.load(f)


def pid_of(node):
    return state()["nodes"][node]["pid"]


def in_host(host, argv, check=True, timeout=60):
    return sh(["nsenter", "-t", str(pid_of(host)), "-a", "--"] + list(argv), check=check, timeout=timeout)


def teardown():
    return playbook("-i", TOPOLOGY, os.path.join(REPO, "playbooks", "lab.yml"), "-e", "lab_state=absent", check=False)


def build(mode):
    """The monitored lab: lab.yml (with lab_monitoring), site.yml in ``mode`` (none: skipped), monitor.yml."""
    times = {}
    teardown()
    dummy, times["lab.yml"] = playbook("-i", TOPOLOGY, os.path.join(REPO, "playbooks", "lab.yml"))
    log("lab built in %.0f s" % times["lab.yml"])
    if mode != "none":
        dummy, times["site.yml"] = playbook(
            "-i", TOPOLOGY, os.path.join(REPO, "playbooks", "site.yml"), "-e", "tor_bgp_intended_dir=%s/intended" % WORK,
            "-e", "host_datapath_build_dir=%s/bpf" % WORK, "-e", "host_datapath_ebpf=%s" % str(mode == "ebpf").lower())
        log("site.yml (%s) deployed in %.0f s" % (mode, times["site.yml"]))
    dummy, times["monitor.yml"] = playbook("-i", TOPOLOGY, os.path.join(REPO, "playbooks", "monitor.yml"))
    log("agents deployed in %.0f s" % times["monitor.yml"])
    return times


# ---- Prometheus and the case file ----------------------------------------------------------------
def prom_url():
    with open(MON_DIR + "/url", encoding="utf-8") as f:
        return f.read().strip()


def query(expr):
    u = "%s/api/v1/query?%s" % (prom_url(), urllib.parse.urlencode({"query": expr}))
    data = json.loads(urllib.request.urlopen(u, timeout=10).read())
    return [(r["metric"], float(r["value"][1])) for r in data["data"]["result"]]


def lossy_paths(window="20s"):
    """[(host, nic, target, lost)] with probes lost in the last ``window``; None when Prometheus has no series."""
    r = query("sum by (host, nic, target) (increase(fabric_monitor_probes_lost_total[%s]))" % window)
    if not r:
        return None
    return [(m.get("host"), m.get("nic"), m.get("target"), round(v, 1)) for m, v in r if v > 0]


def agents_up():
    return dict((m["host"], v) for m, v in query('up{job="fabric_monitor"}'))


def case_lines():
    try:
        with open(CASE_FILE, encoding="utf-8") as f:
            out = []
            for line in f:
                if line.strip():
                    try:
                        out.append(json.loads(line)["case"])
                    except (ValueError, KeyError):
                        pass
            return out
    except OSError:
        return []


def cases_since(t0, slack=5.0):
    """{id: {first line, last line}} of the cases whose first line is an opening at or after t0 - slack."""
    first, last = {}, {}
    for c in case_lines():
        first.setdefault(c["id"], c)
        last[c["id"]] = c
    out = []
    for cid, c in first.items():
        if c.get("state") == "open" and (c.get("opened_at") or 0) >= t0 - slack:
            out.append(summary(last[cid], t0))
    return sorted(out, key=lambda x: x["opened_at"] or 0)


def summary(c, t0):
    return {"id": c["id"], "state": c.get("state"), "scope": c["scope"], "kind": c["scope"]["kind"],
            "root_cause": c.get("root_cause"), "opened_at": c.get("opened_at"), "start": c.get("start"),
            "detect_s": round(c["opened_at"] - t0, 1) if c.get("opened_at") else None,
            "detections": c.get("detections"), "repeats": c.get("repeats"), "absorbed": c.get("absorbed"),
            "evidence": c.get("evidence")}


def snapshot():
    try:
        with open(CASES, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": str(e)}


def correlator_record():
    recs = [r for r in state().get("resources", []) if r.get("name") == "monitoring/correlator"]
    return recs[0] if recs else None


def events_tail(lab, host, since, kinds=None, limit=30):
    """The agent's events since ``since`` (from the controller side: the host's overlay upper dir)."""
    path = MON.host_events_path(lab, host)
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 2 * 1024 * 1024))
            for line in f.read().splitlines()[1:]:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("time", 0) >= since and (kinds is None or e.get("kind") in kinds):
                    out.append(e)
    except OSError as e:
        return {"error": str(e)}
    return out[-limit:]


def evidence(lab, hosts, since):
    snap = snapshot()
    try:
        with open(MON_DIR + "/correlator.log", encoding="utf-8") as f:
            clog = f.read()[-3000:]
    except OSError:
        clog = None
    try:
        lossy = lossy_paths("60s")
    except Exception as e:  # pylint: disable=broad-except  # evidence: what failed is itself recorded
        lossy = "prometheus: %s" % e
    return {"stats": snap.get("stats"), "engine_errors": snap.get("engine_errors"), "sources": snap.get("sources"),
            "open": [(c.get("id"), c.get("scope", {}).get("kind")) for c in snap.get("open", [])],
            "correlator_log_tail": clog, "lossy_paths_60s": lossy,
            "agent_events": dict((h, events_tail(lab, h, since, limit=15)) for h in hosts)}


def wait_for(fn, timeout, step=2.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(step)
    return None


# ---- the correlator's clean restart ---------------------------------------------------------------
def correlator_argv(lab, options=None):
    """The correlator's command line as lab_monitoring starts it (monitoring.start: same layout, same order);
    ``options``: Correlator options (its own --options JSON, e.g. {"quiet": 120}), none by default."""
    cor = MON.layout(lab, agent_program=AGENT_PROGRAM, correlator_program=CORRELATOR_PROGRAM)["correlator"]
    argv = ["/usr/bin/python3", "-I", "-S", cor["program"], "--topology", cor["topology"], "--case-file", cor["case_file"],
            "--snapshot", cor["snapshot"], "--prometheus", cor["prometheus"]]
    for item in cor["events"]:
        argv += ["--events", "%s=%s" % (item["host"], item["path"])]
    if options:
        argv += ["--options", json.dumps(options, sort_keys=True)]
    return argv


def restart_correlator(lab, options=None):
    """The live correlator alone: SIGTERM to its recorded PID (lab state, monitoring/correlator), then the same
    command line started as lab_monitoring starts it (monitoring._spawn: the lab's monitoring cgroup, recorded in
    the lab state with the same digest, so lab_monitoring and the lab's teardown see it as their own).

    Not through the module: with one recorded process gone, lab_monitoring stops and starts the whole set
    (Prometheus, the scrape relay, the exporters, the storage node's responder): the agents' scrapes and the probes
    to storage would be interrupted right before the fault, and what that gives (agent_down, lost probes) would be
    read as part of it. Restarting the correlator alone changes nothing else. ``options``: see correlator_argv."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import State, load
    rec = correlator_record()
    if rec is None:
        raise RuntimeError("no monitoring/correlator record in %s: lab_monitoring did not start it" % STATE)
    t0 = time.time()
    n_lines = len(case_lines())
    kill(rec["pid"], rec.get("started"), signal.SIGTERM)
    if wait_gone([(rec["pid"], rec.get("started"))], timeout=15.0):
        kill(rec["pid"], rec.get("started"), signal.SIGKILL)
        wait_gone([(rec["pid"], rec.get("started"))], timeout=5.0)
    for p in list(CORRELATORS):
        if p.poll() is not None:
            CORRELATORS.remove(p)
    st = State(lab.fabric, lab.state_root, load(lab.fabric, lab.state_root))
    st.drop(None, [rec])
    spawned = time.time()
    argv = correlator_argv(lab, options)
    proc = MON._spawn(lab, st, "correlator", argv, MON_DIR, rec.get("digest"),  # pylint: disable=protected-access
                      "correlator.log")
    CORRELATORS.append(proc)
    new = correlator_record()
    if new is None or new["pid"] != proc.pid:
        raise RuntimeError("the restarted correlator is not recorded: %r" % (new,))
    fresh = wait_for(lambda: snapshot().get("updated_at", 0) >= spawned, 30, 1.0)
    if not fresh or proc.poll() is not None:
        raise RuntimeError("the restarted correlator wrote no current cases within 30 s (rc %s); log: %s"
                           % (proc.poll(), MON.log_tail(MON_DIR + "/correlator.log")))
    # the cases the restart closed: the case lines it appended (a case line carries no closed_at)
    closed = [c["id"] for c in case_lines()[n_lines:] if c.get("state") == "closed"]
    return {"old_pid": rec["pid"], "new_pid": proc.pid, "seconds": round(time.time() - t0, 1), "closed": closed}


def safe(fn):
    try:
        return fn()
    except Exception:  # pylint: disable=broad-except
        return None


def stack_settled():
    """Every BGP and BFD session the agents see is up and none changed, nor a carrier, in the last 30 s (after a
    ToR's FRR comes back the hosts' sidecars reconnect some 40 s later and their BFD sessions go down and up once
    more: without this wait those events fell into the next fault's windows). An absent series counts as 0."""
    def total(expr):
        return sum(v for dummy, v in query(expr))
    for a, b in (("fabric_monitor_bgp_sessions", "fabric_monitor_bgp_sessions_up"),
                 ("fabric_monitor_bfd_sessions", "fabric_monitor_bfd_sessions_up")):
        if total("sum(%s)" % a) != total("sum(%s)" % b):
            return False
    changes = ("fabric_monitor_bgp_session_changes_total", "fabric_monitor_bfd_session_changes_total",
               "fabric_monitor_nic_carrier_changes_total")
    return all(total("sum(increase(%s[30s]))" % m) == 0 for m in changes)


def wait_clean(timeout=240):
    """Until no probe was lost anywhere in the last 20 s and the sessions are settled (Prometheus); returns the
    wait or None (still lossy or unsettled at the timeout)."""
    t0 = time.monotonic()
    ok = wait_for(lambda: safe(lossy_paths) == [] and safe(stack_settled), timeout, 3.0)
    return round(time.monotonic() - t0, 1) if ok else None


# ---- load -----------------------------------------------------------------------------------------
class Load(threading.Thread):
    """32 flows each way (egress IPv6, ingress IPv4 -R) between the load host and storage, in back-to-back runs."""

    def __init__(self, lab, host, mode, chunk, interval=10, server_interval=None):
        """``interval``: iperf3's -i of the clients; ``server_interval``: the servers' -i, and the clients ask for
        the server's output (--get-server-output: the receiving end of the egress flows), none by default."""
        threading.Thread.__init__(self, daemon=True)
        self.lab, self.host, self.mode, self.chunk = lab, host, mode, chunk
        self.interval, self.server_interval = interval, server_interval
        self.stop_ev = threading.Event()
        self.runs = []
        self.port = 5700
        self.nics = [n["name"] for h in lab.spec.hosts if h["name"] == host for n in h["nics"]]
        self.sto = lab.spec.storage_addr

    def counters(self):
        out = {}
        for ns, names, key in ((netns_name(self.lab.spec.storage_name), ["eth0"], "storage_rx"),
                               (netns_name(self.host), self.nics, "host_rx")):
            links = json.loads(sh(["ip", "-n", ns, "-j", "-s", "link", "show"]).stdout)
            out[key] = sum(li["stats64"]["rx"]["bytes"] for li in links if li["ifname"] in names)
        return out

    def client_argv(self, argv):
        pid = pid_of(self.host)
        if self.mode == "none":
            return ["nsenter", "-t", str(pid), "-n", "-m", "--"] + argv
        return ["nsenter", "-t", str(pid), "-m", "-n", "--", "nsenter", "--net=/run/netns/mn-slot1", "--"] + argv

    def start_pair(self):
        procs = []
        for d, fam, rev in (("egress", "ipv6", False), ("ingress", "ipv4", True)):
            self.port = 5700 + (self.port - 5700 + 1) % 200
            port = self.port
            srv = subprocess.Popen(["nsenter", "--net=/run/netns/%s" % netns_name(self.lab.spec.storage_name), "--",
                                    "iperf3", "-s", "-1", "-p", str(port)]
                                   + (["-i", str(self.server_interval), "-J"] if self.server_interval else []),
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
            STARTED.append(srv)
            t = time.monotonic()
            while time.monotonic() - t < 5 and not sh(["nsenter", "--net=/run/netns/%s" % netns_name(
                    self.lab.spec.storage_name), "--", "ss", "-Hltn", "sport = :%d" % port], check=False).stdout.strip():
                time.sleep(0.05)
            argv = ["iperf3", "-c", self.sto[fam]["storage"], "-p", str(port), "-P", str(FLOWS), "-t", str(self.chunk),
                    "-i", str(self.interval), "--json"] + (["-R"] if rev else []) \
                + (["--get-server-output"] if self.server_interval else [])
            cli = subprocess.Popen(self.client_argv(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
            STARTED.append(cli)
            procs.append((d, srv, cli))
        return procs

    def run(self):
        while not self.stop_ev.is_set():
            t0, c0 = time.time(), safe(self.counters)
            rec = {"start": round(t0, 1)}
            try:
                procs = self.start_pair()
            except Exception as e:  # pylint: disable=broad-except
                rec["error"] = "start: %s" % e
                self.runs.append(rec)
                self.stop_ev.wait(5)
                continue
            outs = {}
            for d, srv, cli in procs:
                left = max(1.0, t0 + self.chunk + 20 - time.time())
                try:
                    out, err = cli.communicate(timeout=left)
                    outs[d] = (out, err)
                except subprocess.TimeoutExpired:
                    outs[d] = None
                for p in (cli, srv):
                    stop_proc(p)
            c1 = safe(self.counters)
            dur = time.time() - t0
            rec["seconds"] = round(dur, 1)
            for d, got in ((d, outs.get(d)) for d in ("egress", "ingress")):
                if got is None:
                    rec[d] = {"error": "hung: killed %d s after its end" % 20}
                    continue
                try:
                    res = json.loads(got[0])
                    if "error" in res:
                        rec[d] = {"error": res["error"]}
                    else:
                        rec[d] = self.result(d, res, t0)
                except (ValueError, KeyError) as e:
                    rec[d] = {"error": "no JSON (%s): %s" % (e, (got[1] or got[0])[-200:])}
            if c0 and c1:
                rec["egress_rx_mbit_per_s"] = round((c1["storage_rx"] - c0["storage_rx"]) * 8 / dur / 1e6, 1)
                rec["ingress_rx_mbit_per_s"] = round((c1["host_rx"] - c0["host_rx"]) * 8 / dur / 1e6, 1)
            self.runs.append(rec)

    @staticmethod
    def result(direction, res, t0):  # pylint: disable=unused-argument  # a subclass reads more of the run
        """What a run's record keeps of iperf3's JSON ``res`` in ``direction`` (egress, ingress) started at ``t0``."""
        return {"mbit_per_s": round(res["end"]["sum_received"]["bits_per_second"] / 1e6, 1)}

    def stop(self):
        self.stop_ev.set()
        for p in list(STARTED):
            stop_proc(p)
        self.join(self.chunk + 40)

    def between(self, t0, t1):
        """The runs that overlap [t0, t1] (a run that began before it and ended inside counts)."""
        return [r for r in self.runs if r["start"] < t1 and r["start"] + r.get("seconds", 0) > t0]


def stop_proc(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)   # its own session (start_new_session): iperf3 and the nsenter in front
        except OSError:
            pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass
    if p in STARTED:
        STARTED.remove(p)


def load_figures(runs):
    """Mean throughput at the receiving end over runs (counters; iperf3's sums beside), and the failed runs."""
    def mean(xs):
        xs = [x for x in xs if x is not None]
        return round(sum(xs) / len(xs), 1) if xs else None
    return {"runs": len(runs),
            "egress_rx_mbit_per_s": mean([r.get("egress_rx_mbit_per_s") for r in runs]),
            "ingress_rx_mbit_per_s": mean([r.get("ingress_rx_mbit_per_s") for r in runs]),
            "iperf3_egress_mbit_per_s": mean([r.get("egress", {}).get("mbit_per_s") for r in runs]),
            "iperf3_ingress_mbit_per_s": mean([r.get("ingress", {}).get("mbit_per_s") for r in runs]),
            "runs_with_error": sum(1 for r in runs if "error" in r or "error" in r.get("egress", {})
                                   or "error" in r.get("ingress", {}))}


# ---- faults ---------------------------------------------------------------------------------------
def host_nic(lab, text):
    host, nic = text.split(":")
    h, n = ops.nic_ref(lab, host, nic)
    return h["name"], n


def nic_scope(host, n):
    return {"kind": "nic", "id": "%s/nic%d" % (host, n["index"] + 1)}


class Fault(object):
    """Inject / heal one fault; ``expected``: {kind, id prefix}; ``hosts``: whose events are evidence."""

    def __init__(self, key, target, expected, hosts, inject, heal, hold=0.0, within=None, repeats=None, run=None):
        self.key, self.target, self.expected, self.hosts = key, target, expected, hosts
        self.inject, self.heal, self.hold, self.within, self.repeats, self.run = \
            inject, heal, hold, within, repeats, run


def make_faults(lab, a):
    out = {}
    h, n = host_nic(lab, a.nic_fault)
    out["a"] = Fault("a", "%s %s (ToR port %s)" % (h, n["name"], n["tor_port"]), nic_scope(h, n), [h],
                     lambda h=h, n=n: ops.set_loss(lab, h, n["name"], True),
                     lambda h=h, n=n: ops.set_loss(lab, h, n["name"], False))
    hb = next(x for x in lab.spec.hosts if x["name"] == a.host_fault)
    out["b"] = Fault("b", "%s, %d NICs" % (hb["name"], len(hb["nics"])), {"kind": "host", "id": hb["name"]},
                     [hb["name"]],
                     lambda: [ops.set_loss(lab, hb["name"], x["name"], True) for x in hb["nics"]],
                     lambda: [ops.set_loss(lab, hb["name"], x["name"], False) for x in hb["nics"]])
    tor = a.tor_fault
    rack = next(r for r in lab.spec.racks if r["tor"]["name"] == tor)
    daemons = ("bgpd", "bfdd", "staticd", "zebra")

    def tor_down():
        return [ops.daemon(lab, tor, d, "kill") for d in daemons]

    def tor_up():
        # zebra first (bgpd, staticd and bfdd register with it)
        return [ops.daemon(lab, tor, d, "start") for d in ("zebra", "staticd", "bgpd", "bfdd")]
    out["c"] = Fault("c", "%s (%s killed)" % (tor, ", ".join(daemons)), {"kind": "tor", "id": tor},
                     [x["name"] for x in rack["hosts"]], tor_down, tor_up)
    parts = a.uplink_fault.split(":")
    utor = parts[0]
    dummy, port, spine = F.uplink_port(lab.spec.racks, utor, parts[1] if len(parts) > 1 and parts[1] else None)
    urack = next(r for r in lab.spec.racks if r["tor"]["name"] == utor)
    kind, pct = ("all", None) if a.uplink_percent >= 100 else ("random", a.uplink_percent)
    out["d"] = Fault("d", "%s uplink %s to %s, %s" % (utor, port, spine, "100 %" if pct is None else "%d %% random" % pct),
                     {"kind": "uplink", "id": utor + "/"}, [x["name"] for x in urack["hosts"]],
                     lambda: F.set_uplink_fault(lab, utor, True, spine, "both", kind, pct),
                     lambda: F.set_uplink_fault(lab, utor, False, spine, "both", kind, pct))
    g, gn = host_nic(lab, a.gray_fault)
    out["e"] = Fault("e", "%s %s, %d %% random both ways" % (g, gn["name"], a.percent), nic_scope(g, gn), [g],
                     lambda: F.set_fault(lab, g, gn["name"], True, "both", "random", percent=a.percent),
                     lambda: F.set_fault(lab, g, gn["name"], False, "both", "random", percent=a.percent),
                     hold=a.gray_hold, within=120.0)
    fh, fn = host_nic(lab, a.flap_fault)
    sched = [(k * a.flap_period, False) for k in range(3)] + [(k * a.flap_period + a.flap_down, True) for k in range(3)]
    sched.sort()

    def flap():
        return F.run_schedule(sched, lambda up: ops.set_link(lab, fh, fn["name"], up, side="tor"))
    offsets = [int(k * a.flap_period) for k in range(3)]
    out["f"] = Fault("f", "%s %s: ToR port %s down %d s at %s s" % (fh, fn["name"], fn["tor_port"], a.flap_down, offsets),
                     nic_scope(fh, fn), [fh], lambda: None,
                     lambda: ops.set_link(lab, fh, fn["name"], True, side="tor"), repeats=3, run=flap)
    ah = a.agent_fault

    def agent_kill():
        shown = in_host(ah, ["systemctl", "show", "-p", "MainPID", "--value", "netscale-fabric-monitor.service"])
        pid = int(shown.stdout.strip() or 0)
        if pid <= 0:
            raise RuntimeError("netscale-fabric-monitor.service has no MainPID on %s" % ah)
        in_host(ah, ["kill", "-9", str(pid)])
        in_host(ah, ["systemctl", "stop", "netscale-fabric-monitor.service"])
        return {"killed": pid, "then": "systemctl stop (Restart=always would restart it after 1 s)"}
    out["g"] = Fault("g", "%s: agent kill -9, then systemctl stop" % ah, {"kind": "agent", "id": ah}, [ah],
                     agent_kill, lambda: in_host(ah, ["systemctl", "start", "netscale-fabric-monitor.service"]))
    return out


def matches(case, expected):
    if case["kind"] != expected["kind"]:
        return False
    if expected["id"].endswith("/"):
        return case["scope"]["id"].startswith(expected["id"])
    return case["scope"]["id"] == expected["id"]


def run_fault(lab, f, a, load):
    rec = {"fault": f.key, "name": NAMES[f.key], "target": f.target, "expected": f.expected}
    rec["clean_wait_s"] = wait_clean()
    if rec["clean_wait_s"] is None:
        rec["lossy_before"] = safe(lossy_paths)
        log("fault %s: paths still lossy or sessions unsettled before it: %s" % (f.key, rec["lossy_before"]))
    rec["correlator_restart"] = restart_correlator(lab)
    time.sleep(5)
    t0 = time.time()
    rec["start"] = round(t0, 1)
    rec["start_utc"] = time.strftime("%H:%M:%S", time.gmtime(t0))
    CLEANUP.append(f.heal)
    log("fault %s (%s) on %s" % (f.key, NAMES[f.key], f.target))
    try:
        rec["inject"] = repr(f.inject())[:500]
        runner = None
        if f.run:
            runner = threading.Thread(target=lambda: rec.__setitem__("schedule_offsets", f.run()), daemon=True)
            runner.start()

        def found():
            got = [c for c in cases_since(t0) if matches(c, f.expected)]
            if f.repeats and got and (got[0].get("repeats") or 0) < f.repeats:
                return None
            return got or None
        timeout = a.open_timeout + (3 * a.flap_period if f.run else 0)
        hit = wait_for(found, timeout, 2.0)
        rec["opened_within_timeout"] = bool(hit)
        if hit:
            log("fault %s: case %s opened after %.0f s" % (f.key, hit[0]["id"], hit[0]["opened_at"] - t0))
            time.sleep(a.observe)
        else:
            rec["evidence"] = evidence(lab, f.hosts, t0)
            log("fault %s: MISS, no %s case within %d s" % (f.key, f.expected["kind"], timeout))
        left = t0 + f.hold - time.time()
        if left > 0:
            time.sleep(left)
        if runner:
            runner.join(4 * a.flap_period + 60)
    finally:
        rec["healed"] = round(time.time(), 1)
        try:
            rec["heal"] = repr(f.heal())[:500]
        except Exception as e:  # pylint: disable=broad-except
            rec["heal"] = "FAILED: %s" % e
        CLEANUP.remove(f.heal)
    rec["fault_s"] = round(rec["healed"] - t0, 1)
    time.sleep(a.after)
    cases = cases_since(t0)
    rec["cases"] = cases
    exp = [c for c in cases if matches(c, f.expected)]
    others = [c for c in cases if c not in exp and c["kind"] in NETWORK_KINDS]
    rec["expected_cases"] = [c["id"] for c in exp]
    rec["other_network_cases"] = [(c["id"], c["kind"], c["detections"]) for c in others]
    rec["other_cases"] = [(c["id"], c["kind"], c["detections"]) for c in cases if c not in exp and c not in others]
    rec["time_to_detect_s"] = exp[0]["detect_s"] if exp else None
    rec["detections_per_case"] = dict((c["id"], c["detections"]) for c in cases)
    rec["load"] = load_figures(load.between(t0, time.time()))
    verdict = "pass"
    if not exp:
        verdict = "miss"
        if "evidence" not in rec:
            rec["evidence"] = evidence(lab, f.hosts, t0)
    elif len(exp) > 1 or others:
        verdict = "extra cases"
    if exp and f.within and exp[0]["detect_s"] > f.within:
        verdict = "late (> %d s)" % f.within
    if exp and f.repeats and (exp[0].get("repeats") or 0) != f.repeats:
        verdict = "repeats %s (expected %d)" % (exp[0].get("repeats"), f.repeats)
    rec["verdict"] = verdict
    seen = [(c["id"], c["kind"], c["detect_s"], c["detections"]) for c in cases]
    log("fault %s: %s; cases %s; other network cases %s" % (f.key, verdict, seen, rec["other_network_cases"]))
    return rec


def soak(lab, a, load, data):
    res = {"seconds": a.soak}
    res["clean_wait_s"] = wait_clean()
    res["correlator_restart"] = restart_correlator(lab)
    t0 = time.time()
    res["start"] = round(t0, 1)
    res["start_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))
    data["soak"] = res
    log("soak: %d s under load, no fault" % a.soak)
    n_seen = 0
    while time.time() - t0 < a.soak:
        time.sleep(min(30, max(1, a.soak - (time.time() - t0))))
        cases = cases_since(t0, slack=0)
        if len(cases) != n_seen:
            n_seen = len(cases)
            log("soak: %d case(s) so far: %s" % (n_seen, [(c["id"], c["kind"]) for c in cases]))
        res["cases"] = cases
        res["elapsed_s"] = round(time.time() - t0, 1)
        res["load"] = load_figures(load.between(t0, time.time()))
        save(a.json, data)
    # the last window is decided 30 s after its end: wait for it
    time.sleep(95)
    cases = cases_since(t0, slack=0)
    res["cases"] = cases
    res["count"] = len(cases)
    res["network_cases"] = sum(1 for c in cases if c["kind"] in NETWORK_KINDS)
    res["elapsed_s"] = round(time.time() - t0, 1)
    res["load"] = load_figures(load.between(t0, t0 + a.soak))
    ev = {}
    for c in cases:
        hosts = set((c.get("evidence") or {}).get("hosts") or [])
        if "host" in c["scope"]:
            hosts.add(c["scope"]["host"])
        ev[c["id"]] = dict((h, events_tail(lab, h, (c.get("start") or t0) - 60, kinds=("probe_loss", "target_unreachable"),
                                           limit=40)) for h in sorted(hosts))
    res["evidence"] = ev
    res["correlator"] = {"stats": snapshot().get("stats"), "engine_errors": snapshot().get("engine_errors")}
    log("soak: %d s, %d case(s) opened (%d network)" % (res["elapsed_s"], res["count"], res["network_cases"]))


# ---- output ---------------------------------------------------------------------------------------
def save(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def table(data):
    head = ("", "fault", "expected", "case scope (id)", "detect s", "detections", "other network cases", "verdict")
    print("\n%-3s %-36s %-8s %-32s %8s %11s %-28s %s" % head)
    for r in data["faults"]:
        exp = [c for c in r.get("cases", []) if c["id"] in r.get("expected_cases", [])]
        c = exp[0] if exp else None
        print("%-3s %-36s %-8s %-32s %8s %11s %-28s %s" % (
            r["fault"], r["name"], r["expected"]["kind"], ("%s (%s)" % (c["kind"], c["scope"]["id"])) if c else "-",
            c["detect_s"] if c else "-", c["detections"] if c else "-",
            ",".join("%s:%s" % (k, i) for i, k, dummy in r.get("other_network_cases", [])) or "0", r.get("verdict")))
    if data.get("soak"):
        s = data["soak"]
        print("soak: %s s under load, cases opened: %s (network %s); load %s" % (
            s.get("elapsed_s"), s.get("count"), s.get("network_cases"), s.get("load")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--mode", choices=("ebpf", "kernel", "none"), default="ebpf",
                    help="host datapath deployed by site.yml (host_datapath_ebpf); none: no site.yml")
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--soak", type=int, default=1800)
    ap.add_argument("--load-host", default="lab-r2-h1")
    ap.add_argument("--chunk", type=int, default=60)
    ap.add_argument("--nic-fault", default="lab-r2-h1:eth1")
    ap.add_argument("--host-fault", default="lab-r2-h2")
    ap.add_argument("--tor-fault", default="lab-r2-tor")
    ap.add_argument("--uplink-fault", default="lab-r2-tor")
    ap.add_argument("--uplink-percent", type=int, default=10)
    ap.add_argument("--gray-fault", default="lab-r2-h1:eth2")
    ap.add_argument("--percent", type=int, default=2)
    ap.add_argument("--gray-hold", type=float, default=240.0)
    ap.add_argument("--flap-fault", default="lab-r2-h2:eth0")
    ap.add_argument("--flap-down", type=float, default=30.0)
    ap.add_argument("--flap-period", type=float, default=170.0)
    ap.add_argument("--agent-fault", default="lab-r1-h1")
    ap.add_argument("--open-timeout", type=float, default=240.0)
    ap.add_argument("--observe", type=float, default=60.0, help="seconds the fault stays on after its case opened")
    ap.add_argument("--after", type=float, default=20.0, help="seconds after the heal before the cases are read")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    keys = [k for k in a.faults.split(",") if k]
    for k in keys:
        if k not in FAULTS:
            ap.error("--faults: %r is not one of %s" % (k, ",".join(FAULTS)))
    if not 1 <= a.percent <= 99:
        ap.error("--percent: %d is not from 1 to 99" % a.percent)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    a.json = a.json or os.path.join(REPO, "docs", "bench", "monitor-lab-%s-%s.json" % (a.mode, stamp))
    os.makedirs(WORK, exist_ok=True)
    os.makedirs(os.path.dirname(a.json), exist_ok=True)

    def term(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, term)
    data = {"argv": sys.argv, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mode": a.mode,
            "load_host": a.load_host, "flows_each_way": FLOWS, "faults": []}
    try:
        head = sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], check=False).stdout.strip()
        data["commit"] = head
    except Exception:  # pylint: disable=broad-except
        pass
    load = None
    try:
        data["build_s"] = build(a.mode)
        save(a.json, data)
        lab = open_lab(TOPOLOGY)
        faults = make_faults(lab, a)

        def all_agents_up():
            u = safe(agents_up)
            return u if u and all(v == 1 for v in u.values()) else None
        up = wait_for(all_agents_up, 120)
        data["agents_up"] = up
        load = Load(lab, a.load_host, a.mode, a.chunk)
        load.start()
        time.sleep(20)
        for k in keys:
            try:
                r = run_fault(lab, faults[k], a, load)
            except Exception as e:  # pylint: disable=broad-except  # recorded, the bench goes on
                r = {"fault": k, "name": NAMES[k], "target": faults[k].target, "expected": faults[k].expected,
                     "verdict": "error", "error": "%s: %s" % (type(e).__name__, e)}
                log("fault %s: ERROR %s" % (k, e))
            data["faults"].append(r)
            data["load_so_far"] = load_figures(load.runs)
            save(a.json, data)
        if a.soak:
            soak(lab, a, load, data)
        data["load"] = load_figures(load.runs)
        data["load_runs"] = load.runs
        save(a.json, data)
    finally:
        for undo in list(CLEANUP):
            try:
                undo()
            except Exception as e:  # pylint: disable=broad-except
                log("cleanup: %s" % e)
        if load is not None:
            load.stop()
            data["load_runs"] = load.runs
        for p in list(STARTED):
            stop_proc(p)
        save(a.json, data)
        p, secs = teardown()
        log("lab torn down (rc=%d, %.0f s); JSON: %s" % (p.returncode, secs, a.json))
    table(data)


if __name__ == "__main__":
    main()
