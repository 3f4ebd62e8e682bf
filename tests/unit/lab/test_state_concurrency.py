# -*- coding: utf-8 -*-
"""The lab state file under concurrent writers: lab operations of several hosts run in parallel
forks on the controller (e.g. the health gates' share probes) and each records what it starts.
No writer may fail on another's temporary file, and no record may be lost."""
import json
import multiprocessing
import os

from ansible_collections.netscale.multinic.plugins.module_utils.lab import state as lab_state

WRITERS = 4
RECORDS = 40


def _writer(root, n):
    for i in range(RECORDS):
        st = lab_state.State("conc", root, lab_state.load("conc", root))   # attach as lab operations do
        st.add(type="process", name="w%d-%d" % (n, i), pid=100000 + n * 1000 + i)


def test_parallel_writers_keep_every_record(tmp_path):
    root = str(tmp_path)
    fresh = lab_state.State("conc", root)
    fresh.set(status="ready")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(root, n)) for n in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    data = lab_state.load("conc", root)
    names = sorted(r["name"] for r in data["resources"])
    assert names == sorted("w%d-%d" % (n, i) for n in range(WRITERS) for i in range(RECORDS))
    assert data["status"] == "ready"
    left = sorted(os.listdir(os.path.join(root, "conc")))
    assert left == ["state.json", "state.lock"], left   # no temporary file left behind
    with open(os.path.join(root, "conc", "state.json")) as f:
        json.load(f)


def test_fresh_state_does_not_merge_an_old_file(tmp_path):
    root = str(tmp_path)
    old = lab_state.State("conc", root)
    old.add(type="netns", name="from-an-earlier-lab")
    new = lab_state.State("conc", root)   # a new build starts from nothing
    new.set(status="building")
    assert lab_state.load("conc", root)["resources"] == []


def test_remove_file_removes_lock_and_temporaries(tmp_path):
    root = str(tmp_path)
    st = lab_state.State("conc", root)
    st.set(status="ready")
    open(os.path.join(root, "conc", ".state.abc.tmp"), "w").close()
    st.remove_file()
    assert os.listdir(os.path.join(root, "conc")) == []
