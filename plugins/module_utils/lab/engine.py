# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build, check and tear down the fabric lab from the planner's output.

The build runs the steps of ``STEPS`` in order, each in its own module: ``image`` (the cached base
image), ``nodes`` and ``hosts`` (``nodes.py``: the boxes and GPU hosts), ``links`` (``wiring.py``),
``frr`` and ``bgp`` (``routing.py``). ``teardown.py`` undoes a build from the state file's journal.
A running lab whose topology changed only in its GPU hosts (added, removed, other NICs) or racks is
changed in place by ``incremental.py``: only those nodes and their links are torn down or built,
the spines get their new configs with frr-reload.py.
What is built comes from ``spec.LabSpec``.
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab import image as imagemod
from ansible_collections.netscale.multinic.plugins.module_utils.lab import incremental
from ansible_collections.netscale.multinic.plugins.module_utils.lab import nodes, routing, wiring
from ansible_collections.netscale.multinic.plugins.module_utils.lab import teardown as teardown_steps
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, alive, run
from ansible_collections.netscale.multinic.plugins.module_utils.lab.spec import LabSpec
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import STATE_ROOT, State, load
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import (
    PREFIX, cgroup2_root, netns_exists, netns_name,
)

__all__ = ["FAIL_ENV", "PREFIX", "STEPS", "Lab", "LabSpec", "cgroup2_root", "netns_name"]

FAIL_ENV = "NETSCALE_LAB_FAIL_AT"
STEPS = ("image", "nodes", "hosts", "links", "frr", "bgp", "ready")


class Lab(object):
    def __init__(self, spec, state_root=STATE_ROOT, log=None, fail_at=None, host_default_route=True,
                 bgp_timeout=60.0, rebuild=False):
        self.spec = spec
        self.fabric = spec.fabric
        self.state_root = state_root
        self.log_lines = []
        self._log = log
        self.fail_at = fail_at or os.environ.get(FAIL_ENV) or None
        self.host_default_route = host_default_route
        self.bgp_timeout = bgp_timeout
        self.rebuild = rebuild
        self.state = None
        self.timings = {}

    # ------------------------------------------------------------------ places and records
    def log(self, msg):
        self.log_lines.append(msg)
        if self._log:
            self._log(msg)

    @property
    def sdir(self):
        return os.path.join(self.state_root, self.fabric)

    @property
    def state_file(self):
        return os.path.join(self.sdir, "state.json")

    def node_dir(self, node):
        return os.path.join(self.sdir, "nodes", node)

    def cg_dir(self, node=None):
        base = os.path.join(cgroup2_root(), PREFIX, self.fabric)
        return os.path.join(base, node) if node else base

    def mkcg(self, path):
        self.state.add(type="cgroup", path=path)
        os.makedirs(path, exist_ok=True)

    def mkdir(self, path, record=True):
        if record:
            self.state.add(type="dir", path=path)
        os.makedirs(path, exist_ok=True)

    def attached_state(self):
        """The state being built, or the running lab's (lab operations after the build)."""
        if self.state is None:
            self.state = State(self.fabric, self.state_root, load(self.fabric, self.state_root))
        return self.state

    def leftovers(self):
        """Objects with this fabric's names that exist although no state file lists them."""
        out = [netns_name(n) for n, _k in self.spec.node_list() if netns_exists(netns_name(n))]
        if os.path.isdir(self.cg_dir()):
            out.append(self.cg_dir())
        if os.path.isdir(self.sdir):
            out.append(self.sdir)
        return out

    # ------------------------------------------------------------------ status
    def status(self):
        """(healthy: bool, reasons: list, state dict or None)."""
        data = load(self.fabric, self.state_root)
        if data is None:
            return False, ["no state file"], None
        reasons = []
        if data.get("status") != "ready":
            reasons.append("state is %r" % data.get("status"))
        if data.get("plan_hash") != self.spec.plan_hash():
            reasons.append("topology, plan or templates changed since the build")
        for r in data.get("resources", []):
            if r["type"] == "process" and r.get("keep", True) and not alive(r["pid"], r.get("started")):
                reasons.append("process %s (pid %s) is gone" % (r.get("name"), r["pid"]))
        for name, _kind in self.spec.node_list():
            if name not in data.get("nodes", {}):
                reasons.append("node %s missing" % name)
        return not reasons, reasons, data

    def change_summary(self, data, reasons):
        """What build() would do: 'build', 'rebuild' or 'in_place' with the nodes removed/added/reloaded."""
        if data is None:
            return {"action": "build"}
        change = None if self.rebuild else incremental.in_place_change(self, data, reasons)
        if change is None:
            return {"action": "rebuild"}
        return {"action": "in_place", "remove": change.remove + change.remove_tors,
                "add": [h["name"] for h in change.add] + change.add_tors, "reload": change.reload_spines}

    # ------------------------------------------------------------------ build
    def build(self):
        """Build the lab. Returns dict(changed, ...). Idempotent: a healthy lab is left as is."""
        healthy, reasons, data = self.status()
        if healthy and not self.rebuild:
            return {"changed": False, "state_file": self.state_file, "nodes": data["nodes"]}
        if data is not None and not self.rebuild:
            change = incremental.in_place_change(self, data, reasons)
            if change is not None:
                return incremental.apply(self, data, change)
        if data is not None:
            self.log("lab: rebuilding (%s)" % "; ".join(reasons if not self.rebuild else ["rebuild requested"]))
            self.teardown()
        t0 = time.monotonic()
        self.state = State(self.fabric, self.state_root)
        self.state.set(topology_file=self.spec.topology_file, started_at=time.time())
        try:
            self._build()
        except BaseException as e:
            self.log("lab: build failed (%s); tearing down what was made" % e)
            try:
                self.state.set(status="failed", error=str(e))
                self.teardown()
            except Exception as e2:  # report both
                raise LabError("build failed: %s; teardown after the failure also failed: %s" % (e, e2))
            if isinstance(e, LabError):
                raise LabError("build failed and was rolled back: %s" % e)
            raise
        self.timings["build"] = round(time.monotonic() - t0, 2)
        self.state.set(status="ready", plan_hash=self.spec.plan_hash(), node_hashes=self.spec.node_hashes(),
                       timings=self.timings)
        return {"changed": True, "state_file": self.state.path, "nodes": self.state.data["nodes"],
                "timings": self.timings}

    def _build(self):
        self._step("image")
        rootfs = self._timed("image", self._image)
        self.mkdir(self.sdir, record=True)
        self.mkdir(os.path.join(self.sdir, "nodes"))
        self.mkcg(os.path.join(cgroup2_root(), PREFIX))  # removed only when empty
        self.mkcg(self.cg_dir())
        self._step("nodes")
        self._timed("boxes", lambda: nodes.start_boxes(self))
        self._step("hosts")
        self._timed("hosts", lambda: nodes.start_hosts(self, rootfs))
        self._step("links")
        self._timed("links", lambda: wiring.wire(self))
        self._step("frr")
        self._timed("frr", lambda: routing.start_frr(self))
        self._step("bgp")
        self._timed("bgp", lambda: routing.wait_bgp(self))
        self._step("ready")

    def _image(self):
        rootfs, info, _built = imagemod.ensure_image(log=self.log)
        self.state.set(image=info["key"], image_rootfs=rootfs)
        return rootfs

    def _step(self, name):
        if self.fail_at == name:
            raise LabError("injected failure at build step '%s' (%s=%s)" % (name, FAIL_ENV, name))

    def _timed(self, name, fn):
        t = time.monotonic()
        out = fn()
        self.timings[name] = round(time.monotonic() - t, 2)
        return out

    # ------------------------------------------------------------------ FRR boxes after the build
    def box_pid(self, node):
        data = self.state.data if self.state else load(self.fabric, self.state_root)
        return data["nodes"][node]["pid"]

    def nsenter_box(self, node):
        return ["nsenter", "-t", str(self.box_pid(node)), "-n", "-m", "-u", "--"]

    def start_daemon(self, node, daemon):
        """Start one FRR daemon inside a box (default paths), record its PID."""
        return routing.start_daemon(self, node, daemon)

    def vtysh(self, node, args, check=True, timeout=60):
        return run(self.nsenter_box(node) + ["vtysh"] + args, check=check, timeout=timeout)[1]

    def bgp_summary(self, node):
        return json.loads(self.vtysh(node, ["-c", "show bgp summary json"]))

    # ------------------------------------------------------------------ teardown
    def teardown(self):
        """Remove everything the state file lists (reverse order), then sweep our prefix."""
        return teardown_steps.teardown(self)
