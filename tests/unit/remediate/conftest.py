# -*- coding: utf-8 -*-
"""Fixtures of the remediation unit tests."""
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="module")
def host():
    """The lab plan's 4-NIC host lab-r1-h2 (host_data)."""
    with open(os.path.join(REPO, "inventories", "lab", "fabric.yml")) as f:
        topo = load_topology(yaml.safe_load(f))
    plan = FabricPlan(topo).allocate()
    return [plan.host_data(h) for h in topo.hosts if h.name == "lab-r1-h2"][0]
