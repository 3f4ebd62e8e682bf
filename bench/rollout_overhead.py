# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rollout benchmark on a built lab: prints figures, asserts nothing.

1. rollout wall time (playbooks/rollout.yml, canary then fleet), per wave from the report;
2. a no-change re-run: wall time and the changed count of the PLAY RECAP (target 0);
3. controller overhead per host per task: the re-run's wall time minus the time its gates spent
   measuring (from the report), divided by the tasks it ran per host, against a no-op playbook
   (ansible.builtin.ping) with the same number of tasks on the same hosts and connections (target <= 1.5x).

  python bench/rollout_overhead.py --inventory /tmp/mnr-lab/fabric.yml [-e k=v ...]
Build the lab first: ansible-playbook -i FABRIC playbooks/lab.yml -e lab_topology=FABRIC
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


def playbook(args, inventory, extra, report_root=None):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               PATH=os.path.join(REPO, ".venv", "bin") + os.pathsep + os.environ["PATH"])
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


def gate_seconds(report):
    return sum(g.get("seconds") or 0 for w in report.get("waves") or [] for g in w.get("gates") or []) + \
        sum(g.get("seconds") or 0 for t in report.get("tors") or [] for g in t.get("gates") or [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inventory", required=True)
    ap.add_argument("-e", dest="extra", action="append", default=[])
    ap.add_argument("--skip-first", action="store_true", help="only the re-run and the no-op comparison")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mnr-bench-")
    root = os.path.join(work, "reports")
    extra = ["rollout_report_root=%s" % root, "rollout_intended_dir=%s/intended" % work,
             "tor_bgp_intended_dir=%s/intended" % work, "host_datapath_build_dir=%s/build" % work] + a.extra
    pb = os.path.join(REPO, "playbooks", "rollout.yml")
    if not a.skip_first:
        r, wall, recap = playbook([pb], a.inventory, extra)
        rep = latest_report(root)
        print("rollout: %.1f s wall, status %s, rc %d" % (wall, rep["run"].get("status"), r.returncode))
        for w in rep.get("waves") or []:
            hosts = ", ".join(w.get("hosts") or [])
            print("  wave %-14s %-12s %5s s  hosts %s" % (w["name"], w.get("status"), w.get("seconds"), hosts))
        print("  changed tasks: %d" % sum(v["changed"] for v in recap.values()))
    r, wall, recap = playbook([pb], a.inventory, extra)
    rep = latest_report(root)
    changed = sum(v["changed"] for v in recap.values())
    gs = gate_seconds(rep)
    print("no-change re-run: %.1f s wall, changed %d, status %s, gates measuring %.1f s" % (
        wall, changed, rep["run"].get("status"), gs))
    hosts = [h for h in recap if h != "localhost"]
    tasks = max(recap[h]["ok"] + recap[h]["changed"] + recap[h]["skipped"] for h in hosts) if hosts else 0
    noop = os.path.join(work, "noop.yml")
    with open(noop, "w") as f:
        f.write("- hosts: %s\n  gather_facts: false\n  tasks:\n" % ":".join(hosts))
        for i in range(tasks):
            f.write("    - name: noop %d\n      ansible.builtin.ping:\n" % i)
    r2, wall2, recap2 = playbook([noop], a.inventory, [])
    per_rollout = (wall - gs) / max(1, tasks)
    per_noop = wall2 / max(1, tasks)
    print("controller overhead: %d hosts, %d tasks/host; re-run without gate measuring %.3f s/task, "
          "no-op (ping) %.3f s/task, ratio %.2fx (target <= 1.5x); no-op rc %d"
          % (len(hosts), tasks, per_rollout, per_noop, per_rollout / per_noop if per_noop else 0, r2.returncode))
    print("work dir: %s" % work)


if __name__ == "__main__":
    main()
