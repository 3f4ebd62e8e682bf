# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric lease core: acquire / join / refuse / break / release, stale detection, races between processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.rollout import lease as ls

HOST = "ctl-a"
T0 = 1_800_000_000.0


def cli(pid, rid="20261127T110000Z", playbook="rollout.yml", host=HOST, now=T0):
    return ls.make_member(rid, playbook, controller=host, pid=pid, pid_start="1", now=now)


def awx(job, wf=None, rid=None, host="awx-ee-1", now=T0):
    return ls.make_member(rid or ("awx-wf-%s" % wf if wf else "run-x"), "rollout.yml", controller=host,
                          awx_job_id=job, awx_workflow_job_id=wf, now=now)


def alive_set(*pids):
    return lambda pid, start=None: pid in pids


def test_acquire_free_then_refuse_a_second_cli_run_naming_the_holder(tmp_path):
    d = str(tmp_path)
    r1 = ls.acquire(d, "lab", cli(111), host=HOST, now=T0, alive=alive_set(111, 222))
    assert r1["action"] == "acquired" and r1["changed"]
    doc = json.load(open(ls.lease_path(d, "lab")))
    assert list(doc["members"]) == ["ctl-a:111"]
    r2 = ls.acquire(d, "lab", cli(222, rid="20261127T110500Z", playbook="rollback.yml"), host=HOST, now=T0 + 65,
                    alive=alive_set(111, 222))
    assert r2["action"] == "refused" and not r2["changed"]
    msg = r2["message"]
    for part in ("rollout 20261127T110000Z", "playbook rollout.yml", "controller ctl-a", "pid 111",
                 "since 2027-01-15T08:00:00Z", "65 s ago", "nothing was changed", "Wait until it ends"):
        assert part in msg, (part, msg)
    # the refused run did not touch the file
    assert json.load(open(ls.lease_path(d, "lab"))) == doc


def test_same_member_again_is_held_not_refused(tmp_path):
    d = str(tmp_path)
    ls.acquire(d, "lab", cli(111), host=HOST, now=T0, alive=alive_set(111))
    r = ls.acquire(d, "lab", cli(111), host=HOST, now=T0 + 5, alive=alive_set(111))
    assert r["action"] == "held" and not r["changed"]
    assert r["lease"]["members"]["ctl-a:111"]["heartbeat"] == T0 + 5


def test_slices_of_one_awx_workflow_share_and_last_out_frees(tmp_path):
    d = str(tmp_path)
    acts = [ls.acquire(d, "lab", awx(j, wf=104), host=HOST, now=T0 + j - 100)["action"] for j in (105, 106, 107)]
    assert acts == ["acquired", "joined", "joined"]
    # another workflow, a job alone, a CLI run: refused
    assert ls.acquire(d, "lab", awx(120, wf=119), host=HOST, now=T0 + 10)["action"] == "refused"
    assert ls.acquire(d, "lab", awx(121), host=HOST, now=T0 + 10)["action"] == "refused"
    assert ls.acquire(d, "lab", cli(333), host=HOST, now=T0 + 10, alive=alive_set(333))["action"] == "refused"
    assert ls.release(d, "lab", "awx-job-105")["action"] == "left"
    assert ls.release(d, "lab", "awx-job-107")["action"] == "left"
    assert os.path.exists(ls.lease_path(d, "lab"))
    assert ls.release(d, "lab", "awx-job-106")["action"] == "released"
    assert not os.path.exists(ls.lease_path(d, "lab"))
    assert ls.release(d, "lab", "awx-job-106")["action"] == "not_held"
    hist = [json.loads(x) for x in open(ls.history_path(d, "lab"))]
    assert [h["event"] for h in hist] == ["acquired", "joined", "joined", "released", "released", "released"]


def test_stale_by_pid_refused_without_consent_broken_with_it(tmp_path):
    d = str(tmp_path)
    ls.acquire(d, "lab", cli(111), host=HOST, now=T0, alive=alive_set(111))
    # the holder was SIGKILLed: pid 111 gone
    r = ls.acquire(d, "lab", cli(222, rid="R2"), host=HOST, now=T0 + 30, alive=alive_set(222))
    assert r["action"] == "refused" and r["stale"]
    assert "pid 111 gone on ctl-a" in r["message"]
    assert "-e rollout_break_lease=true" in r["message"]
    assert "playbooks/rollback.yml -e rollout_id=20261127T110000Z" in r["message"]
    r = ls.acquire(d, "lab", cli(222, rid="R2"), host=HOST, now=T0 + 31, alive=alive_set(222), break_stale=True)
    assert r["action"] == "broken" and r["changed"]
    assert r["previous"]["rollout_id"] == "20261127T110000Z"
    doc = json.load(open(ls.lease_path(d, "lab")))
    assert list(doc["members"]) == ["ctl-a:222"]
    assert "pid 111 gone" in doc["broke"]["previous"]
    assert json.loads(open(ls.history_path(d, "lab")).read().splitlines()[-1])["event"] == "broken"


def test_consent_never_breaks_a_live_holder(tmp_path):
    d = str(tmp_path)
    ls.acquire(d, "lab", cli(111), host=HOST, now=T0, alive=alive_set(111, 222))
    r = ls.acquire(d, "lab", cli(222), host=HOST, now=T0 + 1, alive=alive_set(111, 222), break_stale=True)
    assert r["action"] == "refused" and not r["stale"]
    assert "breaks only a stale lease" in r["message"]
    assert list(json.load(open(ls.lease_path(d, "lab")))["members"]) == ["ctl-a:111"]


def test_other_host_holder_stale_only_by_heartbeat(tmp_path):
    d = str(tmp_path)
    ls.acquire(d, "lab", cli(111, host="ctl-b"), host="ctl-b", now=T0, alive=alive_set())
    # from ctl-a, pid 111 cannot be checked (alive() says no, but it is not asked): heartbeat decides
    r = ls.acquire(d, "lab", cli(222), host=HOST, now=T0 + 100, ttl=300, alive=alive_set(222))
    assert r["action"] == "refused" and not r["stale"] and "heartbeat 100 s ago from ctl-b" in r["message"]
    assert ls.renew(d, "lab", "ctl-b:111", now=T0 + 250)
    r = ls.acquire(d, "lab", cli(222), host=HOST, now=T0 + 500, ttl=300, alive=alive_set(222))
    assert r["action"] == "refused" and not r["stale"]
    r = ls.acquire(d, "lab", cli(222), host=HOST, now=T0 + 600, ttl=300, alive=alive_set(222))
    assert r["stale"] and "no heartbeat for 5 min (ttl 300 s" in r["message"]


def test_partly_stale_group_is_live(tmp_path):
    d = str(tmp_path)
    ls.acquire(d, "lab", awx(105, wf=104), host=HOST, now=T0)
    ls.acquire(d, "lab", awx(106, wf=104), host=HOST, now=T0 + 400)
    r = ls.acquire(d, "lab", cli(222), host=HOST, now=T0 + 500, ttl=300, alive=alive_set(222), break_stale=True)
    assert r["action"] == "refused" and not r["stale"]
    kinds = sorted(m["stale"] for m in r["holder"]["members"])
    assert kinds == [False, True]


def test_check_mode_decides_but_never_writes(tmp_path):
    d = str(tmp_path / "leases")
    r = ls.acquire(d, "lab", cli(111), host=HOST, now=T0, check=True)
    assert r["action"] == "acquired" and not os.path.exists(d)
    ls.acquire(d, "lab", cli(111), host=HOST, now=T0, alive=alive_set(111))
    before = open(ls.lease_path(d, "lab")).read()
    r = ls.acquire(d, "lab", cli(222), host=HOST, now=T0, alive=alive_set(222), break_stale=True, check=True)
    assert r["action"] == "broken"
    assert ls.release(d, "lab", "ctl-a:222", check=True)["action"] == "not_held"
    assert ls.release(d, "lab", "ctl-a:111", check=True)["action"] == "released"
    assert open(ls.lease_path(d, "lab")).read() == before


@pytest.mark.parametrize("field,kw", [
    ("fabric", dict(fabric="../etc")), ("rollout_id", dict(rid="a b")),
])
def test_bad_names_refused_before_anything_is_written(tmp_path, field, kw):
    d = str(tmp_path / "leases")
    with pytest.raises(ls.LeaseError) as exc:
        ls.acquire(d, kw.get("fabric", "lab"), cli(1, rid=kw.get("rid", "ok")), host=HOST)
    assert field in str(exc.value) and "nothing was changed" in str(exc.value)
    assert not os.path.exists(d)


def test_holder_needs_a_pid_or_an_awx_job():
    with pytest.raises(ls.LeaseError, match="no pid and no awx_job_id"):
        ls.make_member("r", "rollout.yml", controller=HOST)


def test_corrupt_lease_file_is_an_error_naming_it(tmp_path):
    d = str(tmp_path)
    open(ls.lease_path(d, "lab"), "w").write("{not json")
    with pytest.raises(ls.LeaseError, match="not a lease file"):
        ls.acquire(d, "lab", cli(1), host=HOST)


def test_real_processes_pid_alive_and_reuse_by_start_time():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = ls.process_start(p.pid)
        assert start and ls.pid_alive(p.pid, start)
        assert not ls.pid_alive(p.pid, str(int(start) + 1))   # same pid, another process
    finally:
        p.kill()
        p.wait()
    assert not ls.pid_alive(p.pid, start)


def test_controller_pid_finds_the_nearest_ansible_playbook(tmp_path):
    # a fake "ansible-playbook" (a python script of that name) forks a worker (same command line) which
    # runs a shell which runs the "module": the module must find the fake's main pid, not the worker's
    fake = tmp_path / "ansible-playbook"
    fake.write_text("#!%s\nimport os, subprocess, sys\n"
                    "if os.fork() == 0:\n"
                    "    subprocess.run(['/bin/sh', '-c', sys.argv[1]]); os._exit(0)\n"
                    "os.wait(); print('main', os.getpid())\n" % sys.executable)
    fake.chmod(0o755)
    module = tmp_path / "module.py"
    module.write_text("import sys\nsys.path[:0] = %r\nfrom ansible_collections.netscale.multinic.plugins."
                      "module_utils.rollout import lease\nprint('found', lease.controller_pid(), flush=True)\n"
                      % (sys.path,))
    probe = "%s %s" % (sys.executable, module)
    out = subprocess.run([str(fake), probe], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "found" and out[2] == "main" and out[1] == out[3], out


def _racer(d, pid, barrier, q):
    m = ls.make_member("R%d" % pid, "rollout.yml", controller=HOST, pid=os.getpid())
    barrier.wait()
    q.put(ls.acquire(d, "lab", m, host=HOST)["action"])


@pytest.mark.parametrize("n", [2, 8])
def test_race_exactly_one_of_n_processes_wins(tmp_path, n):
    d = str(tmp_path)
    ctx = multiprocessing.get_context("fork")
    for _round in range(5):
        barrier, q = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_racer, args=(d, i, barrier, q)) for i in range(n)]
        for p in procs:
            p.start()
        actions = sorted(q.get(timeout=30) for _proc in procs)
        for p in procs:
            p.join(10)
        assert actions == ["acquired"] + ["refused"] * (n - 1)
        doc = json.load(open(ls.lease_path(d, "lab")))
        assert len(doc["members"]) == 1
        os.unlink(ls.lease_path(d, "lab"))


def _slice(d, job, barrier, q):
    barrier.wait()
    q.put(ls.acquire(d, "lab", awx(job, wf=104), host=HOST)["action"])


def test_race_slices_of_one_workflow_all_get_in(tmp_path):
    d = str(tmp_path)
    ctx = multiprocessing.get_context("fork")
    barrier, q = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_slice, args=(d, 200 + i, barrier, q)) for i in range(6)]
    for p in procs:
        p.start()
    actions = sorted(q.get(timeout=30) for _proc in procs)
    for p in procs:
        p.join(10)
    assert actions == ["acquired"] + ["joined"] * 5
    assert len(json.load(open(ls.lease_path(d, "lab")))["members"]) == 6


_OPS = st.lists(st.tuples(st.sampled_from(["acq", "rel", "brk"]), st.integers(0, 3), st.integers(0, 2)),
                max_size=25)


@settings(max_examples=60, deadline=None)
@given(ops=_OPS)
def test_property_one_group_at_a_time(tmp_path_factory, ops):
    """Whatever order jobs take, join, break and release in: the file holds members of one group only, a
    member is never silently dropped except by its own release or a consented break of a stale lease."""
    d = str(tmp_path_factory.mktemp("lease"))
    alive = set()
    held = set()
    for op, who, wf in ops:
        m = awx(300 + who, wf=wf or None) if wf else cli(300 + who)
        key = ls.member_key(m)
        if op == "rel":
            r = ls.release(d, "lab", key)
            assert (r["action"] != "not_held") == (key in held)
            held.discard(key)
            alive.discard(300 + who)
            continue
        alive.add(300 + who)
        r = ls.acquire(d, "lab", m, host=HOST, now=T0, alive=lambda p, s=None: p in alive,
                       break_stale=(op == "brk"))
        if r["action"] in ("acquired", "joined", "held", "broken"):
            if r["action"] == "broken":
                held = set()
            held.add(key)
        doc = ls.read_doc(d, "lab")
        assert set((doc or {}).get("members", {})) == held
        if doc:
            assert len(set(ls.group_key(x) for x in doc["members"].values())) == 1
