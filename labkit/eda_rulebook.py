# -*- coding: utf-8 -*-
"""The collection's remediation rulebook (extensions/eda/rulebooks/remediate.yml) as one real ansible-rulebook
process for a test or a bench: started in its own session with a variables file and an inventory copied into a
work directory, stopped by its process group (its PID), also when the caller fails.

Used by tests/e2e/eda (synthetic cases, stand-in or real playbooks) and tests/e2e/remediate (the real drain and
undrain on the stack lab). ``start`` is a generator: ``yield from start(...)`` in a pytest fixture, or drive it
with ``contextlib.contextmanager``.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal  # noqa: E402

BIN = os.path.join(ROOT, ".venv", "bin")
RULEBOOK = shutil.which("ansible-rulebook", path=BIN + os.pathsep + os.environ.get("PATH", ""))
JAVA = shutil.which("java")
STARTUP_TIMEOUT = 120.0
RUN_TIMEOUT = 90.0


def case_line(cid, kind="nic", host="h1", nic=1, state="open", zone="az1", repeats=0, **scope):
    """One line of the correlator's case file (docs/operations.md), as the case_file source reads it."""
    sc = {"kind": kind, "host": host, "nic": nic, "tor": None, "spine": None, "zone": zone}
    sc.update(scope)
    return json.dumps({"case": {"id": cid, "state": state, "scope": sc, "root_cause": "loss", "detections": 2,
                                "start": time.time(), "end": None, "repeats": repeats}}) + "\n"


class Rulebook(object):
    def __init__(self, work):
        self.work = work
        self.cases = os.path.join(work, "cases.jsonl")
        self.state = os.path.join(work, "state")
        self.records = os.path.join(work, "records")
        self.reports = os.path.join(work, "reports")   # netscale_eda_report_root: the fabric's drain journal and lease
        self.log = os.path.join(work, "rulebook.log")
        self.proc = None

    def write(self, *lines):
        with open(self.cases, "a") as handle:
            handle.write("".join(lines))

    def journal(self):
        return eda_journal.read(os.path.join(self.state, eda_journal.JOURNAL))

    def decisions(self, case):
        return [r for r in self.journal() if r.get("type") == "decision" and r.get("case") == case]

    def runs(self, case, request_id=actions.request_id):
        """The journal's runs of a case's request (``request_id``: actions.request_id, undrain_request_id or
        snapshot_request_id)."""
        return eda_journal.runs(self.journal()).get(request_id(case), {}).get("runs", [])

    def undrain_runs(self, case):
        return self.runs(case, actions.undrain_request_id)

    def recorded(self, case, kind=""):
        """What the stand-in playbooks recorded for a case (``kind``: "" for drains, "undrain" or "snapshot"; a "/" of
        the case id is "+" in the file name)."""
        out = []
        name = "%s%s-*.json" % (kind + "-" if kind else "", case.replace("/", "+"))
        for path in sorted(glob.glob(os.path.join(self.records, name))):
            with open(path) as handle:
                out.append(json.load(handle))
        return out

    def set_mode(self, mode):
        with open(os.path.join(self.state, eda_journal.MODE), "w") as handle:
            handle.write(mode + "\n")
        self.wait(lambda: any(r.get("type") == "mode" and r.get("mode") == mode for r in self.journal()),
                  "the source to switch to mode %s" % mode, 15)

    def wait(self, predicate, what, timeout=RUN_TIMEOUT):
        end = time.time() + timeout
        while time.time() < end:
            if predicate():
                return
            if self.proc.poll() is not None:
                raise AssertionError("ansible-rulebook exited (%s) while waiting for %s:\n%s" % (
                    self.proc.returncode, what, self.tail_log()))
            time.sleep(0.25)
        raise AssertionError("timed out after %g s waiting for %s; rulebook log:\n%s" % (
            timeout, what, self.tail_log()))

    def tail_log(self, n=60):
        with open(self.log, errors="replace") as handle:
            return "".join(handle.readlines()[-n:])


def start(work, variables, inventory=None, inventory_dir=None, env_extra=None):
    """Start ansible-rulebook in ``work`` (a new, empty directory) and yield its :class:`Rulebook` once the case_file
    source tails; stop it (SIGTERM to its session, SIGKILL after 20 s) when the generator closes.

    ``variables`` are merged over the defaults below (mode report, the report root and state under ``work``).
    ``inventory``: a file copied as inventory.yml; ``inventory_dir``: a directory copied whole (a fabric file and its
    group_vars: ansible-rulebook gives the playbooks a copy of what -i names); neither: localhost only."""
    if not RULEBOOK or not JAVA:
        # scripts/setup.sh installs both (requirements-eda.txt, openjdk-17-jre-headless): a missing one is a broken
        # set-up, which fails rather than skipping
        raise RuntimeError("ansible-rulebook (%s) or java (%s) missing: run scripts/setup.sh" % (RULEBOOK, JAVA))
    rb = Rulebook(work)
    os.makedirs(rb.records)
    open(rb.cases, "w").close()
    merged = dict({"netscale_eda_case_file": rb.cases, "netscale_eda_state_dir": rb.state,
                   "netscale_eda_mode": "report", "netscale_eda_report_root": rb.reports}, **variables)
    with open(os.path.join(work, "vars.yml"), "w") as handle:
        json.dump(merged, handle)
    if inventory_dir:
        shutil.copytree(inventory_dir, os.path.join(work, "inventory"))
        inv = "inventory"
    elif inventory:
        shutil.copy(inventory, os.path.join(work, "inventory.yml"))
        inv = "inventory.yml"
    else:
        inv = "inventory.yml"
        with open(os.path.join(work, inv), "w") as handle:
            handle.write("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n")
    env = dict(os.environ)
    env.update(PATH=BIN + os.pathsep + env.get("PATH", ""), ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               PYTHONUNBUFFERED="1", **(env_extra or {}))
    t0 = time.time()
    with open(rb.log, "w") as log:
        rb.proc = subprocess.Popen(
            [RULEBOOK, "-r", "netscale.multinic.remediate", "--vars", "vars.yml", "-i", inv, "-v"],
            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        rb.wait(lambda: os.path.exists(os.path.join(rb.state, eda_journal.STATUS)), "the case_file source to start",
                STARTUP_TIMEOUT)
        with open(os.path.join(rb.state, eda_journal.STATUS)) as handle:
            status = json.load(handle)
        assert status["mode"] == merged["netscale_eda_mode"] and status["case_file"] == rb.cases, status
        print("ansible-rulebook: source tailing %.1f s after start" % (time.time() - t0))
        yield rb
    finally:
        stop(rb)


def stop(rb):
    if rb.proc is None or rb.proc.poll() is not None:
        return
    os.killpg(rb.proc.pid, signal.SIGTERM)  # its own session: the rulebook and the playbooks it started
    try:
        rb.proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(rb.proc.pid, signal.SIGKILL)
        rb.proc.wait(10)
