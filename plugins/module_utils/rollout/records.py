# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing a rollout's records: this job's journal file, then the run's report events.

One writer for both callers on the controller: the ``rollout_journal`` module and the ``rollout_decide``
action, whose decisions record their own results. The journal is always written before the report, so
the report never records what the journal does not; in check mode the journal is not written (the
report is, a controller-side artifact)."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.report import model
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import journal as jr


class JobJournal(object):
    """This job's journal file in its rollout (``<dir>/<rollout_id>/<job>.json``), read with the other jobs'
    files so every record is checked against the rollout's merged record."""

    def __init__(self, journal_dir, rollout_id, job=None, meta=None):
        self.rollout_id = jr.check_id(rollout_id)
        docs = jr.read(journal_dir, self.rollout_id)
        self.path = (jr.job_path(journal_dir, self.rollout_id, job) if job
                     else jr.rollout_dir(journal_dir, self.rollout_id))
        mine = [d for d in docs if d.get("job") == job]
        # no job (a status read): the rollout's files only
        self.doc = mine[0] if mine else jr.new_job(self.rollout_id, job, meta=meta or {}) if job else None
        self.others = [d for d in docs if d.get("job") != job]
        self.docs = docs

    def merged(self):
        return jr.replay(jr.merge(self.others + ([self.doc] if self.doc else [])))

    def append(self, items, default_kind=None):
        """Append ``items`` (each a record; its ``_record`` key, else ``default_kind``, names the kind; a ToR
        item with ``names`` is one record per name), each checked against the merged record first."""
        expanded = []
        for item in items:
            item = dict(item)
            kind = item.pop("_record", None) or default_kind
            if kind == "tor" and "names" in item:
                names = item.pop("names") or []
                expanded.extend((kind, dict(item, name=n)) for n in names)
            else:
                expanded.append((kind, item))
        rec = self.merged()
        for kind, item in expanded:
            if kind not in jr.EVENT_TYPES[1:]:
                raise jr.JournalError("record %r: give record (host, tor, wave, gate, event) or _record in the item"
                                      % (kind,))
            jr.check_event(rec, kind, item)
            jr.append(self.doc, kind, item)
            if kind in ("host", "tor"):   # the only records a check reads: a wave's gate results replay nothing
                rec = self.merged()

    def save(self, check_mode):
        if not check_mode:
            jr.save(self.path, self.doc)
        rec = self.merged()
        return dict(record=rec, summary=jr.summary(rec), path=self.path)


def report_events(report_dir, events, summary, check_mode):
    """Record ``events`` (``[(event, data, extra)]``) in the run's report; ``extra``: ``journal_summary`` (put
    the journal's ``summary`` into the event's data), ``snapshot``, ``share_tolerance``. Returns ``{events:
    [{event, summary}], status, paths}``."""
    out = {"events": []}
    for event, data, extra in events:
        data = dict(data or {})
        if extra.get("journal_summary"):
            data["journal_summary"] = summary
        res = model.record(report_dir, event, data, snapshot=extra.get("snapshot"),
                           share_tolerance=extra.get("share_tolerance"), check_mode=check_mode)
        out["events"].append({"event": event, "summary": res["summary"]})
        out.update(status=res["status"], paths=res["paths"])
    return out


def record(where, items, report=(), check_mode=False, default_kind=None):
    """Journal ``items`` then report ``report`` (``[{event, data, share_tolerance?, journal_summary?}]``).

    ``where``: ``{dir, rollout_id, job, report_dir}``, the run's journal and report. Returns the journal's
    ``record``, ``summary`` and ``path``, and with report events the ``report`` (see :func:`report_events`).
    Raises :class:`journal.JournalError` (bad record, unreadable journal) before anything is written."""
    if report and not where.get("report_dir"):
        raise jr.JournalError("report events need report_dir (the run's report directory)")
    job = JobJournal(where["dir"], where["rollout_id"], where["job"])
    job.append(items, default_kind)
    out = job.save(check_mode)
    if report:
        out["report"] = report_events(where["report_dir"], [(r.get("event"), r.get("data"), r) for r in report],
                                      out["summary"], check_mode)
    return out
