"""A closed case whose drain was queued starts the undrain (mode auto) through undrain.yml; a refused (window not
clean yet) or failed undrain is journaled and queued again, not lost; the rulebook's undrain rules pass what the
core gives (pure and files in a tmp dir)."""
import json
import os

import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal as ej
from ansible_collections.netscale.multinic.plugins.module_utils.remediate.eda_journal import apply, empty_history

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RULEBOOK = os.path.join(REPO, "extensions", "eda", "rulebooks", "remediate.yml")


def case(cid="c1", state="open", kind="nic", host="h1", nic=1, tor=None, zone="az1"):
    return {"case": {"id": cid, "state": state, "scope": {"kind": kind, "host": host, "nic": nic, "tor": tor,
                                                          "spine": None, "zone": zone},
                     "root_cause": "loss", "detections": 3, "start": 100.0, "end": None, "repeats": 0}}


def drained(cid="c1", **kw):
    h = empty_history()
    r = actions.decide(case(cid, **kw), "auto", h, 0.0)
    assert r["outcome"] == "queued"
    apply(h, dict(r, type="decision", time=0.0))
    return h


def test_closed_case_after_its_drain_queues_the_undrain_in_auto():
    h = drained()
    r = actions.decide(case(state="closed"), "auto", h, 50.0)
    assert (r["outcome"], r["action"], r["element"]) == ("queued", "undrain", "nic:h1:1")
    assert r["extra_vars"] == {"drain_scope": "nic", "drain_host": "h1", "drain_nic": 1, "drain_case": "c1"}
    assert r["request"] == actions.undrain_request_id("c1") != actions.request_id("c1")
    ev = actions.rulebook_event(r)["netscale"]
    assert ev["dispatch"] == "undrain" and ev["element"] == "nic:h1:1"
    # journaled: one undrain per case; the undrain never counts against the pre-queue budget
    apply(h, dict(r, type="decision", time=50.0))
    assert len(h["queued"]) == 1 and h["undrains"] == {"c1": "queued"} and h["cases"]["c1"] == "queued"
    again = actions.decide(case(state="closed"), "auto", h, 51.0)
    assert again["outcome"] == "duplicate" and actions.rulebook_event(again) is None


def test_closed_case_in_approve_and_report_is_reported_with_the_command():
    for mode in ("approve", "report"):
        r = actions.decide(case(state="closed"), mode, drained(), 50.0)
        assert r["outcome"] == "reported" and actions.rulebook_event(r)["netscale"]["dispatch"] == "report"
        assert "ansible-playbook playbooks/undrain.yml -e drain_case=c1 -e drain_host=h1 -e drain_nic=1 " \
               "-e drain_scope=nic" in r["reasons"][0]


def test_closed_case_that_was_not_drained_starts_nothing():
    h = empty_history()
    r = actions.decide(case(), "report", h, 0.0)
    apply(h, dict(r, type="decision", time=0.0))      # would_drain only
    assert actions.decide(case(state="closed"), "auto", h, 5.0)["outcome"] == "ignored"
    agent = actions.decide(case(kind="agent", nic=None, state="closed"), "auto", empty_history(), 5.0)
    assert agent["outcome"] == "ignored"


def test_closed_tor_case_is_reported_not_undrained():
    h = drained(kind="tor", host=None, nic=None, tor="r1-tor")
    r = actions.decide(case(kind="tor", host=None, nic=None, tor="r1-tor", state="closed"), "auto", h, 5.0)
    assert r["outcome"] == "reported" and "taken back by an operator" in r["reasons"][0]


def test_dispatcher_undrain_refused_is_retried_then_succeeds(tmp_path):
    clock = [1000.0]
    d = ej.Dispatcher(str(tmp_path), "auto", clock=lambda: clock[0], undrain_retry={"interval": 60, "attempts": 2})
    assert d.handle_line(json.dumps(case()))[0]["netscale"]["dispatch"] == "drain"
    (ev,) = d.handle_line(json.dumps(case(state="closed")))
    req = ev["netscale"]["request"]
    assert ev["netscale"]["dispatch"] == "undrain"
    assert d.poll_undrain_retries() == []            # no run yet: nothing to retry
    # the playbook ran and the clean window refused it (the eda_journal callback's record)
    ej.append(d.journal, {"type": "run", "request": req, "case": "c1", "status": "failed",
                          "detail": "undrain nic:h1:1: REFUSED ... window not yet elapsed"}, now=1010.0)
    clock[0] = 1030.0
    d._next_retry_check = 0.0
    assert d.poll_undrain_retries() == []            # interval not over yet
    clock[0] = 1075.0
    d._next_retry_check = 0.0
    (retry,) = d.poll_undrain_retries()
    assert retry["netscale"]["dispatch"] == "undrain" and retry["netscale"]["request"] == req
    assert "retry 1 of 2: the last undrain run failed (undrain nic:h1:1: REFUSED" in retry["netscale"]["summary"]
    d._next_retry_check = 0.0
    assert d.poll_undrain_retries() == []            # queued again, no new failed run since
    ej.append(d.journal, {"type": "run", "request": req, "case": "c1", "status": "failed", "detail": "x"}, now=1080.0)
    clock[0] = 1200.0
    d._next_retry_check = 0.0
    assert len(d.poll_undrain_retries()) == 1        # retry 2 of 2
    ej.append(d.journal, {"type": "run", "request": req, "case": "c1", "status": "failed", "detail": "x"}, now=1210.0)
    clock[0] = 1400.0
    d._next_retry_check = 0.0
    assert d.poll_undrain_retries() == []            # attempts spent: it stays failed in the summary
    s = ej.summary(ej.read(d.journal))
    assert (req, "c1") in s["failed"]


def test_dispatcher_no_retry_outside_auto_or_after_success(tmp_path):
    clock = [1000.0]
    d = ej.Dispatcher(str(tmp_path), "auto", clock=lambda: clock[0], undrain_retry={"interval": 1})
    d.handle_line(json.dumps(case()))
    (ev,) = d.handle_line(json.dumps(case(state="closed")))
    req = ev["netscale"]["request"]
    ej.append(d.journal, {"type": "run", "request": req, "case": "c1", "status": "succeeded"}, now=1001.0)
    clock[0] = 2000.0
    assert d.poll_undrain_retries() == []
    ej.append(d.journal, {"type": "run", "request": req, "case": "c1", "status": "failed"}, now=2001.0)
    d.mode = "report"
    d._next_retry_check = 0.0
    clock[0] = 3000.0
    assert d.poll_undrain_retries() == []


def test_undrain_retry_settings_are_checked(tmp_path):
    import pytest
    with pytest.raises(ej.EdaStateError, match="netscale_eda_undrain_retry.attempts"):
        ej.Dispatcher(str(tmp_path), "auto", undrain_retry={"attempts": -1})


def test_undrain_rules_pass_the_core_variables_and_are_not_throttled():
    with open(RULEBOOK) as handle:
        rules = yaml.safe_load(handle)[0]["rules"]
    undrains = [r for r in rules if r["condition"].startswith('event.netscale.dispatch == "undrain"')]
    by_scope = dict((r["action"]["run_playbook"]["extra_vars"]["drain_scope"], r) for r in undrains)
    assert sorted(by_scope) == sorted(actions.UNDRAIN_SCOPES) and len(undrains) == len(actions.UNDRAIN_SCOPES)
    for scope, fields in (("nic", {"host": "h1", "nic": 3}), ("host", {"host": "h1", "nic": None})):
        h = drained(kind=scope, **fields)
        r = actions.decide(case(kind=scope, state="closed", **fields), "auto", h, 5.0)
        event = actions.rulebook_event(r)["netscale"]
        rule = by_scope[scope]
        play = rule["action"]["run_playbook"]
        assert play["name"] == "{{ netscale_eda_undrain_playbook | default('playbooks/undrain.yml') }}"
        assert "throttle" not in rule     # a retry of the same case must start again
        passed = play["extra_vars"]
        assert sorted(passed) == sorted(list(event["extra_vars"]) + [
            "netscale_eda_journal", "netscale_eda_request", "drain_clean_window", "drain_journal_dir", "rollout_report_root"])
        for key in event["extra_vars"]:
            if key not in ("drain_scope", "drain_case"):
                assert passed[key] == "{{ event.netscale.extra_vars.%s }}" % key
        assert passed["drain_case"] == "{{ event.netscale.case }}"
