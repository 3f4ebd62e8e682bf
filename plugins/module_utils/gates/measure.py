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

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bpf as datapath_bpf
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as datapath_spec
from ansible_collections.netscale.multinic.plugins.module_utils.frr.state import split_json_stream
from ansible_collections.netscale.multinic.plugins.module_utils.gates import builtin
from ansible_collections.netscale.multinic.plugins.module_utils.gates.engine import MeasurementError


FRR_COMMANDS = {
    "neighbors": ["show bgp neighbors json"],
    "bfd_peers": ["show bfd peers json"],
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
    return docs if what == "routes" else docs[0]


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


def _json_output(run, argv):
    """(parsed JSON stdout, None) or (None, error text) of ``argv``."""
    try:
        rc, out, err = run(list(argv))
    except OSError as exc:
        return None, "%s: %s" % (argv[0], exc)
    if rc != 0:
        return None, "%s failed (rc %s): %s" % (" ".join(argv), rc, (err or out or "").strip()[:300])
    try:
        return json.loads(out or "[]"), None
    except ValueError as exc:
        return None, "%s: output is not JSON (%s)" % (" ".join(argv), exc)


def datapath_input(run, state_dir="/var/lib/netscale-multinic", bpffs_root="/sys/fs/bpf"):
    """The host's own view of its NICs (gate ``nics_in_service``, source ``datapath``): the datapath the
    host_datapath role deployed (``datapath.json``: mode, NICs, per-NIC tables), ``ip -j link show``, and the
    egress set: eBPF mode the pinned ``mn_nics`` map (``bpftool -j map dump``), kernel mode ``ip -j route
    show table T`` of every NIC's table. Whatever cannot be read is recorded as an error (the gate counts the
    NIC out of service), never left out."""
    rec = {"configured": False}
    try:
        with open(os.path.join(state_dir, "datapath.json")) as f:
            st = json.load(f)
        spec = st["spec"]
        nics = [{"name": n["name"], "index": int(n["index"]),
                 "families": [fam for fam in ("ipv4", "ipv6") if fam in n]} for n in spec["nics"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        rec["error"] = "%s/datapath.json: %s" % (state_dir, exc)
        return {"datapath": rec}
    rec.update({"configured": True, "host": spec.get("host"), "ebpf": bool(spec.get("ebpf")), "nics": nics,
                "table_base": int(spec.get("table_base", datapath_spec.TABLE_BASE)),
                "metric_own": datapath_spec.METRIC_OWN, "metric_fallback": datapath_spec.METRIC_FALLBACK})
    rec["links"], rec["links_error"] = _json_output(run, ["ip", "-j", "link", "show"])
    if rec["ebpf"]:
        version = st.get("bpf_version")
        if not version:
            rec["mn_nics"], rec["mn_nics_error"] = None, "datapath.json names no loaded BPF version"
        else:
            pin = os.path.join(bpffs_root, datapath_bpf.PIN_SUBDIR, "v-" + version, "maps", "mn_nics")
            rec["mn_nics"], rec["mn_nics_error"] = _json_output(run, ["bpftool", "-j", "map", "dump", "pinned", pin])
        return {"datapath": rec}
    rec["routes"], rec["routes_error"] = {}, {}
    for fam in ("ipv4", "ipv6"):
        for n in nics:
            if fam not in n["families"]:
                continue
            table = str(rec["table_base"] + n["index"])
            routes, error = _json_output(run, ["ip", "-j", "-%s" % fam[-1], "route", "show", "table", table])
            if error:
                rec["routes_error"]["%s/%s" % (fam, table)] = error
            else:
                rec["routes"].setdefault(fam, {})[table] = routes
    return {"datapath": rec}


def ping_argv(target, count=20, interval=0.05, netns=None, timeout=2, nsenter="nsenter"):
    """ping from a workload namespace of this host (``nsenter --net=/run/netns/NS``, so the host's
    own bpffs/sysfs are left alone)."""
    argv = ["ping", "-n", "-q", "-c", str(int(count)), "-i", str(interval), "-W", str(int(timeout)), target]
    if netns:
        argv = [nsenter, "--net=/run/netns/%s" % netns, "--"] + argv
    return argv


def measurement(gate, source, run=None, hosts=None, rack_prefixes=None, session_family="auto", slots=None,
                vtysh=("vtysh",), runtime_dir="/run/netscale-vipinjector", ping=None, command=None, data=None,
                state_dir="/var/lib/netscale-multinic", bpffs_root="/sys/fs/bpf"):
    """A callable measuring built-in (or custom) ``gate`` from ``source``:
    ``frr`` | ``vipinjector`` | ``datapath`` | ``ping`` | ``command`` (argv printing a JSON object) | ``values``
    (``data`` already measured: the gate's recorded input, or the values of a custom gate)."""

    def get_input():
        if source == "values":
            return data
        if source == "frr":
            what = {"bgp_sessions": "neighbors", "nics_in_service": "bfd_peers"}.get(gate, "routes")
            return frr_input(run, vtysh, what)
        if source == "datapath":
            return datapath_input(run, state_dir, bpffs_root)
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
        raise MeasurementError("source %r: use one of frr, vipinjector, datapath, ping, command, values" % (source,))

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
    "nics_in_service": "datapath",
    "custom": "command",
}
