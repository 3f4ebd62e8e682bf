# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One way to read a topology file (plan/job.py read_topology_or): PyYAML's C loader, Ansible's loader for a
vault-encrypted file. The inventory plugin and the fabric_hosts lookup (an AWX slice's preflight) give the same
hosts from the plain file and from the same file encrypted with ansible-vault."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
SOURCE = os.path.join(ROOT, "inventories", "example", "fabric.yml")


def _env(tmp_path):
    password = tmp_path / "vault-pass"
    password.write_text("reader-test\n")
    return dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_VAULT_PASSWORD_FILE=str(password), PATH=BIN + os.pathsep + os.environ["PATH"])


def _files(tmp_path, env):
    plain = tmp_path / "plain" / "fabric.yml"
    vaulted = tmp_path / "vaulted" / "fabric.yml"
    for f in (plain, vaulted):
        f.parent.mkdir()
        shutil.copy(SOURCE, str(f))
    subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt", str(vaulted)], env=env, check=True,
                   capture_output=True)
    assert vaulted.read_text().startswith("$ANSIBLE_VAULT;")
    return plain, vaulted


def test_inventory_plugin_reads_a_vaulted_topology_like_the_plain_one(tmp_path):
    env = _env(tmp_path)
    plain, vaulted = _files(tmp_path, env)
    lists = []
    for f in (plain, vaulted):
        p = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", str(f), "--list"], env=env,
                           capture_output=True, text=True, check=False, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        data = json.loads(p.stdout)
        hosts = data["_meta"]["hostvars"]
        assert hosts, p.stdout[:500]
        lists.append(dict((h, v.get("multinic_host", {}).get("nics")) for h, v in hosts.items()))
    assert lists[0] == lists[1]


def test_fabric_hosts_lookup_reads_a_vaulted_topology_like_the_plain_one(tmp_path):
    env = _env(tmp_path)
    plain, vaulted = _files(tmp_path, env)
    names = []
    for f in (plain, vaulted):
        expr = "{{ lookup('netscale.multinic.fabric_hosts', '%s', groups=['tors', 'spines'], wantlist=true) " \
               "| map(attribute='name') | sort | to_json }}" % f
        p = subprocess.run([os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
                            "-m", "ansible.builtin.debug", "-a", "msg=" + expr],
                           env=dict(env, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1"),
                           capture_output=True, text=True, check=False, cwd=ROOT)
        assert p.returncode == 0, p.stdout + p.stderr
        out = json.loads(p.stdout)
        msg = out["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
        names.append(json.loads(msg) if isinstance(msg, str) else msg)
    assert len(names[0]) > 1 and names[0] == names[1]
