# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout_progress callback fills the wave's groups in Ansible's own inventory in one step (one
reconciliation, in wave order), and leaves them to playbooks/rollout.yml's add_host fallback when it cannot."""

from __future__ import annotations

import pytest

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader

from ansible_collections.netscale.multinic.plugins.callback.rollout_progress import fill_groups

INVENTORY = """
all:
  children:
    gpu_hosts:
      hosts: {h1: {}, h2: {}, h3: {}, h4: {}}
    tors:
      hosts: {t1: {}, t2: {}}
"""


@pytest.fixture
def inventory(tmp_path):
    path = tmp_path / "inv.yml"
    path.write_text(INVENTORY)
    inv = InventoryManager(loader=DataLoader(), sources=[str(path)])
    calls = []
    real = inv.reconcile_inventory

    def counted():
        calls.append(1)
        return real()
    inv.reconcile_inventory = counted
    inv.reconciled = calls
    return inv


def test_groups_filled_in_wave_order_with_one_reconciliation(inventory):
    filled = fill_groups(inventory, (("rollout_targets", ["h3", "h1", "h4", "h2"]), ("rollout_tors", ["t2", "t1"])))
    assert filled == ["rollout_targets", "rollout_tors"]
    assert len(inventory.reconciled) == 1
    # what a later play's "hosts: rollout_targets" and the templates' groups see
    assert [h.name for h in inventory.get_hosts("rollout_targets")] == ["h3", "h1", "h4", "h2"]
    assert inventory.get_groups_dict()["rollout_tors"] == ["t2", "t1"]
    # the hosts keep their own groups
    assert sorted(g.name for g in inventory.get_host("h3").get_groups()) == ["all", "gpu_hosts", "rollout_targets"]


def test_a_host_not_in_the_inventory_leaves_the_group_to_the_add_host_fallback(inventory):
    filled = fill_groups(inventory, (("rollout_targets", ["h1", "h9"]), ("rollout_tors", ["t1"])))
    assert filled == ["rollout_tors"]
    assert "rollout_targets" not in inventory.groups
    assert inventory.get_groups_dict()["rollout_tors"] == ["t1"]


def test_a_group_already_filled_or_an_empty_plan_is_left_alone(inventory):
    inventory.add_group("rollout_targets")
    inventory.add_host("h2", group="rollout_targets")
    filled = fill_groups(inventory, (("rollout_targets", ["h1", "h2"]), ("rollout_tors", [])))
    assert filled == [] and inventory.reconciled == []
    assert [h.name for h in inventory.get_hosts("rollout_targets")] == ["h2"]


def test_progress_lines_of_report_events_a_journal_task_recorded(tmp_path):
    from types import SimpleNamespace

    from ansible_collections.netscale.multinic.plugins.callback.rollout_progress import CallbackModule

    shown = []
    cb = CallbackModule()
    cb._display = SimpleNamespace(display=lambda line, color=None: shown.append(line))
    cb._watch_journal = lambda path: None
    res = {"path": str(tmp_path / "j1.json"), "report": {"status": "running", "events": [
        {"event": "tor", "summary": {"name": "r1-tor", "rack": "r1", "changed": True, "gates": "1/1 passed"}},
        {"event": "wave", "summary": {"name": "canary", "status": "running", "hosts": "h1"}}]}}
    cb._handle(SimpleNamespace(_task=SimpleNamespace(action="netscale.multinic.rollout_journal"), _result=res), False)
    assert [line.split("] ", 1)[1] for line in shown] == ["ToR r1-tor (rack r1): changed=True gates=1/1 passed",
                                                          "wave canary start: running, hosts h1"]
