#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_health
short_description: The fleet's health report - open and recent cases, bad minutes per rack (Markdown, JSON, SVG)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Reads the live correlator's case file (one case event per line; the last event of a case wins), the bad minutes
    per rack (Prometheus's recording rule C(fabric_monitor:bad_minute:rack), or a file of probe samples) and,
    optionally, the correlator's current cases to check that it is still running.
  - Writes C(<prefix>.md), C(<prefix>.json) and C(<prefix>.svg) (bad minutes per rack over time) beside each other
    in O(report_dir), each only when its content changed; a second run with the same inputs (and O(now)) reports
    no change.
  - Missing evidence is not health. An unreadable case file, Prometheus unreachable, no rack minute in the period,
    or current cases older than O(max_age) fail the task, naming what is missing and the fix; nothing is written.
  - Runs on the controller. The logic is in C(plugins/module_utils/monitor/health.py) and C(monitor/report.py).
options:
  case_file:
    description: The live correlator's case file (JSON lines; lab_monitoring returns it as C(case_file)).
    type: path
    required: true
  cases_snapshot:
    description: The live correlator's current cases (lab_monitoring's C(cases)); when set, its C(updated_at) must be
      within O(max_age) seconds of O(now).
    type: path
  max_age:
    description: Seconds the current cases may be old (the correlator rewrites them at least every 10 s).
    type: int
    default: 120
  prometheus_url:
    description: Prometheus with the fabric_monitor recording rules (lab_monitoring's C(url)). One of O(prometheus_url)
      and O(samples_file) is required.
    type: str
  samples_file:
    description: Probe samples instead of Prometheus (JSON lines C({time, host, nic, answered, lost, rack})).
    type: path
  period:
    description: Seconds of bad-minute history in the report (and in the picture).
    type: int
    default: 21600
  recent:
    description: Closed cases that ended within this many seconds are listed.
    type: int
    default: 3600
  bucket:
    description: Seconds per column of the picture (whole minutes).
    type: int
    default: 600
  max_racks:
    description: Racks shown in the picture (the most bad minutes first).
    type: int
    default: 40
  now:
    description: The report's time (epoch seconds); default the wall clock, to the minute.
    type: float
  report_dir:
    description: Directory the three files are written to.
    type: path
    required: true
  prefix:
    description: File name of the three files, without extension.
    type: str
    default: health
  timeout:
    description: Seconds to wait for Prometheus.
    type: int
    default: 10
  drain_journal:
    description:
      - The drain journal (C(<drain_journal_dir>/<fabric>/drain-journal.jsonl), written by C(playbooks/drain.yml),
        C(undrain.yml) and Event-Driven Ansible). When set, the report gets a time-to-repair table - per case
        detected, mitigated (its drain applied) and repaired (its element undrained) - with the O(repair_slo)
        attainment. A journal that does not exist or does not read fails the task (missing evidence).
    type: path
  repair_slo:
    description: Seconds from detection to repair a case should take (the report says within, missed or pending per
      case and the attainment). Needs O(drain_journal).
    type: int
  snapshot_dir:
    description:
      - The fabric's case snapshots (C(<case_snapshot_dir>/<fabric>), written by C(playbooks/case_snapshot.yml)). When
        set, each open and recent case shows the path of its snapshot index (C(<snapshot_dir>/<case id, / as +>/
        index.json)), marked partial with the nodes missing, or C(none) when it has no snapshot. A directory that
        does not exist fails the task, like a missing drain journal (a typo must not show every case without a
        snapshot); before the fabric's first snapshot, leave it unset or create it (C(mkdir -m 0700)).
    type: path
attributes:
  check_mode:
    support: full
    description: Reads every input and builds the report; writes nothing.
  diff_mode:
    support: full
    description: The Markdown report before and after.
"""

EXAMPLES = r"""
- name: Health of the lab fleet
  netscale.multinic.fabric_health:
    case_file: /run/netscale-multinic/lab/lab/monitoring/cases.jsonl
    cases_snapshot: /run/netscale-multinic/lab/lab/monitoring/cases.json
    prometheus_url: http://127.0.0.1:19090
    report_dir: /var/tmp/health
  register: health
"""

RETURN = r"""
open_cases:
  description: Open cases (id, scope kind and id, root cause, start).
  returned: always
  type: list
  elements: dict
recent_cases:
  description: Cases closed within O(recent) seconds (id, scope kind and id, root cause, start, end).
  returned: always
  type: list
  elements: dict
racks:
  description: Good and bad minutes and the SLI per rack over O(period).
  returned: always
  type: dict
markdown:
  description: The report in Markdown (what health.yml prints).
  returned: always
  type: str
paths:
  description: The three files (md, json, svg).
  returned: always
  type: dict
case_file_bad_lines:
  description: Lines of the case file that are not case events (shown as a warning in the report).
  returned: always
  type: int
repairs:
  description: Time to repair per case (C(rows)) and the SLO attainment (C(slo)), from O(drain_journal).
  returned: when O(drain_journal) is set
  type: dict
snapshots:
  description: Per open and recent case id, its snapshot (C(index) path, C(complete), C(nodes), C(failed)) or null.
  returned: when O(snapshot_dir) is set
  type: dict
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import health
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import case_snapshot
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import journal as drain_journal
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import ttr
from ansible_collections.netscale.multinic.plugins.module_utils.writing import read_text, write_if_changed


def _short(c):
    out = {"id": c["id"], "scope": "%s %s" % (c["scope"].get("kind"), c["scope"].get("id")),
           "root_cause": c.get("root_cause"), "start": c.get("start"), "end": c.get("end")}
    if "snapshot" in c:
        out["snapshot"] = c["snapshot"]["index"] if c["snapshot"] else "none"
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            case_file=dict(type="path", required=True),
            cases_snapshot=dict(type="path"),
            max_age=dict(type="int", default=120),
            prometheus_url=dict(type="str"),
            samples_file=dict(type="path"),
            period=dict(type="int", default=21600),
            recent=dict(type="int", default=3600),
            bucket=dict(type="int", default=600),
            max_racks=dict(type="int", default=40),
            now=dict(type="float"),
            report_dir=dict(type="path", required=True),
            prefix=dict(type="str", default="health"),
            timeout=dict(type="int", default=10),
            drain_journal=dict(type="path"),
            repair_slo=dict(type="int"),
            snapshot_dir=dict(type="path"),
        ),
        required_one_of=[("prometheus_url", "samples_file")],
        required_by={"repair_slo": "drain_journal"},
        mutually_exclusive=[("prometheus_url", "samples_file")],
        supports_check_mode=True,
    )
    p = module.params
    now = p["now"] if p["now"] is not None else float(int(time.time()) // 60 * 60)
    try:
        health.check_settings(now, p["period"], p["recent"], p["bucket"], p["max_racks"], p["max_age"])
        if not p["prefix"] or "/" in p["prefix"]:
            module.fail_json(msg="prefix: %r is not a file name. Fix: a name without /, e.g. health" % (p["prefix"],))
        text = health.read_text(p["case_file"], "case_file", "give the live correlator's case file (lab_monitoring "
                                "returns it as case_file; in the lab <state dir>/monitoring/cases.jsonl) and check "
                                "that the correlator runs")
        cases, bad = health.fold_cases(text)
        sources = {"case_file": p["case_file"]}
        if p["cases_snapshot"]:
            snap = health.read_text(p["cases_snapshot"], "cases_snapshot", "give the live correlator's current cases "
                                    "(lab_monitoring returns it as cases) or leave cases_snapshot unset")
            sources["correlator_updated_at"] = health.check_fresh(snap, p["cases_snapshot"], now, p["max_age"])
            engine_errors = json.loads(snap).get("engine_errors") or 0
            if engine_errors:
                module.warn("the live correlator counted %s correlation error(s) (see its log): detections may be "
                            "missing from the cases" % engine_errors)
        if p["prometheus_url"]:
            url = health.prometheus_query_url(p["prometheus_url"], p["period"], now)
            try:
                answer = json.loads(open_url(url, timeout=p["timeout"], validate_certs=True).read())
            except Exception as exc:  # pylint: disable=broad-except
                raise health.HealthError([InputProblem(
                    "prometheus_url", p["prometheus_url"], "unreachable or not Prometheus: %s" % exc,
                    "start the lab's monitoring (playbooks/lab.yml with lab_monitoring: true) or point prometheus_url at "
                    "the Prometheus that scrapes the agents; or give samples_file")])
            minutes = health.rack_minutes_from_prometheus(answer, p["prometheus_url"])
            sources["minutes"] = "%s (%s)" % (p["prometheus_url"], health.BAD_MINUTE_RACK)
        else:
            minutes = health.rack_minutes_from_samples(health.read_text(
                p["samples_file"], "samples_file", "give a file of probe samples, or prometheus_url"), p["samples_file"])
            sources["minutes"] = p["samples_file"]
        repairs = None
        if p["drain_journal"]:
            if not os.path.isfile(p["drain_journal"]):
                raise health.HealthError([InputProblem(
                    "drain_journal", p["drain_journal"], "no such file",
                    "give the drain journal (<drain_journal_dir>/<fabric>/drain-journal.jsonl; playbooks/drain.yml "
                    "writes it at the first drain decision) or leave drain_journal unset")])
            repairs = ttr.repairs(list(cases.values()), drain_journal.read(p["drain_journal"]), now, p["repair_slo"])
            sources["drain_journal"] = p["drain_journal"]
        snapshots = None
        if p["snapshot_dir"]:
            if not os.path.isdir(p["snapshot_dir"]):
                raise health.HealthError([InputProblem(
                    "snapshot_dir", p["snapshot_dir"], "no such directory",
                    "give the fabric's case snapshots (<case_snapshot_dir>/<fabric>; playbooks/case_snapshot.yml writes "
                    "them, the rulebook on each case that opens) or leave snapshot_dir unset")])
            snapshots = health.snapshot_links(cases, now, p["recent"],
                                              lambda cid: case_snapshot.link(p["snapshot_dir"], cid))
            sources["snapshot_dir"] = p["snapshot_dir"]
        rep, texts = health.make(cases, bad, minutes, now, p["period"], p["recent"], p["bucket"], p["max_racks"], sources,
                                 repairs=repairs, snapshots=snapshots)
    except MultinicError as exc:
        module.fail_json(msg=str(exc))
    paths = dict((ext, os.path.join(p["report_dir"], "%s.%s" % (p["prefix"], ext))) for ext in ("md", "json", "svg"))
    before = read_text(paths["md"]) or ""
    changed = False
    for ext in ("json", "svg", "md"):
        changed = write_if_changed(paths[ext], texts[ext], check_mode=module.check_mode) or changed
    result = dict(changed=changed, paths=paths, markdown=texts["md"], case_file_bad_lines=bad,
                  open_cases=[_short(c) for c in rep["open_cases"]],
                  recent_cases=[_short(c) for c in rep["recent_cases"]], racks=rep["racks"])
    if repairs is not None:
        result["repairs"] = repairs
    if snapshots is not None:
        result["snapshots"] = snapshots
    if module._diff and before != texts["md"]:
        result["diff"] = {"before_header": paths["md"], "after_header": paths["md"], "before": before,
                          "after": texts["md"]}
    if bad:
        module.warn("%d line(s) of %s are not case events (not counted in the report)" % (bad, p["case_file"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
