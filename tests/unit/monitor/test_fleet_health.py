# -*- coding: utf-8 -*-
"""monitor/health.py: the case file folded per case, the correlator's freshness, bad minutes per rack from
Prometheus's answer, and missing evidence refused (never an all-green report)."""
import json

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import health

T0 = 3000 * 60.0


def event(cid, state, start=T0, end=None, kind="nic", sid="lab-r2-h1/nic2"):
    return {"case": {"id": cid, "state": state, "scope": {"kind": kind, "id": sid}, "root_cause": "NIC 2 of lab-r2-h1",
                     "detections": 5, "start": start, "end": end, "repeats": 1, "opened_at": start + 60,
                     "evidence": {}, "absorbed": []}}


def lines(*events):
    return "".join(json.dumps(e) + "\n" for e in events)


def test_fold_keeps_the_last_event_of_each_case_and_counts_bad_lines():
    text = lines(event("a", "open"), event("b", "open", kind="agent", sid="lab-r1-h1"), event("a", "updated"),
                 event("b", "closed", end=T0 + 100)) + "not json\n" + '{"case": {"id": "c"}}\n' + '{"case": {"id": "d", "st'
    cases, bad = health.fold_cases(text)
    assert sorted(cases) == ["a", "b"] and cases["a"]["status"] == "open" and cases["b"]["status"] == "closed"
    assert bad == 2          # the unterminated last line is not a line yet
    assert "state" not in cases["a"]


def test_make_lists_open_and_recent_cases_and_bad_minutes():
    cases, _bad = health.fold_cases(lines(event("a", "open"), event("b", "closed", end=T0 + 100, sid="lab-r1-h1/nic1"),
                                          event("old", "closed", start=T0 - 90000, end=T0 - 80000)))
    minutes = {"lab-r1": {int(T0 // 60) + i: "good" for i in range(10)},
               "lab-r2": {int(T0 // 60) + i: ("bad" if i < 3 else "good") for i in range(10)}}
    rep, texts = health.make(cases, 1, minutes, T0 + 600, 3600, recent=3600, bucket=600)
    assert [c["id"] for c in rep["open_cases"]] == ["a"] and [c["id"] for c in rep["recent_cases"]] == ["b"]
    assert rep["racks"]["lab-r2"] == {"good": 7, "bad": 3, "sli": 0.7}
    assert "## Open cases: 1" in texts["md"] and "1 unreadable line in the case file" in texts["md"]
    assert texts["svg"].startswith("<svg") and json.loads(texts["json"])["case_file_bad_lines"] == 1


def test_no_minute_in_the_period_is_missing_evidence_not_health():
    minutes = {"lab-r1": {int(T0 // 60) - 1000: "good"}}
    with pytest.raises(health.HealthError, match="no rack has a minute that counts in the last 3600 s.*Fix: check"):
        health.make({}, 0, minutes, T0, 3600, sources={"minutes": "http://p"})
    with pytest.raises(health.HealthError):
        health.make({}, 0, {}, T0, 3600)


def test_prometheus_answer_to_rack_minutes():
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "fabric_monitor:bad_minute:rack", "rack": "lab-r2", "zone": "z"},
         "values": [[T0 + 1, "0"], [T0 + 61, "1"], [T0 + 121, "0"]]},
        {"metric": {"rack": "lab-r1"}, "values": [[T0 + 1, "0"], [T0 + 30, "1"]]}]}}
    got = health.rack_minutes_from_prometheus(answer, "http://p")
    m = int(T0 // 60)
    assert got == {"lab-r2": {m: "good", m + 1: "bad", m + 2: "good"}, "lab-r1": {m: "bad"}}
    with pytest.raises(health.HealthError, match="prometheus_url.*the query fabric_monitor:bad_minute:rack failed.*Fix"):
        health.rack_minutes_from_prometheus({"status": "error", "error": "parse error"}, "http://p")
    url = health.prometheus_query_url("http://p/", 3600, T0)
    assert url.startswith("http://p/api/v1/query?query=fabric_monitor%3Abad_minute%3Arack%5B3600s%5D&time=")


def test_freshness_of_the_correlator():
    assert health.check_fresh(json.dumps({"updated_at": T0 - 5}), "c.json", T0, 120) == T0 - 5
    with pytest.raises(health.HealthError, match="cases_snapshot: the live correlator last wrote 300 s ago.*Fix: start"):
        health.check_fresh(json.dumps({"updated_at": T0 - 300}), "c.json", T0, 120)
    with pytest.raises(health.HealthError, match="no updated_at"):
        health.check_fresh("[]", "c.json", T0, 120)


def test_unreadable_inputs_and_bad_settings_name_the_field(tmp_path):
    with pytest.raises(health.HealthError, match="case_file: cannot read it: No such file.*Fix: give"):
        health.read_text(str(tmp_path / "none.jsonl"), "case_file", "give the case file")
    with pytest.raises(MultinicError) as err:
        health.check_settings(T0, 10, 3600, 90, 0, 120)
    text = str(err.value)
    assert "period: expected seconds >= 60 (value: 10)" in text and "bucket: a timeline column must be whole minutes" in text
    assert "max_racks: expected a whole number >= 1 (value: 0)" in text
    with pytest.raises(health.HealthError, match="samples_file.*line 2"):
        health.rack_minutes_from_samples('{"time": 1, "host": "h", "nic": 1, "answered": 10, "lost": 0}\n{"time": -1}\n', "s")
