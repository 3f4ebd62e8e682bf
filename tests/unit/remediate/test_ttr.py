# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time to repair per case (remediate/ttr.py) and its place in the health report (monitor/report.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import report as R
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import ttr as T


def case(cid, start, opened=None, kind="nic", scope_id="h1/nic2", status="closed"):
    return {"id": cid, "status": status, "scope": {"kind": kind, "id": scope_id}, "root_cause": "loss",
            "start": start, "end": start + 10, "opened_at": opened if opened is not None else start + 60,
            "detections": 3, "repeats": 1}


def decision(t, element, case_id, job, action="drain", allowed=True, noop=False):
    return {"type": "decision", "time": t, "element": element, "case": case_id, "job": job, "action": action,
            "allowed": allowed, "noop": noop}


def outcome(t, element, job, action="drain", ok=True):
    return {"type": "outcome", "time": t, "element": element, "job": job, "action": action, "ok": ok}


def test_stages_and_split():
    cases = [case("c1", 1000.0, opened=1060.0)]
    j = [decision(1070.0, "nic:h1:1", "c1", "d1"), outcome(1078.0, "nic:h1:1", "d1"),
         decision(1500.0, "nic:h1:1", "c1", "u1", action="undrain"), outcome(1507.0, "nic:h1:1", "u1", action="undrain")]
    (r,) = T.rows(cases, j, now=2000.0, slo=600)
    assert (r["detected"], r["opened"], r["mitigated"], r["repaired"]) == (1000.0, 1060.0, 1078.0, 1507.0)
    assert (r["detect_to_mitigate"], r["mitigate_to_repair"], r["total"]) == (78.0, 429.0, 507.0)
    assert r["status"] == "repaired" and r["slo"] == "within" and r["element"] == "nic:h1:1"


def test_open_stages_are_none_and_pending_or_missed():
    cases = [case("c1", 1000.0), case("c2", 1900.0), case("c3", 100.0)]
    j = [decision(1070.0, "nic:h1:1", "c1", "d1"), outcome(1078.0, "nic:h1:1", "d1")]
    rows = dict((r["case"], r) for r in T.rows(cases, j, now=2000.0, slo=600))
    assert rows["c1"]["status"] == "mitigated" and rows["c1"]["repaired"] is None
    assert rows["c1"]["mitigate_to_repair"] is None and rows["c1"]["total"] is None
    assert rows["c1"]["slo"] == "missed"          # 1000 s since detection > 600 s, not back yet
    assert rows["c2"]["status"] == "open" and rows["c2"]["mitigated"] is None and rows["c2"]["slo"] == "pending"
    assert rows["c3"]["slo"] == "missed"
    att = T.attainment(list(rows.values()), 600)
    assert att == {"slo": 600.0, "within": 0, "missed": 2, "pending": 1, "attainment": 0.0}


def test_failed_drain_is_not_mitigation_and_refused_drain_neither():
    cases = [case("c1", 1000.0)]
    j = [decision(1070.0, "nic:h1:1", "c1", "d1", allowed=False),
         decision(1080.0, "nic:h1:1", "c1", "d2"), outcome(1085.0, "nic:h1:1", "d2", ok=False)]
    (r,) = T.rows(cases, j, now=2000.0)
    assert r["status"] == "open" and r["mitigated"] is None and r["slo"] is None


def test_noop_drain_mitigates_at_its_decision():
    j = [decision(1070.0, "nic:h1:1", "c1", "d1", noop=True)]
    (r,) = T.rows([case("c1", 1000.0)], j, now=2000.0)
    assert r["mitigated"] == 1070.0


def test_undrain_before_the_mitigation_does_not_repair():
    j = [outcome(900.0, "nic:h1:1", "u0", action="undrain"),
         decision(1070.0, "nic:h1:1", "c1", "d1"), outcome(1078.0, "nic:h1:1", "d1")]
    (r,) = T.rows([case("c1", 1000.0)], j, now=2000.0)
    assert r["repaired"] is None and r["status"] == "mitigated"


def test_bad_input_names_the_field():
    with pytest.raises(T.TtrError, match="slo"):
        T.rows([], [], 0.0, slo=0)
    with pytest.raises(T.TtrError, match=r"cases\[0\]"):
        T.rows([{"no": "id"}], [], 0.0)
    with pytest.raises(T.TtrError, match=r"cases\[0\].start"):
        T.rows([dict(case("c1", 0.0), start="yesterday")], [], 0.0)


def test_report_takes_repairs_as_an_option():
    cases = [case("c1", 1000.0)]
    j = [decision(1070.0, "nic:h1:1", "c1", "d1"), outcome(1078.0, "nic:h1:1", "d1"),
         outcome(1507.0, "nic:h1:1", "u1", action="undrain")]
    plain = R.build(cases, {}, 2000.0)
    assert "repairs" not in plain and "Time to repair" not in R.render_markdown(plain)   # the old signature, as before
    rep = R.build(cases, {}, 2000.0, repairs=T.repairs(cases, j, 2000.0, slo=600))
    md = R.render_markdown(rep)
    assert "## Time to repair: 1 case" in md and "SLO 600 s: 100.0 % attained (1 within, 0 missed, 0 pending)" in md
    assert "| c1 | nic:h1:1 |" in md and "| 78 s | 429 s | 507 s | within |" in md
    assert json.loads(R.render_json(rep))["repairs"]["slo"]["attainment"] == 1.0
    with pytest.raises(R.ReportError, match="repairs"):
        R.build(cases, {}, 2000.0, repairs=[1, 2])


def test_report_shows_open_stages():
    rep = R.build([case("c1", 1000.0)], {}, 2000.0, repairs=T.repairs([case("c1", 1000.0)], [], 2000.0))
    assert "| c1 | - | 1970-01-01 00:16:40Z | open | open | open | open | open | - |" in R.render_markdown(rep)


# ------------------------------------------------------------------------------------------------
# Properties: ordering of the stages, open stages, SLO attainment
# ------------------------------------------------------------------------------------------------
@st.composite
def histories(draw):
    n = draw(st.integers(min_value=0, max_value=8))
    cases, recs = [], []
    for i in range(n):
        start = draw(st.floats(min_value=0, max_value=1e5))
        c = case("c%d" % i, start)
        cases.append(c)
        el = "nic:h%d:1" % i
        stage = draw(st.sampled_from(["none", "refused", "drained", "failed", "repaired"]))
        t = start + draw(st.floats(min_value=0, max_value=1e4))
        if stage == "refused":
            recs.append(decision(t, el, c["id"], "d%d" % i, allowed=False))
        if stage in ("drained", "failed", "repaired"):
            recs.append(decision(t, el, c["id"], "d%d" % i))
            t2 = t + draw(st.floats(min_value=0, max_value=100))
            recs.append(outcome(t2, el, "d%d" % i, ok=stage != "failed"))
            if stage == "repaired":
                t3 = t2 + draw(st.floats(min_value=0, max_value=1e4))
                recs.append(outcome(t3, el, "u%d" % i, action="undrain"))
    return cases, sorted(recs, key=lambda r: r["time"])


@settings(max_examples=200, deadline=None)
@given(h=histories(), slo=st.one_of(st.none(), st.floats(min_value=1, max_value=2e4)),
       later=st.floats(min_value=0, max_value=1e5))
def test_property_stages_ordered_open_shown_attainment(h, slo, later):
    cases, recs = h
    now = max([c["start"] for c in cases] + [r["time"] for r in recs] + [0.0]) + later
    rows = T.rows(cases, recs, now, slo)
    assert len(rows) == len(cases)
    for r in rows:
        stages = [r["detected"], r["mitigated"], r["repaired"]]
        reached = [x for x in stages if x is not None]
        assert reached == sorted(reached)                        # detected <= mitigated <= repaired
        assert stages.index(None) == len(reached) if None in stages else len(reached) == 3   # no stage after an open one
        for d in ("detect_to_mitigate", "mitigate_to_repair", "total"):
            assert r[d] is None or r[d] >= 0
        assert (r["total"] is None) == (r["repaired"] is None)
        if r["total"] is not None:
            assert abs(r["total"] - r["detect_to_mitigate"] - r["mitigate_to_repair"]) < 1e-6
        assert r["status"] == ("repaired" if r["repaired"] is not None else
                               "mitigated" if r["mitigated"] is not None else "open")
    if slo is None:
        assert all(r["slo"] is None for r in rows)
        return
    att = T.attainment(rows, slo)
    within = sum(1 for r in rows if r["total"] is not None and r["total"] <= slo)
    missed = sum(1 for r in rows if (r["total"] is not None and r["total"] > slo)
                 or (r["total"] is None and now - r["detected"] > slo))
    assert (att["within"], att["missed"]) == (within, missed)
    assert att["within"] + att["missed"] + att["pending"] == len(rows)
    if within + missed:
        assert att["attainment"] == pytest.approx(within / float(within + missed))
        assert 0.0 <= att["attainment"] <= 1.0
    else:
        assert att["attainment"] is None
