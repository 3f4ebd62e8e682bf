# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Measurement adapters: turn a live source into the recorded input a built-in gate takes.

Kept apart from the engine and the gate functions so those are unit-tested on recorded input.
Every adapter takes ``run(argv) -> (rc, stdout, stderr)`` (the module passes
``AnsibleModule.run_command``; tests pass a fake) and returns a zero-argument callable the engine
calls once per measurement.
"""

from __future__ import annotations

import json
import os

from ansible_collections.netscale.multinic.plugins.module_utils.frr_state import split_json_stream
from ansible_collections.netscale.multinic.plugins.module_utils.gates import builtin
from ansible_collections.netscale.multinic.plugins.module_utils.gates.engine import MeasurementError


FRR_COMMANDS = {
    "neighbors": ["show bgp neighbors json"],
    "routes": ["show ip route json", "show ipv6 route json"],
}


def frr_input(run, vtysh, what):
    """Raw FRR JSON for a gate: ``what`` = neighbors (one doc) or routes (a list of two docs)."""
    argv = list(vtysh)
    cmds = FRR_COMMANDS[what]
    for c in cmds:
        argv += ["-c", c]
    rc, out, err = run(argv)
    if rc != 0:
        raise MeasurementError("%s failed (rc %s): %s" % (" ".join(argv), rc, (err or out or "").strip()[:300]))
    try:
        docs = split_json_stream(out)
    except ValueError as exc:
        raise MeasurementError("%s: output is not JSON (%s)" % (" ".join(argv), exc))
    if len(docs) != len(cmds):
        raise MeasurementError("%s: %d JSON documents for %d commands" % (" ".join(argv), len(docs), len(cmds)))
    return docs[0] if what == "neighbors" else docs


def process_chain(pid, proc_root="/proc", depth=2):
    """``[{pid, name, state}]`` of ``pid`` and its parents (``depth`` processes at most, never PID 1): the
    VipInjector helper and the ExaBGP that runs it. A process that does not exist is ``state: gone``."""
    out = []
    while pid and int(pid) > 1 and len(out) < depth:
        fields = {}
        try:
            with open(os.path.join(proc_root, str(int(pid)), "status")) as f:
                for line in f:
                    key, dummy, value = line.partition(":")
                    fields[key.strip()] = value.strip()
        except (OSError, ValueError):
            out.append({"pid": int(pid), "name": "", "state": "gone"})
            break
        state = (fields.get("State") or "?").split()[0]
        out.append({"pid": int(pid), "name": fields.get("Name", ""), "state": state})
        pid = fields.get("PPid")
    return out


def vipinjector_input(runtime_dir, slots, proc_root="/proc"):
    """Status JSON per slot (``{"1": {...}}``), ``present: false`` where the file is missing. A status file
    is only rewritten on a change, so it cannot tell a hung sidecar from a quiet one: ``processes`` adds the
    state of the helper that wrote it (its ``pid``) and of its parent ExaBGP (a stopped one, SIGSTOP, keeps
    its sessions Established on the ToR until the hold timer and its status file says 'up')."""
    out = {}
    for s in slots:
        path = os.path.join(runtime_dir, "slot%d" % int(s), "status.json")
        try:
            with open(path) as f:
                st = json.load(f)
            st["present"] = True
        except (OSError, ValueError) as exc:
            st = {"present": False, "error": str(exc)}
        if st.get("present") and isinstance(st.get("pid"), int):
            st["processes"] = process_chain(st["pid"], proc_root)
        out[str(s)] = st
    return out


def ping_argv(target, count=20, interval=0.05, netns=None, timeout=2, nsenter="nsenter"):
    """ping from a workload namespace of this host (``nsenter --net=/run/netns/NS``, so the host's
    own bpffs/sysfs are left alone)."""
    argv = ["ping", "-n", "-q", "-c", str(int(count)), "-i", str(interval), "-W", str(int(timeout)), target]
    if netns:
        argv = [nsenter, "--net=/run/netns/%s" % netns, "--"] + argv
    return argv


def measurement(gate, source, run=None, hosts=None, rack_prefixes=None, session_family="auto", slots=None,
                vtysh=("vtysh",), runtime_dir="/run/netscale-vipinjector", ping=None, command=None, data=None):
    """A callable measuring built-in (or custom) ``gate`` from ``source``:
    ``frr`` | ``vipinjector`` | ``ping`` | ``command`` (argv printing a JSON object) | ``values``
    (``data`` already measured: the gate's recorded input, or the values of a custom gate)."""

    def get_input():
        if source == "values":
            return data
        if source == "frr":
            what = "neighbors" if gate == "bgp_sessions" else "routes"
            return frr_input(run, vtysh, what)
        if source == "vipinjector":
            return vipinjector_input(runtime_dir, slots or [])
        if source == "ping":
            p = dict(ping or {})
            argv = ping_argv(p["target"], p.get("count", 20), p.get("interval", 0.05), p.get("netns"),
                             p.get("timeout", 2))
            rc, out, err = run(argv)
            if rc not in (0, 1):   # 1 = some replies missing: still a measurement
                raise MeasurementError("%s failed (rc %s): %s" % (" ".join(argv), rc, (err or out).strip()[:300]))
            return out
        if source == "command":
            rc, out, err = run(list(command))
            if rc != 0:
                raise MeasurementError("%s failed (rc %s): %s" % (" ".join(command), rc, (err or out).strip()[:300]))
            try:
                val = json.loads(out)
            except ValueError as exc:
                raise MeasurementError("%s: stdout is not a JSON object (%s)" % (" ".join(command), exc))
            return val
        raise MeasurementError("source %r: use one of frr, vipinjector, ping, command, values" % (source,))

    def measure():
        raw = get_input()
        if gate == "custom":
            if not isinstance(raw, dict):
                raise MeasurementError("custom gate: measured %s, not a dict of values" % type(raw).__name__)
            return raw
        return builtin.values_for(gate, raw, hosts=hosts, rack_prefixes=rack_prefixes,
                                  session_family=session_family, slots=slots)

    return measure


DEFAULT_SOURCE = {
    "bgp_sessions": "frr",
    "ecmp_width": "frr",
    "spine_task_routes": "frr",
    "nic_shares": "values",
    "probe_loss": "ping",
    "sidecars": "vipinjector",
    "custom": "command",
}
