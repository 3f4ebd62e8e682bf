# -*- coding: utf-8 -*-
"""Shared fixture of the datapath unit tests: the planner's host data of the lab fabric."""

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology


@pytest.fixture(scope="module")
def plan():
    with open("inventories/lab/fabric.yml") as f:
        topo = load_topology(yaml.safe_load(f))
    p = FabricPlan(topo).allocate()
    return dict((h.name, p.host_data(h)) for h in topo.hosts)
