# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/case_snapshot.yml through Ansible, without a lab: the lab's topology as the inventory, every node reached
with the local connection (rollout_snapshot's read-only commands on this machine) except lab-r1-h1, whose ssh port is
closed (unreachable). A fake vtysh first on PATH prints a running config and neighbour JSON carrying a key.

Checked: a ToR case takes the ToR and its rack's hosts; the unreachable host is failed in the index with the reason,
the play fails, the files it got stay; no byte of the key reaches a file; files 0600, directories 0700; a complete
case's second run changes nothing; check mode writes nothing; a bad case fails naming the field, the value and the
fix, and writes nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECRET = "SeKrEt-not-a-key-4411"
VTYSH = """#!/bin/sh
case "$*" in
  *running-config*) printf 'frr version 9\\nrouter bgp 4200001001\\n neighbor fd00::1 password %s\\n' ;;
  *) printf '{"peers": {"fd00::1": {"password": "%s", "state": "Established"}}}\\n' ;;
esac
""" % (SECRET, SECRET)


@pytest.fixture
def lab(tmp_path):
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    with open(os.path.join(ROOT, "inventories", "lab", "fabric.yml")) as handle:
        topo = yaml.safe_load(handle)
    topo.pop("lab")          # the lab's inventory extension would reach the nodes through its namespaces
    (inv / "fabric.yml").write_text(yaml.safe_dump(topo))
    (inv / "group_vars" / "all.yml").write_text(yaml.safe_dump({"ansible_connection": "local",
                                                                "ansible_python_interpreter": sys.executable}))
    # port 1 on the loopback: nothing listens, the connection is refused at once
    (inv / "host_vars" / "lab-r1-h1.yml").write_text(yaml.safe_dump({"ansible_connection": "ssh",
                                                                     "ansible_host": "127.0.0.1", "ansible_port": 1}))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "vtysh").write_text(VTYSH)
    (fake / "vtysh").chmod(0o755)
    return tmp_path


def play(work, case, *extra, check=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               PATH=os.pathsep.join([str(work / "bin"), os.path.join(ROOT, ".venv", "bin"), os.environ["PATH"]]))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(work / "inv" / "fabric.yml"),
            os.path.join(ROOT, "playbooks", "case_snapshot.yml"), "-e", json.dumps({"case_snapshot_case": case}),
            "-e", "case_snapshot_dir=%s" % (work / "out")] + list(extra)
    if check:
        argv.append("--check")
    p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = json.loads(p.stdout[p.stdout.index("{"):])
    return p.returncode, out


def task(out, name, host="localhost"):
    for pl in out["plays"]:
        for t in pl["tasks"]:
            if t["task"]["name"].startswith(name) and host in t["hosts"]:
                return t["hosts"][host]
    return None


def tree(folder):
    """Every file and directory under ``folder`` with its mode."""
    found = {}
    for path, dirs, files in os.walk(str(folder)):
        for name in dirs + files:
            full = os.path.join(path, name)
            found[os.path.relpath(full, str(folder))] = stat.S_IMODE(os.stat(full).st_mode)
    return found


def test_partial_snapshot_fails_names_the_unreachable_node_and_keeps_the_files(lab):
    case = {"case": {"id": "lab-r1-tor@1795000000", "state": "open", "scope": {"kind": "tor", "tor": "lab-r1-tor"},
                     "root_cause": "ToR lab-r1-tor: 2 hosts of its rack hit", "detections": 40}}
    rc, out = play(lab, case)
    assert rc != 0
    folder = lab / "out" / "lab" / "lab-r1-tor@1795000000"
    index = json.loads((folder / "index.json").read_text())
    assert [(n["node"], n["role"], n["ok"]) for n in index["nodes"]] == [
        ("lab-r1-tor", "tor", True), ("lab-r1-h1", "host", False), ("lab-r1-h2", "host", True)]
    assert index["complete"] is False and index["failed"] == ["lab-r1-h1"]
    assert index["nodes"][1]["reason"].startswith("unreachable:") and "port 1" in index["nodes"][1]["reason"]
    assert (index["case"], index["scope"]["kind"], index["root_cause"], index["fabric"]) == (
        "lab-r1-tor@1795000000", "tor", "ToR lab-r1-tor: 2 hosts of its rack hit", "lab")
    fail = task(out, "A partial snapshot fails")
    assert fail["failed"] and "PARTIAL, missing: lab-r1-h1 (unreachable" in fail["msg"]
    tor = json.loads((folder / "lab-r1-tor.json").read_text())
    commands = tor["snapshot"]["commands"]
    assert commands["running_config"]["stdout"].splitlines()[-1] == " neighbor fd00::1 password <redacted>"
    assert commands["bgp"]["stdout"]["peers"]["fd00::1"]["password"] == "<redacted>"
    host = json.loads((folder / "lab-r1-h2.json").read_text())
    assert host["ok"] and host["snapshot"]["commands"]["addresses"]["rc"] == 0
    modes = tree(lab / "out")
    assert sorted(modes) == ["lab", "lab/lab-r1-tor@1795000000"] + sorted(
        "lab/lab-r1-tor@1795000000/%s" % n for n in ("index.json", "lab-r1-h1.json", "lab-r1-h2.json", "lab-r1-tor.json"))
    assert all(mode == (0o600 if name.endswith(".json") else 0o700) for name, mode in modes.items()), modes
    for name in modes:
        path = lab / "out" / name
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), name


def test_complete_snapshot_check_mode_and_a_second_run(lab):
    case = {"id": "lab-r2-h1/nic2@1795000000", "scope": {"kind": "nic", "host": "lab-r2-h1", "nic": 1,
                                                         "tor": "lab-r2-tor"}, "root_cause": "NIC 2 of lab-r2-h1"}
    rc, out = play(lab, case, "--diff", check=True)
    assert rc == 0, json.dumps(out)[-2000:]
    index_task = task(out, "Write the index")
    assert index_task["changed"] is True and not (lab / "out").exists()
    assert index_task["diff"]["before"] == "" and '"file": "lab-r2-tor.json"' in index_task["diff"]["after"]
    rc, out = play(lab, case)
    assert rc == 0, json.dumps(out)[-2000:]
    folder = lab / "out" / "lab" / "lab-r2-h1+nic2@1795000000"
    index = json.loads((folder / "index.json").read_text())
    assert [(n["node"], n["ok"]) for n in index["nodes"]] == [("lab-r2-h1", True), ("lab-r2-tor", True)]
    assert index["complete"] is True and index["failed"] == []
    before = dict((p, os.stat(str(folder / p)).st_mtime_ns) for p in os.listdir(str(folder)))
    rc, out = play(lab, case)
    assert rc == 0
    assert sum(s["changed"] for s in out["stats"].values()) == 0, out["stats"]
    assert "0 node(s) to snapshot, 2 kept" in task(out, "Nodes to snapshot")["summary"]
    assert dict((p, os.stat(str(folder / p)).st_mtime_ns) for p in os.listdir(str(folder))) == before


@pytest.mark.parametrize("case,field,value", [
    ({"id": "c1@1", "state": "open"}, "case.scope", "None"),
    ({"id": "c1@1", "scope": {"kind": "rack", "host": "lab-r1-h2"}}, "case.scope.kind", "'rack'"),
])
def test_a_bad_case_fails_naming_the_field_and_writes_nothing(lab, case, field, value):
    rc, out = play(lab, case)
    assert rc != 0
    res = task(out, "Nodes to snapshot")
    assert res["failed"] and ("%s: %s" % (field, value)) in res["msg"] and "Fix:" in res["msg"], res["msg"]
    assert not (lab / "out").exists()
