# -*- coding: utf-8 -*-
"""The health report: open/recent cases, bad minutes per rack, the timeline picture (Markdown, JSON, SVG)."""
import json
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.netscale.multinic.bench.monitor_sim import Fault, Simulator
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import report, sli
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.correlate import Correlator, case_dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import monitor_fabric as fabrics  # noqa: E402  pylint: disable=wrong-import-position

IDX = fabrics.index()
T0 = 1000 * 60.0


def cases_at(now):
    sim = Simulator(IDX)
    faults = [Fault("nic", T0, T0 + 300, host="z1r2h3", nic=2), Fault("host", T0 + 1500, T0 + 3000, host="z1r1h1")]
    corr = Correlator(IDX)
    out = list(corr.feed_many(d for d in sim.stream(faults, now, t_start=T0 - 60) if d.time < now))
    return [case_dict(c, IDX) for c in out + corr.finish(now=now)]


def rack_minutes():
    s = []
    for m in range(60):
        s.append(sli.Sample(T0 + m * 60 + 5, "z1r2h3", 2, 100, 5 if 3 <= m < 8 else 0))
        s.append(sli.Sample(T0 + m * 60 + 5, "z1r1h1", 1, 100, 50 if 25 <= m < 50 else 0))
        s.append(sli.Sample(T0 + m * 60 + 5, "z1r4h1", 1, 100, 0))
    return sli.minutes(s, "rack", index=IDX)


def test_report_lists_open_and_recent_cases_and_bad_minutes_per_rack():
    now = T0 + 2400
    rep = report.build(cases_at(now), rack_minutes(), now, recent=3600, bucket=600)
    assert [c["scope"]["id"] for c in rep["open_cases"]] == ["z1r1h1"]
    assert [c["scope"]["id"] for c in rep["recent_cases"]] == ["z1r2h3/nic2"]
    assert rep["racks"]["z1r2"] == {"good": 55, "bad": 5, "sli": round(55 / 60.0, 6)}
    assert rep["racks"]["z1r1"]["bad"] == 25 and rep["racks"]["z1r4"]["bad"] == 0
    tl = rep["timeline"]
    assert tl["columns"] == 6 and list(tl["racks"]) == ["z1r1", "z1r2", "z1r4"]
    assert tl["racks"]["z1r2"] == [5, 0, 0, 0, 0, 0] and sum(tl["racks"]["z1r1"]) == 25
    assert json.loads(report.render_json(rep)) == rep
    md = report.render_markdown(rep)
    assert "## Open cases: 1" in md and "| z1r1 | 25 | 35 |" in md and "2 of 3 racks with bad minutes" in md
    assert "NIC 2 of z1r2h3" in md
    svg = ET.fromstring(report.render_svg(rep))
    rects = [r for r in svg.iter("{http://www.w3.org/2000/svg}rect") if r.find("{http://www.w3.org/2000/svg}title") is not None]
    assert len(rects) == 3 * 6
    assert sum(1 for r in rects if r.get("fill") != "#eeeeee") == 1 + 3  # z1r2: one column; z1r1: 3 columns


def test_an_old_closed_case_is_not_recent_and_max_racks_limits_the_picture():
    now = T0 + 2400
    rep = report.build(cases_at(now), rack_minutes(), now + 7200, recent=600, max_racks=1)
    assert rep["recent_cases"] == [] and list(rep["timeline"]["racks"]) == ["z1r1"]
    assert rep["timeline"]["racks_total"] == 3


def test_empty_inputs_render():
    rep = report.build([], {}, T0)
    assert rep["timeline"]["columns"] == 0
    assert "## Open cases: 0" in report.render_markdown(rep)
    ET.fromstring(report.render_svg(rep))


def test_bad_arguments_name_field_value_and_fix():
    with pytest.raises(report.ReportError) as err:
        report.build([], {}, T0, bucket=90, max_racks=0)
    assert sorted(p.path for p in err.value.problems) == ["bucket", "max_racks"]


def test_markdown_escapes_table_cells_and_svg_escapes_names():
    case = {"id": "x|y", "scope": {"kind": "target", "id": "a|b"}, "root_cause": "<pipe | here>", "start": T0,
            "end": None, "status": "open", "detections": 1, "repeats": 1}
    rep = report.build([case], {"r<1>": {int(T0 // 60): "bad"}}, T0)
    assert "x\\|y" in report.render_markdown(rep)
    assert "r&lt;1&gt;" in report.render_svg(rep)
    ET.fromstring(report.render_svg(rep))


def _case(cid, status, start, end=None):
    return {"id": cid, "status": status, "scope": {"kind": "nic", "id": cid.split("@")[0]}, "root_cause": "loss",
            "start": start, "end": end, "detections": 3, "repeats": 1}


def test_report_links_each_listed_case_to_its_snapshot_index_or_none():
    cases = [_case("h1/nic1@1", "open", T0), _case("h2/nic2@2", "closed", T0, T0 + 60),
             _case("h3/nic1@3", "closed", T0, T0 - 7200), _case("h4/nic1@4", "open", T0 + 5)]
    links = {"h1/nic1@1": {"index": "/s/lab/h1+nic1@1/index.json", "complete": True, "nodes": 2, "failed": []},
             "h2/nic2@2": {"index": "/s/lab/h2+nic2@2/index.json", "complete": False, "nodes": 2, "failed": ["r1-tor"]},
             "h4/nic1@4": None}
    rep = report.build(cases, {"r1": {int(T0 // 60): "good"}}, T0 + 120, recent=3600, snapshots=links)
    assert [(c["id"], c["snapshot"]) for c in rep["open_cases"]] == [("h1/nic1@1", links["h1/nic1@1"]), ("h4/nic1@4", None)]
    assert [(c["id"], c["snapshot"]) for c in rep["recent_cases"]] == [("h2/nic2@2", links["h2/nic2@2"])]
    md = report.render_markdown(rep)
    assert "| case | scope | root cause | start | end | detections | repeats | snapshot |" in md
    assert "| 3 | 1 | /s/lab/h1+nic1@1/index.json |" in md
    assert "| 3 | 1 | none |" in md
    assert "| 3 | 1 | /s/lab/h2+nic2@2/index.json (partial: 1 of 2 missing: r1-tor) |" in md
    assert json.loads(report.render_json(rep))["open_cases"][0]["snapshot"]["index"] == "/s/lab/h1+nic1@1/index.json"
    # without snapshots the tables are as before (no column, no key)
    plain = report.build(cases, {"r1": {int(T0 // 60): "good"}}, T0 + 120, recent=3600)
    assert "snapshot" not in report.render_markdown(plain) and "snapshot" not in plain["open_cases"][0]
    with pytest.raises(report.ReportError, match="snapshots"):
        report.build(cases, {}, T0, snapshots=["h1"])
