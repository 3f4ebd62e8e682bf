# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machine's side of the lab: names of its namespaces and cgroups, and removing them."""

from __future__ import annotations

import os
import signal
import shutil
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, reap, run

# Prefix of every network namespace and cgroup a lab makes (mnl-<node>, <cgroup2>/mnl/<fabric>).
PREFIX = "mnl"


def netns_name(node):
    return "%s-%s" % (PREFIX, node)


def cgroup2_root():
    """Mount point of the cgroup v2 hierarchy (/sys/fs/cgroup or, on hybrid hosts, .../unified)."""
    best = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            if right.split()[0] == "cgroup2":
                mp = left.split()[4]
                if best is None or len(mp) < len(best):
                    best = mp
    if best is None:
        raise LabError("no cgroup2 hierarchy mounted; mount one: mount -t cgroup2 none /sys/fs/cgroup")
    return best


def tail(path, n=800):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return "(no log)"


def read_pid(path, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            time.sleep(0.02)
    return None


def netns_exists(name):
    return os.path.exists("/run/netns/%s" % name)


def cgroup_kill(cg):
    k = os.path.join(cg, "cgroup.kill")
    if os.path.exists(k):
        try:
            with open(k, "w") as f:
                f.write("1")
        except OSError:
            pass
    else:  # kernels < 5.14: kill what is listed
        for root, _dirs, _files in os.walk(cg):
            try:
                with open(os.path.join(root, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            except OSError:
                pass


def cgroup_populated(cg):
    try:
        with open(os.path.join(cg, "cgroup.events")) as f:
            for line in f:
                k, v = line.split()
                if k == "populated":
                    return v == "1"
    except OSError:
        return False
    return False


def rmdir_cgroup(cg, timeout=5.0):
    """rmdir a cgroup tree bottom-up once it has no processes. Returns an error text or None."""
    deadline = time.monotonic() + timeout
    while cgroup_populated(cg):
        if time.monotonic() > deadline:
            return "cgroup %s still has processes" % cg
        reap()
        time.sleep(0.02)
    for root, _dirs, _files in sorted(os.walk(cg), key=lambda x: len(x[0]), reverse=True):
        try:
            os.rmdir(root)
        except FileNotFoundError:
            pass
        except OSError as e:
            return "cgroup %s: %s" % (root, e)
    return None


def rmtree(path):
    # Overlay work dirs may hold a 'work' subdir with mode 000: shutil copes as root.
    shutil.rmtree(path, ignore_errors=True)
    if os.path.exists(path):
        run(["rm", "-rf", "--one-file-system", path], check=False)
