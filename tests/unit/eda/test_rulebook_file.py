"""The rulebook file agrees with the core: one drain rule per drain scope passing exactly the variables the mapping
gives, throttled on the keys the event carries; the report rule catches every other dispatch."""
import os

import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions
from ansible_collections.netscale.multinic.plugins.module_utils.remediate.eda_journal import empty_history

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RULEBOOK = os.path.join(REPO, "extensions", "eda", "rulebooks", "remediate.yml")
CASES = {
    "nic": {"host": "h1", "nic": 3},
    "host": {"host": "h1"},
    "tor": {"tor": "r1-tor"},
    "spine": {"spine": "s1"},
}


def _rules():
    with open(RULEBOOK) as handle:
        doc = yaml.safe_load(handle)
    assert len(doc) == 1 and list(doc[0]["sources"][0]) == ["name", "netscale.multinic.case_file"]
    return doc[0]["rules"]


def test_one_drain_rule_per_scope_with_the_mapped_variables():
    # the drain rules (the undrain rules of closed cases: test_undrain_rules_*)
    drains = [r for r in _rules() if "run_playbook" in r["action"]
              and r["condition"].startswith('event.netscale.dispatch == "drain"')]
    by_scope = dict((r["action"]["run_playbook"]["extra_vars"]["drain_scope"], r) for r in drains)
    assert sorted(by_scope) == sorted(actions.DRAIN_SCOPES) and len(drains) == len(actions.DRAIN_SCOPES)
    for scope, fields in CASES.items():
        sc = {"kind": scope, "host": None, "nic": None, "tor": None, "spine": None, "zone": "z"}
        sc.update(fields)
        result = actions.decide({"case": {"id": "c", "state": "open", "scope": sc}}, "auto", empty_history(), 0.0)
        event = actions.rulebook_event(result)["netscale"]
        rule = by_scope[scope]
        assert rule["condition"] == ('event.netscale.dispatch == "drain" and '
                                     'event.netscale.extra_vars.drain_scope == "%s"' % scope)
        passed = rule["action"]["run_playbook"]["extra_vars"]
        # every variable the mapping gives is passed, and nothing else but the journal's two
        assert sorted(passed) == sorted(list(event["extra_vars"]) + ["netscale_eda_journal", "netscale_eda_request"])
        for key in event["extra_vars"]:
            if key not in ("drain_scope", "drain_case"):
                assert passed[key] == "{{ event.netscale.extra_vars.%s }}" % key
        assert rule["throttle"]["group_by_attributes"] == ["event.netscale.%s" % k for k in actions.throttle_key(result)]
        assert all(k in event for k in actions.throttle_key(result))


def test_report_rule_catches_every_other_dispatch():
    reports = [r for r in _rules() if "debug" in r["action"]]
    assert len(reports) == 1 and reports[0]["condition"] == 'event.netscale.dispatch == "report"'
    dispatches = set()
    for mode in actions.MODES:
        for kind in ("nic", "agent", "zone"):
            sc = {"kind": kind, "host": "h1", "nic": 1, "tor": None, "spine": None, "zone": "z"}
            ev = actions.rulebook_event(actions.decide({"case": {"id": "c", "state": "open", "scope": sc}}, mode,
                                                       empty_history(), 0.0))
            dispatches.add(ev["netscale"]["dispatch"])
    assert dispatches == {"drain", "report"}
