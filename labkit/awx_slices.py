# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWX workflow "multinic rollout" (canary job, approval, fleet job in N slices) on a lab fabric of its own
(``mnas``: the shape of the lab fabric, 2 racks of 2 GPU hosts, own names so it runs beside other labs), run the
way AWX runs it (:mod:`labkit.awx_jobs`), for a given ``awx_fleet_slices``. A slice AWX gives no GPU host of the
recorded waves must end successful, its report saying "nothing to deploy" (issue 27 item 6).

Used by ``tests/e2e/rollout/test_awx_slices.py`` (one slice count in CI) and ``bench/awx_slices.py`` (every
count from 1 to 8, each a real change: the previous workflow's rollout is rolled back from its journal first).
Needs root; run under the lab lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from labkit.lab_vars import link_group_vars

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.join(REPO, ".venv", "bin")
FABRIC = "mnas"
STATE_DIR = "/run/netscale-multinic/lab/%s" % FABRIC
NOTHING = "nothing to deploy"
# this lab's monitoring port block: CI runs it beside other labs (scripts/ci_groups.py)
MONITORING_PORT = 20690


def env():
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + ":" + e.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    e["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    e["ANSIBLE_NOCOLOR"] = "1"
    e["ANSIBLE_VAULT_PASSWORD_FILE"] = os.path.join(REPO, ".cache", "lab-vault-password")
    e.pop("NETSCALE_LAB_FAIL_AT", None)
    return e


def prepare(work):
    """The fabric file (tests/e2e/rollout/fabric.yml renamed) and the lab's group_vars (MD5 keys from the
    vault, the relaxed detection timers, its monitoring off) under ``work``; returns the topology path."""
    link_group_vars(work, monitoring_port=MONITORING_PORT, monitoring=False)   # nothing here reads it
    with open(os.path.join(REPO, "tests", "e2e", "rollout", "fabric.yml")) as f:
        text = f.read().replace("mnrd", FABRIC)
    path = os.path.join(work, "fabric.yml")
    with open(path, "w") as f:
        f.write(text)
    return path


def playbook(topology, name, *args, timeout=900):
    return subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", topology, "playbooks/%s" % name]
                          + list(args), cwd=REPO, env=env(), capture_output=True, text=True, timeout=timeout,
                          check=False)


def lab(topology, state):
    return playbook(topology, "lab.yml", "-e", "lab_topology=%s" % topology, "-e", "lab_state=%s" % state)


def extra_vars(work):
    return {"rollout_report_root": os.path.join(work, "reports"), "rollout_intended_dir": os.path.join(work, "intended"),
            "tor_bgp_intended_dir": os.path.join(work, "intended"), "host_datapath_build_dir": os.path.join(work, "build"),
            "rollout_journal_dir": os.path.join(work, "journal")}


def workflow(topology, work, slices):
    """Run the workflow with ``awx_fleet_slices: slices``; returns (summary dict, wall seconds, rc)."""
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "labkit.awx_jobs", "--inventory-source", topology,
                        "--work", os.path.join(work, "awx"), "--site-vars", json.dumps({"awx_fleet_slices": slices}),
                        "--extra-vars", json.dumps(extra_vars(work)), "workflow", "multinic rollout"],
                       cwd=REPO, env=env(), capture_output=True, text=True, timeout=1200, check=False)
    wall = time.monotonic() - t0
    try:
        out = json.loads(p.stdout)
    except ValueError:
        out = {"ok": False, "nodes": [], "error": (p.stdout[-3000:] + p.stderr[-3000:])}
    return out, wall, p.returncode


def rollback(topology, work, workflow_job_id):
    ev = dict(extra_vars(work), rollout_id="awx-wf-%s" % workflow_job_id)
    return playbook(topology, "rollback.yml", "-e", json.dumps(ev))


def fleet_slices(out):
    """[(slice, status, GPU hosts of the recorded waves it deployed (report waves), report message)]"""
    rows = []
    for node in out.get("nodes") or []:
        if node.get("node") != "fleet":
            continue
        for job in node.get("jobs") or []:
            run = job.get("report") or {}
            rows.append({"slice": job["slice"], "status": job["status"], "report_status": run.get("status"),
                         "message": run.get("message", ""), "waves": [w.get("name") for w in run.get("waves") or []]})
    return rows


def check(out, slices):
    """Problems of one workflow run: every node ran and succeeded, one fleet job per slice, each report passed,
    and a slice without a wave to run says nothing to deploy."""
    problems = []
    if not out.get("ok"):
        problems.append("workflow not ok: %s" % json.dumps(out)[-2000:])
    rows = fleet_slices(out)
    if [r["slice"] for r in rows] != ["%d/%d" % (k, slices) for k in range(1, slices + 1)]:
        problems.append("fleet slices %s, expected %d" % ([r["slice"] for r in rows], slices))
    for r in rows:
        if r["status"] != "successful" or r["report_status"] != "passed":
            problems.append("slice %s: %s, report %s" % (r["slice"], r["status"], r["report_status"]))
        if not r["waves"] and NOTHING not in r["message"]:
            problems.append("slice %s ran no wave and its report does not say %r: %r"
                            % (r["slice"], NOTHING, r["message"]))
    return problems
