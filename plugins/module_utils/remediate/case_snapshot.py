# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshots of device state when a monitoring case opens (issue 29 item 4). No Ansible imports.

``playbooks/case_snapshot.yml`` (started by the rulebook on a case's ``open`` event, or by hand) takes the
rollout's triage snapshot (``netscale.multinic.rollout_snapshot``, read-only, its output redacted) of the nodes
this module picks for the case's scope, and writes them beside each other with an index::

    <dir>/<fabric>/<case dir>/<node>.json     one node's snapshot (mode 0600, directories 0700)
    <dir>/<fabric>/<case dir>/index.json      the case, its scope and root cause, taken_at, per node: the
                                              file, ok or failed with the reason

``<case dir>`` is the case id with ``/`` written as ``+`` (:func:`case_dir_name`: the id's other characters are
file-name safe and ``+`` is not one of them, so two ids never share a directory).

Nodes per scope kind (:func:`targets`; the suspected element first, then its neighbours):

* ``nic``, ``host`` -> the host and its ToR (the NIC, its cable and its ToR port cannot be told apart by probes);
* ``tor`` -> the ToR and every host of its rack;
* ``uplink`` -> the ToR and the spine (the zone's spines when the case names none: ``<tor>/any-spine``);
* ``spine`` -> the spine and the ToRs of its zone;
* ``zone`` -> the zone's spines (the spine layer is what a zone case suspects; every ToR and host of a zone is
  not a snapshot, it is a fleet dump);
* ``agent`` -> the host only: an agent that stopped reporting is most often a crashed or stuck agent on a live
  host (its units and their journal are in the host snapshot); a host that is down is unreachable and recorded
  failed in the index, which is what happened.

A node is ``ok`` when its snapshot module returned and at least one command succeeded; an unreachable node, a
failed module, a node without a result (its play did not run) or one outside the inventory is ``failed`` with the
reason. The index is ``complete`` only when every node is ok.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.remediate.actions import KINDS, STATES
from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact, write_if_changed

FORMAT = 1
INDEX = "index.json"
FILE_MODE = 0o600       # as the drain journal: its files 0600, its directories 0700
DIR_MODE = 0o700
ROLES = ("host", "tor", "spine")
# a node of the plan's take without an entry: its snapshot task or the write of its file did not complete (the node
# left the play: the playbook's output says why)
NO_RESULT = "no result: the node's snapshot or its file was not completed (see the playbook's output)"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")
_NODE_RE = re.compile(r"[^A-Za-z0-9_.-]")
# keys of a module result that are Ansible's bookkeeping, not the node's state
_DROP = ("invocation", "_ansible_no_log", "_ansible_verbose_always", "_ansible_delegated_vars", "changed")


class SnapshotError(MultinicError, ValueError):
    """Bad input (names the field, the value and the fix)."""


def _name(value, field, fix):
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise SnapshotError("%s: %r is not a name. Fix: %s." % (field, value, fix))
    return value


def check_case(event):
    """The case of a case event (``{"case": {...}}``, as the rulebook passes it) or a bare case dict (a line of
    the case file, an entry of the correlator's current cases), checked: ``id``, ``scope.kind`` and, when given,
    ``state``. Returns the case."""
    case = event.get("case") if isinstance(event, dict) and isinstance(event.get("case"), dict) else event
    if not isinstance(case, dict):
        raise SnapshotError("case_snapshot_case: %r is not a case. Fix: pass the case event's case, "
                            "{\"id\": ..., \"scope\": {\"kind\": ...}, ...} (a line of the case file)." % (case,))
    _name(case.get("id"), "case.id", "the case id of the case file (letters, digits and _.:@/-, at most 128)")
    scope = case.get("scope")
    if not isinstance(scope, dict):
        raise SnapshotError("case.scope: %r (case %s) is missing or not an object. Fix: pass the whole case, with "
                            "its scope {\"kind\": ..., \"host\": ...}." % (scope, case["id"]))
    if scope.get("kind") not in KINDS:
        raise SnapshotError("case.scope.kind: %r (case %s) is not a scope kind with a snapshot. Fix: one of %s." % (
            scope.get("kind"), case["id"], ", ".join(KINDS)))
    if "state" in case and case["state"] not in STATES:
        raise SnapshotError("case.state: %r (case %s) is not a case state. Fix: one of %s, or leave it out." % (
            case["state"], case["id"], ", ".join(STATES)))
    return case


def case_dir_name(case_id):
    """The directory of a case's snapshot: its id with ``/`` as ``+`` (injective: ``+`` is not an id character)."""
    _name(case_id, "case.id", "a case id (letters, digits and _.:@/-)")
    return case_id.replace("/", "+")


def node_file(node):
    return "%s.json" % _NODE_RE.sub("_", node)


def _field(scope, field, cid, fix):
    return _name(scope.get(field), "case.scope.%s" % field, "%s (case %s, kind %s)" % (fix, cid, scope["kind"]))


def _host(fabric, host, cid):
    if host not in fabric.hosts:
        raise SnapshotError("case.scope.host: %r (case %s) is not a GPU host of this fabric. Fix: take the snapshot "
                            "with the inventory of the fabric the case came from." % (host, cid))
    return host


def _rack_of_tor(fabric, tor, cid):
    for rack, data in sorted(fabric.racks.items()):
        if data["tor"] == tor:
            return rack
    raise SnapshotError("case.scope.tor: %r (case %s) is not a ToR of this fabric. Fix: take the snapshot with the "
                        "inventory of the fabric the case came from." % (tor, cid))


def _spine(fabric, spine, cid):
    if spine not in fabric.spines:
        raise SnapshotError("case.scope.spine: %r (case %s) is not a spine of this fabric. Fix: take the snapshot "
                            "with the inventory of the fabric the case came from." % (spine, cid))
    return spine


def targets(case, fabric):
    """The nodes to snapshot for a checked case (see the module doc): ``[{"node", "kind": "host" | "frr",
    "role": "host" | "tor" | "spine", "file"}]``, the suspected element first, no node twice.

    ``fabric`` is the remediation's view of the plan (:class:`.budget.FabricView`: hosts and their racks, racks
    and their ToR and zone, spines and their zone), the one ``drain_budget`` uses. A name the plan does not know
    is an error (the case came from another fabric)."""
    cid, scope = case["id"], case["scope"]
    kind = scope["kind"]
    out = []

    def add(node, role):
        if node not in [t["node"] for t in out]:
            out.append({"node": node, "kind": "host" if role == "host" else "frr", "role": role,
                        "file": node_file(node)})

    if kind in ("nic", "host", "agent"):
        host = _host(fabric, _field(scope, "host", cid, "the correlation sets the host of a %s case" % kind), cid)
        tor = fabric.racks[fabric.hosts[host]["rack"]]["tor"]
        if scope.get("tor") not in (None, tor):
            raise SnapshotError("case.scope.tor: %r (case %s) but the plan puts host %s under ToR %s. Fix: take the "
                                "snapshot with the inventory of the fabric the case came from." % (
                                    scope.get("tor"), cid, host, tor))
        add(host, "host")
        if kind != "agent":
            add(tor, "tor")
    elif kind in ("tor", "uplink"):
        tor = _field(scope, "tor", cid, "the correlation sets the ToR of a %s case" % kind)
        rack = _rack_of_tor(fabric, tor, cid)
        add(tor, "tor")
        if kind == "tor":
            for host in fabric.rack_hosts.get(rack, []):
                add(host, "host")
        elif scope.get("spine"):
            add(_spine(fabric, _field(scope, "spine", cid, "a spine name or null"), cid), "spine")
        else:
            for spine in fabric.zone_spines(fabric.racks[rack]["zone"]):
                add(spine, "spine")
    elif kind == "spine":
        spine = _spine(fabric, _field(scope, "spine", cid, "the correlation sets the spine of a spine case"), cid)
        add(spine, "spine")
        for rack in fabric.zone_racks(fabric.spines[spine]):
            add(fabric.racks[rack]["tor"], "tor")
    else:  # zone
        zone = _field(scope, "zone", cid, "the correlation sets the zone of a zone case")
        zones = set(v["zone"] for v in fabric.racks.values()) | set(fabric.spines.values())
        if zone not in zones:
            raise SnapshotError("case.scope.zone: %r (case %s) is not a zone of this fabric. Fix: take the snapshot "
                                "with the inventory of the fabric the case came from." % (zone, cid))
        for spine in fabric.zone_spines(zone):
            add(spine, "spine")
    return out


def read_index(path):
    """The index at ``path``, or None when there is none. An index that does not parse is an error (naming the
    file): a run would otherwise overwrite evidence it cannot read."""
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SnapshotError("%s: cannot read it (%s). Fix: check its mode and owner." % (path, exc.strerror or exc))
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise ValueError("no nodes")
    except ValueError as exc:
        raise SnapshotError("%s: not a case snapshot index (%s). Fix: move it away; the next run writes a new "
                            "one." % (path, exc))
    return data


def plan(event, fabric, fabric_name, base_dir, now, force=False, inventory=None):
    """What one run does: ``{"case", "fabric", "case_dir", "index_path", "taken_at", "take", "kept",
    "not_in_inventory"}``.

    ``take``: the targets to snapshot now. A node that is ``ok`` in an earlier index of the case is kept, not taken
    again (the snapshot is the state when the problem was detected), unless ``force``; a complete earlier index
    leaves nothing to take. ``inventory``: the names the inventory has (None: not checked); a target outside it
    cannot be reached and is recorded failed. Reads the earlier index; writes nothing."""
    case = check_case(event)
    _name(fabric_name, "fabric", "the fabric's name (the topology's name)")
    if not isinstance(base_dir, str) or not base_dir:
        raise SnapshotError("dir: %r is not a directory. Fix: set case_snapshot_dir (default <checkout>/reports/"
                            "cases)." % (base_dir,))
    case_dir = os.path.join(base_dir, fabric_name, case_dir_name(case["id"]))
    index_path = os.path.join(case_dir, INDEX)
    previous = read_index(index_path)
    wanted = targets(case, fabric)
    kept = []
    if previous is not None and not force:
        done = dict((e.get("node"), e) for e in previous["nodes"] if e.get("ok"))
        kept = [done[t["node"]] for t in wanted if t["node"] in done]
    kept_names = set(e["node"] for e in kept)
    known = None if inventory is None else set(inventory)
    take = [t for t in wanted if t["node"] not in kept_names and (known is None or t["node"] in known)]
    outside = [t for t in wanted if t["node"] not in kept_names and known is not None and t["node"] not in known]
    body = dict((k, case.get(k)) for k in ("id", "scope", "root_cause", "start", "opened_at") if k in case)
    return {"case": body, "fabric": fabric_name, "case_dir": case_dir, "index_path": index_path,
            "taken_at": previous.get("taken_at", now) if previous and not force else now,
            "targets": wanted, "take": take, "kept": kept, "not_in_inventory": outside}


def _reason_of(result):
    msg = str(result.get("msg") or result.get("exception") or "").strip().splitlines()
    return redact(msg[0] if msg else "no message")[:300]


def node_entry(target, result, now):
    """(file body, index entry) of one node from its registered ``rollout_snapshot`` result (None: no result).

    Failed: no result, unreachable, the module failed or was skipped, or no command succeeded. The body holds the
    result redacted (``writing.redact``: config forms of a key and secret-named fields)."""
    entry = {"node": target["node"], "kind": target["kind"], "role": target["role"], "file": target["file"],
             "ok": False, "reason": None, "taken_at": now, "commands_failed": []}
    if not isinstance(result, dict) or not result:
        entry["reason"] = "no result: the node's snapshot task did not run"
    elif result.get("unreachable"):
        entry["reason"] = "unreachable: %s" % _reason_of(result)
    elif result.get("skipped"):
        entry["reason"] = "skipped: %s" % (result.get("skip_reason") or "the task was skipped")
    elif result.get("failed"):
        entry["reason"] = "failed: %s" % _reason_of(result)
    else:
        commands = result.get("commands") if isinstance(result.get("commands"), dict) else {}
        bad = sorted(n for n, c in commands.items() if not isinstance(c, dict) or c.get("rc") != 0)
        entry["commands_failed"] = bad
        if not commands or len(bad) == len(commands):
            entry["reason"] = "no command succeeded (%s)" % (", ".join(bad) or "none ran")
        else:
            entry["ok"] = True
            if isinstance(result.get("time"), (int, float)) and not isinstance(result.get("time"), bool):
                entry["taken_at"] = float(result["time"])
    snap = dict((k, v) for k, v in (result or {}).items() if k not in _DROP) if isinstance(result, dict) else None
    body = {"v": FORMAT, "node": target["node"], "kind": target["kind"], "role": target["role"],
            "ok": entry["ok"], "reason": entry["reason"], "taken_at": entry["taken_at"],
            "commands_failed": entry["commands_failed"], "snapshot": redact(snap)}
    return body, entry


def index(snapshot_plan, entries):
    """The index record of a run: the plan (:func:`plan`) and the entries of the nodes it took (:func:`node_entry`;
    None for a node that gave none). Every target is in it exactly once: taken now, kept from an earlier run,
    outside the inventory or without a result (failed)."""
    got = dict((e["node"], e) for e in entries if isinstance(e, dict) and e.get("node"))
    kept = dict((e["node"], e) for e in snapshot_plan["kept"])
    outside = set(t["node"] for t in snapshot_plan["not_in_inventory"])
    nodes = []
    for t in snapshot_plan["targets"]:
        if t["node"] in kept:
            nodes.append(kept[t["node"]])
        elif t["node"] in outside:
            nodes.append(dict(t, ok=False, reason="not in the inventory: cannot be reached", taken_at=None,
                              commands_failed=[]))
        elif t["node"] in got:
            nodes.append(got[t["node"]])
        else:
            nodes.append(dict(t, ok=False, reason=NO_RESULT, taken_at=None, commands_failed=[]))
    failed = [n["node"] for n in nodes if not n["ok"]]
    case = snapshot_plan["case"]
    return {"v": FORMAT, "case": case["id"], "scope": case["scope"], "root_cause": case.get("root_cause"),
            "fabric": snapshot_plan["fabric"], "taken_at": snapshot_plan["taken_at"], "complete": not failed,
            "failed": failed, "nodes": nodes}


def summary(idx):
    """One line: what the index says."""
    ok = len(idx["nodes"]) - len(idx["failed"])
    text = "case %s (%s): %d of %d node snapshots" % (idx["case"], idx["scope"].get("kind"), ok, len(idx["nodes"]))
    if idx["failed"]:
        reasons = dict((n["node"], n["reason"]) for n in idx["nodes"] if not n["ok"])
        text += "; PARTIAL, missing: " + "; ".join("%s (%s)" % (n, reasons[n]) for n in idx["failed"])
    return text


def _makedirs(folder):
    """``folder`` and its missing parents 0700 (the snapshots of a fabric are as private as its drain journal)."""
    if not os.path.isdir(folder):
        parent = os.path.dirname(folder.rstrip(os.sep))
        if parent and parent != folder:
            _makedirs(parent)
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            pass


def render(data):
    """The text of a node file or an index: ``data`` redacted, as JSON."""
    return json.dumps(redact(data), indent=1, sort_keys=True, default=str) + "\n"


def write_json(path, data, check_mode=False):
    """Write ``data`` (redacted) as JSON at ``path``, atomically, 0600, in a 0700 directory; returns whether the
    content or mode changed (or would)."""
    if not check_mode:
        _makedirs(os.path.dirname(path))
    return write_if_changed(path, render(data), mode=FILE_MODE, check_mode=check_mode)


def link(snapshot_dir, case_id):
    """Where the health report points a case to: ``{"index": path, "complete", "nodes", "failed"}`` of the case's
    snapshot index in ``snapshot_dir`` (``<case_snapshot_dir>/<fabric>``), or None when it has none. An index that
    does not read is shown as such (``"error"``), not as none: the report must not hide a broken snapshot."""
    path = os.path.join(snapshot_dir, case_dir_name(case_id), INDEX)
    try:
        idx = read_index(path)
    except SnapshotError as exc:
        return {"index": path, "complete": False, "nodes": 0, "failed": [], "error": str(exc)}
    if idx is None:
        return None
    return {"index": path, "complete": bool(idx.get("complete")), "nodes": len(idx["nodes"]),
            "failed": list(idx.get("failed") or [])}
