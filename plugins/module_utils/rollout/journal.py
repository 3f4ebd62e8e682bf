# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rollout journal: what a rollout did, host by host and ToR by ToR, so that a resumed run, a rollback
and the jobs of an AWX workflow act on the record instead of on guesses. No Ansible imports.

Layout: ``<journal_dir>/<rollout_id>/<job>.json``, one file per job (AWX job slices run in parallel, in
production in different containers: no two writers ever share a file), each an append-only list of
events rewritten atomically (``writing.atomic_write``, mode 0600, ``writing.redact``) after every
event. ``<journal_dir>/<rollout_id>/tor_backup/`` holds the ORIGINAL pre-change ToR copies (the
``tor_bgp`` role writes each once and never overwrites it); the journal references those files, it never
embeds a config.

:func:`read` + :func:`merge` order the events of every job (job start time, job key, sequence) and
:func:`replay` folds them into the record::

    {id, plan_hash, created, jobs, waves [{name, hosts, racks}] (frozen by the first job), hosts {name:
     {wave, state, updated, error, job}}, tors {name: {state, backup, updated, job}}, gates [...],
     wave_records [...], events [...], cancelled}

:func:`open_plan` decides what a job may do (resume point, refusals); :func:`rollback_plan` what a
rollback must undo.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import waves as waves_mod
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write, redact

FORMAT = 1
HOST_STATES = ("pending", "deploying", "deployed", "passed", "failed", "rolled_back", "unreachable", "excluded")
TOR_STATES = ("pending", "configuring", "backed_up", "configured", "restored", "failed")
# Host transitions the rollout makes. Anything may become unreachable or excluded; an unreachable or
# excluded host may be retried (deploying) or rolled back; a rolled-back host may be deployed again
# (resume of its wave). Same state again is always allowed (a re-run records the same fact).
HOST_TRANSITIONS = {
    "pending": {"deploying", "rolled_back", "failed"},
    "deploying": {"deployed", "failed", "rolled_back"},
    "deployed": {"passed", "failed", "rolled_back", "deploying"},
    "passed": {"rolled_back", "deploying", "failed"},
    "failed": {"rolled_back", "deploying"},
    "rolled_back": {"deploying", "rolled_back"},
    "unreachable": {"deploying", "rolled_back", "failed"},
    "excluded": {"deploying", "rolled_back"},
}
TOR_TRANSITIONS = {
    "pending": {"configuring", "backed_up", "failed"},
    "configuring": {"backed_up", "configured", "failed", "restored"},
    "backed_up": {"configuring", "configured", "failed", "restored"},
    "configured": {"configuring", "restored", "failed"},
    "restored": {"configuring", "restored"},
    "failed": {"configuring", "restored"},
}
# Hosts a rollback must undo (anything that may carry the new stack, or may have been touched).
ROLLBACK_HOST_STATES = ("deploying", "deployed", "passed", "failed", "unreachable")
ROLLBACK_TOR_STATES = ("configuring", "backed_up", "configured", "failed")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
EVENT_TYPES = ("open", "host", "tor", "wave", "gate", "event")
GATE_KEYS = ("gate", "name", "target", "verdict", "reason", "values", "evidence", "seconds", "wave", "attempts")


class JournalError(MultinicError):
    """The journal refuses an action (names what, why and the fix)."""


def check_id(value, field="rollout_id"):
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise JournalError("%s=%r: use letters, digits, '.', '_' or '-' (at most 128, no '/'), e.g. "
                           "awx-wf-42 or 20260101T000000Z" % (field, value))
    return value


def rollout_dir(journal_dir, rollout_id):
    return os.path.join(journal_dir, check_id(rollout_id))


def job_path(journal_dir, rollout_id, job):
    return os.path.join(rollout_dir(journal_dir, rollout_id), "%s.json" % check_id(job, "job"))


def plan_hash(paths):
    """sha256 over the plan files (relative path and content, sorted): ``paths`` are files or
    directories (walked). The plan holds allocations only, never keys."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _dirs, names in os.walk(p):
                for n in names:
                    full = os.path.join(root, n)
                    files.append((os.path.relpath(full, p), full))
        elif os.path.isfile(p):
            files.append((os.path.basename(p), p))
    if not files:
        raise JournalError("plan files %s: none found; the preflight writes the plan (fabric_plan) first" % (paths,))
    h = hashlib.sha256()
    for rel, full in sorted(files):
        h.update(rel.encode() + b"\0")
        with open(full, "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    return h.hexdigest()


def new_job(rollout_id, job, now=None, meta=None):
    now = time.time() if now is None else now
    return {"format": FORMAT, "rollout_id": check_id(rollout_id), "job": check_id(job, "job"),
            "started": round(float(now), 6), "meta": dict(meta or {}), "events": []}


def load_job(path):
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("events"), list):
        raise JournalError("%s: not a rollout journal file (format %s); move it away or use another rollout_id"
                           % (path, FORMAT))
    return doc


def append(doc, etype, data, now=None):
    """Append one event to a job document (in memory); returns the event."""
    if etype not in EVENT_TYPES:
        raise JournalError("journal event type %r: use one of %s" % (etype, ", ".join(EVENT_TYPES)))
    now = time.time() if now is None else now
    data = dict(data or {})
    if etype == "gate":   # the verdict and its values; per-measurement detail stays in the report
        data = dict((k, v) for k, v in data.items() if k in GATE_KEYS)
    ev = dict(redact(data))
    ev["type"] = etype
    ev["seq"] = len(doc["events"])
    ev["t"] = round(float(now), 6)
    doc["events"].append(ev)
    return ev


def save(path, doc):
    """Atomic, 0600, redacted."""
    atomic_write(path, json.dumps(redact(doc), indent=1, sort_keys=True, default=str) + "\n", mode=0o600)


def read(journal_dir, rollout_id):
    """Every job document of a rollout (order of the files is irrelevant: :func:`merge` orders)."""
    d = rollout_dir(journal_dir, rollout_id)
    if not os.path.isdir(d):
        return []
    return [load_job(os.path.join(d, n)) for n in sorted(os.listdir(d))
            if n.endswith(".json") and not n.startswith(".") and os.path.isfile(os.path.join(d, n))]


def merge(docs):
    """Events of every job in order: jobs by (start time, job key), events by sequence within a job.
    Each event is tagged with its job."""
    out = []
    for doc in sorted(docs, key=lambda d: (d.get("started", 0), d.get("job", ""))):
        for ev in sorted(doc.get("events") or [], key=lambda e: e.get("seq", 0)):
            e = dict(ev)
            e["job"] = doc.get("job")
            out.append(e)
    return out


def _check_transition(kind, name, old, new, table):
    # What went wrong and what was undone is always recorded (a rollback must never be stopped by its own
    # journal); only forward progress (deploying, deployed, passed, configuring, configured) is checked.
    always = ("unreachable", "excluded", "failed", "rolled_back") if table is HOST_TRANSITIONS else ("failed", "restored")
    if old is None or old == new or new in always:
        return
    if new not in table.get(old, ()):
        raise JournalError("%s %s: %s -> %s is not a rollout transition (allowed from %s: %s)"
                           % (kind, name, old, new, old, ", ".join(sorted(table.get(old, ()))) or "none"))


def check_event(rec, etype, data):
    """Raise :class:`JournalError` when recording ``data`` would make a transition the rollout never
    makes (a bug in the playbook, not an operator error). Reading stays lenient."""
    if etype == "host":
        for name in (data["hosts"] if "hosts" in data else [data.get("name")]):
            if data.get("state") not in HOST_STATES:
                raise JournalError("host %s: state %r: use one of %s" % (name, data.get("state"), ", ".join(HOST_STATES)))
            cur = rec["hosts"].get(name)
            _check_transition("host", name, cur and cur["state"], data["state"], HOST_TRANSITIONS)
    elif etype == "tor":
        if data.get("state") not in TOR_STATES:
            raise JournalError("tor %s: state %r: use one of %s"
                               % (data.get("name"), data.get("state"), ", ".join(TOR_STATES)))
        cur = rec["tors"].get(data.get("name"))
        _check_transition("tor", data.get("name"), cur and cur["state"], data["state"], TOR_TRANSITIONS)


def replay(events):
    """Fold merged events into the journal record (lenient: a record is never lost to a bad line)."""
    rec = {"id": None, "plan_hash": None, "created": None, "jobs": [], "waves": [], "hosts": {}, "tors": {},
           "gates": [], "wave_records": [], "events": [], "cancelled": None, "scope": None}
    for ev in events:
        t = ev.get("type")
        job = ev.get("job")
        if t == "open":
            if rec["id"] is None:
                rec["id"] = ev.get("rollout_id")
                rec["created"] = ev.get("t")
            if rec["scope"] is None and ev.get("scope"):
                rec["scope"] = ev["scope"]   # the change scope of the first scoped job (resumes keep it)
            if not rec["waves"] and ev.get("waves"):
                rec["waves"] = [{"name": w["name"], "hosts": list(w.get("hosts") or []),
                                 "racks": list(w.get("racks") or [])} for w in ev["waves"]]
                rec["plan_hash"] = ev.get("plan_hash")
                for w in rec["waves"]:
                    for h in w["hosts"]:
                        rec["hosts"].setdefault(h, {"wave": w["name"], "state": "pending", "updated": ev.get("t"),
                                                    "error": "", "job": job})
                for tor in ev.get("tors") or []:
                    rec["tors"].setdefault(tor, {"state": "pending", "backup": "", "updated": ev.get("t"), "job": job})
            elif ev.get("plan_hash") and ev.get("plan_hash") != rec["plan_hash"] and ev.get("plan_change_consented"):
                rec["plan_hash"] = ev.get("plan_hash")
            rec["jobs"].append({"job": job, "t": ev.get("t"), "action": ev.get("action", "rollout"),
                                "start_wave": ev.get("start_wave"), "meta": ev.get("meta") or {}})
            rec["cancelled"] = None
        elif t == "host":
            for name in (ev["hosts"] if "hosts" in ev else [ev.get("name")]):
                cur = rec["hosts"].get(name)
                entry = cur or {"wave": ev.get("wave"), "error": ""}
                entry.update({"state": ev["state"], "updated": ev.get("t"), "job": job})
                if ev.get("wave"):
                    entry["wave"] = ev["wave"]
                errors = ev.get("errors") or {}
                entry["error"] = errors.get(name, ev.get("error", "")) if ev["state"] != "passed" else ""
                rec["hosts"][name] = entry
        elif t == "tor":
            name = ev.get("name")
            cur = rec["tors"].get(name)
            entry = cur or {"backup": ""}
            entry.update({"state": ev["state"], "updated": ev.get("t"), "job": job})
            if ev.get("backup") and not entry.get("backup"):
                entry["backup"] = ev["backup"]   # the ORIGINAL copy: first one recorded wins
            if ev.get("error"):
                entry["error"] = ev["error"]
            rec["tors"][name] = entry
        elif t == "gate":
            rec["gates"].append(dict((k, v) for k, v in ev.items() if k not in ("type", "seq")))
        elif t == "wave":
            rec["wave_records"].append(dict((k, v) for k, v in ev.items() if k not in ("type", "seq")))
        elif t == "event":
            entry = dict((k, v) for k, v in ev.items() if k not in ("type", "seq"))
            if ev.get("kind") == "cancelled":
                entry["in_flight"] = dict((h, s["state"]) for h, s in rec["hosts"].items()
                                          if s["state"] in ("deploying", "deployed"))
                rec["cancelled"] = {"job": job, "t": ev.get("t"), "signal": ev.get("signal"),
                                    "hosts": entry["in_flight"]}
            rec["events"].append(entry)
    return rec


def load_record(journal_dir, rollout_id):
    return replay(merge(read(journal_dir, rollout_id)))


def wave_status(rec, name):
    """passed: every host of the wave passed, or was unreachable/excluded (within the budget), and at
    least one passed. failed: a host failed, was rolled back or is mid-deploy. pending: nothing ran."""
    wave = [w for w in rec["waves"] if w["name"] == name]
    if not wave:
        return "unknown"
    states = [rec["hosts"].get(h, {}).get("state", "pending") for h in wave[0]["hosts"]]
    if states and all(s in ("passed", "unreachable", "excluded") for s in states) and "passed" in states:
        return "passed"
    if all(s == "pending" for s in states):
        return "pending"
    if any(s in ("deploying", "deployed") for s in states):
        return "in_flight"
    return "failed"


def _wave_names(rec):
    return [w["name"] for w in rec["waves"]]


def _plan_view(waves, skipped, deferred, present):
    """Same shape as waves.plan_waves, restricted to the hosts this job's inventory holds."""
    run = []
    for w in waves:
        hosts = [h for h in w["hosts"] if present is None or h in present]
        if hosts:
            run.append(dict(w, hosts=hosts, size=len(hosts)))
    return {"waves": run, "order": [h for w in run for h in w["hosts"]], "serial": [w["size"] for w in run],
            "skipped": skipped, "deferred": deferred,
            "wave_of": dict((h, w["name"]) for w in run for h in w["hosts"])}


def open_plan(rec, plan_hash_now, hosts=None, canary=None, waves_spec=None, start_wave=None, end_wave=None,
              allow_plan_change=False, skip_tors=False, present=None, rack_tors=None, scope=None):
    """What this job runs. ``rec``: the record so far (:func:`replay`, possibly empty). ``hosts``,
    ``canary``, ``waves_spec``: the inventory's GPU hosts (``{name, rack}``) and the wave settings, used
    only when the journal is new (then the waves are computed and frozen). ``present``: GPU hosts in
    this job's inventory (an AWX slice); None = all. ``rack_tors``: ``{rack: tor}``.
    ``scope``: None (every host, the ToRs of every rack of the waves) or a change scope (``rollout.scope``:
    ``deploy`` - the hosts to deploy, ``tors.changed`` - the ToRs to configure): a new journal freezes waves
    of the ``deploy`` hosts only (none: no wave, "nothing to deploy"), the ToRs are the scope's (a resume keeps
    the scope recorded by the first job, since the plan on disk is already the new one by then).

    Returns ``(plan, open_event, notes)``; ``plan`` has the shape of ``waves.plan_waves`` plus
    ``tors`` (the ToRs of every rack of the rollout). Raises :class:`JournalError` with the fix when the
    job must not run."""
    notes = []
    rid = rec.get("id")
    rack_tors = dict(rack_tors or {})
    present = None if present is None else set(present)   # membership tests over a region's hosts
    new = not rec["waves"]
    waves = []
    if scope is not None and new:
        deploy = set(scope.get("deploy") or [])
        hosts = [h for h in (hosts or []) if h["name"] in deploy]
    if new and scope is not None and not hosts:
        if start_wave or skip_tors:
            raise JournalError("rollout %s: rollout_scope=changed has no host to deploy (%s); rollout_start_wave and "
                               "rollout_skip_tors do not apply" % (rid, scope.get("message", "")))
    elif new:
        computed = waves_mod.plan_waves(list(hosts or []), canary or None, list(waves_spec or ["5%", "25%", "100%"]))
        waves = [dict(name=w["name"], hosts=list(w["hosts"]), racks=list(w.get("racks") or []))
                 for w in computed["waves"]]
    if new:
        first = waves[0]["name"] if waves else None
        if start_wave and start_wave != first:
            raise JournalError(
                "rollout_start_wave=%r with a new rollout id (%s): no journal records that the waves before it "
                "passed. Resume with the id of the run that did them: -e rollout_id=<id> (printed at the start of "
                "every run and in its report), or start from the first wave (%s)" % (start_wave, rid, first))
        if skip_tors:
            raise JournalError(
                "rollout_skip_tors=true with a new rollout id (%s): no journal records the ToRs as configured. "
                "Run the ToR phase first (the canary job) and give this job the same rollout_id (AWX workflows "
                "pass awx_workflow_job_id, which names it)" % rid)
        rec = dict(rec, waves=waves, hosts=dict((h, {"state": "pending"}) for w in waves for h in w["hosts"]))
    consented = False
    if not new and rec["plan_hash"] and plan_hash_now and plan_hash_now != rec["plan_hash"]:
        if not allow_plan_change:
            raise JournalError(
                "rollout %s: the plan changed since the journal started (plan hash %s... recorded, %s... now); "
                "the recorded waves and ToR copies belong to the old plan. Roll back "
                "(playbooks/rollback.yml -e rollout_id=%s), or consent with -e rollout_allow_plan_change=true"
                % (rid, rec["plan_hash"][:12], plan_hash_now[:12], rid))
        consented = True
        notes.append("plan changed since the journal started (consented: rollout_allow_plan_change)")
    waves = rec["waves"]
    names = _wave_names(rec)
    if start_wave == "fleet":
        if len(names) < 2:
            raise JournalError("rollout_start_wave=fleet: rollout %s has no fleet wave (every host is in the canary)"
                               % rid)
        start_wave = names[1]
    if start_wave:
        if start_wave not in names:
            raise JournalError("rollout_start_wave=%r: no such wave in rollout %s (recorded waves: %s)"
                               % (start_wave, rid, ", ".join(names)))
        idx = names.index(start_wave)
    else:
        idx = len(names)
        for i, n in enumerate(names):
            if wave_status(rec, n) != "passed":
                idx = i
                break
    for n in names[:idx]:
        st = wave_status(rec, n)
        if st != "passed":
            raise JournalError(
                "rollout %s: cannot start at wave %s: wave %s has no recorded pass (%s: %s). Resume at it with "
                "-e rollout_id=%s -e rollout_start_wave=%s, or roll back with playbooks/rollback.yml -e rollout_id=%s"
                % (rid, names[idx] if idx < len(names) else "(end)", n, st,
                   ", ".join("%s=%s" % (h, rec["hosts"].get(h, {}).get("state", "pending"))
                             for h in waves[names.index(n)]["hosts"]), rid, n, rid))
    end = len(names)
    if end_wave:
        if end_wave not in names:
            raise JournalError("rollout_end_wave=%r: no such wave in rollout %s (waves: %s)"
                               % (end_wave, rid, ", ".join(names)))
        end = names.index(end_wave) + 1
    racks = list(dict.fromkeys(r for w in waves for r in w.get("racks") or []))
    unknown = [r for r in racks if r not in rack_tors]
    if rack_tors and unknown:
        raise JournalError("racks %s of rollout %s have no ToR in the inventory (group tors, multinic_rack.name); "
                           "every job needs the ToRs in its inventory" % (", ".join(map(str, unknown)), rid))
    tors = [rack_tors[r] for r in racks if r in rack_tors]
    scope_rec = None
    if scope is not None:
        scope_rec = rec.get("scope") if (not new and rec.get("scope")) else {
            "deploy": [h["name"] for h in (hosts or [])] if new else list(scope.get("deploy") or []),
            "tors": list((scope.get("tors") or {}).get("changed") or []),
            "message": scope.get("message", "")}
        known = set(rack_tors.values())
        tors = [t for t in scope_rec["tors"] if not rack_tors or t in known]
    if skip_tors:
        bad = [t for t in tors if rec["tors"].get(t, {}).get("state") != "configured"]
        if bad or not tors:
            states = ", ".join("%s=%s" % (t, rec["tors"].get(t, {}).get("state", "none")) for t in bad)
            raise JournalError(
                "rollout %s: rollout_skip_tors=true but the journal does not record these ToRs as configured: %s "
                "(racks %s). Run the ToR phase (the canary job, or this playbook without rollout_skip_tors) with "
                "-e rollout_id=%s first" % (rid, states or "no ToR known", ", ".join(str(r) for r in racks), rid))
    plan = _plan_view(waves[idx:end], waves[:idx], waves[end:], present)
    plan["tors"] = tors
    plan["all_waves"] = waves
    if present is not None:
        missing = [h for w in waves[idx:end] for h in w["hosts"] if h not in present]
        if missing:
            notes.append("hosts of the journal's waves not in this job's inventory (another slice, or removed): %s"
                         % ", ".join(missing))
    ev = {"rollout_id": rid, "plan_hash": plan_hash_now, "start_wave": names[idx] if idx < len(names) else None,
          "plan_change_consented": consented, "new": new}
    if new:
        ev["waves"] = waves
        ev["tors"] = tors
    if scope_rec is not None:
        plan["scope"] = scope_rec
        if new or not rec.get("scope"):
            ev["scope"] = scope_rec
    return plan, ev, notes


def rollback_plan(rec):
    """Hosts and ToRs a rollback undoes: every host that may carry the new stack (deploying, deployed,
    passed, failed, unreachable) and every ToR whose config the rollout may have changed, with its
    ORIGINAL backup."""
    if not rec["waves"]:
        raise JournalError("rollout %s: no journal (nothing recorded under this id); check -e rollout_id and "
                           "rollout_journal_dir" % rec.get("id"))
    hosts = [h for w in rec["waves"] for h in w["hosts"]
             if rec["hosts"].get(h, {}).get("state") in ROLLBACK_HOST_STATES]
    tors = dict((t, s.get("backup", "")) for t, s in sorted(rec["tors"].items()) if s.get("state") in ROLLBACK_TOR_STATES)
    return {"hosts": hosts, "tors": tors}


def summary(rec):
    """Small view for reports and messages."""
    by_state = {}
    for h, s in sorted(rec["hosts"].items()):
        by_state.setdefault(s["state"], []).append(h)
    return {"id": rec.get("id"), "waves": dict((w["name"], wave_status(rec, w["name"])) for w in rec["waves"]),
            "hosts_by_state": by_state,
            "tors": dict((t, s["state"]) for t, s in sorted(rec["tors"].items())),
            "cancelled": rec.get("cancelled"), "jobs": len(rec["jobs"])}


def budget(spec, wave_size):
    """``rollout_max_unreachable``: a count (int or digits) or 'N%' of the wave (rounded down); the one
    parser is :func:`.decide.budget`."""
    from ansible_collections.netscale.multinic.plugins.module_utils.rollout import decide
    try:
        return decide.budget(spec, wave_size)
    except decide.DecideError as exc:
        raise JournalError(str(exc))
