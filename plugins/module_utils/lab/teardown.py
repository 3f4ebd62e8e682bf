# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Teardown: remove everything the state file lists, newest first, then sweep the lab's names.

A build that failed midway is undone exactly as far as it got, because every object was recorded
right after it was made.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, kill, reap, run, wait_gone
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import State, load
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import (
    PREFIX, cgroup2_root, cgroup_kill, netns_exists, netns_name, rmdir_cgroup, rmtree,
)


@dataclasses.dataclass
class Removal:
    """What one teardown removed and what it could not."""

    resources: list                       # the journal, newest first
    removed: list = dataclasses.field(default_factory=list)
    problems: list = dataclasses.field(default_factory=list)

    def of_type(self, kind):
        return [r for r in self.resources if r["type"] == kind]


def teardown(lab):
    data = load(lab.fabric, lab.state_root)
    t0 = time.monotonic()
    work = Removal(list(reversed(data.get("resources", []))) if data else [])
    prefix_cg = os.path.join(cgroup2_root(), PREFIX)
    _stop_processes(work, prefix_cg)
    _remove_links_and_netns(work)
    _remove_cgroups(work, prefix_cg)
    _remove_mounts_and_dirs(work, lab.sdir)
    _sweep(lab, work, prefix_cg)
    if work.problems:
        if data is not None:
            State(lab.fabric, lab.state_root, data).set(status="teardown-failed", error="; ".join(work.problems))
        raise LabError("teardown incomplete: %s" % "; ".join(work.problems))
    _remove_state_dirs(lab, work, data)
    lab.timings["teardown"] = round(time.monotonic() - t0, 2)
    return {"changed": bool(data is not None or work.removed), "removed": work.removed, "timings": lab.timings}


def remove_resources(lab, resources):
    """Remove some of the lab's recorded objects (newest first), e.g. one GPU host's: its processes
    by PID, its cgroups, its links (the ToR-side end), its namespace name and its directory.
    Returns the Removal; the caller drops the records from the state."""
    work = Removal(list(reversed(resources)))
    prefix_cg = os.path.join(cgroup2_root(), PREFIX)
    _stop_processes(work, prefix_cg)
    _remove_links_and_netns(work)
    _remove_cgroups(work, prefix_cg)
    _remove_mounts_and_dirs(work, lab.sdir)
    reap()
    return work


def _stop_processes(work, prefix_cg):
    """FRR daemons and holders first by PID (checked start time), then whole cgroups."""
    procs = work.of_type("process")
    for r in procs:
        if kill(r["pid"], r.get("started"), signal.SIGKILL):
            work.removed.append("process %s (pid %s)" % (r["name"], r["pid"]))
    left = wait_gone([(r["pid"], r.get("started")) for r in procs], timeout=5.0)
    if left:
        work.problems.append("processes still alive: %s" % left)
    for r in work.of_type("cgroup"):
        if r["path"] != prefix_cg:  # the shared prefix cgroup holds every other fabric's lab: never kill it
            cgroup_kill(r["path"])


def _remove_links_and_netns(work):
    """Links (ToR-side ends explicitly; the peer goes with them), then netns names."""
    for r in work.of_type("link"):
        if netns_exists(r["netns"]):
            if run(["ip", "-n", r["netns"], "link", "del", r["dev"]], check=False)[0] == 0:
                work.removed.append("link %s/%s" % (r["netns"], r["dev"]))
    for r in work.of_type("netns"):
        if netns_exists(r["name"]):
            rc, _out, err = run(["ip", "netns", "del", r["name"]], check=False)
            if rc == 0:
                work.removed.append("netns %s" % r["name"])
            else:
                work.problems.append("netns %s: %s" % (r["name"], err.strip()))


def _remove_cgroups(work, prefix_cg):
    """Deepest first (systemd made sub-cgroups inside the hosts')."""
    for cg in sorted(set(r["path"] for r in work.of_type("cgroup")), key=len, reverse=True):
        if cg == prefix_cg:
            continue  # shared by every fabric's lab: removed in the sweep only when empty
        if os.path.isdir(cg):
            err = rmdir_cgroup(cg)
            if err:
                work.problems.append(err)
            else:
                work.removed.append("cgroup %s" % cg)


def _remove_mounts_and_dirs(work, state_dir):
    """Only under the lab's own state dir."""
    for r in work.resources:
        if r["type"] == "mount":
            run(["umount", "-l", r["path"]], check=False)
        elif r["type"] == "dir":
            path = r["path"]
            if not (path + "/").startswith(state_dir + "/"):
                work.problems.append("refusing to remove %s (outside %s)" % (path, state_dir))
                continue
            if path == state_dir:
                continue
            if os.path.exists(path):
                rmtree(path)
                work.removed.append("dir %s" % path)


def _sweep(lab, work, prefix_cg):
    """This fabric's named namespaces and cgroups, even if unrecorded."""
    for name, _kind in lab.spec.node_list():
        ns = netns_name(name)
        if netns_exists(ns):
            run(["ip", "netns", "del", ns], check=False)
            work.removed.append("netns %s (sweep)" % ns)
    if os.path.isdir(lab.cg_dir()):
        cgroup_kill(lab.cg_dir())
        err = rmdir_cgroup(lab.cg_dir())
        if err:
            work.problems.append(err)
    try:
        os.rmdir(prefix_cg)
    except OSError:
        pass
    reap()


def _remove_state_dirs(lab, work, data):
    if os.path.isdir(lab.sdir):
        rmtree(lab.sdir)
        if data is not None:
            work.removed.append("dir %s" % lab.sdir)
    for d in (lab.state_root, os.path.dirname(lab.state_root)):
        try:  # shared parents: only when nothing else lives there
            os.rmdir(d)
        except OSError:
            break
