# -*- coding: utf-8 -*-
"""Fixtures of the monitoring lab test: the lab with its Prometheus (playbooks/lab.yml), the agents on
every GPU host (playbooks/monitor.yml); always torn down (lab teardown: every process by PID)."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "lab"))

import labsnap  # noqa: E402


@pytest.fixture(scope="module")
def monitored_lab():
    if os.geteuid() != 0:
        pytest.fail("lab tests need root (namespaces, cgroups, FRR)")
    for tool in ("/usr/bin/prometheus", "/usr/bin/prometheus-frr-exporter", "/usr/lib/frr/bgpd"):
        if not os.path.exists(tool):
            pytest.fail("%s is missing (run scripts/setup.sh)" % tool)
    inventory = labsnap.TOPOLOGY
    try:
        # the lab inventory's group_vars turn the lab's Prometheus on (lab_monitoring, off by default)
        built = labsnap.playbook("-i", inventory, "playbooks/lab.yml")
        labsnap.playbook("-i", inventory, "playbooks/monitor.yml")
        again = labsnap.playbook("-i", inventory, "playbooks/monitor.yml")   # a second run changes nothing
        yield built.stdout, again.stdout, labsnap.lab_state()
    finally:
        labsnap.playbook("-i", inventory, "playbooks/lab.yml", "-e", "lab_state=absent", check=False)
