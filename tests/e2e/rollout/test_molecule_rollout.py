# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`molecule test` of the three rollout scenarios, each on its own lab fabric (runs beside other labs):

- default (fabric mnrd via MULTINIC_MOLECULE_FABRIC): lab build, the staged rollout, idempotence (second
  rollout 0 changed), verify = every gate, teardown;
- canary_failure (fabric mnrc): fault in a canary host, rollout stops after the canary, before/after dumps of
  every GPU host identical (asserted in its verify), teardown;
- nic_failure (fabric mnrn): canary passes, a fleet NIC goes down, the fleet wave fails and is rolled back,
  the report names the NIC, teardown.

Each test also checks that nothing of its fabric is left: no state dir, no ``mnl-<fabric>-*`` namespace,
no cgroup dir. Needs root, FRR, systemd-capable lab image (the lab role builds it).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VENV_BIN = os.path.join(REPO, ".venv", "bin")
STATE_ROOT = "/run/netscale-multinic/lab"


def env(**extra):
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + ":" + e.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    e["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    e["ANSIBLE_NOCOLOR"] = "1"
    e.pop("NETSCALE_LAB_FAIL_AT", None)
    e.update(extra)
    return e


def leftovers(fabric):
    """Everything a lab of this fabric could leave behind (only names carrying the fabric's prefix)."""
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    netns = [line.split()[0] for line in p.stdout.splitlines() if line.startswith("mnl-%s-" % fabric)]
    cgroups = glob.glob("/sys/fs/cgroup/mnl/%s" % fabric) + glob.glob("/sys/fs/cgroup/unified/mnl/%s" % fabric)
    state = [d for d in [os.path.join(STATE_ROOT, fabric)] if os.path.exists(d)]
    return {"netns": netns, "cgroups": cgroups, "state": state}


def molecule(scenario, fabric, **extra):
    log = "/tmp/mnr-molecule-%s.log" % scenario
    try:
        p = subprocess.run([os.path.join(VENV_BIN, "molecule"), "test", "-s", scenario], cwd=REPO,
                           env=env(**extra), capture_output=True, text=True, timeout=900, check=False)
    finally:
        # molecule's own destroy runs even when converge/verify fail; make sure of it anyway
        if any(leftovers(fabric).values()):
            subprocess.run([os.path.join(VENV_BIN, "molecule"), "destroy", "-s", scenario], cwd=REPO,
                           env=env(**extra), capture_output=True, text=True, timeout=300, check=False)
    with open(log, "w") as f:
        f.write(p.stdout + "\n" + p.stderr)
    assert p.returncode == 0, "molecule test -s %s rc=%d (log %s)\n%s\n%s" % (
        scenario, p.returncode, log, p.stdout[-6000:], p.stderr[-3000:])
    assert leftovers(fabric) == {"netns": [], "cgroups": [], "state": []}
    # the ToR role's sysctl.d file lands in the lab box's private /etc/sysctl.d, never the machine's
    assert glob.glob("/etc/sysctl.d/*netscale*") == []


@pytest.mark.e2e
def test_molecule_default_rollout():
    work = "/tmp/mnr-molecule-default"
    shutil.rmtree(work, ignore_errors=True)
    molecule("default", "mnrd", MULTINIC_MOLECULE_FABRIC="tests/e2e/rollout/fabric.yml", MULTINIC_WORK=work)
    # converge + idempotence = two rollouts, both passed (verify asserted the last one in detail)
    reports = sorted(glob.glob(os.path.join(work, "reports", "*", "report.json")))
    assert len(reports) >= 2, reports
    for r in reports[-2:]:
        with open(r) as f:
            assert json.load(f)["run"]["status"] == "passed", r


@pytest.mark.e2e
def test_molecule_canary_failure():
    molecule("canary_failure", "mnrc")


@pytest.mark.e2e
def test_molecule_nic_failure():
    molecule("nic_failure", "mnrn")
