"""The rulebook file agrees with the core: one drain rule per drain scope passing exactly the variables the mapping
gives, throttled on the keys the event carries; the report rule catches every other dispatch."""
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions
from ansible_collections.netscale.multinic.plugins.module_utils.remediate.eda_journal import check_report_root, empty_history

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
        # every variable the mapping gives is passed, and nothing else but the EDA journal's two and the fabric's drain
        # journal and lease (test_every_drain_and_undrain_uses_the_fabrics_journal_and_lease)
        assert sorted(passed) == sorted(list(event["extra_vars"]) + ["netscale_eda_journal", "netscale_eda_request",
                                                                     "drain_journal_dir", "rollout_report_root"])
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


def test_every_drain_and_undrain_uses_the_fabrics_journal_and_lease():
    """run_playbook runs a temporary copy of the playbook's directory: every drain and undrain gets the fabric's drain
    journal and lease from netscale_eda_report_root (absolute, checked by the source at start), never playbook_dir."""
    with open(RULEBOOK) as handle:
        doc = yaml.safe_load(handle)
    assert doc[0]["sources"][0]["netscale.multinic.case_file"]["report_root"] == \
        "{{ netscale_eda_report_root | default('') }}"
    runs = [r["action"]["run_playbook"] for r in _rules() if "run_playbook" in r["action"]]
    changing = [r for r in runs if "drain_scope" in r["extra_vars"]]
    assert len(changing) == len(actions.DRAIN_SCOPES) + 2      # the drains, and the nic and host undrains
    for run in changing:
        assert run["extra_vars"]["drain_journal_dir"] == "{{ netscale_eda_report_root }}/drain", run
        assert run["extra_vars"]["rollout_report_root"] == "{{ netscale_eda_report_root }}", run


def test_report_root_must_be_given_and_absolute():
    assert check_report_root("/opt/nm/reports/") == "/opt/nm/reports"
    for bad, words in ((None, "is required"), ("", "is required"), ("  ", "is required"),
                       ("reports", "not an absolute path")):
        with pytest.raises(ValueError) as err:
            check_report_root(bad)
        assert "report_root=%r" % (bad,) in str(err.value) and words in str(err.value)
        assert "Fix: set netscale_eda_report_root" in str(err.value)


def test_rulebook_hosts_include_localhost():
    """run_playbook passes the rulebook's hosts as --limit; "all" alone does not match Ansible's implicit localhost, and
    drain.yml and case_snapshot.yml decide on localhost (a fabric inventory does not list it): with "all" only, every
    automatic drain skipped all its plays and reported a success."""
    with open(RULEBOOK) as handle:
        doc = yaml.safe_load(handle)
    assert doc[0]["hosts"] == "all,localhost"   # a string: the rulebook schema (ansible-lint) wants one


def test_callback_a_run_on_no_host_is_failed_not_succeeded(tmp_path):
    from ansible_collections.netscale.multinic.plugins.callback import eda_journal as cb
    from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal as ej

    class Play(object):
        def get_variable_manager(self):
            return type("VM", (), {"extra_vars": {"drain_case": "c1", "netscale_eda_request": "req-1",
                                                  "netscale_eda_journal": str(tmp_path / "j.jsonl")}})()

    class Stats(object):
        def __init__(self, processed, failures=None):
            self.processed, self.failures, self.dark = processed, failures or {}, {}

    for stats, want in ((Stats({}), "failed"), (Stats({"localhost": 1}), "succeeded"),
                        (Stats({"localhost": 1}, {"localhost": 1}), "failed")):
        mod = cb.CallbackModule()
        mod.v2_playbook_on_play_start(Play())
        mod.v2_playbook_on_stats(stats)
        last = ej.read(str(tmp_path / "j.jsonl"))[-1]
        assert (last["type"], last["status"]) == ("run", want), last
    assert "ran on no host" in [r for r in ej.read(str(tmp_path / "j.jsonl")) if r.get("status") == "failed"][0]["detail"]


def test_callback_a_failed_run_names_the_first_failed_task_and_its_message(tmp_path):
    """A drain refused at the fabric lease fails its localhost play with the lease's message (the holder): the run
    record keeps it, so the EDA journal says why (the drain journal has no decision for it: the lease comes first).
    A failure whose errors are ignored is not the reason; a run that succeeded carries no failure."""
    from ansible_collections.netscale.multinic.plugins.callback import eda_journal as cb
    from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal as ej
    journal = str(tmp_path / "j.jsonl")

    class Play(object):
        def get_variable_manager(self):
            return type("VM", (), {"extra_vars": {"drain_case": "c1", "netscale_eda_request": "req-1",
                                                  "netscale_eda_journal": journal}})()

    class Result(object):
        def __init__(self, task, msg):
            self._host = type("H", (), {"name": "localhost"})()
            self._task = type("T", (), {"name": task})()
            self._result = {"failed": True, "msg": msg}

    class Stats(object):
        processed, failures, dark = {"localhost": 1}, {"localhost": 1}, {}

    lease = ("fabric lab: another job holds this fabric's lease (one change at a time per fabric); nothing was "
             "changed by this job. Holder: rollout r1, playbook rollout.yml")
    mod = cb.CallbackModule()
    mod.v2_playbook_on_play_start(Play())
    mod.v2_runner_on_failed(Result("Probe something", "ignored: not the reason"), ignore_errors=True)
    mod.v2_runner_on_failed(Result("Lease | take the fabric's lease", lease))
    mod.v2_runner_on_failed(Result("A later task", "a later failure"))
    mod.v2_playbook_on_stats(Stats())
    last = ej.read(journal)[-1]
    assert last["status"] == "failed"
    assert last["detail"] == ("failed hosts: localhost; unreachable hosts: -; first failure: localhost, task "
                              "\"Lease | take the fabric's lease\": " + lease), last["detail"]
    # a playbook run by hand (no netscale_eda_request): nothing kept, nothing written
    quiet = cb.CallbackModule()
    quiet.v2_runner_on_failed(Result("x", "y"))
    assert quiet.first_failure is None and len(ej.read(journal)) == 2
