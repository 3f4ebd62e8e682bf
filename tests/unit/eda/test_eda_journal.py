"""The EDA journal, the case-file tail (rotation, truncation, resume) and the dispatcher (files in a tmp dir)."""
import json
import os

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal as ej


def line(cid, kind="nic", host="h1", nic=1, state="open", zone="az1"):
    return json.dumps({"case": {"id": cid, "state": state,
                                "scope": {"kind": kind, "host": host, "nic": nic, "tor": None, "spine": None,
                                          "zone": zone},
                                "root_cause": "loss", "detections": 1, "start": 1.0, "end": None, "repeats": 0}})


class Clock(object):
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_append_read_fold_and_torn_line(tmp_path):
    path = str(tmp_path / "j.jsonl")
    ej.append(path, {"type": "decision", "case": "a", "outcome": "queued", "zone": "z", "element": "e",
                     "request": "req-0000000000000001"}, now=5.0)
    ej.append(path, {"type": "run", "request": "req-0000000000000001", "status": "failed", "detail": "boom"}, now=6.0)
    with open(path, "a") as handle:
        handle.write('{"type": "decision", "case": "b"')  # a writer killed mid-line
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    recs = ej.read(path)
    assert len(recs) == 2
    h = ej.fold(recs)
    assert h["cases"] == {"a": "queued"}
    assert h["queued"] == [{"zone": "z", "time": 5.0, "element": "e", "request": "req-0000000000000001"}]
    assert h["requests"]["req-0000000000000001"]["state"] == "failed"
    run = ej.runs(recs)["req-0000000000000001"]
    assert run["outcome"] == "queued" and run["status"] == "failed" and run["runs"][0]["detail"] == "boom"


def test_tail_reads_complete_lines_only_and_resumes(tmp_path):
    cases, off = tmp_path / "cases.jsonl", str(tmp_path / "off.json")
    cases.write_text("old-1\nold-2\n")
    tail = ej.CaseTail(str(cases), off, start_at="end")
    assert tail.poll() == []  # old cases are skipped on the first start
    with open(cases, "a") as handle:
        handle.write("new-1\nnew-")
    got = tail.poll()
    assert [g[0] for g in got] == ["new-1"]
    tail.commit(got[-1][1])
    with open(cases, "a") as handle:
        handle.write("2\n")
    got = tail.poll()
    assert [g[0] for g in got] == ["new-2"]
    tail.close()  # "restart" before committing new-2: it is read again, nothing older is
    again = ej.CaseTail(str(cases), off, start_at="end")
    assert [g[0] for g in again.poll()] == ["new-2"]
    again.close()


def test_tail_beginning_rotation_and_truncation(tmp_path):
    cases, off = tmp_path / "cases.jsonl", str(tmp_path / "off.json")
    tail = ej.CaseTail(str(cases), off, start_at="beginning")
    assert tail.poll() == []  # no file yet
    cases.write_text("a\n")
    assert [g[0] for g in tail.poll()] == ["a"]
    with open(cases, "a") as handle:
        handle.write("b\n")
    os.rename(cases, tmp_path / "cases.jsonl.1")  # rotated: the rest of the old file, then the new one
    cases.write_text("c\n")
    assert [g[0] for g in tail.poll()] == ["b", "c"] and tail.rotations == 1
    with open(cases, "w") as handle:  # truncated in place (copytruncate)
        handle.write("")
    assert tail.poll() == []
    cases.write_text("d\n")
    assert [g[0] for g in tail.poll()] == ["d"] and tail.truncations == 1
    tail.close()


def test_tail_restart_after_rotation_reads_new_file_from_start(tmp_path):
    cases, off = tmp_path / "cases.jsonl", str(tmp_path / "off.json")
    cases.write_text("a\nb\n")
    tail = ej.CaseTail(str(cases), off, start_at="beginning")
    got = tail.poll()
    tail.commit(got[-1][1])
    tail.close()
    os.rename(cases, tmp_path / "cases.jsonl.1")
    cases.write_text("c\n")
    again = ej.CaseTail(str(cases), off, start_at="end")
    assert [g[0] for g in again.poll()] == ["c"]
    again.close()


def test_start_at_is_checked(tmp_path):
    with pytest.raises(ej.EdaStateError, match="start_at"):
        ej.CaseTail(str(tmp_path / "c"), str(tmp_path / "o"), start_at="now")


def test_dispatcher_auto_duplicate_storm_and_rejects(tmp_path):
    clock = Clock()
    d = ej.Dispatcher(str(tmp_path), "auto", {"max_auto_drains_per_zone": 3}, clock=clock)
    events = d.handle_line(line("c0"))
    assert [e["netscale"]["dispatch"] for e in events] == ["drain"]
    assert d.handle_line(line("c0", state="updated")) == []  # duplicate: nothing to the rulebook
    storm = [d.handle_line(line("s%d" % i, host="h%d" % i)) for i in range(9)]
    dispatches = [e[0]["netscale"]["dispatch"] for e in storm]
    assert dispatches == ["drain", "drain"] + ["report"] * 7
    assert d.handle_line("not json") == [] and d.handle_line(line("x", kind="rack")) == []
    recs = ej.read(str(tmp_path / ej.JOURNAL))
    outcomes = [r["outcome"] for r in recs if r["type"] == "decision"]
    assert outcomes.count("queued") == 3 and outcomes.count("refused") == 7 and outcomes.count("duplicate") == 1
    rejected = [r for r in recs if r["type"] == "rejected"]
    assert len(rejected) == 2 and "case.scope.kind" in rejected[1]["error"]
    # a restarted dispatcher reads its history from the journal: no second action for c0, budget still spent
    d2 = ej.Dispatcher(str(tmp_path), "auto", {"max_auto_drains_per_zone": 3}, clock=clock)
    assert d2.handle_line(line("c0", state="updated")) == []
    assert d2.handle_line(line("new", host="hz"))[0]["netscale"]["outcome"] == "refused"


def test_dispatcher_approve_flow(tmp_path):
    clock = Clock()
    d = ej.Dispatcher(str(tmp_path), "approve", clock=clock)
    ev = d.handle_line(line("c1"))[0]["netscale"]
    req = ev["request"]
    assert ev["dispatch"] == "report" and ev["outcome"] == "pending" and d.pending() == [req]
    assert req in ev["summary"] and "eda_approve.yml" in ev["summary"]
    assert d.poll_approvals() == []  # nothing happens until approved
    assert d.handle_line(line("c1", state="updated")) == []
    (tmp_path / ej.APPROVED / ("%s.json" % req)).write_text('{"by": "me"}\n')
    out = d.poll_approvals()
    assert [e["netscale"]["dispatch"] for e in out] == ["drain"]
    assert out[0]["netscale"]["extra_vars"] == {"drain_scope": "nic", "drain_host": "h1", "drain_nic": 1,
                                                "drain_case": "c1"}
    assert d.pending() == [] and os.listdir(str(tmp_path / ej.APPROVED)) == []
    # an approval of an unknown request is recorded, starts nothing
    (tmp_path / ej.APPROVED / "req-00000000000000ff.json").write_text("{}\n")
    assert d.poll_approvals() == []
    assert ej.read(str(tmp_path / ej.JOURNAL))[-1]["type"] == "rejected"
    assert ej.fold(ej.read(str(tmp_path / ej.JOURNAL)))["requests"][req]["state"] == "queued"


def test_dispatcher_report_mode_changes_nothing(tmp_path):
    d = ej.Dispatcher(str(tmp_path), "report", clock=Clock())
    ev = d.handle_line(line("c1"))[0]["netscale"]
    assert (ev["dispatch"], ev["outcome"]) == ("report", "would_drain")
    assert d.pending() == []
    assert [r["outcome"] for r in ej.read(str(tmp_path / ej.JOURNAL))] == ["would_drain"]


def test_dispatcher_budget_seam(tmp_path):
    seen = []

    def budget(request, history, now):
        seen.append(request["element"])
        return False, ["fabric budget: last NIC of h1"]
    d = ej.Dispatcher(str(tmp_path), "auto", budget=budget, clock=Clock())
    ev = d.handle_line(line("c1"))[0]["netscale"]
    assert seen == ["nic:h1:1"] and ev["outcome"] == "refused" and "last NIC" in ev["summary"]


def test_check_request():
    assert ej.check_request(actions.request_id("x")) == actions.request_id("x")
    with pytest.raises(ej.EdaStateError, match="eda_request"):
        ej.check_request("../etc/passwd")


def test_tail_file_created_after_start_is_read_from_its_beginning(tmp_path):
    cases, off = tmp_path / "cases.jsonl", str(tmp_path / "off.json")
    tail = ej.CaseTail(str(cases), off, start_at="end")
    assert tail.poll() == []
    cases.write_text("first\n")
    assert [g[0] for g in tail.poll()] == ["first"]
    tail.close()


def test_mode_file_overrides_and_bad_word_is_journaled_once(tmp_path):
    d = ej.Dispatcher(str(tmp_path), "report", clock=Clock())
    assert d.refresh_mode() == "report"
    (tmp_path / ej.MODE).write_text("auto\n")
    assert d.refresh_mode() == "auto"
    assert d.handle_line(line("c1"))[0]["netscale"]["outcome"] == "queued"
    (tmp_path / ej.MODE).write_text("yolo\n")
    assert d.refresh_mode() == "auto" and d.refresh_mode() == "auto"
    os.unlink(str(tmp_path / ej.MODE))
    assert d.refresh_mode() == "report"
    recs = ej.read(str(tmp_path / ej.JOURNAL))
    assert [r["type"] for r in recs] == ["mode", "decision", "rejected", "mode"]
    assert "not a mode" in recs[2]["error"]


def test_summary_names_failed_pending_and_never_started(tmp_path):
    path = str(tmp_path / "j.jsonl")
    reqs = dict((c, actions.request_id(c)) for c in ("a", "b", "c", "d"))
    for c, outcome in (("a", "queued"), ("b", "queued"), ("c", "pending"), ("d", "queued")):
        ej.append(path, {"type": "decision", "case": c, "outcome": outcome, "request": reqs[c]})
    ej.append(path, {"type": "run", "case": "a", "request": reqs["a"], "status": "started"})
    ej.append(path, {"type": "run", "case": "a", "request": reqs["a"], "status": "failed", "detail": "x"})
    ej.append(path, {"type": "run", "case": "d", "request": reqs["d"], "status": "started"})
    ej.append(path, {"type": "rejected", "error": "bad"})
    s = ej.summary(ej.read(path))
    assert s["failed"] == [(reqs["a"], "a")] and s["pending"] == [(reqs["c"], "c")]
    assert s["queued_not_started"] == [(reqs["b"], "b")] and s["running"] == [(reqs["d"], "d")]
    assert s["decisions"] == {"queued": 3, "pending": 1} and s["rejected"] == 1 and s["succeeded"] == 0


def test_approvals_wait_while_the_mode_is_report(tmp_path):
    d = ej.Dispatcher(str(tmp_path), "approve", clock=Clock())
    req = d.handle_line(line("c1"))[0]["netscale"]["request"]
    (tmp_path / ej.MODE).write_text("report\n")
    d.refresh_mode()
    (tmp_path / ej.APPROVED / ("%s.json" % req)).write_text("{}\n")
    assert d.poll_approvals() == [] and d.pending() == [req]
    assert os.path.exists(str(tmp_path / ej.APPROVED / ("%s.json" % req)))
    os.unlink(str(tmp_path / ej.MODE))
    d.refresh_mode()
    assert [e["netscale"]["dispatch"] for e in d.poll_approvals()] == ["drain"]
