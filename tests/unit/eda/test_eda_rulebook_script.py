# -*- coding: utf-8 -*-
"""scripts/eda-rulebook.sh start --set: more rulebook variables, checked before anything is written or started."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "scripts", "eda-rulebook.sh")


def start(tmp_path, more):
    state = tmp_path / "state"
    p = subprocess.run(["bash", SCRIPT, "start", "--cases", str(tmp_path / "cases.jsonl"), "--state", str(state),
                        "--inventory", os.path.join(ROOT, "inventories", "lab"), "--set", more],
                       capture_output=True, text=True, timeout=60, check=False)
    return p, state


def test_set_that_is_not_json_is_refused_naming_the_value_and_nothing_starts(tmp_path):
    p, state = start(tmp_path, "{netscale_eda_clean_window: 60")
    assert p.returncode != 0
    assert "--set {netscale_eda_clean_window: 60 is not JSON" in p.stderr and "Fix: a JSON object" in p.stderr
    assert not (state / "vars.yml").exists() and not (state / "rulebook.pid").exists()


def test_set_of_a_name_that_is_not_a_rulebook_variable_is_refused(tmp_path):
    p, state = start(tmp_path, json.dumps({"netscale_eda_clean_window": 60, "drain_budget": {}}))
    assert p.returncode != 0
    assert "['drain_budget'] is not a rulebook variable" in p.stderr, p.stderr
    assert not (state / "vars.yml").exists() and not (state / "rulebook.pid").exists()


def test_set_that_is_not_an_object_is_refused(tmp_path):
    p, state = start(tmp_path, "[60]")
    assert p.returncode != 0 and "is not a rulebook variable" in p.stderr, p.stderr
    assert not (state / "rulebook.pid").exists()
