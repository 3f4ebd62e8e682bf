# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab state file: every object the lab created, written as each one is created.

Layout of /run/netscale-multinic/lab/<fabric>/state.json::

    {"fabric": "lab", "status": "building|ready|failed", "plan_hash": "...",
     "nodes": {"<inventory name>": {"pid": 1234, "kind": "gpu_host|tor|spine|storage", ...}},
     "resources": [{"type": "process|netns|link|cgroup|dir|mount|pin|nft", ...}, ...]}

`nodes` is the contract with the inventory plugin (pid = the PID to nsenter). `resources` is an
ordered journal: teardown removes them in reverse order, so a build that failed midway is
undone exactly as far as it got.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import threading

from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

# Where every lab keeps its state: the one spelling of this path (lab modules' defaults, the
# inventory plugin's lab_state_dir default and the lab role's default all use it).
STATE_ROOT = "/run/netscale-multinic/lab"


def state_dir(fabric, root=STATE_ROOT):
    return os.path.join(root, fabric)


def state_file(fabric, root=STATE_ROOT):
    return os.path.join(state_dir(fabric, root), "state.json")


def load(fabric, root=STATE_ROOT):
    try:
        with open(state_file(fabric, root)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except ValueError:
        # Half-written files cannot happen (atomic rename); an unreadable one is reported.
        raise


class State(object):
    """In-memory state mirrored to disk after every change (atomic write + rename).

    A State built from data loaded from disk (``data=...``: lab operations attaching to a running
    lab) may share the file with other processes - e.g. two hosts' probes delegated to the
    controller in parallel forks, each recording its iperf3 server. Every change then re-reads the
    file under an exclusive flock on ``state.lock`` and writes through a temporary file of its own,
    so no writer loses another's record or renames another's temporary file away."""

    def __init__(self, fabric, root=STATE_ROOT, data=None):
        self.fabric = fabric
        self.root = root
        self.dir = state_dir(fabric, root)
        self.path = state_file(fabric, root)
        self.attached = data is not None
        self.data = data or {"fabric": fabric, "status": "building", "nodes": {}, "resources": []}
        self.lock = threading.RLock()  # FRR nodes start in parallel threads

    @contextlib.contextmanager
    def _change(self):
        """Serialise one read-modify-write: threads by the RLock, processes by flock."""
        with self.lock:
            os.makedirs(self.dir, exist_ok=True)
            fd = os.open(os.path.join(self.dir, "state.lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if self.attached:
                    disk = load(self.fabric, self.root)
                    if disk is not None:
                        self.data = disk
                yield self.data
                self._save()
            finally:
                os.close(fd)   # releases the flock

    def save(self):
        with self._change():
            pass

    def _save(self):
        # Each writer's temporary file is its own (mkstemp in atomic_write): no writer renames
        # another's away.
        atomic_write(self.path, json.dumps(self.data, indent=1, sort_keys=True), mode=0o644)

    def add(self, **resource):
        """Record one created object (before it can be leaked: callers record right after creating)."""
        with self._change() as data:
            data["resources"].append(resource)
        return resource

    def retire(self, pid):
        """A recorded process was replaced on purpose (daemon restart): no longer part of health."""
        with self._change() as data:
            for r in data["resources"]:
                if r.get("type") == "process" and r.get("pid") == pid:
                    r["keep"] = False

    def drop(self, node, resources):
        """Forget a node and the given resource records (removed by an incremental change)."""
        gone = [json.dumps(r, sort_keys=True) for r in resources]
        with self._change() as data:
            data["nodes"].pop(node, None)
            data["resources"] = [r for r in data["resources"] if json.dumps(r, sort_keys=True) not in gone]

    def set_node(self, name, **fields):
        with self._change() as data:
            data["nodes"].setdefault(name, {}).update(fields)

    def set(self, **fields):
        with self._change() as data:
            data.update(fields)

    def remove_file(self):
        for p in [self.path, os.path.join(self.dir, "state.lock")] + glob.glob(os.path.join(self.dir, ".state.*.tmp")):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
