# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's decisions (module_utils/rollout/decide.py): unreachable budget, lost-host accounting, wave
verdict, inventory checks, ToRs to restore; examples and properties over any mix of host states."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.rollout import decide, journal as jr, waves as wv

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


# --- budget -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,size,want", [
    (0, 4, 0), ("1", 4, 1), (3, 2, 3), ("25%", 4, 1), ("10%", 4, 0), ("100%", 3, 3), ("10%", 30, 3),
    ("10%", 29, 2), ("33.4%", 3, 1), ("0%", 100, 0), ("12.5%", 8, 1), ("7%", 100, 7), (None, 5, 0)])
def test_budget(spec, size, want):
    assert decide.budget(spec, size) == want
    assert jr.budget(spec, size) == want   # the journal's entry point is the same parser


@pytest.mark.parametrize("spec", [True, False, "-1", "x", "150%", "100.1%", "5 %", " 5", "1.5", 1.5, "", "%",
                                  "1e3", [1], {"n": 1}])
def test_budget_refused_names_the_field_and_the_fix(spec):
    with pytest.raises(decide.DecideError) as exc:
        decide.budget(spec, 4)
    assert "rollout_max_unreachable=%r" % (spec,) in str(exc.value)
    assert "percentage" in str(exc.value)


@given(st.integers(0, 10 ** 6), st.integers(0, 100), st.integers(0, 99), st.integers(0, 10 ** 4))
def test_budget_percent_is_exact_floor(size, whole, frac, count):
    spec = "%d.%02d%%" % (whole, frac) if whole < 100 else "100%"
    got = decide.budget(spec, size)
    num = (whole * 100 + frac) if whole < 100 else 10000
    assert got == (num * size) // 10000            # exact: no float error, rounded down
    assert 0 <= got <= size
    assert decide.budget(count, size) == decide.budget(str(count), size) == count


# --- lost-host accounting ----------------------------------------------------------------------------------

HOSTS = ["h%d" % i for i in range(12)]
budgets = st.one_of(st.integers(0, 14), st.integers(0, 100).map(lambda p: "%d%%" % p))


@st.composite
def waves_in_flight(draw):
    """A wave, the hosts marked lost at the start, marked after the deploy, dropped by Ansible during the
    deploy and during the gates."""
    hosts = draw(st.lists(st.sampled_from(HOSTS), min_size=1, max_size=12, unique=True))
    start = draw(st.lists(st.sampled_from(hosts), unique=True))
    rest = [h for h in hosts if h not in start]
    deploy = draw(st.lists(st.sampled_from(rest), unique=True)) if rest else []
    rest = [h for h in rest if h not in deploy]
    dropped = draw(st.lists(st.sampled_from(rest), unique=True)) if rest else []
    rest = [h for h in rest if h not in dropped]
    gates_dropped = draw(st.lists(st.sampled_from(rest), unique=True)) if rest else []
    return hosts, start, deploy, dropped, gates_dropped


@settings(max_examples=300)
@given(waves_in_flight(), budgets)
def test_accounting_counts_every_lost_host_once_and_only_grows(wave, spec):
    hosts, start, deploy, dropped, gates_dropped = wave
    limit = decide.budget(spec, len(hosts))
    a = decide.account(hosts, [h for h in hosts if h not in start], start, (), spec, "start",
                       errors=dict((h, "no route") for h in start))
    assert a["lost"] == [h for h in hosts if h in start]
    assert a["over_budget"] == (len(start) > limit) and a["deploy_ran"] == (not a["over_budget"])
    batch = [h for h in hosts if h not in start + dropped]
    b = decide.account(hosts, batch, start + deploy, a["lost"], spec, "deploy")
    assert set(b["lost"]) == set(start + deploy + dropped)
    assert len(b["lost"]) == len(set(b["lost"]))
    assert b["lost_now"] == [h for h in b["lost"] if h not in start]
    assert sorted(b["dropped"]) == sorted(dropped)
    assert all(b["errors"][h].startswith("dropped by Ansible during the deploy") for h in dropped)
    batch = [h for h in batch if h not in deploy + gates_dropped]
    c = decide.account(hosts, batch, start + deploy, b["lost"], spec, "gates")
    assert c["lost"][:len(b["lost"])] == b["lost"]    # what was counted stays
    assert set(c["lost"]) == set(start + deploy + dropped + gates_dropped)
    assert c["lost_now"] == [h for h in hosts if h in gates_dropped] == c["dropped"]
    assert c["over_budget"] == (len(c["lost"]) > limit)
    assert not (a["over_budget"] and not c["over_budget"])               # once over, over for the wave
    assert c["messages"] == ["%s: dropped by Ansible during the gates" % h for h in c["dropped"]]
    # journal records: every lost host recorded unreachable exactly once across the steps
    recs = [r for acct, step in ((a, "start"), (b, "deploy"), (c, "gates"))
            for r in decide.records(step, "w", hosts, batch, acct, deploy_ran=a["deploy_ran"])]
    lost_recorded = [h for r in recs if r.get("state") == "unreachable" for h in r["hosts"]]
    assert sorted(lost_recorded) == sorted(c["lost"])
    deploying = [h for r in recs if r.get("state") == "deploying" for h in r["hosts"]]
    assert deploying == ([] if a["over_budget"] else [h for h in hosts if h not in start])


def test_account_order_matches_the_journal_so_far():
    hosts = ["a", "b", "c", "d"]
    s = decide.account(hosts, ["a", "b", "d"], ["c"], (), 1, "start", errors={"c": "timeout"})
    assert s["lost"] == ["c"] and s["budget"] == 1 and not s["over_budget"]
    assert decide.records("start", "canary", hosts, ["a", "b", "d"], s)[0] == {
        "_record": "host", "hosts": ["c"], "state": "unreachable", "wave": "canary", "errors": {"c": "timeout"}}
    d = decide.account(hosts, ["b", "d"], ["c", "b"], s["lost"], 1, "deploy")
    # marked hosts in wave order, then the hosts Ansible dropped
    assert d["lost"] == ["b", "c", "a"] and d["over_budget"] and d["dropped"] == ["a"]
    with pytest.raises(decide.DecideError, match="step"):
        decide.account(hosts, hosts, [], (), 0, "later")


# --- verdict ---------------------------------------------------------------------------------------------

GATE = st.sampled_from(["pass", "fail", "inconclusive", "skipped", None, "bogus"])


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(HOSTS), GATE, max_size=12), st.sets(st.sampled_from(HOSTS)),
       st.booleans(), st.booleans(), st.booleans())
def test_verdict_never_passes_on_missing_or_failed_evidence(gates, failed, over_before, over_after, check):
    over_after = over_after or over_before   # lost hosts only grow
    batch = sorted(gates)
    v = decide.verdict(batch, gates, failed, over_budget=over_after, check_mode=check, over_budget_before=over_before)
    bad = [h for h in batch if h in failed or over_before or gates[h] not in ("pass", "skipped", "inconclusive")]
    if bad or over_after or not batch:
        assert v["verdict"] == "fail"
    elif any(gates[h] == "inconclusive" for h in batch):
        assert v["verdict"] == "inconclusive"
    else:
        assert v["verdict"] == ("check" if check else "pass")
    assert v["failed_hosts"] == [h for h in batch if v["host_verdicts"][h] not in ("pass", "skipped")]
    assert set(bad) <= set(v["failed_hosts"])


def test_verdict_over_budget_after_the_gates_keeps_host_verdicts():
    v = decide.verdict(["a", "b"], {"a": "pass", "b": "fail"}, over_budget=True, over_budget_before=False)
    assert v == {"verdict": "fail", "failed_hosts": ["b"], "host_verdicts": {"a": "pass", "b": "fail"}}


@pytest.mark.parametrize("verdict,approved,answer,want", [
    ("inconclusive", False, "", "fail"), ("inconclusive", True, "", "pass"), ("inconclusive", False, " YES ", "pass"),
    ("inconclusive", False, "no", "fail"), ("pass", False, "", "pass"), ("fail", True, "yes", "fail"),
    ("check", False, "", "check")])
def test_approve(verdict, approved, answer, want):
    assert decide.approve(verdict, approved, answer) == want


# --- inventory ---------------------------------------------------------------------------------------------

def _mh(rack, tor):
    return {"rack": rack, "tor": tor}


def test_inventory_problems_name_what_is_missing():
    ok = decide.inventory({"h1": _mh("r1", "t1")}, ["t1"], ["s1"])
    assert ok["problems"] == [] and not ok["slice_empty"] and ok["racks"] == ["r1"]
    bad = decide.inventory({"h1": _mh("r1", "t1"), "h2": None}, [], [])
    assert bad["problems"] == ["GPU host(s) without multinic_host: h2", "ToR(s) t1 not in group tors (has [])",
                               "no host in group spines"]
    assert decide.inventory({}, ["t1"], ["s1"])["problems"] == ["no host in group gpu_hosts"]
    md5 = [{"host": "h1", "required": True, "host_key": True, "tor_key": False},
           {"host": "h2", "required": True, "host_key": True, "tor_key": True},
           {"host": "h3", "required": False, "host_key": False, "tor_key": False}]
    assert decide.inventory({"h1": _mh("r1", "t1")}, ["t1"], ["s1"], md5=md5)["md5_missing"] == ["h1"]


def test_inventory_slice_without_gpu_host_is_nothing_to_deploy():
    out = decide.inventory({}, ["t1", "t2"], ["s1"], topology_gpu_hosts=["h1", "h2"])
    assert out["problems"] == [] and out["slice_empty"]


def _lab_inventory():
    """The lab fabric's inventory as ansible-inventory --list --export gives it (the AWX sync)."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.inventory import fabric_view
    import yaml
    path = os.path.join(REPO, "inventories", "lab", "fabric.yml")
    with open(path) as f:
        view = fabric_view(yaml.safe_load(f), path)
    inv = {"_meta": {"hostvars": {}}}
    for name, entry in view.hosts.items():
        inv["_meta"]["hostvars"][name] = dict(entry["vars"])
        for g in entry["groups"]:
            inv.setdefault(g, {"hosts": []})["hosts"].append(name)
    return inv


@pytest.mark.parametrize("count", range(1, 9))
def test_every_awx_slice_of_the_lab_passes_the_preflight(count):
    """labkit.awx_jobs slices the lab's inventory as AWX does (hosts[k-1::N] by name); each slice is decided
    as the preflight decides it (the ToRs, spines and storage a slice lacks are added from the topology):
    no slice fails, and the slices together hold every GPU host exactly once."""
    from labkit.awx_jobs import slice_inventory
    inv = _lab_inventory()
    topo_gpu = inv["gpu_hosts"]["hosts"]
    seen = []
    for number in range(1, count + 1):
        sl = slice_inventory(json.loads(json.dumps(inv)), number, count)
        gpu = dict((h, sl["_meta"]["hostvars"][h]["multinic_host"]) for h in sl.get("gpu_hosts", {}).get("hosts", []))
        out = decide.inventory(gpu, inv["tors"]["hosts"], inv["spines"]["hosts"], topology_gpu_hosts=topo_gpu)
        assert out["problems"] == [], (count, number, out)
        assert out["slice_empty"] == (not gpu)
        seen += list(gpu)
    assert sorted(seen) == sorted(topo_gpu)
    assert count < 3 or any(not slice_inventory(inv, n, count)["gpu_hosts"]["hosts"] for n in range(1, count + 1))


# --- ToRs to restore ---------------------------------------------------------------------------------------

def test_restore_tors():
    plan = wv.plan_waves([{"name": "a1", "rack": "r1"}, {"name": "b1", "rack": "r2"}, {"name": "b2", "rack": "r2"},
                          {"name": "c1", "rack": "r3"}], None, ["50%", "100%"])
    waves = plan["waves"]
    rt = {"r1": "t1", "r2": "t2", "r3": "t3"}
    assert decide.restore_tors(waves, "canary", rt, ["t1", "t2", "t3"]) == ["t1", "t2", "t3"]
    assert decide.restore_tors(waves, waves[1]["name"], rt, ["t1", "t2", "t3"]) == ["t2", "t3"]
    assert decide.restore_tors(waves, waves[1]["name"], rt, ["t3"]) == ["t3"]
    assert decide.restore_tors(waves, "canary", rt, ["t1"], skip_tors=True) == []
    with pytest.raises(decide.DecideError, match="'nope'"):
        decide.restore_tors(waves, "nope", rt, [])


@given(st.lists(st.sampled_from(["r1", "r2", "r3", "r4"]), min_size=1, max_size=10), st.data())
def test_restore_never_touches_a_rack_of_a_passed_wave(racks, data):
    hosts = [{"name": "h%d" % i, "rack": r} for i, r in enumerate(racks)]
    waves = wv.plan_waves(hosts, None, ["30%", "60%", "100%"])["waves"]
    failed = data.draw(st.sampled_from([w["name"] for w in waves]))
    rt = dict((r, "tor-" + r) for r in racks)
    out = decide.restore_tors(waves, failed, rt, list(rt.values()))
    passed = list(waves[:[w["name"] for w in waves].index(failed)])
    assert not set(out) & set(rt[r] for w in passed for r in w["racks"])
    failed_racks = [r for w in waves if w["name"] == failed for r in w["racks"]]
    assert set(rt[r] for r in failed_racks if r not in [x for w in passed for x in w["racks"]]) <= set(out)


# --- names and the wave's end ----------------------------------------------------------------------------

def test_names():
    t = 1795000000.25   # 2026-11-18T11:06:40Z
    assert decide.names(t) == {"run_id": "20261118T110640Z", "journal_id": "20261118T110640Z",
                               "job": "run-20261118T110640Z", "started": t}
    awx = decide.names(t, "", 7, 42)
    assert awx["run_id"] == "20261118T110640Z-job7" and awx["journal_id"] == "awx-wf-42" and awx["job"] == "awx-job-7"
    assert decide.names(t, "20260101T000000Z", 7, 42)["journal_id"] == "20260101T000000Z"   # a given id resumes
    assert decide.names(t, 123)["journal_id"] == "123"


def test_wave_end_report_and_journal():
    d = decide.account(["a", "b", "c"], ["a", "b"], [], ["c"], 1, "deploy")
    g = decide.account(["a", "b", "c"], ["a"], [], d["lost"], 1, "gates")
    facts = {"a": {"error": "", "warnings": ["w1"], "gates": [{"gate": "bgp_sessions", "verdict": "pass"}],
                   "restored": True},
             "c": {"error": "unreachable at wave start: x"}}
    out = decide.wave_end("fleet-50pct", ["a", "b", "c"], ["a"], d, g, "fail", ["a"], facts, ["t1"], 1.0, 2.0)
    rep = out["report"]
    assert rep["status"] == "rolled_back" and rep["unreachable"] == ["c", "b"] and rep["over_budget"]
    assert rep["max_unreachable"] == 1 and rep["failed_hosts"] == ["a"] and rep["warnings"] == ["w1"]
    assert rep["errors"] == ["unreachable at wave start: x", "b: dropped by Ansible during the gates"]
    assert rep["rollback"] == {"hosts": ["a"], "tors_restored": ["t1"], "restored_exactly": {"a": True}}
    assert out["journal"] == [{"gate": "bgp_sessions", "verdict": "pass", "_record": "gate", "wave": "fleet-50pct"},
                              {"_record": "wave", "name": "fleet-50pct", "status": "fail", "hosts": ["a", "b", "c"],
                               "unreachable": ["c", "b"], "over_budget": True}]
    passed = decide.wave_end("canary", ["a"], ["a"], decide.account(["a"], ["a"], [], [], 0, "deploy"),
                             decide.account(["a"], ["a"], [], [], 0, "gates"), "pass", [], {}, [], 1.0, 2.0)
    assert passed["report"]["rollback"] == {} and passed["journal"][0] == {
        "_record": "host", "hosts": ["a"], "state": "passed", "wave": "canary"}


# --- what the playbooks no longer compute in Jinja ----------------------------------------------------------

@given(st.text(alphabet="ab c", max_size=260), st.integers(3, 220))
def test_truncate_is_jinjas(text, length):
    import jinja2
    from jinja2.filters import do_truncate
    assert decide.truncate(text, length) == do_truncate(jinja2.Environment(), text, length)


def test_reach_marks_only_failed_checks_not_counted_before():
    results = {"a": {"ping": "pong"}, "b": {"unreachable": True, "msg": "ssh: no route"},
               "c": {"failed": True, "msg": "x " * 200}, "d": {"skipped": True}, "e": None}
    marks = decide.reach_marks(["a", "b", "c", "d", "e"], results)
    assert list(marks) == ["b", "c"] and marks["b"] == "unreachable at wave start: ssh: no route"
    assert marks["c"].startswith("unreachable at wave start: x x") and marks["c"].endswith("...")
    assert decide.reach_marks(["a", "b", "c"], results, known=["b"], step="deploy") == {
        "c": "unreachable after the deploy: " + decide.truncate("x " * 200, 200)}


def test_frr_problems():
    results = {"t1": {"rc": 0, "stdout": "{}"}, "t2": {"rc": 1, "stderr": " bgpd is not running \n"},
               "t3": {"unreachable": True, "msg": "gone"}, "t4": {"rc": 0, "stdout": " "}}
    assert decide.frr_problems(["t1", "t2", "t3", "t4", "t5"], results) == [
        "t2: bgpd is not running", "t3: gone", "t4: no output", "t5: not checked"]


def test_host_errors_last_word_wins_as_the_facts_did():
    errs = decide.host_errors(["a", "b", "c", "d"], {"b": "deploy failed in 'x': y", "c": "deploy failed"},
                              {"a": "unreachable at wave start: z"}, {"c": "unreachable after the deploy: w"})
    assert errs == {"a": "unreachable at wave start: z", "b": "deploy failed in 'x': y",
                    "c": "unreachable after the deploy: w", "d": ""}


def test_failed_record_and_stop_messages():
    assert decide.failed_record("canary", ["a", "b"], {"a": "boom", "b": None}) == {
        "_record": "host", "hosts": ["a", "b"], "state": "failed", "wave": "canary", "errors": {"a": "boom", "b": ""}}
    acct = {"lost": ["c"], "budget": 0, "over_budget": True}
    finish, msg = decide.stop("canary", ["a"], acct, "/j/run.json", "/r/1", "rid")
    assert finish == {"status": "failed", "failed_wave": "canary", "message": "wave canary failed on ['a'], "
                      "unreachable ['c'] (budget 0); rolled back; earlier waves stay; journal /j/run.json"}
    assert msg == ("wave canary failed on ['a'] and was rolled back; report: /r/1/report.md; unreachable ['c'] beyond "
                   "rollout_max_unreachable=0. Fix, then resume with -e rollout_id=rid (re-runs wave canary), or undo "
                   "the rollout with playbooks/rollback.yml -e rollout_id=rid")
    finish, msg = decide.stop("w", ["a"], {"lost": [], "budget": 1, "over_budget": False}, "/j", "/r", "rid")
    assert finish["message"] == "wave w failed on ['a']; rolled back; earlier waves stay; journal /j"
    assert "report: /r/report.md. Fix" in msg


def test_preflight_stop_names_every_device_and_how_to_go_on():
    journal, events, stop = decide.preflight_stop(["t2: bgpd is not running", "s1: gone"], "rid")
    assert journal == [{"_record": "event", "kind": "preflight_failed",
                        "devices": ["t2: bgpd is not running", "s1: gone"]}]
    assert events == [{"event": "finish", "data": {
        "status": "failed", "failed_wave": "preflight",
        "message": "FRR not answering on t2: bgpd is not running; s1: gone; nothing was changed by this job"}}]
    assert stop.startswith("FRR not answering on t2: bgpd is not running; s1: gone. Nothing was changed by this job.")
    assert stop.count("-e rollout_id=rid") == 2 and "playbooks/rollback.yml" in stop


def test_tor_configured_fails_only_on_a_spine_gate_that_did_not_pass():
    ran = [{"verdict": "pass", "values": {}}, {"skipped": True}, {"verdict": "fail", "values": {"routes": ["x"]}}]
    out = decide.tor_configured("t1", "r1", True, "/b", ran)
    assert [g["target"] for g in out["gates"]] == ["spines", "spines"]
    assert out["msg"] == "spine_task_routes failed after t1: [{'routes': ['x']}]"
    ok = decide.tor_configured("t1", "r1", "True", "/b", ran[:2])
    assert ok["msg"] == ""
    assert ok["journal"] == [{"_record": "tor", "name": "t1", "state": "configured", "backup": "/b/t1.conf"}]
    assert ok["events"] == [{"event": "tor", "data": {"name": "t1", "rack": "r1", "changed": True, "backup": "/b/t1.conf",
                                                      "gates": [dict(ran[0], target="spines")]}}]
    # check mode: the gates did not run (skipped results only) - nothing to report, nothing fails
    check = decide.tor_configured("t1", "r1", False, "/b", [{"skipped": True, "changed": False}])
    assert check["gates"] == [] and check["msg"] == "" and check["events"][0]["data"]["changed"] is False


def test_tor_failed_record_report_and_stop():
    out = decide.tor_failed("t1", "/b", "Apply the ToR policy", "x " * 400, "rid")
    assert out["error"].startswith("t1: 'Apply the ToR policy' failed: x x") and out["error"].endswith("...")
    assert out["journal"] == [{"_record": "tor", "name": "t1", "state": "restored", "error": out["error"],
                               "backup": "/b/t1.conf"}]
    assert out["events"][0]["data"]["failed_wave"] == "tor"
    assert out["events"][0]["data"]["message"].endswith("; restored from its pre-change copy; the rollout stopped")
    assert "restored from its pre-change copy (/b)" in out["stop"] and out["stop"].count("-e rollout_id=rid") == 2
    assert decide.tor_failed("t1", "/b", None, None, "rid")["error"] == "t1: '?' failed: "


def test_finish_status_and_message():
    out = decide.finish(False, ["a"])
    assert out["status"] == "passed" and out["journal"] == [{"_record": "event", "kind": "finished", "status": "passed"}]
    assert out["events"] == [{"event": "finish", "journal_summary": True, "data": {"status": "passed", "message": ""}}]
    scoped = decide.finish(True, [], "scope changed: nothing to deploy")
    assert scoped["status"] == "check" and scoped["events"][0]["data"]["message"] == "scope changed: nothing to deploy"
    assert decide.finish(False, [])["events"][0]["data"]["message"].startswith(
        "nothing to deploy: this job holds no GPU host of the waves it runs")


def test_rolled_back_records():
    assert decide.rolled_back("w2", ["a", "b"], ["t2"]) == [
        {"_record": "host", "hosts": ["a", "b"], "state": "rolled_back", "wave": "w2"},
        {"_record": "tor", "names": ["t2"], "state": "restored"}]
    assert decide.rolled_back("w2", [], None)[1]["names"] == []
