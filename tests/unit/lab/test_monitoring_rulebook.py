"""Lab monitoring's remediation rulebook (issue 30 item 3: ansible-rulebook beside Prometheus): what it is given (the
live correlator's case file, a state directory in the monitoring directory, the fabric's report root), the checks of
its settings (field, value, fix), and a missing program fails the start before anything is started or recorded."""
import os

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab import monitoring
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
AGENT = os.path.join(REPO, "roles", "fabric_monitor", "files", "netscale-fabric-monitor.py")


def settings(**kw):
    out = {"mode": "report", "program": os.path.join(REPO, ".venv", "bin", "ansible-rulebook"),
           "ansible_config": os.path.join(REPO, "ansible.cfg"), "inventory": os.path.join(REPO, "inventories", "lab"),
           "report_root": os.path.join(REPO, "playbooks", "..", "reports")}
    out.update(kw)
    return out


def test_no_rulebook_unless_asked(ready_lab):
    assert monitoring.layout(ready_lab, agent_program=AGENT)["rulebook"] is None
    assert monitoring.layout(ready_lab, agent_program=AGENT, rulebook={})["rulebook"] is None


def test_the_rulebook_reads_the_correlators_case_file_and_keeps_its_state_beside_it(ready_lab):
    lay = monitoring.layout(ready_lab, agent_program=AGENT,
                            rulebook=settings(budget={"max_auto_drains_per_zone": 2}, clean_window="120"))
    rb = lay["rulebook"]
    v = rb["variables"]
    assert v["netscale_eda_case_file"] == lay["correlator"]["case_file"]
    assert rb["state_dir"] == v["netscale_eda_state_dir"] == os.path.join(lay["dir"], "eda")
    assert v["netscale_eda_mode"] == "report"
    assert v["netscale_eda_report_root"] == os.path.join(REPO, "reports")   # normalised: drains and rollouts agree
    assert v["netscale_eda_budget"] == {"max_auto_drains_per_zone": 2} and v["netscale_eda_clean_window"] == 120
    assert "netscale_eda_snapshot" not in v    # the rulebook's default (snapshots on)
    assert rb["vars_file"].startswith(lay["dir"])
    # part of what runs: another mode is another digest (a restart), the same settings the same (no change)
    again = monitoring.layout(ready_lab, agent_program=AGENT,
                              rulebook=settings(budget={"max_auto_drains_per_zone": 2}, clean_window="120"))
    other = monitoring.layout(ready_lab, agent_program=AGENT, rulebook=settings(mode="auto"))
    assert monitoring._digest(lay) == monitoring._digest(again) != monitoring._digest(other)


@pytest.mark.parametrize("change, message", [
    ({"mode": "fix"}, r"rulebook.mode: 'fix' is not a mode. Fix: one of report, approve, auto"),
    ({"mode": None}, r"rulebook.mode: None is not a mode"),
    ({"program": "ansible-rulebook"}, r"rulebook.program: 'ansible-rulebook' is not an absolute path. Fix: "),
    ({"report_root": ""}, r"rulebook.report_root: '' is not an absolute path"),
    ({"inventory": None}, r"rulebook.inventory: None is not an absolute path"),
    ({"budget": [1]}, r"rulebook.budget: \[1\] is not a mapping. Fix: "),
    ({"clean_window": 0}, r"rulebook.clean_window: 0 is not a positive number of seconds. Fix: e.g. 300"),
    ({"clean_window": "soon"}, r"rulebook.clean_window: 'soon' is not a positive"),
    ({"colour": "red"}, r"rulebook: unknown key colour. Fix: use mode, program"),
])
def test_bad_settings_name_the_field_the_value_and_the_fix(ready_lab, change, message):
    with pytest.raises(LabError, match=message):
        monitoring.layout(ready_lab, agent_program=AGENT, rulebook=settings(**change))


def test_a_missing_rulebook_program_starts_nothing(ready_lab, tmp_path):
    before = open(ready_lab.state_file).read()
    with pytest.raises(LabError, match=r"rulebook.program: .*nope is missing. Fix: bash scripts/setup.sh installs "
                                       r"ansible-rulebook.*nothing was started"):
        monitoring.start(ready_lab, port=20900, agent_program=AGENT,
                         rulebook=settings(program=str(tmp_path / "nope")))
    assert open(ready_lab.state_file).read() == before
    assert not os.path.exists(os.path.join(ready_lab.sdir, "monitoring"))
