# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rollout/records.py: the journal records first, then the report events; nothing in the journal in check mode;
a refused record or a missing report directory writes nothing at all."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.rollout import journal as jr
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import records


def where(tmp_path, report=True):
    out = {"dir": str(tmp_path / "journal"), "rollout_id": "rid", "job": "j1"}
    if report:
        out["report_dir"] = str(tmp_path / "report")
    return out


def journal_events(path):
    with open(path) as handle:
        return [(e["type"], e.get("state") or e.get("kind")) for e in json.load(handle)["events"]]


def test_records_then_report_events(tmp_path):
    w = where(tmp_path)
    out = records.record(w, [{"_record": "tor", "names": ["t1", "t2"], "state": "configuring"},
                             {"_record": "event", "kind": "preflight_failed", "devices": ["t2: down"]}],
                         [{"event": "finish", "data": {"status": "failed", "failed_wave": "preflight", "message": "m"}}])
    assert out["path"] == jr.job_path(w["dir"], "rid", "j1")
    assert journal_events(out["path"]) == [("tor", "configuring"), ("tor", "configuring"), ("event", "preflight_failed")]
    assert sorted(out["record"]["tors"]) == ["t1", "t2"]
    with open(os.path.join(w["report_dir"], "report.json")) as handle:
        assert json.load(handle)["run"]["status"] == "failed"
    assert out["report"]["events"][0]["event"] == "finish" and out["report"]["status"] == "failed"


def test_check_mode_writes_no_journal(tmp_path):
    w = where(tmp_path)
    out = records.record(w, [{"_record": "tor", "name": "t1", "state": "configuring"}],
                         [{"event": "tor", "data": {"name": "t1", "rack": "r1", "changed": False}}], check_mode=True)
    assert not os.path.exists(out["path"]) and out["record"]["tors"]["t1"]["state"] == "configuring"
    assert os.path.exists(os.path.join(w["report_dir"], "report.json")), "the report is written in check mode too"


def test_refusals_write_nothing(tmp_path):
    w = where(tmp_path)
    path = records.record(w, [{"_record": "tor", "name": "t1", "state": "restored"}])["path"]
    before = journal_events(path)
    # the first item is fine, the second a transition the rollout never makes: neither is written
    with pytest.raises(jr.JournalError, match="tor t1: restored -> configured is not a rollout transition"):
        records.record(w, [{"_record": "tor", "name": "t0", "state": "configuring"},
                           {"_record": "tor", "name": "t1", "state": "configured"}])
    assert journal_events(path) == before
    # a transition is checked against the records of the same call too (a gate result between them changes nothing)
    with pytest.raises(jr.JournalError, match="tor t2: restored -> configured is not a rollout transition"):
        records.record(w, [{"_record": "tor", "name": "t2", "state": "restored"},
                           {"_record": "gate", "gate": "g", "verdict": "pass"},
                           {"_record": "tor", "name": "t2", "state": "configured"}])
    assert journal_events(path) == before
    with pytest.raises(jr.JournalError, match="record 'bogus'"):
        records.record(w, [{"_record": "bogus"}])
    assert journal_events(path) == before
    bare = where(tmp_path / "other", report=False)
    with pytest.raises(jr.JournalError, match="report events need report_dir"):
        records.record(bare, [{"_record": "event", "kind": "x"}], [{"event": "finish", "data": {}}])
    assert not os.path.exists(bare["dir"])


def test_status_read_of_a_rollout_without_job(tmp_path):
    w = where(tmp_path)
    records.record(w, [{"_record": "event", "kind": "x"}])
    job = records.JobJournal(w["dir"], "rid")
    assert job.doc is None and job.path == jr.rollout_dir(w["dir"], "rid")
    assert [e["kind"] for e in job.merged()["events"]] == ["x"]
