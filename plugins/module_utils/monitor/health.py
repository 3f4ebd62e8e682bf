# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's health from its evidence (``playbooks/health.yml``, module ``netscale.multinic.fabric_health``).

Inputs, each one required, because missing evidence is not health (never an all-green report without it):

- the **case file** the live correlator writes (:mod:`.live`; JSON lines of :func:`.correlate.case_event`):
  folded per case id, the last line wins (open/updated -> open, closed -> closed). Unreadable -> error; a line
  that is not a case event is counted and shown as a warning (the unterminated last line of a file being
  written is not counted);
- optionally the **current cases** file of the same correlator: its ``updated_at`` must be within
  ``max_age`` seconds of now, else the correlator is not running and its case file is stale -> error;
- the **bad minutes per rack**: from Prometheus (its recording rule ``fabric_monitor:bad_minute:rack``, one
  sample a minute per rack whose minute counts: 1 bad, 0 good, read raw over ``period`` seconds) or from a
  file of probe samples (:class:`.sli.Sample` JSON lines, :func:`.sli.minutes`). Prometheus unreachable, or
  no rack series at all over the period -> error.

Then :func:`.report.build` and its three renderings. No Ansible imports; the HTTP fetch is passed in.
"""

from __future__ import annotations

import json
import math

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import report as reportmod
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import sli
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.sli import MINUTE

BAD_MINUTE_RACK = "fabric_monitor:bad_minute:rack"


class HealthError(MultinicError, ValueError):
    """Evidence missing or unreadable: the report is not made."""

    def __init__(self, problems):
        self.problems = list(problems)
        lines = ["no health report: evidence missing (%d problem%s):" % (
            len(self.problems), "" if len(self.problems) == 1 else "s")]
        lines.extend("  - %s" % p for p in self.problems)
        super(HealthError, self).__init__("\n".join(lines))


def read_text(path, what, fix):
    try:
        with open(path) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise HealthError([InputProblem(what, path, "cannot read it: %s" % (getattr(exc, "strerror", None) or exc), fix)])


def fold_cases(text):
    """(case dicts by the last event of each id, number of bad lines). A case dict has what
    :func:`.report.build` reads: ``status`` from the event's state."""
    cases = {}
    bad = 0
    lines = text.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]        # the unterminated last line of a file being written: not a line yet
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            body = json.loads(line)["case"]
            cid, state = body["id"], body["state"]
            if not isinstance(cid, str) or state not in ("open", "updated", "closed") or \
                    not isinstance(body.get("scope"), dict):
                raise ValueError(line[:80])
            for key in ("start", "detections", "repeats", "root_cause"):
                body[key]   # pylint: disable=pointless-statement
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        d = dict(body)
        d["status"] = "closed" if state == "closed" else "open"
        d.pop("state", None)
        cases[cid] = d
    return cases, bad


def check_fresh(snapshot_text, path, now, max_age):
    """The correlator's current-cases file says it ran within ``max_age`` seconds of ``now``."""
    fix = "start the live correlator (in the lab: playbooks/lab.yml with lab_monitoring: true; its log is " \
          "correlator.log in the monitoring dir) or leave cases_snapshot unset"
    try:
        updated = json.loads(snapshot_text)["updated_at"]
        if isinstance(updated, bool) or not isinstance(updated, (int, float)):
            raise ValueError(updated)
    except (ValueError, KeyError, TypeError):
        raise HealthError([InputProblem("cases_snapshot", path, "not the live correlator's current cases (no updated_at)", fix)])
    if now - updated > max_age:
        raise HealthError([InputProblem("cases_snapshot", path, "the live correlator last wrote %d s ago (more than "
                                        "max_age %d s): its case file is stale" % (now - updated, max_age), fix)])
    return updated


def rack_minutes_from_prometheus(answer, url):
    """{rack: {epoch minute: "good" | "bad"}} from the answer (JSON) of the instant query
    ``fabric_monitor:bad_minute:rack[<period>s]`` (a matrix of raw rule evaluations)."""
    fix = "check that Prometheus at %s scrapes the agents and loads the fabric_monitor rules (docs/monitoring.md)" % url
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise HealthError([InputProblem("prometheus_url", url, "the query %s failed: %s" % (
            BAD_MINUTE_RACK, str(answer.get("error") if isinstance(answer, dict) else answer)[:200]), fix)])
    out = {}
    for series in answer.get("data", {}).get("result", []) or []:
        rack = (series.get("metric") or {}).get("rack")
        if not rack:
            continue
        row = out.setdefault(rack, {})
        for ts, value in series.get("values") or []:
            try:
                v = float(value)
                m = int(float(ts) // MINUTE)
            except (TypeError, ValueError):
                continue
            if math.isnan(v):
                continue
            # one evaluation a minute; should two land in one minute, a bad one wins
            if v >= 1 or row.get(m) != "bad":
                row[m] = "bad" if v >= 1 else "good"
    return out


def prometheus_query_url(url, period, now):
    from urllib.parse import urlencode  # pylint: disable=import-outside-toplevel
    return "%s/api/v1/query?%s" % (url.rstrip("/"), urlencode({"query": "%s[%ds]" % (BAD_MINUTE_RACK, int(period)),
                                                               "time": "%.3f" % now}))


def rack_minutes_from_samples(text, path, threshold=sli.THRESHOLD, min_probes=sli.MIN_PROBES):
    samples = []
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            samples.append(sli.Sample.from_dict(json.loads(line), "%s line %d" % (path, number)))
        except ValueError as exc:
            problems.append(InputProblem("samples_file", "%s line %d" % (path, number), str(exc).replace("\n", " "),
                                         "one JSON sample a line: time, host, nic, answered, lost, rack"))
    if problems:
        raise HealthError(problems[:5])
    return sli.minutes(samples, "rack", threshold, min_probes)


def check_settings(now, period, recent, bucket, max_racks, max_age):
    problems = []
    for name, value, low in (("now", now, 0), ("period", period, MINUTE), ("recent", recent, 0),
                             ("max_age", max_age, 1)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
            problems.append(InputProblem(name, value, "expected seconds >= %d" % low,
                                         "e.g. %s" % {"now": "omit it (the wall clock)", "period": "21600",
                                                      "recent": "3600", "max_age": "120"}[name]))
    if isinstance(bucket, bool) or not isinstance(bucket, (int, float)) or bucket < MINUTE or bucket % MINUTE:
        problems.append(InputProblem("bucket", bucket, "a timeline column must be whole minutes", "e.g. 600"))
    if isinstance(max_racks, bool) or not isinstance(max_racks, int) or max_racks < 1:
        problems.append(InputProblem("max_racks", max_racks, "expected a whole number >= 1", "e.g. 40"))
    if problems:
        raise MultinicError("invalid fabric_health settings:\n" + "\n".join("  - %s" % p for p in problems))


def snapshot_links(cases, now, recent, link):
    """{case id: ``link(case id)``} for the cases a report lists (open, and closed within ``recent``): ``link`` is
    the caller's (``remediate.case_snapshot.link`` with the snapshots' directory), None where a case has none."""
    open_cases, recent_cases = reportmod.listed(list(cases.values()), now, recent)
    return dict((c["id"], link(c["id"])) for c in open_cases + recent_cases)


def make(cases, bad_lines, rack_minutes, now, period, recent=3600.0, bucket=600.0, max_racks=40, sources=None,
         repairs=None, snapshots=None):
    """The report (plain data) and its three texts {"md", "json", "svg"}. Minutes older than ``period`` are left
    out (a samples file may hold more). ``repairs``: time to repair per case (``remediate.ttr.repairs``), shown
    when given; ``snapshots``: the listed cases' snapshot links (:func:`snapshot_links`), shown when given."""
    lo = int((now - period) // MINUTE)
    hi = int(now // MINUTE)
    minutes = dict((rack, dict((m, v) for m, v in row.items() if lo <= m <= hi)) for rack, row in rack_minutes.items())
    if not any(minutes.values()):
        where = (sources or {}).get("minutes", "the rack minutes")
        raise HealthError([InputProblem("minutes", where, "no rack has a minute that counts in the last %d s (no "
                                        "probes resolved, or the agents are not scraped)" % period,
                                        "check that the agents run and Prometheus scrapes them (up{job=\"fabric_monitor\"}),"
                                        " or give a longer period")])
    rep = reportmod.build(list(cases.values()), minutes, now, recent=recent, bucket=bucket, max_racks=max_racks,
                          repairs=repairs, snapshots=snapshots)
    rep["period_s"] = period
    rep["case_file_bad_lines"] = bad_lines
    rep["sources"] = dict(sources or {})
    md = reportmod.render_markdown(rep)
    if bad_lines:
        md = md.replace("\n\n", "\n\n> %d unreadable line%s in the case file (not counted above).\n\n" % (
            bad_lines, "" if bad_lines == 1 else "s"), 1)
    return rep, {"md": md, "json": reportmod.render_json(rep), "svg": reportmod.render_svg(rep)}
