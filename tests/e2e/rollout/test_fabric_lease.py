# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One mutating job per fabric at a time (issue 27 item 4), on a live lab of its own (fabric ``mnls``: two
racks of two 2-NIC hosts, runs beside other labs). Every holder here is a REAL job, never a lease written by
the test: the playbooks' refusal is tested against what the playbooks themselves took.

- two concurrent rollouts: rollout A runs (started in the background, the test waits until A's journal
  records it configuring a ToR); rollout B is refused in its preflight, naming A (rollout id, playbook,
  controller, pid, since), with 0 changed on every host and nothing written (no journal, no report of B); a
  rollback of A started while A runs is refused the same way; A is then cancelled (SIGTERM, as AWX cancels)
  and its lease is gone (released by the callback).
- SIGKILL: rollout C is killed (its whole process group, SIGKILL) once it holds the lease and opened its
  journal; the next rollout is refused naming C as stale ("pid ... gone on <host>"), 0 changed; the fix the
  refusal names - a rollback of C with ``-e rollout_break_lease=true`` - runs to the end, C's journal records
  ``lease_broken`` (by rollback.yml, naming C), the history file says ``broken``, and no lease is left.
- AWX: the workflow "multinic rollout" run as AWX runs it (labkit.awx_jobs; canary job, approval, fleet job
  in 2 slices in parallel): every job succeeds, the second fleet slice JOINED the lease its sibling held
  (history), and the lease is free at the end.

The refused runs stop in the preflight, so they cost seconds (~10 s each here); the holders are real
rollouts, cancelled or killed early. The AWX workflow is a whole rollout (canary, fleet in 2 slices): ~8 min
on this shared, loaded machine.
Needs root; fails (never skips) without. Run under the lab lock: flock /work/lab.lock pytest ...
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml

from labkit.lab_vars import link_group_vars

pytestmark = pytest.mark.e2e
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VENV_BIN = os.path.join(REPO, ".venv", "bin")
FABRIC = "mnls"
STATE = "/run/netscale-multinic/lab/%s/state.json" % FABRIC


def _host(rack, n):
    return {"id": n, "name": "%s-r%d-h%d" % (FABRIC, rack, n), "nics": 2, "task_slots": 1}


TOPOLOGY = {
    "plugin": "netscale.multinic.fabric",
    "name": FABRIC,
    "region": {"name": FABRIC, "id": 1},
    "capacity": {"buildings": 1, "zones": 1, "racks": 4, "hosts": 4, "nics": 8, "task_slots": 2, "spines": 2},
    "pools": {"ipv6": "fd00:10::/48", "ipv4": "198.18.0.0/16",
              "infrastructure": {"ipv6": "fd00:ff::/64", "ipv4": "198.19.0.0/24"}},
    "asn": {"spine": 4200000001, "tor": 4200001001, "host": 4201000001},
    "buildings": [{"id": 1, "name": FABRIC + "-b1", "zones": [{
        "id": 1, "name": FABRIC + "-az1", "spines": [{"id": 1, "name": FABRIC + "-spine1"}],
        "racks": [{"id": r, "name": "%s-r%d" % (FABRIC, r), "hosts": [_host(r, 1), _host(r, 2)]} for r in (1, 2)],
    }]}],
    "lab": {"storage": {"name": FABRIC + "-storage", "ipv6": "fd00:5::/64", "ipv4": "198.19.5.0/24"}},
}
TIMES = {}


def env():
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + ":" + e.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    e["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    e["ANSIBLE_NOCOLOR"] = "1"
    e["ANSIBLE_VAULT_PASSWORD_FILE"] = os.path.join(REPO, ".cache", "lab-vault-password")
    e.pop("NETSCALE_LAB_FAIL_AT", None)
    e.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    return e


def argv(*args):
    return [os.path.join(VENV_BIN, "ansible-playbook")] + list(args)


def playbook(*args, check=True):
    p = subprocess.run(argv(*args), cwd=REPO, env=env(), capture_output=True, text=True, timeout=900, check=False)
    if check and p.returncode != 0:
        raise AssertionError("ansible-playbook %s rc=%d\n%s\n%s" % (" ".join(args), p.returncode, p.stdout[-6000:],
                                                                    p.stderr[-2000:]))
    return p


def recaps(stdout):
    out = {}
    for line in stdout.split("PLAY RECAP", 1)[-1].splitlines():
        if "ok=" in line and ":" in line:
            name, rest = line.split(":", 1)
            out[name.strip()] = dict(kv.split("=") for kv in rest.split())
    return out


def extra(work, **kw):
    ev = {"rollout_report_root": str(work / "reports"), "rollout_intended_dir": str(work / "intended"),
          "tor_bgp_intended_dir": str(work / "intended"), "host_datapath_build_dir": str(work / "build"),
          "rollout_waves": ["100%"]}
    ev.update(kw)
    return json.dumps(ev)


def lease_file(work):
    return str(work / "reports" / "journal" / "leases" / ("%s.json" % FABRIC))


def history(work):
    p = str(work / "reports" / "journal" / "leases" / ("%s.history.jsonl" % FABRIC))
    with open(p) as f:
        return [json.loads(x) for x in f]


def read_lease(work):
    try:
        with open(lease_file(work)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def wait_for(what, cond, proc, timeout=300):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = cond()
        if got:
            return got
        if proc.poll() is not None:
            raise AssertionError("%s: the holder ended first (rc %s):\n%s" % (what, proc.returncode,
                                                                              proc.stdout.read()[-6000:]))
        time.sleep(0.5)
    raise AssertionError("%s: not within %d s" % (what, timeout))


def journal_events(work, rollout_id):
    d = work / "reports" / "journal" / rollout_id
    out = []
    if d.is_dir():
        for f in sorted(d.glob("*.json")):
            out.extend(json.loads(f.read_text()).get("events", []))
    return out


def start(work, *args):
    return subprocess.Popen(argv("-i", str(work / "fabric.yml"), *args), cwd=REPO, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def assert_refused_unchanged(run, must_name):
    assert run.returncode != 0, run.stdout[-4000:]
    text = run.stdout + run.stderr
    assert "another job holds this fabric's lease" in text, text[-4000:]
    for part in must_name:
        assert part in text, (part, text[-4000:])
    recap = recaps(run.stdout)
    assert recap and all(r["changed"] == "0" for r in recap.values()), recap
    # refused in the preflight: only the controller ran, no device was reached
    assert set(recap) == {"localhost"}, recap


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the fabric lease e2e test needs root (namespaces, FRR, systemd lab hosts)")
    d = tmp_path_factory.mktemp("lease")
    link_group_vars(d, monitoring=False)   # nothing here reads the lab's monitoring
    (d / "fabric.yml").write_text(yaml.safe_dump(TOPOLOGY))
    t0 = time.monotonic()
    procs = []
    try:
        playbook("-i", str(d / "fabric.yml"), "playbooks/lab.yml", "-e", "lab_topology=%s" % (d / "fabric.yml"))
        TIMES["lab built"] = round(time.monotonic() - t0, 1)
        yield d, procs
    finally:
        for p in procs:   # holders this test started, by their process group (their pid = group id)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        print("fabric lease e2e phases (s): %s" % json.dumps(TIMES))
        playbook("-i", str(d / "fabric.yml"), "playbooks/lab.yml", "-e", "lab_topology=%s" % (d / "fabric.yml"),
                 "-e", "lab_state=absent", check=False)
        assert not os.path.exists(os.path.dirname(STATE))


def test_second_rollout_and_a_rollback_refused_while_a_rollout_runs(work):
    d, procs = work
    t0 = time.monotonic()
    a = start(d, "playbooks/rollout.yml", "-e", extra(d))
    procs.append(a)
    lease = wait_for("A holds the lease", lambda: read_lease(d), a)
    rid = lease["rollout_id"]
    assert list(lease["members"].values())[0]["pid"] == a.pid, lease
    # B starts while A is changing the fabric: A's journal records a ToR being configured
    wait_for("A configures a ToR", lambda: any(e.get("type") == "tor" for e in journal_events(d, rid)), a)
    TIMES["A changing"] = round(time.monotonic() - t0, 1)
    journals_before = sorted(os.listdir(str(d / "reports" / "journal")))
    b = playbook("-i", str(d / "fabric.yml"), "playbooks/rollout.yml", "-e", extra(d), check=False)
    TIMES["B refused"] = round(time.monotonic() - t0, 1)
    assert a.poll() is None, "A ended before B's refusal was checked: the test proves nothing"
    assert_refused_unchanged(b, ["rollout %s" % rid, "playbook rollout.yml", "controller %s" % socket.gethostname(),
                                 "pid %d" % a.pid, "since ", "pid %d running" % a.pid, "Wait until it ends"])
    assert sorted(os.listdir(str(d / "reports" / "journal"))) == journals_before   # B wrote no journal

    rb = playbook("-i", str(d / "fabric.yml"), "playbooks/rollback.yml", "-e", extra(d, rollout_id=rid), check=False)
    TIMES["rollback refused"] = round(time.monotonic() - t0, 1)
    assert a.poll() is None, "A ended before the rollback's refusal was checked"
    assert_refused_unchanged(rb, ["rollout %s" % rid, "pid %d" % a.pid])
    assert not any(e.get("action") == "rollback" for e in journal_events(d, rid))

    # A is cancelled as AWX cancels a job (SIGTERM to ansible-playbook): a cancel is an end, not a kill - the
    # callback gives the lease back (the full run to the end costs ~7 min here; release at a normal end is
    # tested through ansible-playbook in tests/integration/test_fabric_lease_playbook.py)
    a.send_signal(signal.SIGTERM)
    out = a.communicate(timeout=300)[0]
    TIMES["A cancelled"] = round(time.monotonic() - t0, 1)
    assert a.returncode != 0, out[-6000:]
    assert read_lease(d) is None, "A's lease is left after A was cancelled:\n" + out[-4000:]
    last_two = [(h["event"], h.get("reason")) for h in history(d)][-2:]
    assert last_two == [("acquired", None), ("released", "cancelled by SIGTERM")], last_two


def test_sigkilled_holder_is_stale_refused_then_broken_with_consent(work):
    d, procs = work
    t0 = time.monotonic()
    c = start(d, "playbooks/rollout.yml", "-e", extra(d))
    procs.append(c)
    lease = wait_for("C holds the lease", lambda: read_lease(d), c)
    rid_c = lease["rollout_id"]
    wait_for("C opened its journal", lambda: any(e.get("type") == "open" for e in journal_events(d, rid_c)), c)
    os.killpg(c.pid, signal.SIGKILL)   # the controller and its workers, as an OOM kill or a lost node
    c.wait()
    TIMES["C killed"] = round(time.monotonic() - t0, 1)
    assert read_lease(d)["rollout_id"] == rid_c, "the lease did not outlive the SIGKILL"

    r = playbook("-i", str(d / "fabric.yml"), "playbooks/rollout.yml", "-e", extra(d), check=False)
    assert_refused_unchanged(r, ["rollout %s" % rid_c, "pid %d gone on %s" % (c.pid, socket.gethostname()),
                                 "looks dead", "-e rollout_break_lease=true", "rollback.yml -e rollout_id=%s" % rid_c])
    assert read_lease(d)["rollout_id"] == rid_c   # the refused run broke nothing

    # the fix the refusal names: undo what C did, with consent to break its stale lease (a rollback of what C
    # recorded before it died is cheap; resuming it would cost a whole rollout)
    ok = playbook("-i", str(d / "fabric.yml"), "playbooks/rollback.yml",
                  "-e", extra(d, rollout_id=rid_c, rollout_break_lease=True))
    TIMES["consented rollback"] = round(time.monotonic() - t0, 1)
    assert "STALE lease broken with consent" in ok.stdout
    broken = [h for h in history(d) if h["event"] == "broken"]
    assert broken and "pid %d gone" % c.pid in broken[-1]["previous"], history(d)
    assert "playbook rollback.yml" in broken[-1]["holder"]
    evs = [e for e in journal_events(d, rid_c) if e.get("kind") == "lease_broken"]
    assert len(evs) == 1 and evs[0]["previous_rollout_id"] == rid_c and evs[0]["playbook"] == "rollback.yml", evs
    assert any(e.get("kind") == "rollback_finished" for e in journal_events(d, rid_c))
    assert read_lease(d) is None


def test_awx_workflow_slices_share_the_lease(work):
    d, _procs = work
    sys.path.insert(0, REPO)
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "labkit.awx_jobs", "--inventory-source", str(d / "fabric.yml"), "--work",
         str(d / "awx"), "--site-vars", json.dumps({"awx_fleet_slices": 2, "awx_waves": ["100%"]}),
         "--vault-password-file", os.path.join(REPO, ".cache", "lab-vault-password"),
         "--extra-vars", extra(d), "workflow", "multinic rollout"],
        cwd=REPO, env=env(), capture_output=True, text=True, timeout=900, check=False)
    TIMES["AWX workflow"] = round(time.monotonic() - t0, 1)
    out = json.loads(p.stdout)
    fleet = [n for n in out["nodes"] if "jobs" in n][-1]["jobs"]
    assert out["ok"] and len(fleet) == 2 and all(j["status"] == "successful" for j in fleet), \
        json.dumps(out, indent=1)[-6000:] + p.stderr[-3000:]
    wf = "awx-wf-%s" % out["workflow_job_id"]
    mine = [h for h in history(d) if h["group"] == wf]
    slices = set("awx-job-%s" % j["job_id"] for j in fleet)
    events = dict((h["member"], h["event"]) for h in mine if h["member"] in slices and h["event"] != "released")
    # both slices held it: one took it, the other JOINED while its sibling held it (ran in parallel)
    assert sorted(events.values()) == ["acquired", "joined"], mine
    assert read_lease(d) is None
