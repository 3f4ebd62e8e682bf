# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build steps "frr" and "bgp": FRR's files and daemons in the spine and ToR boxes, then waiting
until BGP has converged (every spine session Established, every ToR has the storage route)."""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import threading
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab import frr as frrmod
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, run, run_command, start_time
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name, read_pid
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write, redact


def write_frr_files(lab, node, config):
    """frr.conf, daemons and vtysh.conf of one box, owned by FRR's users (the daemons drop to them)."""
    etc = os.path.join(lab.node_dir(node), "etc-frr")
    frr_uid, frr_gid = pwd.getpwnam("frr").pw_uid, grp.getgrnam("frr").gr_gid
    vty_gid = grp.getgrnam("frrvty").gr_gid
    for name, text in (("frr.conf", config), ("daemons", frrmod.DAEMONS_FILE), ("vtysh.conf", frrmod.VTYSH_CONF)):
        group = vty_gid if name == "vtysh.conf" else frr_gid
        # frr.conf holds the TCP-MD5 keys: FRR's user only
        atomic_write(os.path.join(etc, name), text, mode=0o600 if name == "frr.conf" else 0o640,
                     owner=(frr_uid, group))


def start_frr(lab, names=None):
    """Write every box's files, then start its daemons and load its config, boxes in parallel
    (``names``: only those boxes, an incremental change)."""
    configs = [(n, c) for n, c in lab.spec.frr_configs() if names is None or n in names]
    for node, config in configs:
        write_frr_files(lab, node, config)
    errors = []

    def start_box(node):
        try:
            for daemon in frrmod.DAEMONS:
                start_daemon(lab, node, daemon)
            lab.vtysh(node, ["-b"])
        except Exception as e:  # collected, raised in the main thread
            errors.append(e)
    threads = [threading.Thread(target=start_box, args=(node,)) for node, _config in configs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def reload_frr(lab, node):
    """Give a running box its new config in place (frr-reload.py: only the differences are applied,
    no daemon restarts): a spine whose downlinks changed because a rack came or went."""
    config = dict(lab.spec.frr_configs())[node]
    write_frr_files(lab, node, config)
    argv = lab.nsenter_box(node) + ["/usr/bin/python3", "/usr/lib/frr/frr-reload.py", "--reload", "--stdout",
                                    "--log-level", "error", "/etc/frr/frr.conf"]
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False)
    if p.returncode != 0:
        raise LabError("node %s: frr-reload.py failed (rc=%d): %s" % (node, p.returncode, redact((p.stderr or p.stdout)[-800:])))


def start_daemon(lab, node, daemon):
    """Start one FRR daemon inside a box (default paths), record its PID."""
    cg = lab.cg_dir(node)

    def join_cgroup():
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write("0")
    p = subprocess.run(lab.nsenter_box(node) + frrmod.daemon_argv(daemon), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, preexec_fn=join_cgroup, timeout=30, check=False)
    pidfile = os.path.join(lab.node_dir(node), "run-frr", "%s.pid" % daemon)
    if p.returncode != 0:
        why = (p.stderr or p.stdout).strip()
        raise LabError("node %s: %s failed to start (rc=%d): %s" % (node, daemon, p.returncode, why))
    pid = read_pid(pidfile)
    if pid is None:
        raise LabError("node %s: %s started but wrote no pid file %s" % (node, daemon, pidfile))
    state = lab.attached_state()
    state.add(type="process", name="%s/%s" % (node, daemon), pid=pid, started=start_time(pid), node=node)
    with state.lock:
        daemons = dict(state.data["nodes"][node].get("daemons", {}))
        daemons[daemon] = pid
        state.set_node(node, daemons=daemons)
    return pid


def start_bare_daemon(ns, daemon, run_dir, conf="/dev/null", extra=(), error=LabError, timeout=5.0):
    """Start one FRR daemon in a bare namespace (the test harnesses' ToRs and BFD responders; the
    engine's boxes use start_daemon). Waits for its pid file, and for zebra also its zserv.api (the
    daemons started next connect to it). Returns (pid file, pid)."""
    run_command(["ip", "netns", "exec", ns] + frrmod.bare_daemon_argv(daemon, run_dir, conf, extra), error=error)
    pidfile = os.path.join(run_dir, "%s.pid" % daemon)
    waits = [pidfile] + ([os.path.join(run_dir, "zserv.api")] if daemon == "zebra" else [])
    deadline = time.monotonic() + timeout
    for path in waits:
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise error("%s in %s: no %s after %.0f s (its log: %s)" % (daemon, ns, path, timeout, run_dir))
            time.sleep(0.02)
    pid = read_pid(pidfile, timeout=max(0.5, deadline - time.monotonic()))
    if pid is None:
        raise error("%s in %s: empty pid file %s" % (daemon, ns, pidfile))
    return pidfile, pid


def wait_bgp(lab):
    deadline = time.monotonic() + lab.bgp_timeout
    want = {}
    for s in lab.spec.spines:
        want[s["name"]] = sum(1 for d in s["downlinks"] for fam in ("ipv4", "ipv6") if fam in d)
    while True:
        missing = _spine_sessions_missing(lab, want)
        if not missing:
            missing = _storage_routes_missing(lab)
        if not missing:
            return
        if time.monotonic() > deadline:
            raise LabError("BGP not converged after %ss: %s" % (lab.bgp_timeout, "; ".join(missing)))
        time.sleep(0.2)


def _spine_sessions_missing(lab, want):
    missing = []
    for node, count in want.items():
        summary = json.loads(lab.vtysh(node, ["-c", "show bgp summary json"]))
        up = sum(1 for af in summary.values() if isinstance(af, dict)
                 for p in af.get("peers", {}).values() if p.get("state") == "Established")
        if up < count:
            missing.append("%s: %d/%d sessions Established" % (node, up, count))
    return missing


def _storage_routes_missing(lab):
    missing = []
    for r in lab.spec.racks:
        for fam, a in lab.spec.storage_addr.items():
            out = run(["ip", "-n", netns_name(r["tor"]["name"]), "-6" if fam == "ipv6" else "-4",
                       "route", "show", a["prefix"]])[1]
            if not out.strip():
                missing.append("%s: no route to storage %s yet" % (r["tor"]["name"], a["prefix"]))
    return missing
