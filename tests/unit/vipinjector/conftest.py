# -*- coding: utf-8 -*-
"""Shared fixtures of the vipinjector unit tests."""
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import watcher
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="module")
def host():
    """The lab plan's 4-NIC host lab-r1-h2 (host_data)."""
    topo = load_topology(yaml.safe_load(open(os.path.join(REPO, "inventories", "lab", "fabric.yml"))))
    plan = FabricPlan(topo).allocate()
    return [plan.host_data(h) for h in topo.hosts if h.name == "lab-r1-h2"][0]


class EgressKit(object):
    """What the egress-state tests (poll and inotify wake-up) share: the NIC watcher's publish and the
    helper's sessions by NIC."""

    @staticmethod
    def publish(path, out_names, index, now):
        """What the watcher writes (Health.publish, through writing.atomic_write) for ``out_names``."""
        w = watcher.Health.__new__(watcher.Health)
        w.STATE_FILE = str(path)
        w.index = index
        real = watcher.time.time
        watcher.time.time = lambda: now
        try:
            w.publish(set(out_names))
        finally:
            watcher.time.time = real

    @staticmethod
    def by_nic(h):
        return dict((int(s["nic"]), peer) for peer, s in h.alloc.sessions.items())

    @staticmethod
    def healthy(h):
        h.core.health.feed(True, "ok")
        h.core.health.feed(True, "ok")
        for peer in h.alloc.sessions:
            h.core.session_event(peer, "up")


@pytest.fixture
def egress():
    return EgressKit
