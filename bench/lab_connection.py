# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU of one module run on a lab node, over the lab's connection, over the same connection with pipelining, with
the lab's interpreter (python3 with a compile cache, plugins/module_utils/lab/interpreter.py) without a zygote, and
with the zygote that forks the runs (as on the lab's nodes): prints figures, asserts nothing (docs/performance.md,
"CI time").

The lab reaches every node with community.docker.nsenter, which has no pipelining (each module run: a remote
temporary directory, ``tee`` of the AnsiballZ file, ``chmod``, the run, ``rm``; each an ``nsenter`` + ``sh``
spawn). The pipelined variant (bench/ansible_plugins/connection/nsenter_pipelined.py) is the same plugin with the
flag on. A node here is a ``sleep`` in a network namespace of its own (``unshare --net``), killed by PID at the
end. The playbook runs ``--tasks`` ``ansible.builtin.ping`` tasks (``--module command``: ``command: true``) on it;
the figures are the whole process tree's CPU (controller, forks, nsenter, the module's python) per task, and the
wall time, for each variant, in alternating order, ``--rounds`` times; the ratios to the plain connection are taken
within each round. The lab interpreter's variants have their compile cache filled by the warm-up, as a lab node's
is after its first run of each module; the zygote's variant counts the runs it forks (its reaped children's CPU).

  sudo .venv/bin/python bench/lab_connection.py [--tasks 60] [--rounds 3] [--module ping|command]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.lab import interpreter  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run_command  # noqa: E402
PLUGINS = os.path.join(REPO, "bench", "ansible_plugins", "connection")
PLAIN = "nsenter"
# variant: (connection plugin, interpreter: a path, or the lab's, installed in the bench's work directory under
# "node" (no zygote: each run a python3 of its own) or "zygote" (a zygote serves it, in the node's namespace))
VARIANTS = {PLAIN: ("community.docker.nsenter", "/usr/bin/python3"),
            "nsenter + pipelining": ("nsenter_pipelined", "/usr/bin/python3"),
            "nsenter + lab interpreter": ("community.docker.nsenter", "node"),
            "nsenter + lab zygote": ("community.docker.nsenter", "zygote")}
TASKS = {"ping": "    - ansible.builtin.ping:", "command": "    - ansible.builtin.command: 'true'"}


def play(tasks, module="ping"):
    lines = ["- hosts: node", "  gather_facts: false", "  tasks:"]
    lines += [TASKS[module]] * tasks
    return "\n".join(lines) + "\n"


def zygote_cpu(zygote):
    """CPU seconds of the zygote and of the runs it forked and reaped (their supervisors reap the runs)."""
    with open("/proc/%d/stat" % zygote.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def time_playbook(work, variant, pid, tasks, zygote):
    connection, python = VARIANTS[variant]
    # the lab's interpreter: installed once per work directory (main), as a lab node gets it at its start
    if not python.startswith("/"):
        python = os.path.join(work, python, interpreter.NODE_SUBDIR, "python3")
    inventory = os.path.join(work, "inventory.ini")
    with open(inventory, "w") as f:
        f.write("node ansible_connection=%s ansible_nsenter_pid=%d ansible_python_interpreter=%s\n"
                % (connection, pid, python))
    # a plain configuration: no callbacks of the collection, the bench's connection plugins
    config = os.path.join(work, "ansible.cfg")
    with open(config, "w") as f:
        f.write("[defaults]\nstdout_callback = ansible.builtin.minimal\nretry_files_enabled = false\n"
                "connection_plugins = %s\n" % PLUGINS)
    env = dict(os.environ, ANSIBLE_CONFIG=config, PATH=os.path.join(REPO, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    before, z0 = resource.getrusage(resource.RUSAGE_CHILDREN), zygote_cpu(zygote)
    t0 = time.monotonic()
    p = run_command(["ansible-playbook", "-i", inventory, os.path.join(work, "play.yml")], check=False, cwd=work,
                    env=env, timeout=900)
    wall = time.monotonic() - t0
    after, z1 = resource.getrusage(resource.RUSAGE_CHILDREN), zygote_cpu(zygote)
    if p.returncode != 0:
        raise SystemExit("%s: ansible-playbook failed:\n%s%s" % (variant, p.stdout[-3000:], p.stderr[-2000:]))
    # the playbook's process tree, and the runs the zygote forked (not in that tree); the zygote's own start is
    # not counted (one per node, for the whole lab's life)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) + (z1 - z0)
    return wall, cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--module", choices=sorted(TASKS), default="ping")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("needs root (nsenter into a network namespace)")
    node = subprocess.Popen(["unshare", "--net", "sleep", "3600"])
    zygote = None
    try:
        time.sleep(0.3)
        with tempfile.TemporaryDirectory(prefix="netscale-lab-connection.") as work:
            with open(os.path.join(work, "play.yml"), "w") as f:
                f.write(play(args.tasks, args.module))
            interpreter.install(os.path.join(work, "node"))
            served = interpreter.install(os.path.join(work, "zygote"))
            zygote = subprocess.Popen(["nsenter", "--net=/proc/%d/ns/net" % node.pid, "--", "/usr/bin/python3",
                                       os.path.join(served, "python3"), "--serve"], start_new_session=True)
            deadline = time.monotonic() + 20
            while not os.path.exists(os.path.join(served, interpreter.SOCKET)):
                if zygote.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the zygote did not listen (rc %s)" % zygote.poll())
                time.sleep(0.02)
            for name in VARIANTS:   # warm caches (AnsiballZ payloads, page cache, the lab interpreter's)
                time_playbook(work, name, node.pid, 2, zygote)
            rows = []
            for r in range(args.rounds):
                order = list(VARIANTS) if r % 2 == 0 else list(reversed(list(VARIANTS)))
                got = dict((name, time_playbook(work, name, node.pid, args.tasks, zygote)) for name in order)
                rows.append(got)
                print("round %d: %s; CPU ratio to plain: %s" % (r + 1, "; ".join(
                    "%s %.1f ms CPU/task, %.1f ms wall/task" % (n, 1000 * c / args.tasks, 1000 * w / args.tasks)
                    for n, (w, c) in got.items()), ", ".join(
                    "%s %.2f" % (n, got[n][1] / got[PLAIN][1]) for n in VARIANTS if n != PLAIN)))
            for name in VARIANTS:
                cpus = sorted(1000 * row[name][1] / args.tasks for row in rows)
                print("%-22s median %.1f ms CPU per module run (min %.1f, max %.1f), %d tasks x %d rounds"
                      % (name, cpus[len(cpus) // 2], cpus[0], cpus[-1], args.tasks, args.rounds))
    finally:
        if zygote is not None:   # by PID: the zygote's process group (it, its supervisors, any run left)
            try:
                os.killpg(zygote.pid, 9)
            except ProcessLookupError:
                pass
            zygote.wait()
        node.kill()
        node.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
