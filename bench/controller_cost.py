# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller cost of one rollout wave per host: prints figures, asserts nothing.

A wave of ``playbooks/rollout.yml`` runs, per GPU host, the host_datapath and vipinjector roles and the
health gates: on the lab fabric 43 task steps per host and wave (docs/performance.md, "Rollout"). What
the controller pays for each of them is Ansible's own work: a worker fork, templating the task with the
host's variables (the fabric inventory plugin's ``multinic_host`` and friends), building the module
payload, the callbacks. This bench runs that work against 100 to 1,000+ inventory hosts of a generated
fabric, through the real ``netscale.multinic.fabric`` inventory plugin, and times it per host and task
for several fork counts.

Simulated cheaply: every GPU host gets the bench's own connection, ``instant_host``
(``bench/ansible_plugins/connection/``): a host that answers every pipelined module at once, so nothing runs
anywhere but the controller. The wave is a mirror playbook of ``--tasks`` task steps per host (default 9, a lab wave has 43:
two in three controller-only tasks, ``debug``/``set_fact`` templating ``multinic_host``, and one in three a
module task, ``ansible.builtin.ping``, whose payload the controller builds and sends). Left out, and to be added for a real fleet: SSH connection
set-up and file transfer (ControlPersist keeps it to one handshake per host and play), the network's
round trips, the module's run time on the host (the roles' real work: compiling nothing, loading eBPF
objects, waiting on BGP), and the gates' measuring time (their probes wait on traffic, not on the
controller). What is in: the controller's CPU per host-task, which is what slices and forks are sized on.

Figures per (hosts, forks): wall and controller CPU (the whole process tree: parent and every fork) per
host per task step, the peak PSS of the whole tree (every fork counted at its proportional share) and the
parent's peak RSS. ``--quick``: one small case (CI smoke).

  .venv/bin/python bench/controller_cost.py                      # 100, 300, 1000 hosts x forks 10, 50, 200
  .venv/bin/python bench/controller_cost.py --hosts 1000 --forks 50 --tasks 43
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import threading
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTS_PER_RACK = 4


def topology(hosts, nics=4):
    """A fabric topology file's content with ``hosts`` GPU hosts (4 per rack, ``nics`` NICs each)."""
    racks_total = (hosts + HOSTS_PER_RACK - 1) // HOSTS_PER_RACK
    zones, left, zone_id = [], hosts, 0
    while racks_total > 0:
        zone_id += 1
        racks = []
        for rid in range(1, min(racks_total, 250) + 1):
            count = min(HOSTS_PER_RACK, left)
            left -= count
            racks.append({"id": rid, "name": "r%d-%d" % (zone_id, rid),
                          "hosts": [{"id": h, "name": "h%d-%d-%d" % (zone_id, rid, h), "nics": nics}
                                    for h in range(1, count + 1)]})
        racks_total -= len(racks)
        zones.append({"id": zone_id, "name": "z%d" % zone_id, "racks": racks,
                      "spines": [{"id": i, "name": "s%d-%d" % (zone_id, i)} for i in range(1, 5)]})
    return {"plugin": "netscale.multinic.fabric", "name": "cost-%d" % hosts, "region": {"name": "bench"},
            "capacity": {"buildings": 2, "zones": 8, "racks": 256, "hosts": HOSTS_PER_RACK, "nics": 8,
                         "task_slots": 8, "spines": 4},
            "pools": {"ipv6": "fd00:2000::/32", "infrastructure": {"ipv6": "fd00:fe::/48"}},
            "asn": {"spine": 4200000001, "tor": 4200010001, "host": 4201000001},
            "buildings": [{"id": 1, "name": "b1", "zones": zones}]}


def wave_playbook(tasks):
    """A mirror of one wave: ``tasks`` task steps per GPU host, one in three a module task."""
    steps = []
    for i in range(tasks):
        kind = i % 3
        if kind == 0:
            steps.append({"name": "step %d: template the host's plan" % i, "ansible.builtin.debug": {
                "msg": "{{ multinic_host.name }} {{ multinic_host.nics | length }} NICs in {{ multinic_host.rack }}"},
                "changed_when": False})
        elif kind == 1:
            steps.append({"name": "step %d: a decision fact" % i, "ansible.builtin.set_fact": {
                "__bench_nics": "{{ multinic_host.nics | length }}"}})
        else:
            steps.append({"name": "step %d: a module through the connection" % i, "ansible.builtin.ping": {}})
    return [{"name": "One wave", "hosts": "gpu_hosts", "gather_facts": False, "tasks": steps}]


class TreeSampler(threading.Thread):
    """Samples the summed PSS of a process and all its descendants (every fork counted at its share)."""

    def __init__(self, pid, period=0.2):
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.peak_pss_kib = 0
        self.peak_procs = 0
        self._done = threading.Event()

    def _tree(self):
        children = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        tree, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, ()))
        return tree

    @staticmethod
    def _pss(pid):
        try:
            with open("/proc/%d/smaps_rollup" % pid) as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def run(self):
        while not self._done.is_set():
            tree = self._tree()
            self.peak_pss_kib = max(self.peak_pss_kib, sum(self._pss(p) for p in tree))
            self.peak_procs = max(self.peak_procs, len(tree))
            self._done.wait(self.period)

    def stop(self):
        self._done.set()
        self.join()


def run_wave(workdir, inventory, playbook, forks):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORKS=str(forks), ANSIBLE_DISPLAY_OK_HOSTS="false", ANSIBLE_DISPLAY_SKIPPED_HOSTS="false",
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    env.update(ANSIBLE_CONNECTION_PLUGINS=os.path.join(ROOT, "bench", "ansible_plugins", "connection"),
               ANSIBLE_PIPELINING="true")
    argv = ["ansible-playbook", "-i", inventory, playbook, "-e", "ansible_connection=instant_host",
            "-e", "ansible_python_interpreter=/usr/bin/python3"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    out = proc.communicate()[0]
    wall = time.monotonic() - t0
    sampler.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit("controller_cost: ansible-playbook failed (rc %d):\n%s" % (proc.returncode, out[-3000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_tree_pss_mib": round(sampler.peak_pss_kib / 1024.0, 1),
            "peak_child_rss_mib": round(after.ru_maxrss / 1024.0, 1), "peak_procs": sampler.peak_procs}


def inventory_load(workdir, inventory):
    """Wall and CPU of the same ansible-playbook with no task step (the inventory load and start-up)."""
    empty = os.path.join(workdir, "empty.yml")
    with open(empty, "w") as handle:
        yaml.safe_dump([{"name": "nothing", "hosts": "gpu_hosts", "gather_facts": False, "tasks": []}], handle)
    return run_wave(workdir, inventory, empty, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, nargs="+", default=[100, 300, 1000], help="GPU host counts")
    ap.add_argument("--forks", type=int, nargs="+", default=[10, 50, 200], help="fork counts")
    ap.add_argument("--tasks", type=int, default=9,
                    help="task steps per host in the mirror wave (a lab rollout wave has 43: scale the per host-task figure)")
    ap.add_argument("--quick", action="store_true", help="one small case: 20 hosts, 5 forks, 6 task steps (CI smoke)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    if args.quick:
        args.hosts, args.forks, args.tasks = [20], [5], 6
    results = []
    with tempfile.TemporaryDirectory(prefix="mn-controller-cost-") as workdir:
        playbook = os.path.join(workdir, "wave.yml")
        with open(playbook, "w") as handle:
            yaml.safe_dump(wave_playbook(args.tasks), handle, sort_keys=False)
        print("== one wave: %d task steps per GPU host (1 in 3 a module task to an instantly answering host); "
              "per host-task figures exclude the inventory load and start-up, measured alone" % args.tasks)
        for hosts in args.hosts:
            inventory = os.path.join(workdir, "fabric-%d.yml" % hosts)
            with open(inventory, "w") as handle:
                yaml.safe_dump(topology(hosts), handle, sort_keys=False)
            base = inventory_load(workdir, inventory)
            print("-- %d GPU hosts: start-up + inventory load %.2f s wall, %.2f s CPU, tree peak PSS %.0f MiB"
                  % (hosts, base["wall_s"], base["cpu_s"], base["peak_tree_pss_mib"]))
            for forks in args.forks:
                wave = run_wave(workdir, inventory, playbook, forks)
                steps = hosts * args.tasks
                row = dict(hosts=hosts, forks=forks, tasks=args.tasks, startup=base, wave=wave,
                           wall_ms_per_host_task=round(1000 * (wave["wall_s"] - base["wall_s"]) / steps, 2),
                           cpu_ms_per_host_task=round(1000 * (wave["cpu_s"] - base["cpu_s"]) / steps, 2))
                results.append(row)
                print("   forks %3d: wave %.1f s wall, %.1f s CPU; per host-task %.2f ms wall, %.2f ms CPU; "
                      "tree peak PSS %.0f MiB (%d processes), largest child RSS %.0f MiB"
                      % (forks, wave["wall_s"], wave["cpu_s"], row["wall_ms_per_host_task"], row["cpu_ms_per_host_task"],
                         wave["peak_tree_pss_mib"], wave["peak_procs"], wave["peak_child_rss_mib"]))
    if len(args.hosts) > 1:
        print("== cost per host-task from %d to %d hosts (flat = ratio near 1):" % (args.hosts[0], args.hosts[-1]))
        for forks in args.forks:
            rows = [r for r in results if r["forks"] == forks]
            first, last = rows[0], rows[-1]
            if first["cpu_ms_per_host_task"] > 0:
                print("   forks %3d: CPU %.2f -> %.2f ms (x%.2f), wall %.2f -> %.2f ms"
                      % (forks, first["cpu_ms_per_host_task"], last["cpu_ms_per_host_task"],
                         last["cpu_ms_per_host_task"] / first["cpu_ms_per_host_task"],
                         first["wall_ms_per_host_task"], last["wall_ms_per_host_task"]))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
