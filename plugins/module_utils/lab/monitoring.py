# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus in the lab: scrape every GPU host's monitoring agent and every FRR node (ToRs, spines).

Started after the lab is built (``netscale.multinic.lab_monitoring``, the lab role), in the lab
machine's root namespace, bound to loopback only, each process in the foreground with its own
config and data directory under the lab's state dir; recorded in the lab's state file (PID and
start time, ``keep: false``: the lab stays healthy without them) so the lab's teardown removes them by
PID, and ``state: absent`` stops them alone.

* **Prometheus** (Debian's ``prometheus``): ``listen:port``, data in ``<lab>/monitoring/data``,
  config and rules rendered by :mod:`..monitor.rules`.
* **Scrape relay**: the agents listen inside the GPU hosts' network namespaces, which only the fabric
  reaches; scraping them through a data NIC would read a NIC fault as "agent down". The lab's
  management plane is the namespace itself: one relay process listens on ``listen:relay_port + i`` per
  host and, for every scrape, connects from inside that host's current network namespace (``setns``
  in the connection's thread; the host's PID comes from the lab state file, so a restarted host is
  followed) to the agent's metrics port. An agent that is down makes its scrape fail: ``up == 0``.
* **FRR exporters** (Debian's ``prometheus-frr-exporter``, BGP and BFD collectors): one per spine and
  ToR on ``listen:frr_port + i``, reading that node's daemon sockets (``<node>/run-frr``) from outside
  the namespace.
* **Storage responder**: the agent program in responder-only mode inside the storage namespace, so
  the hosts' probes to storage (a configured target) are answered.
* **Live correlator** (the bundled ``netscale-case-correlator.py``, :mod:`..monitor.live`): tails every GPU
  host's events file from the controller side (the host's overlay upper dir, ``<node dir>/upper/<events
  file>``: what the agent appends inside the host, without entering it), feeds the correlation with the
  lab's topology (``topology.json``: names, NIC counts and ids only) and Prometheus's
  ``fabric_monitor:agent_down``, and writes the case file ``cases.jsonl`` and the current cases
  ``cases.json`` in the monitoring directory.
* **Remediation rulebook** (optional, ``rulebook``): the collection's ``ansible-rulebook -r
  netscale.multinic.remediate`` reading that case file (docs/remediation-eda.md), its state (journal, mode
  file, approvals) in ``<monitoring dir>/eda``, its drains sharing the fabric's drain journal and lease under
  ``report_root`` with the rollouts. This machine has no systemd of its own (the controller's PID 1 is the
  sandbox's init), so the lab supervises it as it does Prometheus: by PID, in the monitoring cgroup, stopped with
  the lab; production runs the systemd unit of docs/remediation-eda.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, alive, kill, start_time, wait_gone
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import State, load
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import live as livemod
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import probe as probemod
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import rules
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

NAME_PREFIX = "monitoring/"
PROMETHEUS = "/usr/bin/prometheus"
FRR_EXPORTER = "/usr/bin/prometheus-frr-exporter"
EVENTS_FILE = "/var/log/netscale-multinic/fabric-monitor-events.jsonl"   # the agent's default (agent.py)
CORRELATOR_PROGRAM = "netscale-case-correlator.py"   # beside the agent program in the role's files/
RULEBOOK_MODES = ("report", "approve", "auto")
RULEBOOK_KEYS = ("mode", "program", "ansible_config", "inventory", "report_root", "budget", "clean_window",
                 "snapshot")
RULEBOOK_STARTUP = 120.0   # the JVM and Drools: 3-20 s here, more on a loaded machine

RELAY_SOURCE = r'''
import ctypes, json, os, select, socket, sys, threading
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
cfg = json.load(open(sys.argv[1]))

def host_pid(name):
    with open(cfg["state_file"]) as f:
        return json.load(f)["nodes"][name]["pid"]

def serve(conn, name, port):
    conn.settimeout(cfg["timeout"])
    try:
        fd = os.open("/proc/%d/ns/net" % host_pid(name), os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)
        up = socket.create_connection(("127.0.0.1", port), timeout=cfg["timeout"])
    except Exception:
        conn.close()
        return
    socks = [conn, up]
    try:
        while True:
            ready = select.select(socks, [], [], cfg["timeout"])[0]
            if not ready:
                break
            done = False
            for s in ready:
                data = s.recv(65536)
                if not data:
                    done = True
                    break
                (up if s is conn else conn).sendall(data)
            if done:
                break
    except OSError:
        pass
    finally:
        up.close()
        conn.close()

def listen(item):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((cfg["listen"], item["listen_port"]))
    srv.listen(16)
    return srv

servers = [(listen(i), i) for i in cfg["hosts"]]
sys.stdout.write("scrape relay: %d hosts\n" % len(servers))
sys.stdout.flush()

def accept_loop(srv, item):
    while True:
        conn, dummy = srv.accept()
        threading.Thread(target=serve, args=(conn, item["host"], item["port"]), daemon=True).start()

for srv, item in servers[1:]:
    threading.Thread(target=accept_loop, args=(srv, item), daemon=True).start()
if servers:
    accept_loop(*servers[0])
'''


# The relay and exporter port blocks follow Prometheus's port (one number moves a lab's whole block, so two
# labs on one machine need only different ``port`` values): relay at port+10, exporters at port+110.
RELAY_OFFSET = 10
FRR_OFFSET = 110


def host_events_path(lab, host, events_file=EVENTS_FILE):
    """Where a GPU host's events file is seen from the controller: the host's overlay upper dir (the file is
    created by the agent inside the host, so it lives in the upper layer; a restarted host keeps its dir)."""
    return os.path.join(lab.node_dir(host), "upper", events_file.lstrip("/"))


def rulebook_layout(mon_dir, case_file, rulebook):
    """The remediation rulebook's process ({program, ansible_config, inventory, state_dir, vars_file, variables}) from
    ``rulebook`` (None or {}: none; else the keys of RULEBOOK_KEYS, ``mode``, ``program``, ``ansible_config``,
    ``inventory`` and ``report_root`` required). Pure: the files are checked when it starts."""
    if not rulebook:
        return None
    if not isinstance(rulebook, dict):
        raise LabError("rulebook: %r is not a mapping. Fix: {mode: report, program: <venv>/bin/ansible-rulebook, "
                       "ansible_config: <checkout>/ansible.cfg, inventory: <inventory dir>, report_root: <dir>} or "
                       "leave it unset (no rulebook)" % (rulebook,))
    unknown = sorted(set(rulebook) - set(RULEBOOK_KEYS))
    if unknown:
        raise LabError("rulebook: unknown key%s %s. Fix: use %s" % (
            "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(RULEBOOK_KEYS)))
    mode = rulebook.get("mode")
    if mode not in RULEBOOK_MODES:
        raise LabError("rulebook.mode: %r is not a mode. Fix: one of %s (report changes nothing)"
                       % (mode, ", ".join(RULEBOOK_MODES)))
    for key in ("program", "ansible_config", "inventory", "report_root"):
        value = rulebook.get(key)
        if not isinstance(value, str) or not value.startswith("/"):
            raise LabError("rulebook.%s: %r is not an absolute path. Fix: give the absolute path (the rulebook runs "
                           "its playbooks from temporary copies, where a relative path means nothing)" % (key, value))
    budget = rulebook.get("budget") or {}
    if not isinstance(budget, dict):
        raise LabError("rulebook.budget: %r is not a mapping. Fix: e.g. {max_auto_drains_per_zone: 3} or leave it "
                       "unset (docs/remediation.md, the budget's defaults)" % (budget,))
    state_dir = os.path.join(mon_dir, "eda")
    variables = {"netscale_eda_case_file": case_file, "netscale_eda_state_dir": state_dir,
                 "netscale_eda_mode": mode, "netscale_eda_report_root": os.path.normpath(rulebook["report_root"]),
                 "netscale_eda_budget": budget}
    if rulebook.get("clean_window") is not None:
        window = rulebook["clean_window"]
        if isinstance(window, str) and window.strip().isdigit():   # a templated number
            window = int(window)
        if isinstance(window, bool) or not isinstance(window, (int, float)) or window <= 0:
            raise LabError("rulebook.clean_window: %r is not a positive number of seconds. Fix: e.g. 300 (the "
                           "default) or leave it unset" % (window,))
        variables["netscale_eda_clean_window"] = window
    if rulebook.get("snapshot") is not None:
        variables["netscale_eda_snapshot"] = bool(rulebook["snapshot"])
    return {"program": os.path.realpath(rulebook["program"]), "ansible_config": os.path.realpath(
        rulebook["ansible_config"]), "inventory": os.path.realpath(rulebook["inventory"]), "state_dir": state_dir,
        "vars_file": os.path.join(mon_dir, "eda-vars.json"), "variables": variables}


def layout(lab, listen="127.0.0.1", port=19090, relay_port=None, frr_port=None, agent_port=9581,
           probe_port=probemod.PORT, agent_program=None, scrape_interval="5s", threshold=0.01, min_probes=10,
           correlator_program=None, events_file=EVENTS_FILE, rulebook=None):
    """What runs: {"prometheus": {...}, "relay": {...}, "frr": [...], "responder": {...}, "correlator": {...},
    "rulebook": {...} or None, "config", "rules"}."""
    rules.check(threshold, min_probes)
    # one spelling of each program path, so that the digest (a second run changes nothing) does not depend on it
    agent_program = os.path.realpath(agent_program) if agent_program else agent_program
    correlator_program = os.path.realpath(correlator_program) if correlator_program else correlator_program
    if correlator_program is None and agent_program:
        correlator_program = os.path.join(os.path.dirname(agent_program), CORRELATOR_PROGRAM)
    mon_dir = os.path.join(lab.sdir, "monitoring")
    relay_port = port + RELAY_OFFSET if relay_port is None else relay_port
    frr_port = port + FRR_OFFSET if frr_port is None else frr_port
    hosts = []
    for i, h in enumerate(lab.spec.hosts):
        hosts.append({"host": h["name"], "rack": h["rack"], "zone": h["zone"], "listen_port": relay_port + i,
                      "port": agent_port})
    frr = []
    zone_of_rack = dict((h["rack"], h["zone"]) for h in lab.spec.hosts)
    nodes = [(s["name"], None) for s in lab.spec.spines] + [(r["tor"]["name"], r["name"]) for r in lab.spec.racks]
    for i, (node, rack) in enumerate(nodes):
        item = {"host": node, "address": "%s:%d" % (listen, frr_port + i), "socket_dir": os.path.join(
            lab.node_dir(node), "run-frr")}
        if rack:
            item.update(rack=rack, zone=zone_of_rack.get(rack))
        frr.append(item)
    agents = [{"address": "%s:%d" % (listen, h["listen_port"]), "host": h["host"], "rack": h["rack"],
               "zone": h["zone"]} for h in hosts]
    storage = lab.spec.storage_addr
    correlator = {
        "program": correlator_program, "topology": os.path.join(mon_dir, "topology.json"),
        "index": livemod.index_data(lab.spec.racks, lab.spec.spines),
        "events": [{"host": h["host"], "path": host_events_path(lab, h["host"], events_file)} for h in hosts],
        "case_file": os.path.join(mon_dir, "cases.jsonl"), "snapshot": os.path.join(mon_dir, "cases.json"),
        "prometheus": "http://%s:%d" % (listen, port),
    }
    return {
        "listen": listen, "port": port, "dir": mon_dir, "correlator": correlator,
        "rulebook": rulebook_layout(mon_dir, correlator["case_file"], rulebook),
        "relay": {"listen": listen, "hosts": hosts, "state_file": lab.state_file, "timeout": 5.0},
        "frr": frr,
        "responder": {"netns": netns_name(lab.spec.storage_name), "port": probe_port, "program": agent_program,
                      "addresses": [storage[f]["storage"] for f in ("ipv6", "ipv4") if f in storage]},
        "config": rules.scrape_config(agents, frr, scrape_interval=scrape_interval),
        "rules": rules.recording_rules(threshold, min_probes),
    }


def storage_target(lab):
    """The lab storage node as a fabric_monitor target ({name, ipv4, ipv6})."""
    out = {"name": lab.spec.storage_name}
    for fam, a in lab.spec.storage_addr.items():
        out[fam] = a["storage"]
    return out


def _recorded(data):
    return [r for r in (data or {}).get("resources", []) if r.get("type") == "process"
            and str(r.get("name", "")).startswith(NAME_PREFIX)]


def _digest(lay):
    return hashlib.sha256(json.dumps(lay, sort_keys=True).encode()).hexdigest()[:16]


def status(lab):
    """(running: bool, digest of what runs or None, [recorded process records])."""
    data = load(lab.fabric, lab.state_root)
    recs = _recorded(data)
    if not recs:
        return False, None, []
    live = all(alive(r["pid"], r.get("started")) for r in recs)
    return live, recs[0].get("digest"), recs


def _spawn(lab, state, name, argv, cwd, digest, log_name, env=None, log_dir=None):
    """Start one process in the lab's monitoring cgroup (the teardown's second net) and record it."""
    cg = lab.cg_dir("monitoring")

    def join_cgroup():
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write("0")
    log = open(os.path.join(log_dir or cwd, log_name), "ab")
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                             start_new_session=True, close_fds=True, preexec_fn=join_cgroup, env=env)
    finally:
        log.close()
    state.add(type="process", name=NAME_PREFIX + name, pid=p.pid, started=start_time(p.pid), keep=False,
              digest=digest)
    return p


def tcp_ports(lay):
    """Every TCP port the layout binds on its listen address: Prometheus, the relay, the exporters."""
    ports = [("prometheus", lay["port"])]
    ports += [("relay for %s" % h["host"], h["listen_port"]) for h in lay["relay"]["hosts"]]
    ports += [("frr exporter for %s" % i["host"], int(i["address"].rsplit(":", 1)[1])) for i in lay["frr"]]
    return ports


def ports_in_use(listen, ports):
    """The (what, port) of ``ports`` something already listens on at ``listen`` (bind test, no packet sent).

    SO_REUSEADDR as Prometheus, the exporters and the relay set it: connections of a process just stopped
    (scrapes in TIME_WAIT) do not hold the port, only a listener does."""
    busy = []
    family = socket.AF_INET6 if ":" in listen else socket.AF_INET
    for what, port in ports:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((listen, port))
        except OSError:
            busy.append((what, port))
        finally:
            s.close()
    return busy


def log_tail(path, lines=8):
    """The last lines of a process log, for an error message ("" when there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def _wait_http(listen, port, path, proc, timeout, what, log):
    """Wait until ``GET path`` answers 200 (Prometheus's readiness endpoint)."""
    import http.client
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError("%s exited at start (rc=%s); its log ends: %s" % (what, proc.returncode, log_tail(log)))
        conn = http.client.HTTPConnection(listen, port, timeout=1.0)
        try:
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except (OSError, http.client.HTTPException) as e:
            last = e
        finally:
            conn.close()
        time.sleep(0.2)
    raise LabError("%s did not answer at http://%s:%d%s within %ss (%s)" % (what, listen, port, path, timeout, last))


def _wait_file(path, proc, timeout, what, log, since=None):
    """Wait until ``proc`` has written ``path`` (the correlator's first snapshot: it started and read its input)."""
    deadline = time.monotonic() + timeout
    since = time.time() - 1.0 if since is None else since
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError("%s exited at start (rc=%s); its log ends: %s" % (what, proc.returncode, log_tail(log)))
        try:
            if os.stat(path).st_mtime >= since:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise LabError("%s wrote no %s within %ss; its log ends: %s" % (what, path, timeout, log_tail(log)))


def start(lab, check=False, **kw):
    """Start (or keep) Prometheus, the relay, the FRR exporters and the storage responder."""
    data = load(lab.fabric, lab.state_root)
    if check and (data is None or data.get("status") != "ready"):
        return {"changed": True, "url": None, "note": "the lab is not built yet: monitoring starts after it"}
    if data is None or data.get("status") != "ready":
        raise LabError("lab %s is not running (state file %s); build it first: ansible-playbook playbooks/lab.yml"
                       % (lab.fabric, lab.state_file))
    lay = layout(lab, **kw)
    digest = _digest(lay)
    running, have, recs = status(lab)
    url = "http://%s:%d" % (lay["listen"], lay["port"])
    cor = lay["correlator"]
    result = {"changed": False, "url": url, "dir": lay["dir"], "targets": len(lay["relay"]["hosts"]),
              "frr_exporters": len(lay["frr"]), "storage_target": storage_target(lab),
              "case_file": cor["case_file"], "cases": cor["snapshot"], "events_files": len(cor["events"])}
    rb = lay["rulebook"]
    if rb:
        result["rulebook"] = {"mode": rb["variables"]["netscale_eda_mode"], "state_dir": rb["state_dir"],
                              "report_root": rb["variables"]["netscale_eda_report_root"],
                              "log": os.path.join(lay["dir"], "rulebook.log")}
    if running and have == digest:
        return result
    result["changed"] = True
    if check:
        return result
    if recs:
        stop(lab)
    busy = ports_in_use(lay["listen"], tcp_ports(lay))
    if busy:
        raise LabError("lab %s: port%s %s on %s already in use (another lab's monitoring on this machine?); nothing "
                       "was started. Fix: give this lab its own lab_monitoring_port (the relay and the exporters "
                       "follow it: +%d, +%d), stop what holds the port, or set lab_monitoring: false"
                       % (lab.fabric, "s" if len(busy) > 1 else "", ", ".join("%d (%s)" % (p, w) for w, p in busy),
                          lay["listen"], RELAY_OFFSET, FRR_OFFSET))
    for tool in (PROMETHEUS, FRR_EXPORTER):
        if not os.access(tool, os.X_OK):
            raise LabError("%s is missing: install Debian's prometheus and prometheus-frr-exporter "
                           "(bash scripts/setup.sh)" % tool)
    program = lay["responder"]["program"]
    if not program or not os.path.isfile(program):
        raise LabError("agent_program: %r is not a file; pass roles/fabric_monitor/files/netscale-fabric-monitor.py"
                       % (program,))
    if not cor["program"] or not os.path.isfile(cor["program"]):
        raise LabError("correlator_program: %r is not a file; pass roles/fabric_monitor/files/%s (built by "
                       "python scripts/build-host-programs.py)" % (cor["program"], CORRELATOR_PROGRAM))
    if rb:
        _check_rulebook_files(rb)
    d = lay["dir"]
    state = State(lab.fabric, lab.state_root, data)
    if not os.path.isdir(d):
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        state.add(type="dir", path=d)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    if not os.path.isdir(lab.cg_dir("monitoring")):
        state.add(type="cgroup", path=lab.cg_dir("monitoring"))
        os.makedirs(lab.cg_dir("monitoring"), exist_ok=True)
    with open(os.path.join(d, "prometheus.json"), "w") as f:
        f.write(rules.dump(lay["config"]))
    with open(os.path.join(d, "rules.json"), "w") as f:
        f.write(rules.dump(lay["rules"]))
    with open(os.path.join(d, "relay.json"), "w") as f:
        f.write(json.dumps(lay["relay"], indent=1, sort_keys=True))
    with open(os.path.join(d, "relay.py"), "w") as f:
        f.write(RELAY_SOURCE)
    try:
        relay = _spawn(lab, state, "relay", ["/usr/bin/python3", "-I", "-S", os.path.join(d, "relay.py"),
                                             os.path.join(d, "relay.json")], d, digest, "relay.log")
        for item in lay["frr"]:
            _spawn(lab, state, "frr-exporter/" + item["host"],
                   [FRR_EXPORTER, "--web.listen-address=" + item["address"],
                    "--frr.socket.dir-path=" + item["socket_dir"], "--frr.socket.timeout=3s",
                    "--no-collector.ospf", "--collector.bfd", "--collector.bgp", "--collector.bgp6"],
                   d, digest, "frr-exporter-%s.log" % item["host"])
        resp = lay["responder"]
        argv = ["nsenter", "--net=/run/netns/" + resp["netns"], "--", "/usr/bin/python3", "-I", "-S", program,
                "--port", str(resp["port"])]
        for a in resp["addresses"]:
            argv += ["--responder-only", a]
        _spawn(lab, state, "storage-responder", argv, d, digest, "storage-responder.log")
        prom = _spawn(lab, state, "prometheus",
                      [PROMETHEUS, "--config.file=" + os.path.join(d, "prometheus.json"),
                       "--storage.tsdb.path=" + os.path.join(d, "data"),
                       "--web.listen-address=%s:%d" % (lay["listen"], lay["port"]),
                       "--storage.tsdb.retention.time=2d", "--web.enable-lifecycle"],
                      d, digest, "prometheus.log")
        _wait_http(lay["listen"], lay["port"], "/-/ready", prom, 30.0, "prometheus", os.path.join(d, "prometheus.log"))
        atomic_write(cor["topology"], json.dumps(cor["index"], indent=1, sort_keys=True) + "\n")
        argv = ["/usr/bin/python3", "-I", "-S", cor["program"], "--topology", cor["topology"],
                "--case-file", cor["case_file"], "--snapshot", cor["snapshot"], "--prometheus", cor["prometheus"]]
        for item in cor["events"]:
            argv += ["--events", "%s=%s" % (item["host"], item["path"])]
        spawned_at = time.time()
        correlator = _spawn(lab, state, "correlator", argv, d, digest, "correlator.log")
        with open(os.path.join(d, "url"), "w") as f:
            f.write(url + "\n")
        if relay.poll() is not None:
            raise LabError("the scrape relay exited at start (rc=%s); its log (%s/relay.log) ends: %s"
                           % (relay.returncode, d, log_tail(os.path.join(d, "relay.log"))))
        _wait_file(cor["snapshot"], correlator, 20.0, "the live correlator", os.path.join(d, "correlator.log"),
                   since=spawned_at - 1.0)
        if rb:
            _start_rulebook(lab, state, rb, d, digest)
    except Exception:
        stop(lab)
        raise
    return result


def _cgroup_pids(cg):
    try:
        with open(os.path.join(cg, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _check_rulebook_files(rb):
    for key, ok, fix in (("program", os.access(rb["program"], os.X_OK), "bash scripts/setup.sh installs "
                          "ansible-rulebook in the checkout's .venv (requirements-eda.txt)"),
                         ("ansible_config", os.path.isfile(rb["ansible_config"]), "the checkout's ansible.cfg"),
                         ("inventory", os.path.exists(rb["inventory"]), "the lab's inventory (its directory carries "
                          "the group_vars the drains need)")):
        if not ok:
            raise LabError("rulebook.%s: %s is missing. Fix: %s; nothing was started" % (key, rb[key], fix))


def _start_rulebook(lab, state, rb, d, digest):
    """ansible-rulebook in the checkout (its ansible.cfg finds the collection and enables the journal callbacks), its
    state directory kept across restarts (the journal is the memory of "one action per case")."""
    os.makedirs(rb["state_dir"], mode=0o700, exist_ok=True)
    status = os.path.join(rb["state_dir"], "status.json")   # remediate.eda_journal.STATUS: the source writes it
    if os.path.exists(status):
        os.unlink(status)
    atomic_write(rb["vars_file"], json.dumps(rb["variables"], indent=1, sort_keys=True) + "\n", mode=0o600)
    env = dict(os.environ)
    env.update(ANSIBLE_CONFIG=rb["ansible_config"], PYTHONUNBUFFERED="1",
               PATH=os.path.dirname(rb["program"]) + os.pathsep + env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"))
    argv = [rb["program"], "-r", "netscale.multinic.remediate", "--vars", rb["vars_file"], "-i", rb["inventory"]]
    spawned_at = time.time()
    proc = _spawn(lab, state, "rulebook", argv, os.path.dirname(rb["ansible_config"]), digest, "rulebook.log",
                  env=env, log_dir=d)
    _wait_file(status, proc, RULEBOOK_STARTUP, "the remediation rulebook (ansible-rulebook)",
               os.path.join(d, "rulebook.log"), since=spawned_at - 1.0)


def stop(lab, check=False):
    """Stop what :func:`start` started, by recorded PID (checked start time)."""
    data = load(lab.fabric, lab.state_root)
    recs = _recorded(data)
    if not recs:
        return {"changed": False, "stopped": []}
    if check:
        return {"changed": True, "stopped": [r["name"] for r in recs]}
    stopped = []
    for r in recs:
        if kill(r["pid"], r.get("started"), signal.SIGTERM):
            stopped.append(r["name"])
    left = wait_gone([(r["pid"], r.get("started")) for r in recs], timeout=10.0)
    for pid, started in left:
        kill(pid, started, signal.SIGKILL)
    left = wait_gone(left, timeout=5.0)
    if left:
        raise LabError("monitoring processes still alive after SIGKILL: %s" % (left,))
    # what the recorded processes started and left behind (the rulebook's playbook runs): the monitoring cgroup is
    # this lab's own, so every PID still in it is ours
    stray = [(pid, start_time(pid)) for pid in _cgroup_pids(lab.cg_dir("monitoring"))]
    for pid, started in stray:
        kill(pid, started, signal.SIGKILL)
    if wait_gone(stray, timeout=5.0):
        raise LabError("processes still alive in %s after SIGKILL" % lab.cg_dir("monitoring"))
    state = State(lab.fabric, lab.state_root, data)
    state.drop(None, recs)
    return {"changed": True, "stopped": stopped}
