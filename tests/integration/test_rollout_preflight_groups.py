# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/rollout.yml's preflight on a synthetic 94-host fabric (bench/plan_scale.py "quick"), stopped when
its first device play starts (nothing is contacted): the wave's groups are filled by the rollout_progress
callback in one step, and by the playbook's add_host loops when the callback is not enabled; the preflight's
report names the same ToRs either way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import plan_scale  # noqa: E402  (bench/ is not a package)

MARKER = "PLAY [Rollout | ToRs and spines reachable]"
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    work = tmp_path_factory.mktemp("preflight")
    topo = work / "quick.yml"
    topo.write_text(yaml.safe_dump(dict({"plugin": "netscale.multinic.fabric"}, **plan_scale.synthetic("quick")),
                                   sort_keys=False))
    subprocess.run(["ansible-playbook", "-i", str(topo), os.path.join(ROOT, "playbooks", "plan.yml"),
                    "-e", "fabric_intended_dir=%s" % (work / "intended")], cwd=ROOT, env=ENV, check=True,
                   capture_output=True, timeout=300)
    return work, topo


def _preflight(work, topo, name, callbacks):
    """Run rollout.yml -v until its first device play starts; stop its process group there. Returns its output
    up to that line and the run's report.json."""
    env = dict(ENV, ANSIBLE_CALLBACKS_ENABLED=callbacks)
    reports = work / ("reports-" + name)
    proc = subprocess.Popen(["ansible-playbook", "-v", "-i", str(topo), os.path.join(ROOT, "playbooks", "rollout.yml"),
                             "-e", "rollout_intended_dir=%s" % (work / "intended"), "-e", "rollout_report_root=%s" % reports],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(MARKER):
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # its own process group: ansible-playbook and its workers
        proc.wait(timeout=60)
    out = "".join(lines)
    assert MARKER in out, out[-3000:]
    runs = [d for d in os.listdir(str(reports)) if d != "journal"]
    assert len(runs) == 1, runs
    with open(os.path.join(str(reports), runs[0], "report.json")) as handle:
        return out, json.load(handle)


def _items_of(out, task):
    """Loop items the task printed (-v prints one line per item)."""
    section = out.split("TASK [%s]" % task, 1)[1].split("TASK [", 1)[0]
    return [line for line in section.splitlines() if "(item=" in line]


def test_wave_groups_by_the_callback_and_by_the_add_host_fallback(planned):
    work, topo = planned
    out_cb, rep_cb = _preflight(work, topo, "callback", "netscale.multinic.rollout_progress,netscale.multinic.fabric_lease")
    out_fb, rep_fb = _preflight(work, topo, "fallback", "netscale.multinic.fabric_lease")
    hosts = rep_cb["preflight"]["gpu_hosts"]
    tors = rep_cb["preflight"]["tors"]
    assert hosts == 94 and len(tors) == 32
    # callback: filled when the journal opened, the loops ran over nothing
    assert "groups rollout_targets, rollout_tors filled in one step (%d in rollout_targets, %d in rollout_tors)" % (
        hosts, len(tors)) in out_cb
    assert _items_of(out_cb, "Hosts of the rollout, in wave order") == []
    tors_task = "ToRs of every rack of the plan (also racks of later jobs' waves; a policy without hosts is inert)"
    assert _items_of(out_cb, tors_task) == []
    # fallback: one add_host per host and per ToR, same groups
    assert "filled in one step" not in out_fb
    assert len(_items_of(out_fb, "Hosts of the rollout, in wave order")) == hosts
    assert rep_fb["preflight"]["tors"] == tors
    waves = [w["hosts"] for w in rep_cb["run"]["waves"]]
    assert sum(len(w) for w in waves) == hosts and [w["hosts"] for w in rep_fb["run"]["waves"]] == waves


def test_a_renumbering_is_refused_in_the_preflight_with_nothing_written(planned, tmp_path, tree_digest):
    """One plan pass: the write refuses a renumbering before it writes anything, and the run stops there (no
    journal opened, no device contacted)."""
    work, topo = planned
    data = yaml.safe_load(topo.read_text())
    racks = [r for b in data["buildings"] for z in b["zones"] for r in z["racks"]]
    rack = next(r for r in racks if len(r["hosts"]) < 4)
    free = min(set(range(1, 5)) - set(h["id"] for h in rack["hosts"]))
    rack["hosts"][0]["id"] = free      # the same host at another position of its rack: its addresses move
    moved = tmp_path / "quick.yml"
    moved.write_text(yaml.safe_dump(data, sort_keys=False))
    before = tree_digest(work / "intended")
    reports = tmp_path / "reports"
    p = subprocess.run(["ansible-playbook", "-i", str(moved), os.path.join(ROOT, "playbooks", "rollout.yml"),
                        "-e", "rollout_intended_dir=%s" % (work / "intended"), "-e", "rollout_report_root=%s" % reports],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600, check=False)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-3000:]
    assert "re-plan would change" in out and "nothing was written" in out and "allow_renumber=true" in out, out[-3000:]
    assert MARKER not in out                                     # stopped in the preflight
    assert tree_digest(work / "intended") == before             # the plan on disk untouched
    journal = reports / "journal"
    assert not journal.exists() or not [d for d in os.listdir(str(journal)) if d != "leases"]
