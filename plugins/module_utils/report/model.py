# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rollout report: ``reports/<run id>/report.json`` is built up event by event (start, preflight,
ToR, wave, snapshot, finish); ``report.md`` and ``nic_shares.svg`` are re-rendered from it after
every event, so a run that dies half-way still leaves a readable report."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time

from ansible_collections.netscale.multinic.plugins.module_utils.report import svg
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write, redact

EVENTS = ("start", "preflight", "tor", "wave", "snapshot", "finish")
JSON_NAME = "report.json"
MD_NAME = "report.md"
SVG_NAME = "nic_shares.svg"


def empty(run_id):
    return {"version": 1, "run": {"id": run_id, "status": "running"}, "preflight": {}, "tors": [],
            "waves": [], "snapshots": [], "events": []}


def load(directory, run_id=None):
    path = os.path.join(directory, JSON_NAME)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return empty(run_id or os.path.basename(os.path.normpath(directory)))


def _slim_gate(g):
    """A gate result for the report: everything but the per-measurement values of passed gates
    beyond the last one (they repeat)."""
    g = dict(g)
    ms = g.get("measurements") or []
    if g.get("verdict") == "pass" and len(ms) > 3:
        g["measurements"] = [dict(m, values={}) for m in ms[:-1]] + ms[-1:]
    for k in ("invocation", "changed", "failed", "msg", "_ansible_no_log"):
        g.pop(k, None)
    return g


def apply_event(report, event, data, now=None):
    """Merge one event into ``report`` (a dict); returns the report."""
    now = time.time() if now is None else now
    data = dict(data or {})
    if event not in EVENTS:
        raise ValueError("event %r: use one of %s" % (event, ", ".join(EVENTS)))
    report["events"].append({"event": event, "time": round(now, 3), "name": data.get("name")})
    if event == "start":
        report["run"].update(data)
        report["run"].setdefault("started", round(now, 3))
        report["run"]["status"] = "running"
    elif event == "preflight":
        report["preflight"].update(data)
    elif event == "tor":
        data["gates"] = [_slim_gate(g) for g in data.get("gates") or []]
        _upsert(report["tors"], data, "name")
    elif event == "wave":
        data["gates"] = [_slim_gate(g) for g in data.get("gates") or []]
        if "started" in data and "ended" in data:
            data["seconds"] = round(data["ended"] - data["started"], 3)
        _upsert(report["waves"], data, "name")
    elif event == "snapshot":
        report["snapshots"].append(data)
    elif event == "finish":
        report["run"].update(data)
        report["run"]["ended"] = round(now, 3)
        if report["run"].get("started"):
            report["run"]["seconds"] = round(now - report["run"]["started"], 3)
    return report


def summarize_event(report, event, data, directory):
    """A few fields of an event for progress output."""
    run = report.get("run") or {}
    if event == "start":
        return {"id": run.get("id"), "dir": directory, "rollout_id": run.get("rollout_id"),
                "journal": run.get("journal"),
                "waves": ", ".join("%s(%d)" % (w.get("name"), len(w.get("hosts") or []))
                                   for w in run.get("waves") or [])}
    if event == "tor":
        gates = data.get("gates") or []
        return {"name": data.get("name"), "rack": data.get("rack"), "changed": data.get("changed"),
                "gates": "%d/%d passed" % (sum(1 for g in gates if g.get("verdict") == "pass"), len(gates))}
    if event == "wave":
        w = [x for x in report.get("waves") or [] if x.get("name") == data.get("name")]
        w = w[0] if w else data
        return {"name": w.get("name"), "status": w.get("status"), "hosts": ", ".join(w.get("hosts") or []),
                "seconds": w.get("seconds")}
    if event == "snapshot":
        return {"node": data.get("node"), "path": data.get("path")}
    if event == "finish":
        return {"id": run.get("id"), "status": run.get("status"), "markdown": os.path.join(directory, MD_NAME)}
    return {}


def record(directory, event, data, snapshot=None, share_tolerance=None, check_mode=False, order=None):
    """Merge one event into ``<directory>/report.json`` and re-render the report (what
    ``netscale.multinic.rollout_report``, ``rollout_journal``'s ``report`` and ``rollout_snapshot``'s ``report`` do).
    A ``snapshot`` event stores ``snapshot`` (a ``rollout_snapshot`` result, redacted, 0600) under
    ``snapshots/<wave>/<node>.json``; with ``order`` (node names) the wave's snapshots of one kind are listed in
    that order, whichever was written first. Returns ``{event, status, paths, summary}``."""
    data = dict(data or {})
    report = load(directory)
    if event == "snapshot":
        snap = snapshot or {}
        node = data.get("node") or snap.get("node") or "unknown"
        wave = re.sub(r"[^A-Za-z0-9_.-]", "_", str(data.get("wave") or "none"))
        path = os.path.join(directory, "snapshots", wave, "%s.json" % re.sub(r"[^A-Za-z0-9_.-]", "_", node))
        # A ToR's running config carries MD5 keys: the stored snapshot is redacted and 0600.
        atomic_write(path, json.dumps(redact(snap), indent=1, sort_keys=True, default=str), mode=0o600)
        data.setdefault("node", node)
        data["path"] = os.path.relpath(path, directory)
        data.setdefault("kind", snap.get("kind"))
        # A snapshot that failed (node unreachable, command error) is recorded, never fatal: it
        # must not stop the rollback that follows it.
        data["captured"] = not (snap.get("failed") or snap.get("unreachable"))
        if not data["captured"]:
            data["error"] = redact(str(snap.get("msg") or "snapshot failed"))[:500]
    if event == "start":
        data.setdefault("check_mode", check_mode)
    apply_event(report, event, data)
    if event == "snapshot" and order:
        _place(report["snapshots"], list(order))
    paths = write(directory, report, share_tolerance)
    return {"event": event, "status": report["run"].get("status"), "paths": paths,
            "summary": summarize_event(report, event, data, directory)}


def _place(snapshots, order):
    """Move the last snapshot before the first one of its wave and kind that comes later in ``order``."""
    rank = dict((n, i) for i, n in enumerate(order))
    new = snapshots[-1]
    if new.get("node") not in rank:
        return
    for i, s in enumerate(snapshots[:-1]):
        if (s.get("wave"), s.get("kind")) == (new.get("wave"), new.get("kind")) and \
                rank.get(s.get("node"), -1) > rank[new["node"]]:
            snapshots.insert(i, snapshots.pop())
            return


@contextlib.contextmanager
def locked(directory):
    """The report directory locked against the other writers of this run (parallel snapshot tasks)."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def plan_line(plan_result):
    """The preflight's one line on the plan write (``fabric_plan``'s result)."""
    plan_result = plan_result or {}
    if not plan_result.get("changed"):
        return "unchanged"
    return "changes: %d added, %d removed" % (len(plan_result.get("added") or []), len(plan_result.get("removed") or []))


def start_events(run, plan, opened, rack_tors=None, scope=None):
    """The report's first events of a rollout, from what the journal's ``open`` returned: ``start`` (the run,
    its waves), ``preflight`` and, with a change ``scope``, one ``tor`` event per ToR out of scope (not touched).

    ``run``: ``id``, ``started``, ``rollout_id``, ``fabric``, ``inventory`` (topology), ``check_mode``,
    ``canary``, ``waves_spec``, ``start_wave``, ``plan`` (the ``fabric_plan`` result), ``renumber_consent``,
    ``gpu_hosts`` (count); ``plan``: the wave plan; ``opened``: ``path``, ``new``, ``notes``, ``plan_hash``;
    ``rack_tors``: ``{rack: ToR}`` (inventory order). Returns ``[(event, data), ...]``."""
    run = dict(run or {})
    start = {"id": run.get("id"), "rollout_id": run.get("rollout_id"), "journal": opened.get("path"),
             "journal_new": opened.get("new"), "journal_notes": opened.get("notes"), "fabric": run.get("fabric"),
             "inventory": run.get("inventory"), "check_mode": run.get("check_mode"),
             "canary": run.get("canary") or "first rack", "waves_spec": run.get("waves_spec"),
             "start_wave": run.get("start_wave"), "waves": plan.get("waves"),
             "skipped_waves": [w["name"] for w in plan.get("skipped") or []],
             "deferred_waves": [w["name"] for w in plan.get("deferred") or []], "started": run.get("started")}
    if scope is None:
        scoped = {"mode": "all"}
    else:
        scoped = dict(scope, deploy=plan.get("order"), tors=dict(scope.get("tors") or {}, changed=plan.get("tors")))
    preflight = {"plan": plan_line(run.get("plan")), "renumber_consent": run.get("renumber_consent"),
                 "gpu_hosts": run.get("gpu_hosts"), "tors": list(plan.get("tors") or []),
                 "plan_hash": opened.get("plan_hash"), "scope": scoped}
    events = [("start", start), ("preflight", preflight)]
    if scope is not None:
        touched = set(plan.get("tors") or [])
        for rack, tor in (rack_tors or {}).items():
            if tor not in touched:
                touched.add(tor)
                events.append(("tor", {"name": tor, "rack": rack, "changed": False,
                                       "status": "unchanged (out of scope, not touched)"}))
    return events


def _upsert(items, data, key):
    for it in items:
        if it.get(key) == data.get(key):
            it.update(data)
            return
    items.append(data)


def share_rows(report):
    """Rows for the plot: the last nic_shares gate of every host."""
    rows = {}
    for w in report.get("waves") or []:
        for g in w.get("gates") or []:
            if g.get("gate") != "nic_shares":
                continue
            per = (g.get("values") or {}).get("per_direction") or {}
            for direction, d in sorted(per.items()):
                rows[(g.get("target"), direction)] = {"host": g.get("target") or "?", "direction": direction,
                                                      "shares": d.get("shares") or {}, "verdict": g.get("verdict")}
    return [rows[k] for k in sorted(rows, key=lambda k: (str(k[0]), k[1]))]


def _fmt_values(v, limit=6):
    parts = []
    for k, val in sorted((v or {}).items()):
        if k in ("detail", "per_direction") or isinstance(val, (dict, list)):
            continue
        parts.append("%s=%s" % (k, val))
    return ", ".join(parts[:limit])


def _fmt_detail(v, limit=4):
    det = (v or {}).get("detail") or []
    out = []
    for d in det[:limit]:
        if isinstance(d, dict):
            out.append(" ".join("%s=%s" % (k, d[k]) for k in sorted(d)))
        else:
            out.append(str(d))
    if len(det) > limit:
        out.append("... %d more" % (len(det) - limit))
    return "; ".join(out)


def _esc(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def scope_lines(scope):
    """The change scope of a ``rollout_scope=changed`` run: what is deployed, what is left untouched."""
    def names(items):
        return _esc(", ".join(items or []) or "none")
    hosts, racks, tors = scope.get("hosts") or {}, scope.get("racks") or {}, scope.get("tors") or {}
    untouched = scope.get("untouched") or {}
    lines = ["## Change scope (rollout_scope=changed)", "", _esc(scope.get("message", "")), "",
             "| | added | changed | removed | unchanged, not touched |", "|---|---|---|---|---|",
             "| hosts | %s | %s | %s | %s |" % (
                 names(hosts.get("added")), names(hosts.get("changed")), names(hosts.get("removed")),
                 names(untouched.get("hosts"))),
             "| racks | %s | %s | %s | %s |" % (
                 names(racks.get("added")), names(racks.get("changed")), names(racks.get("removed")),
                 names(racks.get("unchanged"))),
             "| ToRs (rendered config) | | %s | %s | %s |" % (
                 names(tors.get("changed")), names(tors.get("removed")), names(untouched.get("tors"))),
             ""]
    if not scope.get("deploy"):
        lines += ["Nothing to deploy: no host was added or changed; no wave ran and no gate was evaluated.", ""]
    else:
        lines += ["Deployed through the canary and waves with every gate: %s" % names(scope.get("deploy")), ""]
    return lines


def render_markdown(report):
    run = report.get("run") or {}
    lines = ["# Rollout report %s" % run.get("id", ""), ""]
    lines.append("| | |")
    lines.append("|---|---|")
    for k in ("status", "action", "rollout_id", "journal", "check_mode", "fabric", "inventory", "canary",
              "waves_spec", "start_wave", "failed_wave", "seconds", "hosts_to_roll_back", "tors_to_restore",
              "not_in_inventory"):
        if k in run:
            lines.append("| %s | %s |" % (k, _esc(run[k])))
    if run.get("message"):
        lines.append("| message | %s |" % _esc(run["message"]))
    for note in run.get("journal_notes") or []:
        lines.append("| journal note | %s |" % _esc(note))
    warnings = sum(len(w.get("warnings") or []) for w in report.get("waves") or [])
    if warnings:
        lines.append("| warnings | %d (listed under their waves) |" % warnings)
    lines.append("")
    js = run.get("journal_summary") or {}
    if js:
        lines += ["## Journal (rollout %s)" % js.get("id", ""), "", "| hosts | state |", "|---|---|"]
        for state, hosts in sorted((js.get("hosts_by_state") or {}).items()):
            lines.append("| %s | %s |" % (_esc(", ".join(hosts)), state))
        if js.get("waves"):
            lines.append("")
            lines.append("Waves: %s" % _esc(", ".join("%s %s" % kv for kv in js["waves"].items())))
        if js.get("tors"):
            lines.append("")
            lines.append("ToRs: %s" % _esc(", ".join("%s %s" % kv for kv in sorted(js["tors"].items()))))
        lines.append("")
    pf = dict(report.get("preflight") or {})
    scope = pf.pop("scope", None) or {}
    if scope.get("mode") == "changed":
        lines += scope_lines(scope)
    if pf:
        lines += ["## Preflight", ""]
        for k, v in sorted(pf.items()):
            lines.append("- **%s**: %s" % (k, _esc(v if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True))))
        lines.append("")
    if report.get("tors"):
        lines += ["## ToR policy (rack by rack)", "", "| ToR | rack | changed | gates | backup |", "|---|---|---|---|---|"]
        for t in report["tors"]:
            gates = ", ".join("%s %s" % (g.get("gate"), g.get("verdict")) for g in t.get("gates") or [])
            changed = t.get("changed", "")
            if t.get("status"):
                changed = "%s (%s)" % (changed, t["status"])
            lines.append("| %s | %s | %s | %s | %s |" % (t.get("name"), t.get("rack", ""), _esc(changed),
                                                         _esc(gates), t.get("backup", "")))
        lines.append("")
    lines += ["## Waves", "", "| wave | hosts | status | seconds | gates passed | failed gates |",
              "|---|---|---|---|---|---|"]
    for w in report.get("waves") or []:
        gates = w.get("gates") or []
        passed = sum(1 for g in gates if g.get("verdict") == "pass")
        failed = ["%s@%s" % (g.get("gate"), g.get("target")) for g in gates if g.get("verdict") != "pass"]
        lines.append("| %s | %s | %s | %s | %d/%d | %s |" % (
            w.get("name"), ", ".join(w.get("hosts") or []), w.get("status", ""), w.get("seconds", ""),
            passed, len(gates), _esc(", ".join(failed))))
    lines.append("")
    for w in report.get("waves") or []:
        lines += ["### Wave %s (%s)" % (w.get("name"), w.get("status", "")), ""]
        if w.get("failed_hosts"):
            lines.append("Failed hosts: %s" % ", ".join(w["failed_hosts"]))
            lines.append("")
        if w.get("unreachable"):
            exceeded = " exceeded: the wave failed" if w.get("over_budget") else ""
            lines.append("Unreachable hosts (marked in the journal, excluded from later waves): %s; "
                         "rollout_max_unreachable %s%s"
                         % (", ".join(w["unreachable"]), w.get("max_unreachable", "?"), exceeded))
            lines.append("")
        for err in w.get("errors") or []:
            lines.append("- error: %s" % _esc(err))
        for warn in w.get("warnings") or []:
            lines.append("- warning: %s" % _esc(warn))
        if w.get("errors") or w.get("warnings"):
            lines.append("")
        if w.get("rollback"):
            lines.append("Rollback: %s" % _esc(json.dumps(w["rollback"], sort_keys=True)))
            lines.append("")
        if w.get("gates"):
            lines += ["| gate | target | verdict | values | detail | reason | s |", "|---|---|---|---|---|---|---|"]
            for g in w["gates"]:
                lines.append("| %s | %s | **%s** | %s | %s | %s | %s |" % (
                    g.get("gate"), g.get("target", ""), g.get("verdict"), _esc(_fmt_values(g.get("values"))),
                    _esc(_fmt_detail(g.get("values"))), _esc(g.get("reason", "")), g.get("seconds", "")))
            lines.append("")
    if report.get("snapshots"):
        lines += ["## Snapshots (captured at detection time)", ""]
        for s in report["snapshots"]:
            lines.append("- %s (%s, wave %s): `%s`" % (s.get("node"), s.get("kind", ""), s.get("wave", ""),
                                                       s.get("path", "")))
        lines.append("")
    if share_rows(report):
        lines += ["## Per-NIC shares", "", "![per-NIC shares](%s)" % SVG_NAME, ""]
    return "\n".join(lines)


def write(directory, report, tolerance=None):
    """Write report.json, report.md and (when probes ran) nic_shares.svg; returns the paths."""
    os.makedirs(directory, exist_ok=True)
    paths = {"json": os.path.join(directory, JSON_NAME), "markdown": os.path.join(directory, MD_NAME)}
    atomic_write(paths["json"], json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    atomic_write(paths["markdown"], render_markdown(report) + "\n")
    rows = share_rows(report)
    if rows:
        paths["svg"] = os.path.join(directory, SVG_NAME)
        atomic_write(paths["svg"], svg.shares_svg(rows, tolerance))
    return paths
