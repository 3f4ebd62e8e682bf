"""Case -> action mapping, modes, one action per case, throttle keys and the pre-queue budget seam (pure)."""
import copy

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions
from ansible_collections.netscale.multinic.plugins.module_utils.remediate.eda_journal import apply, empty_history


def case(cid="c1", state="open", kind="nic", host="h1", nic=1, tor=None, spine=None, zone="az1", **extra):
    c = {"id": cid, "state": state, "scope": {"kind": kind, "host": host, "nic": nic, "tor": tor, "spine": spine,
                                              "zone": zone},
         "root_cause": "loss", "detections": 3, "start": 100.0, "end": None, "repeats": 0}
    c.update(extra)
    return {"case": c}


@pytest.mark.parametrize("kind,fields,extra_vars,element", [
    ("nic", {"host": "h1", "nic": 2}, {"drain_scope": "nic", "drain_host": "h1", "drain_nic": 2}, "nic:h1:2"),
    ("host", {"host": "h1", "nic": None}, {"drain_scope": "host", "drain_host": "h1"}, "host:h1"),
    ("tor", {"host": None, "nic": None, "tor": "r1-tor"}, {"drain_scope": "tor", "drain_tor": "r1-tor"}, "tor:r1-tor"),
    ("spine", {"host": None, "nic": None, "spine": "s2"}, {"drain_scope": "spine", "drain_spine": "s2"}, "spine:s2"),
    ("uplink", {"host": None, "nic": None, "tor": "r1-tor", "spine": "s2"},
     {"drain_scope": "spine", "drain_spine": "s2"}, "spine:s2"),
])
def test_drain_mapping(kind, fields, extra_vars, element):
    plan = actions.plan_action(actions.check_case(case(kind=kind, **fields)))
    want = dict(extra_vars, drain_case="c1")
    assert (plan["action"], plan["extra_vars"], plan["element"]) == ("drain", want, element)


@pytest.mark.parametrize("kind,fields", [
    ("agent", {"host": "h1", "nic": None}),
    ("zone", {"host": None, "nic": None}),
    ("uplink", {"host": None, "nic": None, "tor": "r1-tor", "spine": None}),
])
def test_report_only_scopes_never_drain(kind, fields):
    plan = actions.plan_action(actions.check_case(case(kind=kind, **fields)))
    assert plan["action"] == "report" and plan["extra_vars"] is None
    for mode in actions.MODES:
        result = actions.decide(case(kind=kind, **fields), mode, empty_history(), 0.0)
        assert result["outcome"] == "reported"
        assert actions.rulebook_event(result)["netscale"]["dispatch"] == "report"


def test_closed_case_starts_nothing():
    result = actions.decide(case(state="closed"), "auto", empty_history(), 0.0)
    assert result["outcome"] == "ignored" and actions.rulebook_event(result) is None


@pytest.mark.parametrize("mutate,field", [
    (lambda c: c["case"].update(id="bad id!"), "case.id"),
    (lambda c: c["case"].update(state="opened"), "case.state"),
    (lambda c: c["case"]["scope"].update(kind="rack"), "case.scope.kind"),
    (lambda c: c["case"]["scope"].update(nic="eth1"), "case.scope.nic"),
    (lambda c: c["case"]["scope"].update(nic=True), "case.scope.nic"),
    (lambda c: c["case"]["scope"].update(host=None), "case.scope.host"),
    (lambda c: c["case"].update(detections=-1), "case.detections"),
    (lambda c: c["case"]["scope"].update(zone=3), "case.scope.zone"),
])
def test_contract_errors_name_the_field(mutate, field):
    ev = case()
    mutate(ev)
    with pytest.raises(actions.CaseError) as err:
        actions.decide(ev, "auto", empty_history(), 0.0)
    assert str(err.value).startswith(field) and "Fix:" in str(err.value)


def test_modes():
    h = empty_history()
    auto = actions.decide(case(), "auto", h, 0.0)
    approve = actions.decide(case(), "approve", h, 0.0)
    report = actions.decide(case(), "report", h, 0.0)
    assert (auto["outcome"], approve["outcome"], report["outcome"]) == ("queued", "pending", "would_drain")
    assert actions.rulebook_event(auto)["netscale"]["dispatch"] == "drain"
    assert actions.rulebook_event(approve)["netscale"]["dispatch"] == "report"
    assert actions.rulebook_event(report)["netscale"]["dispatch"] == "report"
    assert auto["request"] == approve["request"] == actions.request_id("c1")
    with pytest.raises(actions.CaseError, match="netscale_eda_mode"):
        actions.decide(case(), "manual", h, 0.0)


@pytest.mark.parametrize("mode", actions.MODES)
def test_one_action_per_case(mode):
    h = empty_history()
    first = actions.decide(case(), mode, h, 0.0)
    apply(h, dict(first, type="decision", time=0.0))
    for state in ("open", "updated", "updated"):
        again = actions.decide(case(state=state, repeats=4), mode, h, 1.0)
        assert again["outcome"] == "duplicate" and actions.rulebook_event(again) is None


def test_refused_case_is_decided_again():
    h = empty_history()
    budget = zone_budget_stub(allow=False)
    first = actions.decide(case(), "auto", h, 0.0, budget)
    assert first["outcome"] == "refused" and first["reasons"] == ["stub: no"]
    apply(h, dict(first, type="decision", time=0.0))
    assert actions.decide(case(state="updated"), "auto", h, 1.0)["outcome"] == "queued"


def zone_budget_stub(allow):
    calls = []

    def budget(request, history, now):
        calls.append((request["element"], now))
        return (True, []) if allow else (False, ["stub: no"])
    budget.calls = calls
    return budget


def test_budget_seam_is_consulted_only_before_queueing():
    budget = zone_budget_stub(allow=True)
    h = empty_history()
    for mode in ("report", "approve"):
        actions.decide(case(), mode, h, 0.0, budget)
    assert budget.calls == []
    assert actions.decide(case(), "auto", h, 5.0, budget)["outcome"] == "queued"
    assert budget.calls == [("nic:h1:1", 5.0)]


def test_zone_rate_budget_storm():
    """Ten NIC cases in one zone within a minute: the first three are queued, the rest refused with the reason;
    another zone has its own count; after the window the zone may queue again."""
    h = empty_history()
    budget = actions.zone_rate_budget({"max_auto_drains_per_zone": 3, "rate_window": 600})
    outcomes = []
    for i in range(10):
        r = actions.decide(case(cid="c%d" % i, host="h%d" % i), "auto", h, float(i), budget)
        apply(h, dict(r, type="decision", time=float(i)))
        outcomes.append(r["outcome"])
    assert outcomes == ["queued"] * 3 + ["refused"] * 7
    refused = actions.decide(case(cid="c9", host="h9", state="updated"), "auto", h, 30.0, budget)
    assert "zone_rate: 3 drains already queued in zone az1" in refused["reasons"][0]
    assert actions.decide(case(cid="z2", zone="az2"), "auto", h, 30.0, budget)["outcome"] == "queued"
    assert actions.decide(case(cid="c9", host="h9", state="updated"), "auto", h, 700.0, budget)["outcome"] == "queued"


def test_zone_rate_budget_same_element_not_counted_twice():
    h = empty_history()
    budget = actions.zone_rate_budget({"max_auto_drains_per_zone": 1})
    r = actions.decide(case(cid="a"), "auto", h, 0.0, budget)
    apply(h, dict(r, type="decision", time=0.0))
    # a second case on the same NIC (the first closed and a new one opened): the drain is a no-op, not a second one
    assert actions.decide(case(cid="b"), "auto", h, 1.0, budget)["outcome"] == "queued"
    assert actions.decide(case(cid="c", nic=0), "auto", h, 1.0, budget)["outcome"] == "refused"


@pytest.mark.parametrize("policy,field", [
    ({"max_drains": 1}, "max_drains"),
    ({"max_auto_drains_per_zone": 1.5}, "max_auto_drains_per_zone"),
    ({"max_auto_drains_per_zone": "3"}, "max_auto_drains_per_zone"),
    ({"rate_window": 0}, "rate_window"),
])
def test_budget_policy_errors(policy, field):
    with pytest.raises(actions.CaseError, match=field):
        actions.zone_rate_budget(policy)


def test_approve_queues_once_and_rechecks_budget():
    h = empty_history()
    pending = actions.decide(case(), "approve", h, 0.0)
    apply(h, dict(pending, type="decision", time=0.0))
    assert actions.approve(pending, h, 1.0, zone_budget_stub(allow=False))["outcome"] == "refused"
    approved = actions.approve(pending, h, 1.0)
    assert approved["outcome"] == "queued" and approved["extra_vars"]["drain_nic"] == 1
    apply(h, dict(approved, type="decision", time=1.0))
    assert actions.approve(pending, h, 2.0)["outcome"] == "duplicate"


def test_throttle_key_and_event_shape():
    r = actions.decide(case(), "auto", empty_history(), 0.0)
    ev = actions.rulebook_event(r)["netscale"]
    key = actions.throttle_key(r)
    # the rulebook throttles on event.netscale.case and event.netscale.element: the event carries both
    assert key == {"case": ev["case"], "element": ev["element"]} == {"case": "c1", "element": "nic:h1:1"}
    assert ev["extra_vars"] == {"drain_scope": "nic", "drain_host": "h1", "drain_nic": 1, "drain_case": "c1"}


def test_decide_does_not_mutate_its_inputs():
    ev, h = case(), empty_history()
    before = (copy.deepcopy(ev), copy.deepcopy(h))
    actions.decide(ev, "auto", h, 0.0)
    assert (ev, h) == before


def test_would_drain_is_decided_again_when_the_mode_changes():
    h = empty_history()
    r = actions.decide(case(), "report", h, 0.0)
    apply(h, dict(r, type="decision", time=0.0))
    assert actions.decide(case(state="updated"), "report", h, 1.0)["outcome"] == "duplicate"
    assert actions.decide(case(state="updated"), "auto", h, 2.0)["outcome"] == "queued"
    assert actions.decide(case(state="updated"), "approve", h, 2.0)["outcome"] == "pending"
