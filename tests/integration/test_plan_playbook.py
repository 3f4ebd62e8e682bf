"""playbooks/plan.yml and the inventory plugin through Ansible itself (ansible-playbook, ansible-inventory)."""
import hashlib
import json
import os
import subprocess

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="default", PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])


def _run(*args):
    return subprocess.run(list(args), cwd=ROOT, env=ENV, capture_output=True, text=True, check=False)


def _playbook(topology, dest, *extra):
    return _run("ansible-playbook", "-i", str(topology), os.path.join(ROOT, "playbooks", "plan.yml"),
                "-e", "fabric_intended_dir=%s" % dest, *extra)


def _digest(folder):
    h = hashlib.sha256()
    for base, _dirs, files in sorted(os.walk(folder)):
        for f in sorted(files):
            with open(os.path.join(base, f), "rb") as handle:
                h.update(f.encode() + handle.read())
    return h.hexdigest()


def _example():
    with open(os.path.join(ROOT, "inventories", "example", "fabric.yml")) as handle:
        return yaml.safe_load(handle)


def test_plan_playbook_writes_then_reports_no_change_and_check_mode_writes_nothing(tmp_path):
    topo = tmp_path / "fabric.yml"
    topo.write_text(yaml.safe_dump(_example()))
    dest = tmp_path / "intended"
    check = _playbook(topo, dest, "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert not dest.exists()
    first = _playbook(topo, dest)
    assert first.returncode == 0 and "changed=1" in first.stdout, first.stdout
    assert "files written: 9" in first.stdout
    second = _playbook(topo, dest)
    assert second.returncode == 0 and "changed=0" in second.stdout, second.stdout

    data = _example()
    data["buildings"][0]["zones"][0]["racks"][1]["hosts"].append({"id": 3, "name": "gpu-new", "nics": 2})
    topo.write_text(yaml.safe_dump(data))
    before = _digest(dest)
    diff = _playbook(topo, dest, "--check", "--diff")
    assert diff.returncode == 0 and '+- name: "gpu-new"' in diff.stdout, diff.stdout
    assert _digest(dest) == before


def test_plan_playbook_bad_input_fails_with_path_value_fix_and_writes_nothing(tmp_path):
    topo = tmp_path / "fabric.yml"
    topo.write_text(yaml.safe_dump(_example()))
    dest = tmp_path / "intended"
    assert _playbook(topo, dest).returncode == 0
    before = _digest(dest)
    data = _example()
    data["buildings"][0]["zones"][0]["racks"][0]["hosts"][0]["nics"] = 0
    topo.write_text(yaml.safe_dump(data))
    bad = _playbook(topo, dest)
    assert bad.returncode != 0
    out = bad.stdout + bad.stderr
    assert "buildings[0].zones[0].racks[0].hosts[0].nics" in out and "value: 0" in out and "Fix:" in out, out
    assert _digest(dest) == before


def test_inventory_graph_shows_hierarchy_and_hostvars_hold_allocations():
    inv = os.path.join(ROOT, "inventories", "example", "fabric.yml")
    graph = _run("ansible-inventory", "-i", inv, "--graph")
    assert graph.returncode == 0, graph.stderr
    lines = graph.stdout.splitlines()
    # region > building > zone > rack > host, each one level deeper
    depth = {name: next(len(l) - len(l.lstrip("| -@:")) for l in lines if l.strip("| -@:") == name)
             for name in ("region_rgn1", "building_b1", "zone_b1_az1", "rack_b1_az1_r1")}
    assert depth["region_rgn1"] < depth["building_b1"] < depth["zone_b1_az1"] < depth["rack_b1_az1_r1"]
    host = _run("ansible-inventory", "-i", inv, "--host", "gpu-b1-az1-r1-h2")
    hv = json.loads(host.stdout)
    assert hv["multinic_host"]["nic_count"] == 4 and len(hv["multinic_host"]["nics"]) == 4
    assert hv["multinic_host"]["nics"][3]["subnet"]["ipv6"].endswith("/64")
