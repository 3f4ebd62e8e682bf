# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_lease module: acquire / refuse (fails naming the holder) / check mode / diff / release / inspect / bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.netscale.multinic.plugins.module_utils.rollout import lease as ls
from ansible_collections.netscale.multinic.plugins.modules import fabric_lease


def run(capsys, check_mode=False, diff=False, **args):
    args["_ansible_check_mode"] = check_mode
    args["_ansible_diff"] = diff
    with patch_module_args(args), pytest.raises(SystemExit):
        fabric_lease.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def other():
    """A live process on this host that holds the lease in some tests (killed at the end)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    if p.poll() is None:
        p.kill()
    p.wait()


def test_acquire_refuse_release(tmp_path, capsys, other):
    d = str(tmp_path / "leases")
    held = ls.acquire(d, "lab", ls.make_member("R1", "rollout.yml", pid=other.pid))
    assert held["action"] == "acquired"
    # check mode: a real run would be refused - a warning, nothing written, not failed
    before = open(ls.lease_path(d, "lab")).read()
    dry = run(capsys, check_mode=True, dir=d, fabric="lab", rollout_id="R2", playbook="rollback.yml", pid=os.getpid())
    assert dry["would_refuse"] and not dry.get("failed") and not dry["changed"] and not dry["taken"]
    # the refusal text is the result's message (module.warn repeats it; warnings are process-global in a test run)
    assert "another job holds this fabric's lease" in dry["message"]
    r = run(capsys, dir=d, fabric="lab", rollout_id="R2", playbook="rollback.yml", pid=os.getpid(), break_stale=True)
    assert r["failed"] and r["action"] == "refused"
    assert "rollout R1, playbook rollout.yml" in r["msg"] and "pid %d" % other.pid in r["msg"]
    assert "breaks only a stale lease" in r["msg"]
    assert open(ls.lease_path(d, "lab")).read() == before
    # the holder dies: stale; check mode would break it but does not
    other.kill()
    other.wait()
    dry = run(capsys, check_mode=True, dir=d, fabric="lab", rollout_id="R2", playbook="rollout.yml", pid=os.getpid(),
              break_stale=True)
    assert dry["action"] == "broken" and not dry["taken"] and open(ls.lease_path(d, "lab")).read() == before
    r = run(capsys, diff=True, dir=d, fabric="lab", rollout_id="R2", playbook="rollout.yml", pid=os.getpid(),
            break_stale=True)
    assert r["action"] == "broken" and r["changed"] and r["taken"]
    assert "pid %d gone" % other.pid in r["previous"]["description"]
    assert "R1" in r["diff"]["before"] and "R2" in r["diff"]["after"]
    again = run(capsys, dir=d, fabric="lab", rollout_id="R2", playbook="rollout.yml", pid=os.getpid())
    assert again["action"] == "held" and not again["changed"]
    view = run(capsys, state="inspected", dir=d, fabric="lab")
    assert view["holder"]["rollout_id"] == "R2" and not view["changed"]
    rel = run(capsys, state="released", dir=d, fabric="lab", pid=os.getpid())
    assert rel["action"] == "released" and rel["changed"] and not os.path.exists(ls.lease_path(d, "lab"))
    rel = run(capsys, state="released", dir=d, fabric="lab", pid=os.getpid())
    assert rel["action"] == "not_held" and not rel["changed"]


def test_check_mode_on_a_free_fabric_creates_nothing(tmp_path, capsys):
    d = str(tmp_path / "leases")
    r = run(capsys, check_mode=True, dir=d, fabric="lab", rollout_id="R", playbook="site.yml", pid=os.getpid())
    assert r["action"] == "acquired" and not r["taken"] and not os.path.exists(d)


def test_awx_jobs_of_one_workflow_share(tmp_path, capsys):
    d = str(tmp_path / "leases")
    a = run(capsys, dir=d, fabric="lab", rollout_id="awx-wf-7", playbook="rollout.yml", awx_job_id="8",
            awx_workflow_job_id="7")
    b = run(capsys, dir=d, fabric="lab", rollout_id="awx-wf-7", playbook="rollout.yml", awx_job_id="9",
            awx_workflow_job_id="7")
    c = run(capsys, dir=d, fabric="lab", rollout_id="awx-wf-10", playbook="rollout.yml", awx_job_id="11",
            awx_workflow_job_id="10")
    assert (a["action"], b["action"], c["action"]) == ("acquired", "joined", "refused")
    assert "AWX job 8 of workflow 7" in c["msg"]


@pytest.mark.parametrize("args,needle", [
    (dict(fabric="bad/name"), "fabric='bad/name'"),
    (dict(rollout_id="has space"), "rollout_id='has space'"),
    (dict(ttl=1), "ttl=1"),
])
def test_bad_input_names_the_field_and_writes_nothing(tmp_path, capsys, args, needle):
    d = str(tmp_path / "leases")
    full = dict(dir=d, fabric="lab", rollout_id="R", playbook="rollout.yml", pid=os.getpid())
    full.update(args)
    r = run(capsys, **full)
    assert r["failed"] and needle in r["msg"], r["msg"]
    assert not os.path.exists(d)
