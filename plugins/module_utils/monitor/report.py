# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's health report: open and recent cases, bad minutes per rack, and a picture of bad minutes
per rack over time. Pure: data in (case dicts from :func:`.correlate.case_dict`, rack minutes from
:func:`.sli.minutes`), Markdown, JSON and SVG text out. No Ansible imports; a playbook (health.yml)
only gathers the inputs and writes the three texts.
"""

from __future__ import annotations

import json
import time as _time
from xml.sax.saxutils import escape

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.sli import MINUTE, sli

SCHEMA_VERSION = 1


class ReportError(MultinicError, ValueError):
    def __init__(self, problems):
        self.problems = list(problems)
        super(ReportError, self).__init__("invalid health report input:\n" + "\n".join("  - %s" % p for p in self.problems))


def listed(cases, now, recent=3600.0):
    """(open cases, cases closed within ``recent`` seconds of ``now``): the cases a report lists, in its order."""
    open_cases = sorted((c for c in cases if c.get("status") == "open"), key=lambda c: (c["start"], c["id"]))
    recent_cases = sorted((c for c in cases if c.get("status") == "closed" and c.get("end") is not None
                           and c["end"] >= now - recent), key=lambda c: (-c["end"], c["id"]))
    return open_cases, recent_cases


def build(cases, rack_minutes, now, recent=3600.0, bucket=600.0, max_racks=40, repairs=None, snapshots=None):
    """The report as plain data.

    ``cases``: case dicts; ``rack_minutes``: {rack: {epoch minute: "good" | "bad"}}; ``now``: epoch
    seconds; ``recent``: closed cases that ended within this many seconds are listed; ``bucket``:
    seconds per column of the timeline (a multiple of 60); ``max_racks``: racks shown in the timeline
    (the most bad minutes first); ``repairs``: optional time to repair per case
    (:func:`..remediate.ttr.repairs`: ``{"rows": [...], "slo": {...} or None}``), shown when given; ``snapshots``:
    optional {case id: the case's snapshot link (``remediate.case_snapshot.link``: ``{"index", "complete", "nodes",
    "failed"}``) or None}: each listed case gets ``snapshot`` (None: no snapshot), and the case tables a column."""
    problems = []
    for name, value in (("now", now), ("recent", recent), ("bucket", bucket)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            problems.append(InputProblem(name, value, "expected seconds >= 0", "e.g. recent=3600, bucket=600"))
    if not problems and (bucket < MINUTE or bucket % MINUTE):
        problems.append(InputProblem("bucket", bucket, "a timeline column must be whole minutes", "e.g. 600"))
    if isinstance(max_racks, bool) or not isinstance(max_racks, int) or max_racks < 1:
        problems.append(InputProblem("max_racks", max_racks, "expected a whole number >= 1", "e.g. 40"))
    if repairs is not None and (not isinstance(repairs, dict) or not isinstance(repairs.get("rows"), list)):
        problems.append(InputProblem("repairs", repairs, "expected {rows: [...], slo: ...}",
                                     "pass remediate.ttr.repairs(cases, drain journal records, now, slo)"))
    if snapshots is not None and not isinstance(snapshots, dict):
        problems.append(InputProblem("snapshots", snapshots, "expected {case id: link or None}",
                                     "pass remediate.case_snapshot.link(snapshot_dir, case id) per listed case"))
    if problems:
        raise ReportError(problems)
    open_cases, recent_cases = listed(cases, now, recent)
    if snapshots is not None:
        open_cases = [dict(c, snapshot=snapshots.get(c["id"])) for c in open_cases]
        recent_cases = [dict(c, snapshot=snapshots.get(c["id"])) for c in recent_cases]
    per_rack = {}
    first = last = None
    for rack, row in rack_minutes.items():
        good = sum(1 for v in row.values() if v == "good")
        bad = sum(1 for v in row.values() if v == "bad")
        per_rack[rack] = {"good": good, "bad": bad, "sli": sli(good, bad)}
        for m in row:
            first = m if first is None or m < first else first
            last = m if last is None or m > last else last
    step = int(bucket // MINUTE)
    timeline = {"start": None, "bucket_s": bucket, "columns": 0, "racks": {}}
    if first is not None:
        start = first - first % step
        columns = (last - start) // step + 1
        shown = sorted(per_rack, key=lambda r: (-per_rack[r]["bad"], r))[:max_racks]
        for rack in shown:
            cells = [0] * columns
            for m, v in rack_minutes[rack].items():
                if v == "bad":
                    cells[(m - start) // step] += 1
            timeline["racks"][rack] = cells
        timeline.update(start=start * MINUTE, columns=columns, racks_total=len(per_rack))
    out = {"schema": SCHEMA_VERSION, "generated_at": now, "open_cases": open_cases, "recent_cases": recent_cases,
           "recent_s": recent, "racks": dict(sorted(per_rack.items())), "timeline": timeline}
    if repairs is not None:
        out["repairs"] = repairs
    if snapshots is not None:
        out["snapshots"] = True
    return out


def render_json(report):
    return json.dumps(report, indent=1, sort_keys=True) + "\n"


def _ts(t):
    return "-" if t is None else _time.strftime("%Y-%m-%d %H:%M:%SZ", _time.gmtime(t))


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report):
    out = ["# Fleet health (%s)" % _ts(report["generated_at"]), ""]
    recent = "Cases closed in the last %d min" % (report["recent_s"] // 60)
    for title, key in (("Open cases", "open_cases"), (recent, "recent_cases")):
        rows = report[key]
        out.append("## %s: %d" % (title, len(rows)))
        out.append("")
        snaps = report.get("snapshots")
        if rows:
            out.append("| case | scope | root cause | start | end | detections | repeats |" + (" snapshot |" if snaps else ""))
            out.append("|---|---|---|---|---|---|---|" + ("---|" if snaps else ""))
            for c in rows:
                out.append("| %s | %s %s | %s | %s | %s | %d | %d |" % (
                    _cell(c["id"]), c["scope"]["kind"], _cell(c["scope"]["id"]), _cell(c["root_cause"]),
                    _ts(c["start"]), _ts(c.get("end")), c["detections"], c["repeats"])
                    + (" %s |" % _cell(_snapshot_cell(c.get("snapshot"))) if snaps else ""))
            out.append("")
    racks = report["racks"]
    bad = sorted((r for r in racks if racks[r]["bad"]), key=lambda r: (-racks[r]["bad"], r))
    out.append("## Bad minutes per rack: %d of %d racks with bad minutes" % (len(bad), len(racks)))
    out.append("")
    if bad:
        out.append("| rack | bad | good | SLI |")
        out.append("|---|---|---|---|")
        for r in bad:
            v = racks[r]
            shown = "-" if v["sli"] is None else "%.4f" % v["sli"]
            out.append("| %s | %d | %d | %s |" % (_cell(r), v["bad"], v["good"], shown))
        out.append("")
    if report.get("repairs") is not None:
        out.extend(_repairs_markdown(report["repairs"]))
    return "\n".join(out) + "\n"


def _snapshot_cell(link):
    """The case's snapshot index, or none; a partial or unreadable one says so."""
    if not link:
        return "none"
    if link.get("error"):
        return "%s (unreadable)" % link["index"]
    if not link.get("complete"):
        failed = link.get("failed") or []
        return "%s (partial: %d of %d missing: %s)" % (link["index"], len(failed), link.get("nodes", 0), ", ".join(failed))
    return link["index"]


def _dur(s):
    return "open" if s is None else "%.0f s" % s


def _repairs_markdown(repairs):
    rows = repairs.get("rows") or []
    out = ["## Time to repair: %d case%s" % (len(rows), "" if len(rows) == 1 else "s"), ""]
    slo = repairs.get("slo")
    if slo:
        shown = "-" if slo["attainment"] is None else "%.1f %%" % (100.0 * slo["attainment"])
        out += ["SLO %.0f s: %s attained (%d within, %d missed, %d pending)" % (
            slo["slo"], shown, slo["within"], slo["missed"], slo["pending"]), ""]
    if rows:
        out.append("| case | element | detected | mitigated | repaired | detect->mitigate | mitigate->repair | total | SLO |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                _cell(r["case"]), _cell(r.get("element") or "-"), _ts(r.get("detected")),
                _ts(r.get("mitigated")) if r.get("mitigated") is not None else "open",
                _ts(r.get("repaired")) if r.get("repaired") is not None else "open",
                _dur(r.get("detect_to_mitigate")), _dur(r.get("mitigate_to_repair")), _dur(r.get("total")),
                r.get("slo") or "-"))
        out.append("")
    return out


def render_svg(report, title="Bad minutes per rack over time"):
    """A heat map: one row per rack (most bad minutes first), one column per timeline bucket."""
    tl = report["timeline"]
    racks = list(tl["racks"])
    cols = tl["columns"]
    cw, rh, left, top = 14, 14, 150, 50
    width = max(left + cols * cw + 40, 360)
    height = top + max(1, len(racks)) * rh + 60
    per_col = tl["bucket_s"] / MINUTE
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="11">' % (width, height, width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="20" font-size="14" font-weight="bold">%s</text>' % escape(title)]
    if not racks:
        out.append('<text x="10" y="%d">no minutes recorded</text>' % (top + 10))
    for i, rack in enumerate(racks):
        y = top + i * rh
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (left - 6, y + rh - 3, escape(rack)))
        for j, n in enumerate(tl["racks"][rack]):
            share = min(1.0, n / per_col)
            color = "#eeeeee" if n == 0 else "rgb(%d,%d,%d)" % (255, int(200 * (1 - share)), int(200 * (1 - share)))
            t0 = tl["start"] + j * tl["bucket_s"]
            out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s %s: %d bad min</title></rect>'
                       % (left + j * cw, y, cw - 1, rh - 1, color, escape(rack), _ts(t0), n))
    if racks:
        y = top + len(racks) * rh + 16
        out.append('<text x="%d" y="%d">%s</text>' % (left, y, _ts(tl["start"])))
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>'
                   % (left + cols * cw, y + 14, _ts(tl["start"] + cols * tl["bucket_s"])))
        out.append('<text x="10" y="%d">%d s per column; darker = more bad minutes; %d of %d racks shown</text>'
                   % (y + 32, tl["bucket_s"], len(racks), tl.get("racks_total", len(racks))))
    out.append("</svg>")
    return "\n".join(out) + "\n"
