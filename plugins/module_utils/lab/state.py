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

import json
import os
import threading

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
    """In-memory state mirrored to disk after every change (atomic write + rename)."""

    def __init__(self, fabric, root=STATE_ROOT, data=None):
        self.fabric = fabric
        self.root = root
        self.dir = state_dir(fabric, root)
        self.path = state_file(fabric, root)
        self.data = data or {"fabric": fabric, "status": "building", "nodes": {}, "resources": []}
        self.lock = threading.RLock()  # FRR nodes start in parallel threads

    def save(self):
        with self.lock:
            self._save()

    def _save(self):
        os.makedirs(self.dir, exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.rename(tmp, self.path)

    def add(self, **resource):
        """Record one created object (before it can be leaked: callers record right after creating)."""
        with self.lock:
            self.data["resources"].append(resource)
            self.save()
        return resource

    def retire(self, pid):
        """A recorded process was replaced on purpose (daemon restart): no longer part of health."""
        with self.lock:
            for r in self.data["resources"]:
                if r.get("type") == "process" and r.get("pid") == pid:
                    r["keep"] = False
            self.save()

    def set_node(self, name, **fields):
        with self.lock:
            self.data["nodes"].setdefault(name, {}).update(fields)
            self.save()

    def set(self, **fields):
        with self.lock:
            self.data.update(fields)
            self.save()

    def remove_file(self):
        for p in (self.path, self.path + ".tmp"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
