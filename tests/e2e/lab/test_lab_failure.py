# -*- coding: utf-8 -*-
"""A build that fails midway removes what it made: same snapshot as before the build."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import labsnap  # noqa: E402


@pytest.mark.parametrize("step", ["hosts", "frr", "bgp"])
def test_failed_build_leaves_nothing(clean_before, step):
    out = labsnap.playbook("playbooks/lab.yml", "-e", "lab_fail_at=%s" % step, check=False)
    assert out.returncode != 0
    assert "injected failure at build step '%s'" % step in out.stdout
    assert "rolled back" in out.stdout
    assert labsnap.snapshot() == clean_before


def test_broken_tor_config_fails_and_rolls_back(clean_before, tmp_path):
    (tmp_path / "lab-r2-tor.cfg").write_text("frr defaults traditional\nrouter bgp 4200001002\n neighbor fd00:ff::1 remote-as\n")
    out = labsnap.playbook("playbooks/lab.yml", "-e", "lab_tor_config_dir=%s" % tmp_path, "-e", "lab_bgp_timeout=5",
                           check=False)
    assert out.returncode != 0
    assert "rolled back" in out.stdout
    assert labsnap.snapshot() == clean_before
