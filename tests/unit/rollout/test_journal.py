# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rollout journal core: files, merge order, replay, resume and rollback decisions, budget."""

from __future__ import annotations

import json
import os
import random
import stat

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.rollout import waves as wv
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import journal as jr

HOSTS = [{"name": "r1-h1", "rack": "r1"}, {"name": "r1-h2", "rack": "r1"},
         {"name": "r2-h1", "rack": "r2"}, {"name": "r2-h2", "rack": "r2"}]
TORS = ["r1-tor", "r2-tor"]


RACK_TORS = {"r1": "r1-tor", "r2": "r2-tor", "r3": "r3-tor"}
SPEC = ["25%", "100%"]


def computed(**kw):
    return wv.plan_waves(HOSTS, None, SPEC, kw.get("start"), kw.get("end"))


def op(rec, phash="h" * 64, hosts=None, spec=None, **kw):
    return jr.open_plan(rec, phash, hosts=hosts or HOSTS, waves_spec=spec or SPEC, rack_tors=RACK_TORS, **kw)


def opened(tmp_path, job="j1", rid="rid1", now=100.0, **kw):
    rec = jr.load_record(str(tmp_path), rid)
    rec["id"] = rec["id"] or rid
    end = kw.pop("end", None)
    plan, ev, notes = op(rec, end_wave=end, **kw)
    doc = jr.new_job(rid, job, now=now)
    jr.append(doc, "open", ev, now=now)
    jr.save(jr.job_path(str(tmp_path), rid, job), doc)
    return plan, doc


def rec_host(tmp_path, doc, hosts, state, wave=None, rid="rid1", now=None, **extra):
    rec = jr.load_record(str(tmp_path), rid)
    data = dict(hosts=hosts, state=state, wave=wave, **extra)
    jr.check_event(rec, "host", data)
    jr.append(doc, "host", data, now=now)
    jr.save(jr.job_path(str(tmp_path), rid, doc["job"]), doc)


def test_new_journal_freezes_waves_and_file_is_0600_and_redacted(tmp_path):
    plan, doc = opened(tmp_path, end="canary")
    assert [w["name"] for w in plan["waves"]] == ["canary"]
    assert [w["name"] for w in plan["deferred"]] == ["fleet-25pct", "fleet-100pct"]
    jr.append(doc, "event", {"kind": "note", "md5_key": "s3cret", "message": "neighbor x password s3cret"})
    path = jr.job_path(str(tmp_path), "rid1", "j1")
    jr.save(path, doc)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "s3cret" not in open(path).read()
    rec = jr.load_record(str(tmp_path), "rid1")
    assert [w["name"] for w in rec["waves"]] == ["canary", "fleet-25pct", "fleet-100pct"]
    assert rec["hosts"]["r2-h2"] == {"wave": "fleet-100pct", "state": "pending", "updated": 100.0, "error": "",
                                     "job": "j1"}
    assert rec["tors"]["r1-tor"]["state"] == "pending"


def test_resume_uses_recorded_waves_not_the_inventory(tmp_path):
    plan, doc = opened(tmp_path)
    rec_host(tmp_path, doc, ["r1-h1", "r1-h2"], "deploying", "canary")
    rec_host(tmp_path, doc, ["r1-h1", "r1-h2"], "deployed", "canary")
    rec_host(tmp_path, doc, ["r1-h1", "r1-h2"], "passed", "canary")
    rec_host(tmp_path, doc, ["r2-h1"], "deploying", "fleet-25pct")
    # the inventory now orders hosts differently and has a new host: the journal's waves win
    moved = list(reversed(HOSTS)) + [{"name": "r3-h1", "rack": "r3"}]
    plan2, _doc = opened(tmp_path, job="j2", now=200.0, hosts=moved, spec=["50%", "100%"])
    assert [w["name"] for w in plan2["waves"]] == ["fleet-25pct", "fleet-100pct"]
    assert plan2["order"] == ["r2-h1", "r2-h2"]
    assert [w["name"] for w in plan2["skipped"]] == ["canary"]


def test_refuse_resume_past_a_wave_without_recorded_pass(tmp_path):
    plan, doc = opened(tmp_path)
    rec_host(tmp_path, doc, ["r1-h1", "r1-h2"], "deploying", "canary")
    rec = jr.load_record(str(tmp_path), "rid1")
    with pytest.raises(jr.JournalError) as e:
        op(rec, start_wave="fleet")
    msg = str(e.value)
    assert "wave canary has no recorded pass" in msg and "rollout_start_wave=canary" in msg
    assert "r1-h1=deploying" in msg and "rollback.yml" in msg
    # default start: the in-flight wave is re-run
    plan2, _ev, _n = op(rec)
    assert plan2["waves"][0]["name"] == "canary"


def test_refuse_start_wave_with_a_new_id_and_skip_tors_without_configured_tors(tmp_path):
    rec = jr.load_record(str(tmp_path), "nope")
    rec["id"] = "nope"
    with pytest.raises(jr.JournalError, match="new rollout id.*rollout_id=<id>"):
        op(rec, start_wave="fleet")
    with pytest.raises(jr.JournalError, match="rollout_skip_tors=true with a new rollout id"):
        op(rec, skip_tors=True)
    plan, ev, _notes = op(rec, start_wave="canary")
    assert ev["new"] and plan["tors"] == TORS


def test_fleet_job_needs_canary_pass_and_configured_tors(tmp_path):
    plan, doc = opened(tmp_path, end="canary")
    rec_host(tmp_path, doc, ["r1-h1", "r1-h2"], "deploying", "canary")
    rec_host(tmp_path, doc, ["r1-h1", "r1-h2"], "deployed", "canary")
    rec_host(tmp_path, doc, ["r1-h1", "r1-h2"], "passed", "canary")
    rec = jr.load_record(str(tmp_path), "rid1")
    with pytest.raises(jr.JournalError, match="not record these ToRs as configured: r1-tor=pending, r2-tor=pending"):
        op(rec, start_wave="fleet", skip_tors=True)
    for t in TORS:
        for s in ("configuring", "configured"):
            jr.check_event(jr.load_record(str(tmp_path), "rid1"), "tor", {"name": t, "state": s})
            jr.append(doc, "tor", {"name": t, "state": s, "backup": "/j/rid1/tor_backup/%s.conf" % t})
            jr.save(jr.job_path(str(tmp_path), "rid1", "j1"), doc)
    rec = jr.load_record(str(tmp_path), "rid1")
    # a slice with only r2-h2
    plan2, ev, notes = op(rec, start_wave="fleet", skip_tors=True, present=["r2-h2"])
    assert plan2["order"] == ["r2-h2"] and plan2["serial"] == [1]
    assert "r2-h1" in notes[0]


def test_plan_change_refused_unless_consented(tmp_path):
    opened(tmp_path)
    rec = jr.load_record(str(tmp_path), "rid1")
    with pytest.raises(jr.JournalError, match="plan changed.*rollout_allow_plan_change=true"):
        op(rec, "x" * 64)
    _plan, ev, notes = op(rec, "x" * 64, allow_plan_change=True)
    assert ev["plan_change_consented"] and "consented" in notes[0]


def test_plan_hash_covers_content_and_names(tmp_path):
    d = tmp_path / "plan"
    (d / "racks").mkdir(parents=True)
    (d / "racks" / "r1.yml").write_text("a: 1\n")
    h1 = jr.plan_hash([str(d)])
    (d / "racks" / "r1.yml").write_text("a: 2\n")
    h2 = jr.plan_hash([str(d)])
    assert h1 != h2 and len(h1) == 64
    with pytest.raises(jr.JournalError, match="none found"):
        jr.plan_hash([str(tmp_path / "missing")])


def test_tor_backup_original_copy_wins_and_rollback_plan(tmp_path):
    plan, doc = opened(tmp_path)
    jr.append(doc, "tor", {"name": "r1-tor", "state": "configured", "backup": "/orig/r1-tor.conf"})
    jr.append(doc, "tor", {"name": "r1-tor", "state": "configuring", "backup": "/later/r1-tor.conf"})
    for h, s in (("r1-h1", "passed"), ("r1-h2", "failed"), ("r2-h1", "unreachable")):
        jr.append(doc, "host", {"hosts": [h], "state": s})
    rec = jr.replay(jr.merge([doc]))
    assert rec["tors"]["r1-tor"]["backup"] == "/orig/r1-tor.conf"
    rb = jr.rollback_plan(rec)
    assert rb == {"hosts": ["r1-h1", "r1-h2", "r2-h1"], "tors": {"r1-tor": "/orig/r1-tor.conf"}}
    empty = jr.replay([])
    with pytest.raises(jr.JournalError, match="no journal"):
        jr.rollback_plan(empty)


def test_wave_status_counts_unreachable_within_budget_as_done():
    rec = jr.replay([{"type": "open", "rollout_id": "x", "waves": [{"name": "w", "hosts": ["a", "b"]}], "t": 1}])
    assert jr.wave_status(rec, "w") == "pending"
    rec["hosts"]["a"]["state"] = "passed"
    rec["hosts"]["b"]["state"] = "unreachable"
    assert jr.wave_status(rec, "w") == "passed"
    rec["hosts"]["a"]["state"] = "unreachable"
    assert jr.wave_status(rec, "w") == "failed"
    rec["hosts"]["a"]["state"] = "deploying"
    assert jr.wave_status(rec, "w") == "in_flight"


def test_cancel_event_records_in_flight_hosts():
    evs = [{"type": "open", "rollout_id": "x", "waves": [{"name": "w", "hosts": ["a", "b"]}], "t": 1, "job": "j"},
           {"type": "host", "hosts": ["a", "b"], "state": "deploying", "t": 2, "job": "j"},
           {"type": "event", "kind": "cancelled", "signal": "SIGTERM", "t": 3, "job": "j"}]
    rec = jr.replay(evs)
    assert rec["cancelled"]["hosts"] == {"a": "deploying", "b": "deploying"}
    assert rec["cancelled"]["signal"] == "SIGTERM"


def test_transitions_refused_and_bad_state():
    rec = jr.replay([{"type": "open", "rollout_id": "x", "waves": [{"name": "w", "hosts": ["a"]}], "t": 1}])
    with pytest.raises(jr.JournalError, match="pending -> passed is not a rollout transition"):
        jr.check_event(rec, "host", {"hosts": ["a"], "state": "passed"})
    jr.check_event(rec, "host", {"hosts": ["a"], "state": "unreachable"})
    with pytest.raises(jr.JournalError, match="state 'done'"):
        jr.check_event(rec, "host", {"hosts": ["a"], "state": "done"})


@pytest.mark.parametrize("spec,size,want", [(0, 4, 0), ("1", 4, 1), ("25%", 4, 1), ("10%", 4, 0), ("100%", 3, 3)])
def test_budget(spec, size, want):
    assert jr.budget(spec, size) == want


@pytest.mark.parametrize("spec", [True, "-1", "x", "120%", "5 %x"])
def test_budget_bad(spec):
    with pytest.raises(jr.JournalError, match="rollout_max_unreachable"):
        jr.budget(spec, 4)


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "x" * 200])
def test_bad_ids(bad):
    with pytest.raises(jr.JournalError, match="rollout_id"):
        jr.check_id(bad)


def test_bad_file_refused(tmp_path):
    d = tmp_path / "rid1"
    d.mkdir()
    (d / "j.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(jr.JournalError, match="not a rollout journal file"):
        jr.read(str(tmp_path), "rid1")


# -- properties -------------------------------------------------------------------------------------

_STATES = st.sampled_from(jr.HOST_STATES)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["a", "b", "c", "d"]), _STATES), min_size=1,
                max_size=30), st.randoms())
def test_merge_is_independent_of_file_order_and_keeps_each_jobs_order(ops, rnd):
    """Jobs (e.g. parallel slices) write their own files; whatever order the directory lists them in,
    the merged record is the same, and within a job the last record of a host wins."""
    docs = [jr.new_job("r", "job%d" % i, now=10.0 + i) for i in range(3)]
    for t, (j, host, state) in enumerate(ops):
        jr.append(docs[j], "host", {"hosts": [host], "state": state}, now=100.0 + t)
    shuffled = list(docs)
    rnd.shuffle(shuffled)
    a, b = jr.replay(jr.merge(docs)), jr.replay(jr.merge(shuffled))
    assert a == b
    # the state of a host is its last record in (job start, seq) order
    for host in "abcd":
        mine = [(j, i, s) for i, (j, h, s) in enumerate(ops) if h == host]
        if mine:
            assert a["hosts"][host]["state"] == sorted(mine)[-1][2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["passed", "failed", "unreachable", "pending", "deploying", "rolled_back"]),
                min_size=4, max_size=4), st.sampled_from([None, "canary", "fleet", "fleet-25pct", "fleet-100pct"]))
def test_resume_never_skips_a_wave_without_pass(states, start):
    """Whatever the recorded host states, a resume either refuses or starts at a wave all of whose
    predecessors have a recorded pass; default start = first wave without a pass."""
    comp = computed()
    evs = [{"type": "open", "rollout_id": "r", "t": 1, "job": "j", "plan_hash": "h",
            "waves": [dict(w) for w in comp["waves"]]}]
    for h, s in zip([x["name"] for x in HOSTS], states):
        evs.append({"type": "host", "hosts": [h], "state": s, "t": 2, "job": "j"})
    rec = jr.replay(evs)
    try:
        plan, ev, _notes = op(rec, "h", start_wave=start)
    except jr.JournalError as exc:
        assert "no recorded pass" in str(exc)
        return
    names = [w["name"] for w in rec["waves"]]
    first = ev["start_wave"]
    idx = names.index(first) if first else len(names)
    assert all(jr.wave_status(rec, n) == "passed" for n in names[:idx])
    if start is None:
        assert idx == len(names) or jr.wave_status(rec, names[idx]) != "passed"


def test_random_job_file_order_on_disk(tmp_path):
    docs = [jr.new_job("r", "s%d" % i, now=5.0) for i in range(4)]
    for i, d in enumerate(docs):
        jr.append(d, "host", {"hosts": ["h%d" % i], "state": "deploying"})
        jr.save(jr.job_path(str(tmp_path), "r", d["job"]), d)
    rec = jr.load_record(str(tmp_path), "r")
    assert sorted(rec["hosts"]) == ["h0", "h1", "h2", "h3"]
    assert [e["job"] for e in jr.merge(random.sample(docs, 4))] == ["s0", "s1", "s2", "s3"]


def test_report_shows_rollout_id_journal_and_unreachable(tmp_path):
    from ansible_collections.netscale.multinic.plugins.module_utils.report import model
    rep = model.empty("run1")
    model.apply_event(rep, "start", {"rollout_id": "awx-wf-7", "journal": "/j/awx-wf-7/run-1.json"}, now=1)
    model.apply_event(rep, "wave", {"name": "canary", "hosts": ["a", "b"], "unreachable": ["b"], "max_unreachable": 1,
                                    "over_budget": False, "status": "passed"}, now=2)
    model.apply_event(rep, "finish", {"status": "passed", "journal_summary": {
        "id": "awx-wf-7", "hosts_by_state": {"passed": ["a"], "unreachable": ["b"]}, "waves": {"canary": "passed"},
        "tors": {"t1": "configured"}}}, now=3)
    md = model.render_markdown(rep)
    assert "| rollout_id | awx-wf-7 |" in md and "| journal | /j/awx-wf-7/run-1.json |" in md
    assert "Unreachable hosts (marked in the journal, excluded from later waves): b; rollout_max_unreachable 1" in md
    assert "| b | unreachable |" in md and "ToRs: t1 configured" in md


def test_cancel_record_from_the_callback_orders_after_its_job(tmp_path):
    from ansible_collections.netscale.multinic.plugins.callback import rollout_progress
    plan, doc = opened(tmp_path, end="canary")
    rec_host(tmp_path, doc, ["r1-h1", "r1-h2"], "deploying", "canary")
    later = jr.new_job("rid1", "j0", now=50.0)   # an earlier job (sorted first)
    jr.save(jr.job_path(str(tmp_path), "rid1", "j0"), later)
    path = rollout_progress.record_cancel(jr.job_path(str(tmp_path), "rid1", "j1"), "SIGTERM")
    assert path.endswith("j1.cancel.json") and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    rec = jr.load_record(str(tmp_path), "rid1")
    assert rec["cancelled"]["signal"] == "SIGTERM"
    assert rec["cancelled"]["hosts"] == {"r1-h1": "deploying", "r1-h2": "deploying"}
    assert jr.summary(rec)["waves"]["canary"] == "in_flight"
    # the next command: a resume re-runs the in-flight wave; a rollback undoes both hosts
    plan2, ev, _notes = op(rec)
    assert ev["start_wave"] == "canary"
    assert jr.rollback_plan(rec)["hosts"] == ["r1-h1", "r1-h2"]
