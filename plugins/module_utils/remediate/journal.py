# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain journal: every budget decision and every outcome, and the record of what is out.

One file per fabric, ``<journal_dir>/<fabric>/drain-journal.jsonl``: JSON lines, append only, mode
0600, one record per line. The journal is the source of truth for "what is drained": :func:`state`
folds it. Writers take an exclusive ``flock`` on ``<journal_dir>/<fabric>/.lock`` around
read-decide-append (:meth:`DrainJournal.decide`), so two drain jobs at once (an alert storm) see each
other's decisions and the budget's counts hold.

Records::

    {"v": 1, "seq": n, "type": "decision", "time": t, "job": j, "action": "drain" | "undrain",
     "element": "nic:h:1", "scope", "host", "nic", "rack", "zone", "spine", "automatic": bool,
     "allowed": bool, "noop": bool, "reasons": [...], "numbers": {...}, "reason": operator text,
     "case": case id or null, "window": the clean-window verdict of an undrain or null}
    {"v": 1, "seq": n, "type": "outcome", "time": t, "job": j, "action", "element", "ok": bool,
     "detail": text}

State: an element is out from the allowed decision of its drain (conservative: a drain that fails half
way is still counted out, and must be undrained) until the successful outcome of its undrain.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget

FORMAT = 1
FILE = "drain-journal.jsonl"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class DrainJournalError(MultinicError):
    """The journal cannot be read or written (names the file and the fix)."""


def _flock(fd):
    import fcntl
    fcntl.flock(fd, fcntl.LOCK_EX)


def read(path):
    """Every record of a journal file (``[]`` when absent). A torn last line (a writer killed mid-write)
    is ignored; any other malformed line is an error naming the line."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            if i == len(lines) - 1:
                break   # the last line without its newline: torn write
            raise DrainJournalError("%s line %d: not a JSON record. Fix: restore the journal from backup or move "
                                    "the line out; nothing was changed." % (path, i + 1)) from exc
        if not isinstance(rec, dict) or rec.get("v") != FORMAT or rec.get("type") not in ("decision", "outcome"):
            raise DrainJournalError("%s line %d: not a drain journal record (format %d). Fix: restore the journal; "
                                    "nothing was changed." % (path, i + 1, FORMAT))
        out.append(rec)
    return out


def state(records):
    """``{element: the decision record that took it out}`` of the elements out now."""
    out = {}
    pending_undrain = {}
    for r in records:
        el = r.get("element")
        if r["type"] == "decision" and r.get("allowed") and not r.get("noop"):
            if r["action"] == "drain":
                out[el] = r
            else:
                pending_undrain[el] = r
        elif r["type"] == "outcome" and r.get("action") == "undrain" and r.get("ok"):
            out.pop(el, None)
            pending_undrain.pop(el, None)
    return out


def decisions(records):
    return [r for r in records if r["type"] == "decision"]


class DrainJournal(object):
    """The journal of one fabric under ``journal_dir``."""

    def __init__(self, journal_dir, fabric):
        if not isinstance(fabric, str) or not _NAME_RE.match(fabric):
            raise DrainJournalError("fabric=%r: not a fabric name (letters, digits, '.', '_', '-'). Fix: run with "
                                    "the fabric inventory (multinic_fabric_name)." % (fabric,))
        if not journal_dir or not os.path.isabs(journal_dir):
            raise DrainJournalError("drain_journal_dir=%r: not an absolute path. Fix: set an absolute directory "
                                    "on the controller." % (journal_dir,))
        self.dir = os.path.join(journal_dir, fabric)
        self.path = os.path.join(self.dir, FILE)
        self.fabric = fabric

    @contextlib.contextmanager
    def locked(self, create=True):
        """Exclusive lock of the journal (created with its directory, 0700, unless ``create`` is false:
        then a missing journal is read without a lock)."""
        if not create and not os.path.isdir(self.dir):
            yield
            return
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(self.dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _flock(fd)
            yield
        finally:
            os.close(fd)

    def records(self):
        return read(self.path)

    def state(self):
        return state(self.records())

    def _append(self, rec):
        recs = self.records()
        rec = dict(rec)
        rec["v"] = FORMAT
        rec["seq"] = (recs[-1]["seq"] + 1) if recs else 1
        line = json.dumps(rec, sort_keys=True, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return rec

    def decide(self, fabric, request, lease=None, policy=None, now=None, job=None, reason=None, case=None,
               write=True, window=None, spine_check=None):
        """Under the lock: the budget's decision on ``request`` against the journal's state, journaled
        (unless ``write`` is false: check mode). ``spine_check``: see :func:`budget.decide`. Returns the journaled
        record."""
        now = time.time() if now is None else now
        with self.locked(create=write):
            recs = self.records()
            drained = state(recs)
            d = budget.decide(fabric, request, set(drained), decisions(recs), lease=lease, policy=policy, now=now,
                              job=job, window=window, spine_check=spine_check)
            rec = dict((k, d[k]) for k in ("action", "element", "scope", "host", "nic", "rack", "zone", "spine",
                                           "automatic", "allowed", "noop", "reasons", "numbers", "time"))
            rec.update({"type": "decision", "job": job, "reason": reason, "case": case})
            if window is not None:
                # the clean-window verdict this undrain was decided on (remediate/clean_window.py)
                rec["window"] = dict((k, window.get(k)) for k in (
                    "verdict", "allowed", "window", "since", "start", "end", "reasons", "nics", "summary"))
            if write:
                rec = self._append(rec)
            rec["checks"] = d["checks"]
            rec["summary"] = budget.summary(d)
            rec["drained_before"] = sorted(drained)
            return rec

    def outcome(self, action, element, ok, job=None, detail=None, now=None):
        """The result of applying an allowed decision."""
        if action not in budget.ACTIONS:
            raise DrainJournalError("action=%r: use drain or undrain" % (action,))
        budget.parse_element(element)
        with self.locked():
            return self._append({"type": "outcome", "time": time.time() if now is None else now, "job": job,
                                 "action": action, "element": element, "ok": bool(ok), "detail": detail})
