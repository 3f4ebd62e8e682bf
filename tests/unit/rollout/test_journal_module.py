# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rollout_journal module: open (new, check mode writes nothing, resume refusals), record, status, rollback."""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.netscale.multinic.plugins.modules import rollout_journal

HOSTS = [{"name": "r1-h1", "rack": "r1"}, {"name": "r1-h2", "rack": "r1"}, {"name": "r2-h1", "rack": "r2"}]
RACK_TORS = {"r1": "r1-tor", "r2": "r2-tor"}


def run(capsys, check_mode=False, **args):
    args.setdefault("rollout_id", "rid")
    args["_ansible_check_mode"] = check_mode
    with patch_module_args(args), pytest.raises(SystemExit):
        rollout_journal.main()
    return json.loads(capsys.readouterr().out)


def test_open_record_status_rollback(tmp_path, capsys):
    d = str(tmp_path / "j")
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    (plan_dir / "summary.yml").write_text("racks: 2\n")
    common = dict(dir=d, plan_paths=[str(plan_dir)], hosts=HOSTS, rack_tors=RACK_TORS, waves=["100%"])
    dry = run(capsys, check_mode=True, op="open", job="j1", end_wave="canary", **common)
    assert dry["new"] and not os.path.exists(d), "check mode wrote the journal"
    res = run(capsys, op="open", job="j1", end_wave="canary", **common)
    assert res["plan"]["order"] == ["r1-h1", "r1-h2"] and res["plan"]["tors"] == ["r1-tor", "r2-tor"]
    path = res["path"]
    assert os.stat(path).st_mode & 0o777 == 0o600
    rec = run(capsys, op="record", dir=d, job="j1", items=[
        {"_record": "tor", "names": ["r1-tor", "r2-tor"], "state": "configuring"},
        {"_record": "host", "hosts": ["r1-h1", "r1-h2"], "state": "deploying", "wave": "canary"}])
    assert rec["summary"]["tors"] == {"r1-tor": "configuring", "r2-tor": "configuring"}
    bad = run(capsys, op="record", dir=d, job="j1", record="host", data={"hosts": ["r1-h1"], "state": "passed"})
    assert bad["failed"] and "deploying -> passed" in bad["msg"]
    fleet = run(capsys, op="open", job="j2", start_wave="fleet", skip_tors=True, **common)
    assert fleet["failed"] and "wave canary has no recorded pass" in fleet["msg"]
    changed = (plan_dir / "summary.yml").write_text("racks: 3\n")
    assert changed
    moved = run(capsys, op="open", job="j2", **common)
    assert moved["failed"] and "plan changed" in moved["msg"]
    rb = run(capsys, op="open", action="rollback", dir=d, job="rb1")
    assert rb["rollback"] == {"hosts": ["r1-h1", "r1-h2"], "tors": {"r1-tor": "", "r2-tor": ""}}
    st = run(capsys, op="status", dir=d)
    assert [j["action"] for j in st["record"]["jobs"]] == ["rollout", "rollback"]
    assert st["summary"]["waves"] == {"canary": "in_flight", "fleet-100pct": "pending"}


def test_journal_then_report_in_one_call(tmp_path, capsys):
    d, r = str(tmp_path / "j"), str(tmp_path / "rep" / "run1")
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    (plan_dir / "summary.yml").write_text("racks: 2\n")
    common = dict(dir=d, plan_paths=[str(plan_dir)], hosts=HOSTS, rack_tors=RACK_TORS, waves=["100%"], job="j1",
                  present=["r1-h1", "r1-h2", "r2-h1"])
    bad = run(capsys, op="record", record="event", data={"kind": "x"}, report=[{"event": "finish"}], **common)
    assert bad["failed"] and "report_dir" in bad["msg"]
    started = {"id": "run1", "started": 1.0, "fabric": "f", "inventory": "t", "plan": {"changed": False},
               "renumber_consent": False}
    res = run(capsys, op="open", report_dir=r, run=started, **common)
    facts = res["ansible_facts"]
    assert facts["rollout_plan"] == res["plan"] and facts["rollout_journal_path"] == res["path"]
    assert facts["rollout_tor_backup_dir"] == os.path.join(d, "rid", "tor_backup")
    for folder in (facts["rollout_tor_backup_dir"], r, os.path.join(r, "snapshots")):
        assert os.stat(folder).st_mode & 0o777 == 0o700, folder
    assert [e["event"] for e in res["report"]["events"]] == ["start", "preflight"]
    rep = json.load(open(os.path.join(r, "report.json")))
    assert rep["run"]["rollout_id"] == "rid" and rep["preflight"]["gpu_hosts"] == 3 and rep["run"]["canary"] == "first rack"
    # check mode: the journal writes nothing, the report (a controller-side artifact) is written
    before = open(res["path"]).read()
    dry = run(capsys, check_mode=True, op="record", record="event", data={"kind": "finished"}, report_dir=r,
              report=[{"event": "finish", "data": {"status": "check"}, "journal_summary": True}], **common)
    assert open(res["path"]).read() == before
    rep = json.load(open(os.path.join(r, "report.json")))
    assert rep["run"]["status"] == "check" and rep["run"]["journal_summary"] == dry["summary"]
    assert dry["report"]["status"] == "check" and dry["report"]["paths"]["markdown"].endswith("report.md")
    # a refused record writes neither
    refused = run(capsys, op="record", record="host", data={"hosts": ["r1-h1"], "state": "passed"}, report_dir=r,
                  report=[{"event": "finish", "data": {"status": "passed"}}], **common)
    assert refused["failed"] and json.load(open(os.path.join(r, "report.json")))["run"]["status"] == "check"
