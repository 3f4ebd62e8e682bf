"""The fabric inventory as Ansible sees it (every host's variables, group vars merged, and every group's
members and children, from ``ansible-inventory --list``) is the same as the committed "before" fixture,
captured from the implementation before the fleet-scale inventory (issue 27) changed how the plugin
builds it: the names and values that roles and users read are unchanged.

Cases: the example fabric; the lab fabric with no lab running; the lab fabric with a running lab (a state
file whose nodes point at this test's own process, so the nsenter connection variables are set).

Re-capture (only when a variable is meant to change, and say so in the changelog):
  .venv/bin/python tests/integration/test_inventory_vars.py --capture
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "inventory_before")
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
VAULT = os.path.join(ROOT, ".cache", "lab-vault-password")
CASES = ("example", "lab_down", "lab_running")


def _start_time(pid):
    with open("/proc/%d/stat" % pid) as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[19])


def _inventory(case, workdir):
    """``ansible-inventory --list`` of a copy of the case's inventory directory, with its lab state in
    ``workdir`` and the paths, PID and start time that depend on the run replaced by placeholders."""
    source = "example" if case == "example" else "lab"
    inv = os.path.join(workdir, "inventory")
    shutil.copytree(os.path.join(ROOT, "inventories", source), inv)
    state_root = os.path.join(workdir, "state")
    topo = os.path.join(inv, "fabric.yml")
    with open(topo, "a") as handle:
        handle.write("\nlab_state_dir: %s\n" % state_root)
    pid = os.getpid()
    started = _start_time(pid)
    if case == "lab_running":
        names = ["lab-r1-tor", "lab-r2-tor", "lab-spine1", "lab-storage", "lab-r1-h1", "lab-r1-h2", "lab-r2-h1", "lab-r2-h2"]
        os.makedirs(os.path.join(state_root, "lab"))
        with open(os.path.join(state_root, "lab", "state.json"), "w") as handle:
            json.dump({"nodes": dict((n, {"pid": pid, "started": started, "netns": "ns-" + n}) for n in names)}, handle)
    env = dict(ENV)
    if source == "lab" and os.path.exists(VAULT):
        env["ANSIBLE_VAULT_PASSWORD_FILE"] = VAULT
    p = subprocess.run(["ansible-inventory", "-i", topo, "--list"], cwd=ROOT, env=env, capture_output=True,
                       text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "WARNING" not in p.stderr, p.stderr
    text = p.stdout.replace(workdir, "<WORKDIR>")
    data = json.loads(text)

    def scrub(value):
        if isinstance(value, dict):
            return dict((k, ("<PID>" if k in ("pid", "ansible_nsenter_pid") and value[k] == pid else
                             "<STARTED>" if k == "started" and value[k] == started else scrub(value[k])))
                        for k in value)
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value
    data = scrub(data)
    for group in data.values():   # group member order is not part of the contract
        for key in ("hosts", "children"):
            if isinstance(group, dict) and key in group:
                group[key] = sorted(group[key])
    return data


def _group_vars_keys(case):
    """Top-level keys of the case's inventory's group_vars files (vault files left out)."""
    import yaml
    folder = os.path.join(ROOT, "inventories", "example" if case == "example" else "lab", "group_vars")
    keys = set()
    for base, _dirs, files in os.walk(folder):
        for name in files:
            if name.endswith((".yml", ".yaml")) and "vault" not in name:
                with open(os.path.join(base, name)) as handle:
                    keys.update((yaml.safe_load(handle) or {}).keys())
    return keys


def _fixture(case):
    return os.path.join(FIXTURES, case + ".json")


@pytest.mark.parametrize("case", CASES)
def test_inventory_vars_and_groups_unchanged(case, tmp_path):
    if case != "example" and not os.path.exists(VAULT):
        pytest.fail("the lab inventory's vault password file is missing (%s): run scripts/setup.sh" % VAULT)
    with open(_fixture(case)) as handle:
        before = json.load(handle)
    after = _inventory(case, str(tmp_path))
    assert sorted(after) == sorted(before)
    hostvars_before, hostvars_after = before["_meta"]["hostvars"], after["_meta"]["hostvars"]
    assert sorted(hostvars_after) == sorted(hostvars_before)
    # variables added to the inventory's group_vars files since the capture are the user's data, not the
    # plugin's: a new key from those files is left out; every key the plugin sets is compared
    added = _group_vars_keys(case)
    for host in hostvars_before:
        got = dict((k, v) for k, v in hostvars_after[host].items() if k in hostvars_before[host] or k not in added)
        assert got == hostvars_before[host], host
    for group in before:
        if group != "_meta":   # its hostvars are compared above
            assert after[group] == before[group], group
    if case == "lab_running":
        assert hostvars_after["lab-r1-h1"]["ansible_connection"] == {"__ansible_unsafe": "community.docker.nsenter"}


def _capture():
    os.makedirs(FIXTURES, exist_ok=True)
    for case in CASES:
        workdir = tempfile.mkdtemp(prefix="inv-before-")
        try:
            data = _inventory(case, workdir)
        finally:
            shutil.rmtree(workdir)
        with open(_fixture(case), "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
        print("%s: %d hosts" % (_fixture(case), len(data["_meta"]["hostvars"])))


if __name__ == "__main__" and sys.argv[1:] == ["--capture"]:
    _capture()
