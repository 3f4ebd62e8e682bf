# -*- coding: utf-8 -*-
"""The lab acceptance faults of issue 29 item 6, modelled on the lab's own topology
(inventories/lab/fabric.yml: two racks of two hosts, one spine) with the lab's sparse probing (10 probes
per path and 10 s interval): what correlation must make of them before the lab run does it for real."""
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.bench.monitor_sim import Fault, Simulator
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.correlate import correlate
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.fabric import FabricIndex
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
with open(os.path.join(ROOT, "inventories", "lab", "fabric.yml")) as handle:
    LAB = FabricIndex.from_topology(load_topology(yaml.safe_load(handle), "lab"))
T0 = 3000 * 60.0


def cases_of(faults, seed, until=T0 + 1200):
    sim = Simulator(LAB, probes=10, seed=seed)
    cases, stats = correlate(sim.stream(faults, until, noise=1, t_start=T0 - 600), LAB)
    return cases, stats


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("fault,expected", [
    (Fault("nic", T0, T0 + 300, host="lab-r2-h1", nic=3, loss=1.0), ("nic", "lab-r2-h1/nic3")),
    (Fault("nic", T0, T0 + 600, host="lab-r2-h1", nic=3, loss=0.02), ("nic", "lab-r2-h1/nic3")),
    (Fault("host", T0, T0 + 300, host="lab-r1-h2"), ("host", "lab-r1-h2")),
    (Fault("tor", T0, T0 + 300, tor="lab-r1-tor"), ("tor", "lab-r1-tor")),
    (Fault("tor", T0, T0 + 300, tor="lab-r2-tor"), ("tor", "lab-r2-tor")),
    (Fault("uplink", T0, T0 + 300, tor="lab-r2-tor", spine="lab-spine1", loss=0.3), ("uplink", "lab-r2-tor/lab-spine1")),
    (Fault("uplink", T0, T0 + 300, tor="lab-r1-tor", spine="lab-spine1", loss=0.3), ("uplink", "lab-r1-tor/lab-spine1")),
    (Fault("flap", T0, T0 + 600, host="lab-r1-h1", nic=2, flaps=(T0 + 10, T0 + 250, T0 + 500)), ("nic", "lab-r1-h1/nic2")),
    (Fault("agent", T0, T0 + 300, host="lab-r2-h2"), ("agent", "lab-r2-h2")),
])
def test_each_lab_fault_is_one_case_of_its_scope_within_two_minutes(fault, expected, seed):
    cases, _stats = cases_of([fault], seed)
    assert [(c["scope"]["kind"], c["scope"]["id"]) for c in cases] == [expected]
    assert cases[0]["opened_at"] - fault.start <= 120
    if fault.kind == "flap":
        assert cases[0]["repeats"] == 3


def test_the_lab_fault_free_soak_opens_no_case():
    sim = Simulator(LAB, probes=10, seed=9)
    cases, stats = correlate(sim.stream([], T0 + 1800, noise=3, t_start=T0), LAB)
    assert cases == [] and stats["below_threshold"] == stats["detections"] > 300
