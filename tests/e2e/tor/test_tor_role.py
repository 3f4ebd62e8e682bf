# -*- coding: utf-8 -*-
"""The tor_bgp role end to end against the harness's FRR ToR, through community.docker.nsenter:
apply, second run 0 changed, then --check --diff against a changed plan shows the exact delta and
changes nothing."""

from __future__ import annotations

import copy
import os
import re
import subprocess

import yaml

from tor_harness import LAB_FABRIC, REPO

TOR = "lab-r1-tor"


def _playbook(lab, fabric_path, *extra):
    r = lab.routers[TOR]
    with open("%s/zebra.pid" % r["dir"]) as fh:
        pid = int(fh.read().strip())
    inv = {"all": {"children": {"tors": {"hosts": {TOR: {
        "ansible_connection": "community.docker.nsenter", "ansible_nsenter_pid": pid,
        "ansible_python_interpreter": "/usr/bin/python3",
        "multinic_topology_file": fabric_path,
        "tor_bgp_frr_confdir": r["dir"], "tor_bgp_frr_vty_socket": r["dir"], "tor_bgp_frr_rundir": r["dir"],
        "tor_bgp_sysctl_file": os.path.join(lab.dir, "sysctl-tor.conf"),
        "tor_bgp_intended_dir": os.path.join(lab.dir, "intended"),
        "tor_bgp_md5_keys": lab.md5_keys}}}}}}
    inv_path = os.path.join(lab.dir, "inventory.yml")
    with open(inv_path, "w") as fh:
        yaml.safe_dump(inv, fh)
    os.chmod(inv_path, 0o600)
    play = os.path.join(lab.dir, "play.yml")
    with open(play, "w") as fh:
        fh.write("- hosts: tors\n  gather_facts: false\n  roles:\n    - netscale.multinic.tor_bgp\n")
    env = dict(os.environ, PATH="%s/.venv/bin:%s" % (REPO, os.environ.get("PATH", "")),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    p = subprocess.run(["ansible-playbook", "-i", inv_path, play] + list(extra), cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    recap = re.search(r"%s\s+: ok=(\d+)\s+changed=(\d+)" % TOR, p.stdout)
    return p.stdout, int(recap.group(2))


def test_role_apply_idempotent_and_check_diff(torlab):
    out, _changed = _playbook(torlab, LAB_FABRIC)
    hash_v4 = torlab.nsexec("t1", "sysctl", "-n", "net.ipv4.fib_multipath_hash_policy").stdout.strip()
    hash_v6 = torlab.nsexec("t1", "sysctl", "-n", "net.ipv6.fib_multipath_hash_policy").stdout.strip()
    assert (hash_v4, hash_v6) == ("1", "1")
    linkdown = [torlab.nsexec("t1", "sysctl", "-n", "net.ipv%s.conf.all.ignore_routes_with_linkdown" % v).stdout.strip()
                for v in (4, 6)]
    assert linkdown == ["1", "1"], "a dead NIC's next hop must leave the ToR's ECMP group in the kernel"
    out, changed = _playbook(torlab, LAB_FABRIC)
    assert changed == 0, out[-3000:]
    # Changed plan: lab-r1-h1 runs one task slot.
    with open(LAB_FABRIC) as fh:
        data = yaml.safe_load(fh)
    data = copy.deepcopy(data)
    data["buildings"][0]["zones"][0]["racks"][0]["hosts"][0]["task_slots"] = 1
    changed_path = os.path.join(torlab.dir, "fabric-changed.yml")
    with open(changed_path, "w") as fh:
        yaml.safe_dump(data, fh)
    before = torlab.vtysh(TOR, "show running-config").stdout
    out, changed = _playbook(torlab, changed_path, "--check", "--diff")
    after = torlab.vtysh(TOR, "show running-config").stdout
    assert before == after
    assert changed >= 1
    # Slot 2 of lab-r1-h1 goes: its peer-group (with its members), route-maps and prefix-lists.
    assert "- " in out and "no neighbor HOST-lab-r1-h1-S2 peer-group" in out
    assert "no ip prefix-list PL-TASK-lab-r1-h1-S2-IPV4 seq 10 permit 198.18.0.9/32" in out
    assert "HOST-lab-r1-h1-S1" not in out
    for key in torlab.md5_keys.values():
        assert key not in out
