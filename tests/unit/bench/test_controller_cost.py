# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Smoke of bench/controller_cost.py: the mirror wave runs through the real inventory plugin and the
bench's instant_host connection, and every figure it prints comes from a measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import controller_cost  # noqa: E402  pylint: disable=wrong-import-position


def test_topology_has_the_asked_host_count_in_racks_of_four():
    topo = controller_cost.topology(1001)
    hosts = [h for b in topo["buildings"] for z in b["zones"] for r in z["racks"] for h in r["hosts"]]
    assert len(hosts) == 1001
    assert len({h["name"] for h in hosts}) == 1001
    assert max(len(r["hosts"]) for b in topo["buildings"] for z in b["zones"] for r in z["racks"]) == 4


def test_wave_playbook_mixes_controller_and_module_steps():
    play = controller_cost.wave_playbook(9)[0]
    kinds = [next(k for k in t if k.startswith("ansible.builtin.")) for t in play["tasks"]]
    assert len(kinds) == 9
    assert kinds.count("ansible.builtin.ping") == 3


def test_quick_run_measures_a_wave(tmp_path):
    out = tmp_path / "cost.json"
    run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "controller_cost.py"), "--quick", "--json", str(out)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())
    assert len(rows) == 1
    row = rows[0]
    assert (row["hosts"], row["forks"], row["tasks"]) == (20, 5, 6)
    assert row["wave"]["wall_s"] > row["startup"]["wall_s"] > 0
    assert row["wave"]["cpu_s"] > 0 and row["cpu_ms_per_host_task"] > 0
    # the tree sampler saw the forks: more processes than the parent alone, and their memory
    assert row["wave"]["peak_procs"] > 1
    assert row["wave"]["peak_tree_pss_mib"] > 0
    assert "per host-task" in run.stdout
    assert yaml.safe_load(yaml.safe_dump(row)) == row
