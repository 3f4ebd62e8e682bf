# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rollout benchmark on a lab fabric: prints figures, asserts nothing.

1. rollout wall time (playbooks/rollout.yml, canary then fleet waves), per wave from the report;
2. a no-change re-run: wall time and the changed count of its PLAY RECAP (target 0);
3. controller overhead: the re-run's wall time minus the wall time of its measuring tasks (gates, share
   probe and its line-rate set-up, timed per task with ansible.posix.profile_tasks), against a no-op
   playbook (ansible.builtin.ping) that mirrors the rollout: the same plays and batches (localhost, ToRs
   serial 1, spines, GPU hosts in the same waves) with as many tasks per host as the re-run executed
   (PLAY RECAP ok, minus the measuring tasks), over the same nsenter connections (target <= 1.5x).

  python bench/rollout_overhead.py --fabric tests/e2e/rollout/fabric.yml [--fresh] [-e k=v ...]

--fresh tears the fabric's lab down and builds it again first (never use it on a lab someone else uses);
without it the lab must be built already (ansible-playbook playbooks/lab.yml -e lab_topology=FABRIC).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)
# profile_tasks: "<role> : <task name> ---- 1.23s"
PROFILE = re.compile(r"^(?:\S+ : )?(.+?) -{2,} (\d+\.\d+)s$", re.M)
MEASURING = ("Gate ", "Share probe", "Lab line rate")
MEASURING_PER_HOST_WAVE = 9   # 5 gates + share probe + line rate on/off + attempt bookkeeping, per host and wave


def playbook(args, inventory, extra, profile=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=os.path.join(REPO, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    if profile:
        env.update(ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks",
                   PROFILE_TASKS_TASK_OUTPUT_LIMIT="all", PROFILE_TASKS_SORT_ORDER="none")
    argv = ["ansible-playbook", "-i", inventory] + args
    for e in extra:
        argv += ["-e", e]
    t0 = time.monotonic()
    r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    recap = dict((m.group(1), {"ok": int(m.group(2)), "changed": int(m.group(3)), "failed": int(m.group(5)),
                               "skipped": int(m.group(6))}) for m in RECAP.finditer(r.stdout))
    return r, wall, recap


def latest_report(root):
    files = sorted(glob.glob(os.path.join(root, "*", "report.json")))
    with open(files[-1]) as f:
        return json.load(f)


def measuring_seconds(stdout):
    """Wall time of the measuring tasks, from profile_tasks' per-task list at the end of the run."""
    tail = stdout[stdout.rfind("PLAY RECAP"):]
    n, s = 0, 0.0
    for m in PROFILE.finditer(tail):
        if m.group(1).startswith(MEASURING):
            n += 1
            s += float(m.group(2))
    return s, n


def noop_playbook(path, recap, report):
    """A ping-only playbook with the rollout's plays, batches and per-host task counts."""
    waves = [w["hosts"] for w in report.get("waves") or [] if w.get("hosts")]
    gpu = [h for w in waves for h in w]
    tors = [t["name"] for t in report.get("tors") or []]
    spines = [h for h in recap if h not in gpu and h not in tors and h != "localhost"]

    def count(hosts, minus=0):
        return max([recap[h]["ok"] - minus for h in hosts if h in recap] or [0])

    n_gpu = max([(recap[h]["ok"] - MEASURING_PER_HOST_WAVE) for h in gpu if h in recap] + [1])
    plays = [("localhost", None, count(["localhost"]), True), (":".join(tors), 1, count(tors), False),
             (":".join(spines), None, count(spines), False), (":".join(gpu), [len(w) for w in waves], n_gpu, False)]
    with open(path, "w") as f:
        for hosts, serial, n, local in plays:
            if not hosts or n <= 0:
                continue
            f.write("- hosts: %s\n  gather_facts: false\n" % hosts)
            if local:
                f.write("  connection: local\n")
            if serial is not None:
                f.write("  serial: %s\n" % json.dumps(serial))
            f.write("  tasks:\n")
            for i in range(n):
                f.write("    - name: noop %d\n      ansible.builtin.ping:\n" % i)
    return {"localhost": count(["localhost"]), "tor": count(tors), "spine": count(spines), "gpu": n_gpu,
            "waves": [len(w) for w in waves]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fabric", required=True, help="lab fabric topology (also the inventory)")
    ap.add_argument("--fresh", action="store_true", help="tear down and build this fabric's lab first")
    ap.add_argument("-e", dest="extra", action="append", default=[])
    a = ap.parse_args()
    fabric = os.path.abspath(a.fabric)
    work = tempfile.mkdtemp(prefix="mnr-bench-")
    root = os.path.join(work, "reports")
    extra = ["rollout_report_root=%s" % root, "rollout_intended_dir=%s/intended" % work,
             "tor_bgp_intended_dir=%s/intended" % work, "host_datapath_build_dir=%s/build" % work] + a.extra
    lab = os.path.join(REPO, "playbooks", "lab.yml")
    if a.fresh:
        playbook([lab], fabric, ["lab_topology=%s" % fabric, "lab_state=absent"])
        r, wall, recap = playbook([lab], fabric, ["lab_topology=%s" % fabric])
        print("lab build: %.1f s, rc %d" % (wall, r.returncode))
    pb = os.path.join(REPO, "playbooks", "rollout.yml")
    print("extra vars: %s" % " ".join(a.extra))
    r, wall, recap = playbook([pb], fabric, extra)
    rep = latest_report(root)
    print("rollout: %.1f s wall, status %s, rc %d, changed tasks %d" % (
        wall, rep["run"].get("status"), r.returncode, sum(v["changed"] for v in recap.values())))
    for t in rep.get("tors") or []:
        print("  ToR  %-14s changed %s" % (t["name"], t.get("changed")))
    for w in rep.get("waves") or []:
        fields = (w["name"], w.get("status"), w.get("seconds"), ", ".join(w.get("hosts") or []))
        print("  wave %-14s %-12s %6s s  hosts %s" % fields)
    r, wall, recap = playbook([pb], fabric, extra, profile=True)
    rep = latest_report(root)
    changed = sum(v["changed"] for v in recap.values())
    meas, nmeas = measuring_seconds(r.stdout)
    print("no-change re-run: %.1f s wall, changed %d (%s), status %s, rc %d" % (
        wall, changed, ", ".join("%s=%d" % (h, v["changed"]) for h, v in recap.items() if v["changed"]) or "none",
        rep["run"].get("status"), r.returncode))
    print("  measuring tasks (gates, share probe, line rate): %d task runs, %.1f s wall" % (nmeas, meas))
    noop = os.path.join(work, "noop.yml")
    shape = noop_playbook(noop, recap, rep)
    r2, wall2, recap2 = playbook([noop], fabric, [])
    steps = shape["localhost"] + shape["tor"] * max(1, len(rep.get("tors") or [])) + shape["spine"] + \
        shape["gpu"] * max(1, len(shape["waves"]))
    ctl = wall - meas
    print("controller overhead: rollout re-run without measuring %.1f s vs no-op (ping) with the same plays, "
          "batches %s and tasks per host (localhost %d, ToR %d, spine %d, GPU host %d) %.1f s (rc %d): "
          "ratio %.2fx (target <= 1.5x); per task step %.3f s vs %.3f s"
          % (ctl, shape["waves"], shape["localhost"], shape["tor"], shape["spine"], shape["gpu"], wall2,
             r2.returncode, ctl / wall2 if wall2 else 0, ctl / steps, wall2 / steps))
    print("work dir: %s" % work)


if __name__ == "__main__":
    main()
