"""The fabric lease through Ansible itself (no lab): playbooks/tasks/fabric_lease_take.yml and _release.yml
in a small playbook on localhost, with the netscale.multinic.fabric_lease callback on and off.

- a play failing after the lease was taken: the release task never runs, the callback releases at the end;
- the same with the callback off (a controller that died has no callback either): the lease stays, the next
  run is refused naming the stale holder, 0 changed; with -e rollout_break_lease=true it runs, journaled;
- a live holder: refused (0 changed); in check mode only a warning, nothing taken.
"""
import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="default", PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
ENV.pop("ANSIBLE_CALLBACKS_ENABLED", None)
TASKS = os.path.join(ROOT, "playbooks", "tasks")


def _setup(tmp_path):
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"tfab-r1-h1": {"multinic_fabric_name": "tfab"}}}}))
    pb = tmp_path / "job.yml"
    pb.write_text(yaml.safe_dump([
        {"name": "take", "hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
            {"name": "Lease", "ansible.builtin.import_tasks": os.path.join(TASKS, "fabric_lease_take.yml"),
             "vars": {"fabric_lease_playbook": "job.yml", "fabric_lease_rollout_id": "{{ job_id }}",
                      "fabric_lease_journal_root": str(tmp_path / "journal"), "fabric_lease_journal_job": "run"}}]},
        {"name": "work", "hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
            {"name": "Fail mid-way", "ansible.builtin.fail": {"msg": "boom"}, "when": "fail_mid | default(false) | bool"},
            {"name": "Work a while", "ansible.builtin.command": "sleep 60", "changed_when": False,
             "when": "work_long | default(false) | bool"}]},
        {"name": "release", "hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
            {"name": "Release", "ansible.builtin.import_tasks": os.path.join(TASKS, "fabric_lease_release.yml")}]},
    ]))
    return inv, pb


def _run(inv, pb, job_id, *extra, callback=True):
    env = dict(ENV)
    if not callback:
        env["ANSIBLE_CALLBACKS_ENABLED"] = "netscale.multinic.rollout_progress"
    return subprocess.run(["ansible-playbook", "-i", str(inv), str(pb), "-e", "job_id=%s" % job_id] + list(extra),
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)


def _lease(tmp_path):
    p = tmp_path / "journal" / "leases" / "tfab.json"
    return json.loads(p.read_text()) if p.exists() else None


def _history(tmp_path):
    return [json.loads(x) for x in (tmp_path / "journal" / "leases" / "tfab.history.jsonl").read_text().splitlines()]


def _recap_changed(stdout):
    tail = stdout.split("PLAY RECAP", 1)[1]
    return sum(int(w.split("=")[1]) for w in tail.split() if w.startswith("changed="))


def test_success_takes_and_releases(tmp_path):
    inv, pb = _setup(tmp_path)
    r = _run(inv, pb, "J1")
    assert r.returncode == 0, r.stdout[-3000:]
    assert _lease(tmp_path) is None
    assert [h["event"] for h in _history(tmp_path)] == ["acquired", "released"]
    assert _history(tmp_path)[-1]["reason"] == "finished"


def test_failed_play_released_by_the_callback(tmp_path):
    inv, pb = _setup(tmp_path)
    r = _run(inv, pb, "J1", "-e", "fail_mid=true")
    assert r.returncode != 0 and "boom" in r.stdout
    assert "fabric lease tfab: released" in r.stdout and "playbook ended, failed" in r.stdout
    assert _lease(tmp_path) is None
    assert _history(tmp_path)[-1]["reason"] == "playbook ended, failed"


def test_cancel_sigterm_releases(tmp_path):
    """An AWX cancel (SIGTERM to ansible-playbook) ends the job: the callback releases before Ansible stops."""
    import signal
    import time
    inv, pb = _setup(tmp_path)
    p = subprocess.Popen(["ansible-playbook", "-i", str(inv), str(pb), "-e", "job_id=J9", "-e", "work_long=true"],
                         cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        t0 = time.monotonic()
        while _lease(tmp_path) is None and time.monotonic() - t0 < 120 and p.poll() is None:
            time.sleep(0.2)
        assert _lease(tmp_path) is not None, "the job never took the lease"
        time.sleep(1)
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=60)[0]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0
    assert _lease(tmp_path) is None, out[-3000:]
    assert _history(tmp_path)[-1]["reason"] == "cancelled by SIGTERM"


def test_without_callback_a_failed_job_is_stale_refused_then_broken_with_consent(tmp_path):
    inv, pb = _setup(tmp_path)
    r = _run(inv, pb, "J1", "-e", "fail_mid=true", callback=False)
    assert r.returncode != 0
    held = _lease(tmp_path)
    assert held and held["rollout_id"] == "J1"
    pid = list(held["members"].values())[0]["pid"]
    r = _run(inv, pb, "J2")
    assert r.returncode != 0 and _recap_changed(r.stdout) == 0
    assert "rollout J1, playbook job.yml" in r.stdout and "pid %d gone on" % pid in r.stdout
    assert "-e rollout_break_lease=true" in r.stdout
    assert _lease(tmp_path)["rollout_id"] == "J1"
    r = _run(inv, pb, "J2", "-e", "rollout_break_lease=true")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "STALE lease broken with consent" in r.stdout
    assert _lease(tmp_path) is None
    events = json.loads((tmp_path / "journal" / "J2" / "run.json").read_text())["events"]
    assert [e["kind"] for e in events] == ["lease_broken"] and events[0]["previous_rollout_id"] == "J1"
    assert [h["event"] for h in _history(tmp_path)] == ["acquired", "broken", "released"]


def test_live_holder_refused_and_check_mode_only_warns(tmp_path):
    inv, pb = _setup(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        sys.path.insert(0, os.path.join(ROOT, ".build"))
        from ansible_collections.netscale.multinic.plugins.module_utils.rollout import lease as ls
        ls.acquire(str(tmp_path / "journal" / "leases"), "tfab", ls.make_member("HOLD", "rollout.yml", pid=holder.pid))
        before = _lease(tmp_path)
        r = _run(inv, pb, "J3", "-e", "rollout_break_lease=true")
        assert r.returncode != 0 and _recap_changed(r.stdout) == 0
        assert "rollout HOLD" in r.stdout and "pid %d running" % holder.pid in r.stdout
        assert "breaks only a stale lease" in r.stdout
        r = _run(inv, pb, "J3", "--check")
        assert r.returncode == 0 and "a real run would be refused" in (r.stdout + r.stderr)
        assert _lease(tmp_path) == before
    finally:
        holder.kill()
        holder.wait()
