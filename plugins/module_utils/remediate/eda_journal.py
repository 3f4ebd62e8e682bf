# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Event-Driven Ansible side's state: its journal, the case-file tail and pending requests. No Ansible.

Everything lives in one state directory (``netscale_eda_state_dir``)::

    journal.jsonl        every decision on a case event, every approval, every playbook run (append only)
    offset.json          how far the case file was read (inode + offset): a restart resumes there
    pending/<req>.json   a request waiting for an operator (mode approve)
    approved/<req>.json  an operator's approval (playbooks/eda_approve.yml writes it)
    status.json          the running source: pid, mode, case file, start time (written when it tails)
    mode                 optional: auto, approve or report, overrides the rulebook's mode while present

Journal records (one JSON object per line, ``"v": 1``)::

    {"type": "decision", "time", "case", "kind", "zone", "element", "outcome", "mode", "reasons",
     "request", "extra_vars", "action", "root_cause"}
    {"type": "snapshot", "time", "case", "kind", "zone", "element", "outcome", "mode", "reasons", "request",
     "extra_vars", "action": "snapshot", "root_cause"}       the snapshot of a case's open event (queued, duplicate)
    {"type": "rejected", "time", "error", "line"}            a case event that breaks the contract
    {"type": "mode", "time", "mode", "previous"}             the mode file changed the mode
    {"type": "run", "time", "request", "case", "status": "started" | "succeeded" | "failed",
     "playbook", "detail"}                                    written by the eda_journal callback

Writers append one line under an exclusive ``flock`` of the journal (the source and the playbooks the
rulebook starts are different processes). :func:`fold` turns the records into the history
:func:`.actions.decide` reads, and :func:`runs` into the per-request outcome a person reads.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

FORMAT = 1
JOURNAL = "journal.jsonl"
OFFSET = "offset.json"
STATUS = "status.json"
MODE = "mode"
PENDING = "pending"
APPROVED = "approved"
RUN_STATUSES = ("started", "succeeded", "failed")
UNDRAIN_RETRY = {"interval": 300.0, "attempts": 12}
_REQ_RE = re.compile(r"^req-[0-9a-f]{16}$")
_MAX_LINE = 65536


class EdaStateError(MultinicError):
    """The state directory or its files cannot be used (names the path and the fix)."""


def check_request(req, field="eda_request"):
    if not isinstance(req, str) or not _REQ_RE.match(req):
        raise EdaStateError("%s: %r is not a request id. Fix: use the id the report printed (req- and 16 hex "
                            "digits; ls <state_dir>/pending)." % (field, req))
    return req


# ------------------------------------------------------------------------------------------------
# Journal
# ------------------------------------------------------------------------------------------------
def append(path, record, now=None):
    """Append one record (a dict) as a JSON line, under an exclusive lock; returns the record written."""
    rec = {"v": FORMAT, "time": time.time() if now is None else now}
    rec.update(record)
    line = json.dumps(rec, sort_keys=True, default=str) + "\n"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    return rec


def read(path):
    """The journal's records; a missing journal is empty, a torn last line (a writer killed) is skipped."""
    out = []
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        return out
    with handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def empty_history():
    return {"cases": {}, "queued": [], "requests": {}, "undrains": {}, "snapshots": {}}


def apply(history, rec):
    """Fold one record into ``history`` (in place; returns it)."""
    kind = rec.get("type")
    if kind == "snapshot":
        # a case's snapshot: its own history (one per case; never counted against the pre-queue budget)
        outcome = rec.get("outcome")
        if outcome == "queued" and rec.get("case"):
            history.setdefault("snapshots", {})[rec["case"]] = outcome
            if rec.get("request"):
                history["requests"].setdefault(rec["request"], {}).update(
                    state=outcome, case=rec.get("case"), element=rec.get("element"), time=rec.get("time"),
                    action="snapshot")
    elif kind == "decision" and rec.get("action") == "undrain":
        # a closed case's undrain: its own history (never counted against the pre-queue budget)
        outcome = rec.get("outcome")
        if outcome != "duplicate" and rec.get("case"):
            history.setdefault("undrains", {})[rec["case"]] = outcome
        req = rec.get("request")
        if req and outcome == "queued":
            entry = history["requests"].setdefault(req, {})
            entry.update(state=outcome, case=rec.get("case"), element=rec.get("element"), time=rec.get("time"),
                         action="undrain")
    elif kind == "decision":
        outcome = rec.get("outcome")
        if outcome != "duplicate" and rec.get("case"):
            history["cases"][rec["case"]] = outcome
        if outcome == "queued":
            history["queued"].append({"zone": rec.get("zone"), "time": rec.get("time", 0.0),
                                      "element": rec.get("element"), "request": rec.get("request")})
        req = rec.get("request")
        if req and outcome in ("queued", "pending", "refused", "would_drain"):
            entry = history["requests"].setdefault(req, {})
            entry.update(state=outcome, case=rec.get("case"), element=rec.get("element"), time=rec.get("time"))
    elif kind == "run":
        req = rec.get("request")
        if req:
            entry = history["requests"].setdefault(req, {})
            entry.update(state=rec.get("status"), case=rec.get("case", entry.get("case")), detail=rec.get("detail"))
    return history


def fold(records):
    history = empty_history()
    for rec in records:
        apply(history, rec)
    return history


def runs(records):
    """Per request: the last decision and the playbook runs, in order: what a person (or a test) reads to see
    whether a queued drain started, succeeded or failed. A request queued with no run record was never
    started (the rulebook was stopped, or the callback is not enabled): it shows as ``queued``."""
    out = {}
    for rec in records:
        req = rec.get("request")
        if not req:
            continue
        entry = out.setdefault(req, {"request": req, "case": rec.get("case"), "element": rec.get("element"),
                                     "outcome": None, "runs": [], "status": None})
        if rec.get("type") in ("decision", "snapshot") and rec.get("outcome") != "duplicate":
            entry["outcome"] = rec.get("outcome")
            entry["status"] = rec.get("outcome")
        elif rec.get("type") == "run":
            entry["runs"].append({"status": rec.get("status"), "time": rec.get("time"), "detail": rec.get("detail")})
            entry["status"] = rec.get("status")
    return out


# ------------------------------------------------------------------------------------------------
# The case file, tailed
# ------------------------------------------------------------------------------------------------
class CaseTail(object):
    """Reads complete lines appended to the case file, across rotation (a new inode) and truncation.

    ``poll()`` returns ``[(line, position)]``; the caller handles each line, then :meth:`commit` s its
    position: the offset file is what a restart resumes from, so a line handled before a crash is read
    again at most once (and the case id makes that a duplicate), and none is skipped. Without an offset
    file, ``start_at`` ``end`` skips what the file already holds (old cases), ``beginning`` reads it."""

    def __init__(self, path, offset_path, start_at="end"):
        if start_at not in ("end", "beginning"):
            raise EdaStateError("start_at: %r is not a start point. Fix: end or beginning." % (start_at,))
        self.path = path
        self.offset_path = offset_path
        self.start_at = start_at
        self.handle = None
        self.inode = None
        self.pos = 0
        self.buf = b""
        self.rotations = 0
        self.truncations = 0
        self._saved = self._load()
        # the file as it is at start-up: resume at the saved offset, or skip (start_at end) what it holds; a case
        # file that appears later holds new cases only and is read from its beginning
        self._open(first=True)

    def _load(self):
        try:
            with open(self.offset_path) as handle:
                data = json.load(handle)
            return {"inode": int(data["inode"]), "offset": int(data["offset"])}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _open(self, first):
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:
            return False
        st = os.fstat(handle.fileno())
        start = 0
        if first:
            if self._saved is not None:
                # same file as before the restart: resume; another file (rotated while down) or a shorter one
                # (truncated): read it from its beginning
                if self._saved["inode"] == st.st_ino and self._saved["offset"] <= st.st_size:
                    start = self._saved["offset"]
            elif self.start_at == "end":
                start = st.st_size
        handle.seek(start)
        self.handle, self.inode, self.pos, self.buf = handle, st.st_ino, start, b""
        return True

    def close(self):
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def poll(self):
        out = []
        if self.handle is None and not self._open(first=False):
            return out
        out.extend(self._read())
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return out  # rotated away, the new file not there yet: keep the old handle
        if st.st_ino != self.inode:
            out.extend(self._read())  # the rest of the old file first
            self.close()
            self.rotations += 1
            if self._open(first=False):
                out.extend(self._read())
        elif st.st_size < self.pos + len(self.buf):
            self.truncations += 1
            self.handle.seek(0)
            self.pos, self.buf = 0, b""
            out.extend(self._read())
        return out

    def _read(self):
        out = []
        data = self.handle.read()
        if not data:
            return out
        self.buf += data
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                if len(self.buf) > _MAX_LINE:  # a line without end: drop it, never grow without bound
                    self.pos += len(self.buf)
                    self.buf = b""
                break
            raw, self.buf = self.buf[:nl], self.buf[nl + 1:]
            self.pos += nl + 1
            out.append((raw.decode("utf-8", "replace"), self.pos))
        return out

    def commit(self, position):
        atomic_write(self.offset_path, json.dumps({"path": self.path, "inode": self.inode, "offset": position}) + "\n",
                     mode=0o600)


# ------------------------------------------------------------------------------------------------
# The dispatcher: decisions journaled, rulebook events out
# ------------------------------------------------------------------------------------------------
class Dispatcher(object):
    """Case events in, rulebook events out, every decision journaled first.

    ``budget`` is the pre-queue budget (:func:`.actions.zone_rate_budget` by default): the seam where a
    caller with the fabric view plugs the full remediation budget."""

    def __init__(self, state_dir, mode, policy=None, budget=None, clock=time.time, undrain_retry=None,
                 snapshot=False):
        self.state_dir = state_dir
        # the open event of a case queues one snapshot of its devices (playbooks/case_snapshot.yml), in every mode;
        # the event source turns it on (its option snapshot, default true), the class keeps its earlier behaviour
        self.snapshot = bool(snapshot)
        # a refused (window not clean yet) or failed undrain is queued again: {"interval": s, "attempts": n}
        self.undrain_retry = dict(UNDRAIN_RETRY, **(undrain_retry or {}))
        for key in ("interval", "attempts"):
            value = self.undrain_retry[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise EdaStateError("netscale_eda_undrain_retry.%s: %r is not a number >= 0. Fix: e.g. interval 300 "
                                    "(seconds), attempts 12 (0: never retry)." % (key, value))
        self._next_retry_check = 0.0
        self.mode = self.start_mode = actions.check_mode(mode)
        self._bad_mode = None
        self.budget = budget or actions.zone_rate_budget(policy)
        self.clock = clock
        self.journal = os.path.join(state_dir, JOURNAL)
        os.makedirs(os.path.join(state_dir, PENDING), exist_ok=True)
        os.makedirs(os.path.join(state_dir, APPROVED), exist_ok=True)
        self.history = fold(read(self.journal))

    def refresh_mode(self):
        """``<state_dir>/mode`` (auto, approve or report), when present, overrides the mode the rulebook was
        started with: an operator switches modes without restarting the rulebook (its JVM takes ~20 s). A file
        with another word is ignored, and journaled once."""
        try:
            with open(os.path.join(self.state_dir, MODE)) as handle:
                word = handle.read().strip()
        except FileNotFoundError:
            word = self.start_mode
        if word == self.mode:
            return self.mode
        if word in actions.MODES:
            self._record({"type": "mode", "mode": word, "previous": self.mode})
            self.mode = word
        elif word != self._bad_mode:
            self._bad_mode = word
            self._record({"type": "rejected", "error": "%s/%s: %r is not a mode. Fix: write auto, approve or report; "
                          "mode %s stays." % (self.state_dir, MODE, word[:40], self.mode), "line": word[:200]})
        return self.mode

    def _record(self, rec):
        rec = append(self.journal, rec, now=self.clock())
        apply(self.history, rec)
        return rec

    def _decision(self, result):
        keep = ("case", "kind", "zone", "element", "outcome", "mode", "reasons", "request", "extra_vars", "action",
                "root_cause")
        rec = dict((k, result.get(k)) for k in keep)
        rec["type"] = "decision"
        return self._record(rec)

    def handle_line(self, line):
        """One line of the case file -> the rulebook events to put (zero, one or two). The open event of a case
        queues its snapshot first, so that the snapshot (rulebook actions run one at a time) records the devices
        as the problem left them, before a drain changes them."""
        line = line.strip()
        if not line:
            return []
        try:
            event = json.loads(line)
            result = actions.decide(event, self.mode, self.history, self.clock(), self.budget)
        except (ValueError, actions.CaseError) as exc:
            self._record({"type": "rejected", "error": str(exc), "line": line[:2000]})
            return []
        out = self._snapshot(event) if self.snapshot else []
        return out + self._emit(result)

    def _snapshot(self, event):
        result = actions.snapshot(event, self.history)
        if result["outcome"] == "ignored":
            return []
        result["mode"] = self.mode
        keep = ("case", "kind", "zone", "element", "outcome", "mode", "reasons", "request", "extra_vars", "action",
                "root_cause")
        rec = dict((k, result.get(k)) for k in keep)
        rec["type"] = "snapshot"
        self._record(rec)
        ev = actions.rulebook_event(result)
        return [ev] if ev else []

    def _emit(self, result):
        self._decision(result)
        if result["outcome"] == "pending":
            atomic_write(os.path.join(self.state_dir, PENDING, result["request"] + ".json"),
                         json.dumps(result, sort_keys=True) + "\n", mode=0o600)
        ev = actions.rulebook_event(result)
        return [ev] if ev else []

    def pending(self):
        folder = os.path.join(self.state_dir, PENDING)
        return sorted(n[:-5] for n in os.listdir(folder) if n.endswith(".json") and _REQ_RE.match(n[:-5]))

    def poll_approvals(self):
        """Approvals an operator wrote since the last poll -> rulebook events (the approved drains). In mode
        report nothing changes: approvals wait, unread, until the mode is approve or auto again."""
        out = []
        if self.mode == "report":
            return out
        folder = os.path.join(self.state_dir, APPROVED)
        for name in sorted(os.listdir(folder)):
            req = name[:-5]
            if not name.endswith(".json") or not _REQ_RE.match(req):
                continue
            pending_path = os.path.join(self.state_dir, PENDING, name)
            try:
                with open(pending_path) as handle:
                    pending = json.load(handle)
            except (OSError, ValueError):
                pending = None
            if pending is None:
                self._record({"type": "rejected", "request": req,
                              "error": "approval of %s: no pending request with that id" % req, "line": name})
            else:
                result = actions.approve(pending, self.history, self.clock(), self.budget)
                out.extend(self._emit(result))
                os.unlink(pending_path)
            os.unlink(os.path.join(folder, name))
        return out

    def poll_undrain_retries(self):
        """Undrains whose last run failed (most often: the clean window refused, the element still lossy or the
        evidence incomplete) are queued again after ``interval`` seconds, at most ``attempts`` times, in mode auto:
        a refused undrain is journaled and retried, never lost. Reads the journal (the runs are the callback's)."""
        now = self.clock()
        if self.mode != "auto" or now < self._next_retry_check or not self.undrain_retry["attempts"]:
            return []
        self._next_retry_check = now + min(self.undrain_retry["interval"], 10.0)
        records = read(self.journal)
        queued = {}
        for rec in records:
            if rec.get("type") == "decision" and rec.get("action") == "undrain" and rec.get("outcome") == "queued":
                entry = queued.setdefault(rec.get("request"), {"decision": rec, "queued": 0})
                entry["queued"] += 1
                entry["decision"] = rec
        out = []
        by_req = runs(records)
        for req, entry in sorted(queued.items()):
            state = by_req.get(req) or {}
            if state.get("status") != "failed" or not state.get("runs"):
                continue
            last_run = state["runs"][-1]
            if entry["queued"] > self.undrain_retry["attempts"]:
                continue
            if now - float(last_run.get("time") or 0.0) < self.undrain_retry["interval"]:
                continue
            result = dict((k, entry["decision"].get(k)) for k in (
                "case", "kind", "zone", "element", "mode", "request", "extra_vars", "action", "root_cause"))
            result.update(state="closed", outcome="queued", mode=self.mode, reasons=[
                "retry %d of %d: the last undrain run failed (%s)" % (
                    entry["queued"], self.undrain_retry["attempts"], last_run.get("detail") or "see the drain journal")])
            out.extend(self._emit(result))
        return out

    def write_status(self, case_file, pid, report_root=None):
        status = {"pid": pid, "mode": self.mode, "case_file": case_file, "started": self.clock()}
        if report_root is not None:
            status["report_root"] = report_root
        atomic_write(os.path.join(self.state_dir, STATUS), json.dumps(status, sort_keys=True) + "\n", mode=0o600)


def check_report_root(value):
    """The reports directory the fabric's rollouts and drains share (``netscale_eda_report_root``), as an absolute
    path. ansible-rulebook's run_playbook runs each playbook from a temporary copy of its directory, removed after
    the run: a drain journal or a fabric lease found through the playbook's directory would be a new, empty one on
    every run, and the blast-radius budget and the lease would see nothing. So the rulebook passes this directory to
    every drain and undrain, and it must be given, absolute. Raises ValueError naming the field, the value and the fix."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("netscale.multinic.case_file: report_root=%r: the reports directory the fabric's rollouts and "
                         "drains share is required (the drain journal is <it>/drain, the fabric lease <it>/journal/leases). "
                         "Fix: set netscale_eda_report_root to it, e.g. /opt/netscale-multinic/reports (scripts/"
                         "eda-rulebook.sh passes <checkout>/reports)." % (value,))
    if not os.path.isabs(value):
        raise ValueError("netscale.multinic.case_file: report_root=%r is not an absolute path: the drains run from a "
                         "temporary copy of the playbook directory, a relative path would land there. Fix: set "
                         "netscale_eda_report_root to an absolute path, e.g. %s." % (value, os.path.abspath(value)))
    return os.path.normpath(value)


def summary(records):
    """What an operator reads first: decisions per outcome, requests pending approval, drains that failed, drains
    queued that have no run record (never started: the rulebook was stopped, or the eda_journal callback is not
    enabled), contract rejections."""
    counts = {}
    for rec in records:
        if rec.get("type") == "decision":
            counts[rec.get("outcome")] = counts.get(rec.get("outcome"), 0) + 1
    by_req = runs(records)
    pick = dict((s, sorted((r["request"], r["case"]) for r in by_req.values() if r["status"] == s))
                for s in ("pending", "failed", "queued", "started"))
    return {"decisions": counts, "pending": pick["pending"], "failed": pick["failed"],
            "queued_not_started": pick["queued"], "running": pick["started"],
            "succeeded": sum(1 for r in by_req.values() if r["status"] == "succeeded"),
            "rejected": sum(1 for rec in records if rec.get("type") == "rejected")}
