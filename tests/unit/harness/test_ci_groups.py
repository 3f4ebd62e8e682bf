# -*- coding: utf-8 -*-
"""Every lab test file is in exactly one of scripts/test.sh's groups (scripts/ci_groups.py), the Molecule tests
by name, and the lanes' lab fabrics take monitoring ports no other group's fabric uses."""

from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import ci_groups  # noqa: E402


def _files(entry):
    path = os.path.join(REPO, entry.split("::")[0])
    if os.path.isdir(path):
        return sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(path, "**", "test_*.py"), recursive=True))
    return [os.path.relpath(path, REPO)]


def _test_functions(path):
    with open(os.path.join(REPO, path)) as f:
        tree = ast.parse(f.read())
    return sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_"))


def test_every_lab_test_file_is_in_exactly_one_group():
    pattern = os.path.join(REPO, "tests", "e2e", "**", "test_*.py")
    every = sorted(os.path.relpath(p, REPO) for p in glob.glob(pattern, recursive=True))
    seen = {}
    for group, entries in ci_groups.GROUPS.items():
        for entry in entries:
            for path in _files(entry):
                assert os.path.exists(os.path.join(REPO, path)), (group, entry)
                if "::" in entry:
                    seen.setdefault(path, []).append((group, entry.split("::")[1]))
                else:
                    assert path not in seen, "%s is in %s and %s" % (path, seen[path], group)
                    seen[path] = group
    assert sorted(seen) == every
    # a file split by test name: each of its tests in one group, none left out
    for path, parts in seen.items():
        if isinstance(parts, list):
            names = [name for _group, name in parts]
            assert sorted(names) == _test_functions(path), (path, names)


def test_the_command_prints_a_group_and_refuses_an_unknown_one():
    script = os.path.join(REPO, "scripts", "ci_groups.py")
    p = subprocess.run([sys.executable, script, "lane1"], capture_output=True, text=True, check=False)
    assert p.returncode == 0 and p.stdout.split() == ci_groups.GROUPS["lane1"]
    p = subprocess.run([sys.executable, script, "everything"], capture_output=True, text=True, check=False)
    assert p.returncode == 2 and "usage" in p.stderr and p.stdout == ""


def _yaml(path):
    with open(os.path.join(REPO, path)) as f:
        return yaml.safe_load(f)


DEFAULT_PORT = _yaml("roles/lab/defaults/main.yml")["lab_monitoring_port"]


def _port(group_vars):
    path = os.path.join(group_vars, "monitoring.yml")
    return _yaml(path)["lab_monitoring_port"] if os.path.exists(os.path.join(REPO, path)) else DEFAULT_PORT


def _module_constant(path, name):
    """A module-level literal of a test module, read without importing it (it needs the lab)."""
    with open(os.path.join(REPO, path)) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise AssertionError("%s: no %s" % (path, name))


def test_the_lanes_fabrics_take_monitoring_ports_of_their_own():
    """The Molecule lanes run beside the 'beside' group, whose labs (the main fabric, the stack fabric, the spine
    and lease fabrics) take 19090 or 19890: a lane's lab on one of those would stop with 'port in use'. A block is
    Prometheus's port, the relays from +10 (one per GPU host), the FRR exporters from +110 (one per ToR and spine):
    blocks 200 apart never overlap on a lab of under 90 devices of each kind."""
    lanes = {"molecule/canary_failure": _port("molecule/canary_failure/inventory/group_vars/all"),
             "molecule/nic_failure": _port("molecule/nic_failure/inventory/group_vars/all"),
             "molecule/default (mnrd)": _port("tests/e2e/rollout/group_vars/all")}
    from labkit import awx_slices
    lanes["awx slices (mnas)"] = awx_slices.MONITORING_PORT
    lanes["scoped rollout"] = _module_constant("tests/e2e/rollout/test_scoped_rollout.py", "MONITORING_PORT")
    beside = {DEFAULT_PORT, _port("tests/e2e/stack/group_vars/all")}
    ports = sorted(lanes.values()) + sorted(beside)
    assert len(set(ports)) == len(ports), lanes
    for a in ports:
        for b in ports:
            assert a == b or abs(a - b) >= 200, (a, b, lanes)


def test_scripts_test_sh_runs_every_group():
    """A group scripts/test.sh does not start would be tests that never run: the first group alone, the others
    side by side."""
    import re
    with open(os.path.join(REPO, "scripts", "test.sh")) as f:
        text = f.read()
    side_by_side = re.search(r'^\s*side_by_side="([^"]*)"', text, re.M)
    assert side_by_side, "scripts/test.sh: no side_by_side list"
    assert re.search(r"ci_groups\.py alone\)", text)
    assert sorted(["alone"] + side_by_side.group(1).split()) == sorted(ci_groups.GROUPS)
