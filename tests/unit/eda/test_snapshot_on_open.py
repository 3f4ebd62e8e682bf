"""A case's open event queues one snapshot of its devices (playbooks/case_snapshot.yml) in every mode, before its
drain; updated and closed events, re-sent and replayed open lines never do; the rulebook rule passes the case; the
eda_journal callback names the case of a snapshot run."""
import json
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal as ej

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RULEBOOK = os.path.join(REPO, "extensions", "eda", "rulebooks", "remediate.yml")


def line(cid, kind="nic", host="h1", nic=1, state="open", zone="az1"):
    return json.dumps({"case": {"id": cid, "state": state,
                                "scope": {"kind": kind, "host": host, "nic": nic, "tor": None, "spine": None,
                                          "zone": zone},
                                "root_cause": "loss", "detections": 1, "start": 1.0, "end": None, "repeats": 0}})


def dispatches(events):
    return [e["netscale"]["dispatch"] for e in events]


@pytest.mark.parametrize("mode,then", [("auto", "drain"), ("approve", "report"), ("report", "report")])
def test_open_queues_one_snapshot_first_in_every_mode_and_updated_none(tmp_path, mode, then):
    d = ej.Dispatcher(str(tmp_path), mode, snapshot=True, clock=lambda: 1000.0)
    first = d.handle_line(line("c1"))
    assert dispatches(first) == ["snapshot", then]
    snap = first[0]["netscale"]
    assert snap["request"] == actions.snapshot_request_id("c1") != actions.request_id("c1")
    assert snap["extra_vars"]["case_snapshot_case"]["id"] == "c1"
    assert snap["extra_vars"]["case_snapshot_case"]["scope"]["host"] == "h1"
    assert (snap["case"], snap["element"], snap["mode"]) == ("c1", "snapshot:c1", mode)
    # updated, a re-sent open line, closed: no second snapshot
    assert "snapshot" not in dispatches(d.handle_line(line("c1", state="updated")))
    assert "snapshot" not in dispatches(d.handle_line(line("c1")))
    assert "snapshot" not in dispatches(d.handle_line(line("c1", state="closed")))
    recs = [r for r in ej.read(str(tmp_path / ej.JOURNAL)) if r["type"] == "snapshot"]
    assert [r["outcome"] for r in recs] == ["queued", "duplicate"]
    # a restart reads the history: a replayed open line is a duplicate
    d2 = ej.Dispatcher(str(tmp_path), mode, snapshot=True)
    assert "snapshot" not in dispatches(d2.handle_line(line("c1")))
    assert d2.history["snapshots"] == {"c1": "queued"}


def test_report_only_scopes_are_snapshot_too_and_a_case_first_seen_updated_is_not(tmp_path):
    d = ej.Dispatcher(str(tmp_path), "auto", snapshot=True)
    assert dispatches(d.handle_line(line("a1", kind="agent"))) == ["snapshot", "report"]
    assert dispatches(d.handle_line(line("z1", kind="zone", host=None, nic=None))) == ["snapshot", "report"]
    assert "snapshot" not in dispatches(d.handle_line(line("late", state="updated", host="h7")))


def test_snapshot_off_and_bad_lines_start_nothing(tmp_path):
    d = ej.Dispatcher(str(tmp_path), "auto")
    assert dispatches(d.handle_line(line("c1"))) == ["drain"]
    d = ej.Dispatcher(str(tmp_path / "on"), "auto", snapshot=True)
    assert d.handle_line(line("x", kind="rack")) == []
    assert [r["type"] for r in ej.read(str(tmp_path / "on" / ej.JOURNAL))] == ["rejected"]


def test_snapshot_runs_are_reported_like_any_other(tmp_path):
    d = ej.Dispatcher(str(tmp_path), "report", snapshot=True, clock=lambda: 5.0)
    d.handle_line(line("c1"))
    req = actions.snapshot_request_id("c1")
    path = str(tmp_path / ej.JOURNAL)
    assert ej.summary(ej.read(path))["queued_not_started"] == [(req, "c1")]
    ej.append(path, {"type": "run", "request": req, "case": "c1", "status": "started"})
    ej.append(path, {"type": "run", "request": req, "case": "c1", "status": "failed", "detail": "unreachable"})
    assert ej.summary(ej.read(path))["failed"] == [(req, "c1")]
    assert ej.summary(ej.read(path))["decisions"] == {"would_drain": 1}


def test_snapshot_decision_is_pure_and_checks_the_case():
    hist = ej.empty_history()
    out = actions.snapshot({"case": json.loads(line("c1"))["case"]}, hist)
    assert out["outcome"] == "queued" and actions.rulebook_event(dict(out, mode="auto"))["netscale"]["dispatch"] == \
        "snapshot"
    for state in ("updated", "closed"):
        ign = actions.snapshot(json.loads(line("c1", state=state)), hist)
        assert ign["outcome"] == "ignored" and actions.rulebook_event(dict(ign, mode="auto")) is None
    with pytest.raises(actions.CaseError, match="case.scope.kind"):
        actions.snapshot(json.loads(line("c1", kind="rack")), hist)


def test_rulebook_rule_runs_the_snapshot_playbook_with_the_case_throttled_per_case():
    with open(RULEBOOK) as handle:
        doc = yaml.safe_load(handle)[0]
    assert doc["sources"][0]["netscale.multinic.case_file"]["snapshot"] == "{{ netscale_eda_snapshot | default(true) }}"
    rules = [r for r in doc["rules"] if r["condition"] == 'event.netscale.dispatch == "snapshot"']
    assert len(rules) == 1
    rule = rules[0]
    run = rule["action"]["run_playbook"]
    assert run["name"] == "{{ netscale_eda_snapshot_playbook | default('playbooks/case_snapshot.yml') }}"
    assert run["extra_vars"]["case_snapshot_case"] == "{{ event.netscale.extra_vars.case_snapshot_case }}"
    assert sorted(run["extra_vars"]) == ["case_snapshot_case", "case_snapshot_dir", "netscale_eda_journal",
                                         "netscale_eda_request"]
    assert rule["throttle"]["group_by_attributes"] == ["event.netscale.case", "event.netscale.element"]
    # the rule comes before the drain rules: the first rule of the rulebook
    assert doc["rules"].index(rule) == 0
    assert os.path.isfile(os.path.join(REPO, "playbooks", "case_snapshot.yml"))


def test_callback_names_the_case_of_a_snapshot_run(tmp_path):
    from ansible_collections.netscale.multinic.plugins.callback import eda_journal as cb

    class Play(object):
        def __init__(self, extra):
            self.extra = extra

        def get_variable_manager(self):
            return type("VM", (), {"extra_vars": self.extra})()

    journal = str(tmp_path / "j.jsonl")
    for extra, want in (({"case_snapshot_case": json.loads(line("c9"))}, "c9"),
                        ({"case_snapshot_case": json.loads(line("c8"))["case"]}, "c8"),
                        ({"drain_case": "c7"}, "c7")):
        mod = cb.CallbackModule()
        mod.v2_playbook_on_play_start(Play(dict(extra, netscale_eda_request="req-00000000000000aa",
                                                netscale_eda_journal=journal)))
        assert ej.read(journal)[-1]["case"] == want
