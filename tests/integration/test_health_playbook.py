# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/health.yml through Ansible (module netscale.multinic.fabric_health): the three files beside each
other, a second run with the same inputs changes nothing, check mode writes nothing, and missing evidence
(no case file, Prometheus unreachable, a stale correlator, a bad setting) fails naming what and the fix, with
nothing written."""

from __future__ import annotations

import json
import os
import socket
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
           PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
T0 = 29500000 * 60.0


def play(tmp_path, *extra, check=False):
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), os.path.join(ROOT, "playbooks", "health.yml"),
            "-e", "health_monitoring_dir=%s" % (tmp_path / "mon"), "-e", "health_now=%d" % (T0 + 600)]
    argv += list(extra)
    if check:
        argv.append("--check")
    p = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300, check=False)
    out = json.loads(p.stdout[p.stdout.index("{"):])
    task = [t for t in out["plays"][0]["tasks"] if t["task"]["name"] == "Build the health report"]
    return p.returncode, task[0]["hosts"]["localhost"] if task else None, out


def inputs(tmp_path, updated_at=T0 + 590):
    mon = tmp_path / "mon"
    mon.mkdir()
    case = {"id": "lab-r2-h1/nic2@%d" % T0, "state": "open", "scope": {"kind": "nic", "id": "lab-r2-h1/nic2",
            "host": "lab-r2-h1", "nic": 1}, "root_cause": "NIC 2 of lab-r2-h1", "detections": 9, "start": T0,
            "end": None, "repeats": 1, "opened_at": T0 + 60, "evidence": {}, "absorbed": []}
    (mon / "cases.jsonl").write_text(json.dumps({"case": case}) + "\n")
    (mon / "cases.json").write_text(json.dumps({"updated_at": updated_at, "open": []}))
    samples = []
    for i in range(10):
        samples.append({"time": T0 + i * 60 + 5, "host": "lab-r2-h1", "nic": 2, "answered": 90,
                        "lost": 10 if i < 4 else 0, "rack": "lab-r2"})
        samples.append({"time": T0 + i * 60 + 5, "host": "lab-r1-h1", "nic": 1, "answered": 100, "lost": 0,
                        "rack": "lab-r1"})
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return mon


def test_health_report_written_then_unchanged_and_check_mode_writes_nothing(tmp_path):
    mon = inputs(tmp_path)
    samples = "health_samples_file=%s" % (tmp_path / "samples.jsonl")
    rc, res, _out = play(tmp_path, "-e", samples, check=True)
    assert rc == 0 and res["changed"] is True and not (mon / "health").exists()
    rc, res, _out = play(tmp_path, "-e", samples)
    assert rc == 0 and res["changed"] is True, res
    assert sorted(os.listdir(mon / "health")) == ["health.json", "health.md", "health.svg"]
    assert [c["scope"] for c in res["open_cases"]] == ["nic lab-r2-h1/nic2"]
    assert res["racks"]["lab-r2"] == {"good": 6, "bad": 4, "sli": 0.6}
    md = (mon / "health" / "health.md").read_text()
    assert "## Open cases: 1" in md and "| lab-r2 | 4 | 6 |" in md
    rc, res, _out = play(tmp_path, "-e", samples)
    assert rc == 0 and res["changed"] is False


def test_missing_evidence_fails_naming_it_and_writes_nothing(tmp_path):
    mon = inputs(tmp_path)
    samples = "health_samples_file=%s" % (tmp_path / "samples.jsonl")
    rc, res, dummy = play(tmp_path, "-e", samples, "-e", "health_case_file=%s" % (mon / "none.jsonl"))
    assert rc != 0 and "case_file: cannot read it: No such file or directory" in res["msg"] and "Fix:" in res["msg"]
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()                     # nothing listens there now
    rc, res, dummy = play(tmp_path, "-e", "health_prometheus_url=http://127.0.0.1:%d" % port)
    assert rc != 0 and "prometheus_url: unreachable or not Prometheus" in res["msg"] and "Fix: start the lab's" in res["msg"]
    assert not (mon / "health").exists()


def test_a_stale_correlator_or_a_bad_setting_fails(tmp_path):
    mon = inputs(tmp_path, updated_at=T0 - 3600)
    samples = "health_samples_file=%s" % (tmp_path / "samples.jsonl")
    rc, res, dummy = play(tmp_path, "-e", samples)
    assert rc != 0 and "the live correlator last wrote 4200 s ago" in res["msg"]
    rc, res, dummy = play(tmp_path, "-e", samples, "-e", "health_period=30", "-e", "health_cases_snapshot=")
    assert rc != 0 and "period: expected seconds >= 60 (value: 30)" in res["msg"] and "Fix:" in res["msg"]
    assert not (mon / "health").exists()


def journal_record(seq, rtype, t, job, action, **extra):
    rec = {"v": 1, "seq": seq, "type": rtype, "time": t, "job": job, "action": action, "element": "nic:lab-r2-h1:1"}
    rec.update(extra)
    return json.dumps(rec) + "\n"


def test_time_to_repair_from_the_drain_journal_and_a_missing_journal_fails(tmp_path):
    mon = inputs(tmp_path)
    samples = "health_samples_file=%s" % (tmp_path / "samples.jsonl")
    case_id = "lab-r2-h1/nic2@%d" % T0
    journal = tmp_path / "drain-journal.jsonl"
    # drain decided and applied 80 s after detection; the NIC back in service 300 s after detection
    journal.write_text(journal_record(1, "decision", T0 + 70, "d1", "drain", case=case_id, allowed=True, noop=False)
                       + journal_record(2, "outcome", T0 + 80, "d1", "drain", ok=True)
                       + journal_record(3, "decision", T0 + 290, "u1", "undrain", case=case_id, allowed=True,
                                        noop=False)
                       + journal_record(4, "outcome", T0 + 300, "u1", "undrain", ok=True))
    rc, res, _out = play(tmp_path, "-e", samples, "-e", "health_drain_journal=%s" % (tmp_path / "none.jsonl"),
                         "-e", "health_repair_slo=600")
    assert rc != 0 and "drain_journal: no such file" in res["msg"] and "Fix:" in res["msg"], res
    assert not (mon / "health").exists()
    rc, res, _out = play(tmp_path, "-e", samples, "-e", "health_drain_journal=%s" % journal,
                         "-e", "health_repair_slo=600")
    assert rc == 0, res
    (row,) = res["repairs"]["rows"]
    assert (row["case"], row["element"], row["status"]) == (case_id, "nic:lab-r2-h1:1", "repaired")
    stages = (row["detect_to_mitigate"], row["mitigate_to_repair"], row["total"], row["slo"])
    assert stages == (80.0, 220.0, 300.0, "within")
    md = (mon / "health" / "health.md").read_text()
    assert "## Time to repair: 1 case" in md and "SLO 600 s: 100.0 % attained" in md


def test_each_case_links_to_its_snapshot_index_and_a_missing_dir_fails(tmp_path):
    mon = inputs(tmp_path)
    samples = "health_samples_file=%s" % (tmp_path / "samples.jsonl")
    other = {"id": "lab-r1-h1/nic1@%d" % T0, "state": "closed", "scope": {"kind": "nic", "id": "lab-r1-h1/nic1",
             "host": "lab-r1-h1", "nic": 0}, "root_cause": "NIC 1 of lab-r1-h1", "detections": 3, "start": T0,
             "end": T0 + 120, "repeats": 1, "opened_at": T0 + 60, "evidence": {}, "absorbed": []}
    with open(str(mon / "cases.jsonl"), "a") as handle:
        handle.write(json.dumps({"case": other}) + "\n")
    snaps = tmp_path / "cases" / "lab"
    rc, res, _out = play(tmp_path, "-e", samples, "-e", "health_snapshot_dir=%s" % snaps)
    assert rc != 0 and "snapshot_dir: no such directory" in res["msg"] and "Fix:" in res["msg"]
    assert not (mon / "health").exists()
    # the open case has a (partial) snapshot, written as case_snapshot.yml writes it; the closed one has none
    folder = snaps / ("lab-r2-h1+nic2@%d" % T0)
    folder.mkdir(parents=True)
    index = {"v": 1, "case": "lab-r2-h1/nic2@%d" % T0, "scope": {"kind": "nic"}, "complete": False,
             "failed": ["lab-r2-tor"], "nodes": [{"node": "lab-r2-h1", "ok": True}, {"node": "lab-r2-tor", "ok": False}]}
    (folder / "index.json").write_text(json.dumps(index))
    rc, res, _out = play(tmp_path, "-e", samples, "-e", "health_snapshot_dir=%s" % snaps)
    assert rc == 0, res
    assert [(c["id"], c["snapshot"]) for c in res["open_cases"]] == [(index["case"], str(folder / "index.json"))]
    assert [(c["id"], c["snapshot"]) for c in res["recent_cases"]] == [(other["id"], "none")]
    md = (mon / "health" / "health.md").read_text()
    assert "| %s (partial: 1 of 2 missing: lab-r2-tor) |" % (folder / "index.json") in md
    assert "| 3 | 1 | none |" in md
    data = json.loads((mon / "health" / "health.json").read_text())
    assert data["open_cases"][0]["snapshot"]["failed"] == ["lab-r2-tor"] and data["recent_cases"][0]["snapshot"] is None
