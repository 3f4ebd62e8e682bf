"""The vipinjector role stops, disables and cleans up the instances of slots that left the plan: the
expressions of roles/vipinjector/tasks/present.yml rendered with Ansible's templar."""
import os

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TASKS = os.path.join(ROOT, "roles", "vipinjector", "tasks", "present.yml")


def _task(prefix):
    with open(TASKS) as handle:
        tasks = yaml.safe_load(handle)
    return [t for t in tasks if t["name"].startswith("Vipinjector | " + prefix)][0]


def _render(expr, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expr))


def _stale(plan_slots, units=(), wants=()):
    expr = _task("Slots no longer in the plan")["ansible.builtin.set_fact"]["__vipinjector_stale_slots"]
    lines = ["%s loaded active running netscale VipInjector" % u for u in units]
    return _render(expr, {
        "vipinjector_host": {"slots": [{"slot": s} for s in plan_slots]},
        "__vipinjector_present_units": {"stdout_lines": lines},
        "__vipinjector_present_wants": {"files": [{"path": "/etc/systemd/system/multi-user.target.wants/" + w}
                                                  for w in wants]},
    })


@pytest.mark.parametrize("plan_slots,units,wants,stale", [
    ([1, 2], ["netscale-vipinjector@1.service", "netscale-vipinjector@2.service"], [], []),
    # slot 2 left the plan: its running instance, also when only enabled (stopped or failed)
    ([1], ["netscale-vipinjector@1.service", "netscale-vipinjector@2.service"], [], ["2"]),
    ([1], ["netscale-vipinjector@1.service"], ["netscale-vipinjector@1.service", "netscale-vipinjector@3.service"], ["3"]),
    ([1], ["netscale-vipinjector@2.service", "netscale-vipinjector@12.service"], ["netscale-vipinjector@2.service"],
     ["12", "2"]),
    # not ours or not an instance: never touched
    ([1], ["netscale-vipinjector@.service", "other@2.service", "netscale-vipinjector@x.service"], ["ssh.service"], []),
    ([], [], [], []),
    # BFD responders (zebra + bfdd per slot) count too, also when the sidecar instance is gone already
    ([1], ["netscale-vipinjector-zebra@2.service", "netscale-vipinjector-bfd@1.service"],
     ["netscale-vipinjector-bfd@2.service"], ["2"]),
])
def test_stale_slots(plan_slots, units, wants, stale):
    assert _stale(plan_slots, units, wants) == stale


def test_a_run_limited_to_some_slots_leaves_the_others():
    # vipinjector_slots: [1] on a 2-slot plan updates slot 1 only; slot 2 stays
    expr = _task("Slots no longer in the plan")["ansible.builtin.set_fact"]["__vipinjector_stale_slots"]
    out = _render(expr, {"vipinjector_host": {"slots": [{"slot": 1}, {"slot": 2}]}, "__vipinjector_slots": [1],
                         "__vipinjector_present_units": {"stdout_lines": ["netscale-vipinjector@2.service loaded"]},
                         "__vipinjector_present_wants": {"files": []}})
    assert out == []


def test_stale_slot_files_and_units():
    files = _task("Remove the configuration and drain file of slots")
    paths = _render(files["loop"], {"__vipinjector_stale_slots": ["2", "3"],
                                    "vipinjector_config_dir": "/etc/netscale-vipinjector",
                                    "vipinjector_runtime_dir": "/run/netscale-vipinjector"})
    assert paths == ["/etc/netscale-vipinjector/slot2", "/etc/netscale-vipinjector/slot3",
                     "/run/netscale-vipinjector/slot2.drain", "/run/netscale-vipinjector/slot3.drain"]
    stop = _task("Stop and disable the instances of slots no longer in the plan")
    want = {"name": "{{ item }}", "state": "stopped", "enabled": False}
    assert stop["ansible.builtin.systemd_service"] == want
    assert stop["loop"] == "{{ __vipinjector_stale_units }}"


def test_stale_units_are_every_instance_of_a_stale_slot_and_nothing_else():
    expr = _task("Slots no longer in the plan")["ansible.builtin.set_fact"]["__vipinjector_stale_units"]
    units = ["netscale-vipinjector@1.service", "netscale-vipinjector@2.service", "netscale-vipinjector-bfd@2.service",
             "netscale-vipinjector-zebra@2.service", "netscale-vipinjector-bfd@1.service",
             "netscale-vipinjector-zebra@12.service", "other@2.service", "netscale-vipinjector@.service"]
    out = _render(expr, {"vipinjector_host": {"slots": [{"slot": 1}]},
                         "__vipinjector_present_units": {"stdout_lines": ["%s loaded active" % u for u in units]},
                         "__vipinjector_present_wants": {"files": []}})
    assert out == ["netscale-vipinjector-bfd@2.service", "netscale-vipinjector-zebra@12.service",
                   "netscale-vipinjector-zebra@2.service", "netscale-vipinjector@2.service"]
    # no slot in the plan: every instance is stale
    out = _render(expr, {"vipinjector_host": {"slots": []},
                         "__vipinjector_present_units": {"stdout_lines": ["netscale-vipinjector@1.service x"]},
                         "__vipinjector_present_wants": {"files": []}})
    assert out == ["netscale-vipinjector@1.service"]
