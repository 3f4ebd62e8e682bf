# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`molecule test` of the three rollout scenarios, each on its own lab fabric (runs beside other labs):

- default (fabric mnrd via MULTINIC_MOLECULE_FABRIC): lab build, the staged rollout, idempotence (second
  rollout 0 changed), verify = every gate, teardown;
- canary_failure (fabric mnrc): fault in a canary host, rollout stops after the canary, before/after dumps of
  every GPU host identical (asserted in its verify); then the faults during a rollout (issue 11): ToR config
  refused by FRR, host unreachable mid-wave beyond the budget, ToR bgpd killed between canary and fleet, NIC
  flap storm in a fleet wave, hung sidecar (SIGSTOP), each ending as the policy says (verify_faults.yml); teardown;
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

import keysearch
from labkit.stack_lab import env  # the lab tools' environment: this checkout's venv and ansible.cfg

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VENV_BIN = os.path.join(REPO, ".venv", "bin")
STATE_ROOT = "/run/netscale-multinic/lab"


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
                           env=env(**extra), capture_output=True, text=True, timeout=2700, check=False)
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
    return p.stdout + "\n" + p.stderr


def assert_no_key_anywhere(fabric_devices, work, output):
    """Issue 13: no TCP-MD5 key (nor the vaulted secret they derive from) in any byte of the run's output,
    reports, journal, intended/, ansible-runner job dirs (job events) and the lab nodes' logs."""
    secret = keysearch.lab_secret()
    needles = dict(keysearch.lab_keys(fabric_devices, secret))
    needles["vault secret"] = secret
    assert os.path.isdir(os.path.join(work, "logs")), "the scenario collected no node logs"
    hits, nfiles, nbytes = keysearch.search(needles, [work], {"molecule output": output})
    assert nfiles > 50 and nbytes > 1000000, (nfiles, nbytes)   # the search really read the run's artifacts
    assert hits == [], hits[:20]
    # the files of the running lab that must hold a key (FRR configs, the sidecars' configs) are readable
    # by their owner only
    with open(os.path.join(work, "key-files.json")) as f:
        holders = json.load(f)
    assert holders, "no file of the lab holds a key: the search looked for the wrong keys"
    loose = [h for h in holders if int(h["mode"], 8) & 0o077]
    assert loose == [], loose


@pytest.mark.e2e
def test_molecule_default_rollout():
    """The AWX workflow (canary job, approval, fleet job in two parallel slices) through ansible-runner at
    verbosity 3, idempotent, then one slice failing alone; no key anywhere."""
    work = "/tmp/mnr-molecule-default"
    shutil.rmtree(work, ignore_errors=True)
    out = molecule("default", "mnrd", MULTINIC_MOLECULE_FABRIC="tests/e2e/rollout/fabric.yml",
                   MULTINIC_MOLECULE_GROUP_VARS="tests/e2e/rollout/group_vars", MULTINIC_WORK=work)
    # converge + idempotence = two workflows, every job passed (verify asserted the last one in detail)
    reports = sorted(glob.glob(os.path.join(work, "reports", "*", "report.json")))
    assert len(reports) >= 6, reports
    with open(os.path.join(work, "workflow-last.json")) as f:
        last = json.load(f)
    assert last["ok"] and last["changed"] == 0, last
    events = glob.glob(os.path.join(work, "awx", "job_*", "artifacts", "job_*", "job_events", "*.json"))
    assert len(events) > 500, len(events)
    assert_no_key_anywhere(["mnrd-r1-h1", "mnrd-r1-h2", "mnrd-r2-h1", "mnrd-r2-h2", "mnrd-spine1"], work, out)


@pytest.mark.e2e
def test_molecule_canary_failure():
    """Failing rollouts (ToR phase, canary at -vvv with snapshots and rollback, unreachable host, cancel
    and rollback from the journal) leave the fabric as it was; the fault cases (ToR config refused, host
    unreachable mid-wave beyond budget, ToR bgpd killed between canary and fleet, flap storm, hung sidecar)
    end as the policy says; no key anywhere."""
    work = "/tmp/mnr-molecule-canary_failure"
    shutil.rmtree(work, ignore_errors=True)
    try:
        out = molecule("canary_failure", "mnrc", MULTINIC_KEEP_WORK="1")
        with open(os.path.join(work, "rollout.log")) as f:
            assert "Using module file" in f.read()   # the failing canary's rollout really ran at -vvv
        # the fault driver really injected every fault (verify_faults.yml asserts what the rollout did)
        with open(os.path.join(work, "faults-fleet.json")) as f:
            fleet = json.load(f)
        assert [x["do"] for x in fleet["faults"]] == ["flap", "sigstop"] and fleet["not_fired"] == [], fleet
        with open(os.path.join(work, "faults-unreach.json")) as f:
            assert json.load(f)["faults"][0]["host"] == "mnrc-r1-h1"
        assert_no_key_anywhere(["mnrc-r1-h1", "mnrc-r1-h2", "mnrc-r2-h1", "mnrc-r2-h2", "mnrc-spine1"], work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.e2e
def test_molecule_nic_failure():
    molecule("nic_failure", "mnrn")
