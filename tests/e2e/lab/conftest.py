# -*- coding: utf-8 -*-
"""Fixtures of the fabric lab end-to-end tests: the lab is built with the README's command
(ansible-playbook playbooks/lab.yml) and always torn down, also when a test fails."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import labsnap  # noqa: E402


def require_live():
    if os.geteuid() != 0:
        pytest.fail("lab tests need root (namespaces, cgroups, FRR)")
    missing = [t for t in ("/usr/lib/frr/bgpd", "/usr/bin/vtysh", "/usr/sbin/debootstrap", "/usr/bin/iperf3")
               if not os.path.exists(t)]
    missing += [t for t in ("ip", "nft", "tc", "unshare", "nsenter") if not shutil.which(t)]
    if missing:
        pytest.fail("lab tests need %s (run scripts/setup.sh)" % missing)


@pytest.fixture(scope="module")
def clean_before():
    require_live()
    labsnap.playbook("playbooks/lab.yml", "-e", "lab_state=absent")
    snap = labsnap.snapshot()
    assert not snap["netns"] and not snap["processes"] and not snap["cgroups"], snap
    return snap


@pytest.fixture(scope="module")
def lab(clean_before):
    """A running lab; yields (build stdout, state dict). Teardown in the finalizer, always."""
    try:
        out = labsnap.playbook("playbooks/lab.yml")
        yield out.stdout, labsnap.lab_state()
    finally:
        labsnap.playbook("playbooks/lab.yml", "-e", "lab_state=absent", check=False)
