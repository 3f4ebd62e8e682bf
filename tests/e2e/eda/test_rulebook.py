"""The collection's rulebook (extensions/eda/rulebooks/remediate.yml) and event source (case_file) in the real
ansible-rulebook (Java 17), on synthetic case events written to a file.

ONE rulebook process serves the whole module (its JVM and Drools take ~20 s to start): it starts in mode
``report`` and the tests switch modes with the state directory's ``mode`` file, as an operator would. The drain
playbook is a TEST-ONLY stand-in (tests/e2e/eda/playbooks/drain_recorder.yml) that records what it was asked and
fails for the host "fail-host", because playbooks/drain.yml is not merged yet: set EDA_TEST_DRAIN_PLAYBOOK to
point the same test at the real drain.yml (its variables are the same: drain_scope, drain_host, drain_nic, ...).

The tests run in file order and build on one journal: report (nothing runs), auto (a duplicate starts one run),
a storm of 10 cases in one zone (no more runs than the budget of 2 per zone, set low to keep CI short; the rest
refused and reported), a failing
playbook (recorded as failed), approve (nothing runs until the approval, then exactly one run). That process runs
with ``netscale_eda_snapshot: false`` (the tests were written before snapshots; their timing counts the drains).

A second rulebook process (fixture ``snapshot_rulebook``, started only by the snapshot test) runs with snapshots on
(the default) and the stand-in tests/e2e/eda/playbooks/snapshot_recorder.yml: a case's open event starts one snapshot
in mode report and in mode auto (before its drain); updated and re-sent open lines start none.
"""
import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal  # noqa: E402
from labkit import eda_rulebook  # noqa: E402

DRAIN = os.environ.get("EDA_TEST_DRAIN_PLAYBOOK") or os.path.join(os.path.dirname(__file__), "playbooks",
                                                                  "drain_recorder.yml")
UNDRAIN = os.environ.get("EDA_TEST_UNDRAIN_PLAYBOOK") or os.path.join(os.path.dirname(__file__), "playbooks",
                                                                      "undrain_recorder.yml")
SNAPSHOT = os.path.join(os.path.dirname(__file__), "playbooks", "snapshot_recorder.yml")
BIN = eda_rulebook.BIN
RUN_TIMEOUT = eda_rulebook.RUN_TIMEOUT
case_line = eda_rulebook.case_line


@pytest.fixture(scope="module")
def rulebook(tmp_path_factory):
    yield from _rulebook(tmp_path_factory, {"netscale_eda_snapshot": False})


@pytest.fixture(scope="module")
def snapshot_rulebook(tmp_path_factory):
    yield from _rulebook(tmp_path_factory, {"netscale_eda_snapshot_playbook": SNAPSHOT})


@pytest.fixture(scope="module")
def real_drain_rulebook(tmp_path_factory):
    yield from _rulebook(tmp_path_factory, {"netscale_eda_snapshot": False,
                                            "netscale_eda_drain_playbook": os.path.join(ROOT, "playbooks", "drain.yml")},
                         inventory=os.path.join(ROOT, "inventories", "example", "fabric.yml"))


def _rulebook(tmp_path_factory, extra_vars, inventory=None):
    variables = dict({"netscale_eda_drain_playbook": DRAIN,
                      "netscale_eda_budget": {"max_auto_drains_per_zone": 2, "rate_window": 3600},
                      "netscale_eda_undrain_playbook": UNDRAIN, "netscale_eda_clean_window": 45,
                      "netscale_eda_undrain_retry": {"interval": 2, "attempts": 1}}, **extra_vars)
    work = str(tmp_path_factory.mktemp("eda"))
    yield from eda_rulebook.start(work, variables, inventory=inventory,
                                  env_extra={"EDA_TEST_RECORD_DIR": os.path.join(work, "records")})


def test_report_mode_records_would_drain_and_runs_nothing(rulebook):
    rulebook.write(case_line("rep-1", host="h-rep"))
    rulebook.wait(lambda: rulebook.decisions("rep-1"), "the report decision")
    assert [d["outcome"] for d in rulebook.decisions("rep-1")] == ["would_drain"]
    # the rule "Report a case" printed it (the debug action's output)
    rulebook.wait(lambda: "case rep-1 (nic): would_drain nic:h-rep:1" in open(rulebook.log).read(),
                  "the report line in the rulebook's output", 30)


def test_auto_mode_duplicate_starts_one_action(rulebook):
    rulebook.set_mode("auto")
    dup = case_line("auto-1", host="h-auto", nic=0)
    rulebook.write(dup, dup, case_line("auto-1", host="h-auto", nic=0, state="updated", repeats=3))
    rulebook.wait(lambda: [r["status"] for r in rulebook.runs("auto-1")] == ["started", "succeeded"],
                  "the drain of auto-1 to succeed")
    assert [d["outcome"] for d in rulebook.decisions("auto-1")] == ["queued", "duplicate", "duplicate"]
    got = rulebook.recorded("auto-1")
    assert got == [{"drain_scope": "nic", "drain_host": "h-auto", "drain_nic": 0, "drain_tor": None,
                    "drain_spine": None, "drain_case": "auto-1", "request": actions.request_id("auto-1")}]


def test_storm_starts_no_more_than_the_budget(rulebook):
    ids = ["storm-%d" % i for i in range(10)]
    rulebook.write(*[case_line(c, host="h-storm-%d" % i, zone="az-storm") for i, c in enumerate(ids)])
    rulebook.wait(lambda: all(rulebook.decisions(c) for c in ids), "the 10 storm decisions")
    outcomes = dict((c, rulebook.decisions(c)[0]["outcome"]) for c in ids)
    assert sorted(outcomes.values()) == ["queued"] * 2 + ["refused"] * 8
    queued = [c for c in ids if outcomes[c] == "queued"]
    rulebook.wait(lambda: all([r["status"] for r in rulebook.runs(c)] == ["started", "succeeded"] for c in queued),
                  "the 2 admitted storm drains")
    assert sorted(c for c in ids if rulebook.recorded(c)) == sorted(queued)
    refused = [c for c in ids if outcomes[c] == "refused"]
    assert all("zone_rate" in rulebook.decisions(c)[0]["reasons"][0] for c in refused)
    rulebook.wait(lambda: all("case %s (nic): refused" % c in open(rulebook.log).read() for c in refused),
                  "the refused storm cases reported", 30)
    assert all(rulebook.runs(c) == [] and rulebook.recorded(c) == [] for c in refused)


def test_failing_playbook_is_recorded_as_failed(rulebook):
    rulebook.write(case_line("fail-1", host="fail-host", zone="az-fail"))
    rulebook.wait(lambda: [r["status"] for r in rulebook.runs("fail-1")][-1:] in (["failed"], ["succeeded"]),
                  "the failing drain's outcome")
    runs = rulebook.runs("fail-1")
    assert [r["status"] for r in runs] == ["started", "failed"]
    assert runs[-1]["detail"].startswith("failed hosts: localhost")
    assert len(rulebook.recorded("fail-1")) == 1


def test_approve_mode_starts_nothing_until_approved(rulebook):
    rulebook.set_mode("approve")
    rulebook.write(case_line("appr-1", kind="host", host="h-appr", nic=None, zone="az-appr"))
    req = actions.request_id("appr-1")
    pending = os.path.join(rulebook.state, eda_journal.PENDING, req + ".json")
    rulebook.wait(lambda: os.path.exists(pending), "the pending request")
    assert [d["outcome"] for d in rulebook.decisions("appr-1")] == ["pending"]
    time.sleep(3)  # six poll intervals: still nothing started
    assert rulebook.runs("appr-1") == [] and rulebook.recorded("appr-1") == []
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    approve = subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "eda_approve.yml"),
         "-e", "netscale_eda_state_dir=%s" % rulebook.state, "-e", "eda_request=%s" % req],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert approve.returncode == 0, approve.stdout + approve.stderr
    rulebook.wait(lambda: [r["status"] for r in rulebook.runs("appr-1")] == ["started", "succeeded"],
                  "the approved drain")
    assert [d["outcome"] for d in rulebook.decisions("appr-1")] == ["pending", "queued"]
    assert rulebook.recorded("appr-1")[0]["drain_scope"] == "host" and not os.path.exists(pending)
    # the earlier report-mode case never ran, whatever happened since
    assert rulebook.recorded("rep-1") == [] and rulebook.runs("rep-1") == []


def _undrain_runs(rulebook, case):
    return [r["status"] for r in rulebook.undrain_runs(case)]


def test_closed_case_undrains_in_auto_and_a_refused_undrain_is_retried(rulebook):
    """Mode auto: a case's drain, then its closed event starts the undrain playbook once with the clean window; an
    undrain that fails (the stand-in refuses for fail-host, as the clean window does) is journaled failed, queued
    again after netscale_eda_undrain_retry.interval, and stays reported as failed once its attempts are spent."""
    with open(os.path.join(rulebook.state, eda_journal.MODE), "w") as handle:
        handle.write("auto\n")
    rulebook.wait(lambda: [r.get("mode") for r in rulebook.journal() if r.get("type") == "mode"][-1:] == ["auto"],
                  "the source to switch to mode auto", 15)
    rulebook.write(case_line("back-1", host="h-back", nic=1, zone="az-back"),
                   case_line("back-2", host="fail-host", nic=0, zone="az-back2"))
    rulebook.wait(lambda: rulebook.runs("back-1")[-1:] and rulebook.runs("back-1")[-1]["status"] == "succeeded"
                  and rulebook.runs("back-2")[-1:] and rulebook.runs("back-2")[-1]["status"] == "failed",
                  "the two drains' outcomes")
    assert rulebook.recorded("back-1", kind="undrain") == []          # open cases undrain nothing
    closed = case_line("back-1", host="h-back", nic=1, zone="az-back", state="closed")
    rulebook.write(closed, closed, case_line("back-2", host="fail-host", nic=0, zone="az-back2", state="closed"))
    rulebook.wait(lambda: _undrain_runs(rulebook, "back-1") == ["started", "succeeded"], "the undrain of back-1")
    assert rulebook.recorded("back-1", kind="undrain") == [{
        "drain_scope": "nic", "drain_host": "h-back", "drain_nic": 1, "drain_case": "back-1", "drain_clean_window": 45,
        "request": actions.undrain_request_id("back-1")}]
    undrains = [d["outcome"] for d in rulebook.decisions("back-1") if d.get("action") == "undrain"]
    assert undrains == ["queued", "duplicate"]
    # the refused undrain: failed, retried once after 2 s, failed again, then left reported as failed
    rulebook.wait(lambda: _undrain_runs(rulebook, "back-2") == ["started", "failed", "started", "failed"],
                  "the refused undrain of back-2 and its retry")
    time.sleep(5)   # more than two retry intervals: no third run
    assert _undrain_runs(rulebook, "back-2") == ["started", "failed", "started", "failed"]
    assert len(rulebook.recorded("back-2", kind="undrain")) == 2
    retry = [d for d in rulebook.decisions("back-2") if d.get("action") == "undrain"][-1]
    assert retry["outcome"] == "queued" and retry["reasons"][0].startswith("retry 1 of 1: the last undrain run failed")
    failed = eda_journal.summary(rulebook.journal())["failed"]
    assert (actions.undrain_request_id("back-2"), "back-2") in failed


def _snapshot_runs(rulebook, case):
    return rulebook.runs(case, actions.snapshot_request_id)


def test_open_case_starts_one_snapshot_in_report_and_auto_and_updated_none(snapshot_rulebook):
    rb = snapshot_rulebook
    # mode report: the snapshot runs (it changes nothing on a device), the drain does not
    rep = "snap-r/nic1@1"
    rb.write(case_line(rep, host="h-snap-r", zone="az-snap"), case_line(rep, host="h-snap-r", zone="az-snap", state="updated", repeats=2))
    rb.wait(lambda: [r["status"] for r in _snapshot_runs(rb, rep)] == ["started", "succeeded"], "the snapshot of snap-r")
    want = {"case": rep, "kind": "nic", "state": "open", "dir": os.path.join(rb.reports, "cases"),
            "request": actions.snapshot_request_id(rep)}
    assert rb.recorded(rep, kind="snapshot") == [want]
    assert [d["outcome"] for d in rb.decisions(rep)] == ["would_drain", "duplicate"] and rb.runs(rep) == []
    # mode auto: one snapshot, then the drain; a re-sent open line and an updated line start nothing more
    rb.set_mode("auto")
    auto = "snap-a@2"   # no / : the drain stand-in names its record file after the case
    line = case_line(auto, host="h-snap-a", nic=0, zone="az-snap")
    rb.write(line, line, case_line(auto, host="h-snap-a", nic=0, zone="az-snap", state="updated", repeats=2))
    rb.wait(lambda: [r["status"] for r in rb.runs(auto)] == ["started", "succeeded"], "the drain of snap-a")
    assert [r["status"] for r in _snapshot_runs(rb, auto)] == ["started", "succeeded"]
    assert _snapshot_runs(rb, auto)[-1]["time"] <= rb.runs(auto)[0]["time"]   # the snapshot ran first
    time.sleep(3)   # six poll intervals: nothing more starts
    assert len(rb.recorded(auto, kind="snapshot")) == 1 and len(rb.recorded(rep, kind="snapshot")) == 1
    snaps = [r["outcome"] for r in rb.journal() if r.get("type") == "snapshot" and r.get("case") == auto]
    assert snaps == ["queued", "duplicate"]


def test_automatic_drains_use_the_fabrics_lease_and_drain_journal(real_drain_rulebook):
    """The real playbooks/drain.yml started by the rulebook (run_playbook runs it from a temporary copy of its
    directory): while a rollout holds the fabric's lease (<report_root>/journal/leases, where rollout.yml takes it) the
    automatic drain is refused naming the holder, the refusal journaled as the budget's decision (rule lease); once
    released, the next case's drain is decided by the budget and journaled in the fabric's drain journal
    (<report_root>/drain), where a drain run by hand and the next automatic one read it - not in the temporary copy,
    which ansible-rulebook removes after the run."""
    from ansible_collections.netscale.multinic.plugins.module_utils.rollout import lease
    rb = real_drain_rulebook
    leases = os.path.join(rb.reports, "journal", "leases")
    holder = lease.make_member("rollout-under-test", "rollout.yml", pid=os.getpid())
    assert lease.acquire(leases, "example", holder)["action"] == "acquired"
    rb.set_mode("auto")
    held = "tor-held@1"
    rb.write(case_line(held, kind="tor", host=None, nic=None, tor="b1-az1-r1-tor", zone="b1-az1"))
    rb.wait(lambda: [r["status"] for r in rb.runs(held)] == ["started", "failed"], "the drain refused by the lease",
            RUN_TIMEOUT)
    assert "rollout-under-test" in open(rb.log).read(), rb.tail_log()
    drain_journal = os.path.join(rb.reports, "drain", "example", "drain-journal.jsonl")
    with open(drain_journal) as handle:
        recs = [json.loads(x) for x in handle if x.strip()]
    assert [(r["type"], r["action"], r["allowed"], r.get("case")) for r in recs] == [
        ("decision", "drain", False, held)], recs
    assert "the fabric lease is held by rollout-under-test" in recs[0]["reasons"][0], recs[0]["reasons"]
    assert lease.inspect(leases, "example")["members"][0]["rollout_id"] == "rollout-under-test"
    lease.release(leases, "example", lease.member_key(holder))
    # released: the budget decides (1 of the zone's 2 racks is over the default share 0.25: refused), journaled there
    free = "tor-free@2"
    rb.write(case_line(free, kind="tor", host=None, nic=None, tor="b1-az1-r2-tor", zone="b1-az1"))
    rb.wait(lambda: [r["status"] for r in rb.runs(free)] == ["started", "failed"], "the drain decided by the budget",
            RUN_TIMEOUT)
    with open(drain_journal) as handle:
        recs = [json.loads(x) for x in handle if x.strip()]
    assert [(r["type"], r["action"], r["allowed"], r.get("case")) for r in recs] == [
        ("decision", "drain", False, held), ("decision", "drain", False, free)], recs
    assert "of a zone's racks" in recs[1]["reasons"][0] and "lease" not in json.dumps(recs[1]["reasons"]), recs[1]
    assert not lease.inspect(leases, "example")["members"]   # the refused drain gave the lease back
