# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slicing that cannot fail on shape (issue 27 item 6), live: the AWX workflow "multinic rollout" run as AWX
runs it (labkit.awx_jobs) on a lab fabric of the lab's shape with ``awx_fleet_slices: 3``. AWX gives slice 3
only the two ToRs: it must end successful, its report saying "nothing to deploy", and the workflow passes;
slices 1 and 2 deploy their fleet host each. The other slice counts: the preflight decision is unit-tested for
every count 1..8 (tests/unit/rollout/test_decide.py), the live loop 1..8 is bench/awx_slices.py (docs/awx.md).
Needs root; fails (never skips) without. Run under the lab lock."""

from __future__ import annotations

import os
import shutil

import pytest

from labkit import awx_slices

pytestmark = pytest.mark.e2e


def test_fleet_slice_without_a_gpu_host_is_nothing_to_deploy(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("the AWX slices e2e test needs root (namespaces, FRR, systemd lab hosts)")
    work = str(tmp_path)
    topology = awx_slices.prepare(work)
    try:
        built = awx_slices.lab(topology, "present")
        assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-2000:]
        out, _wall, rc = awx_slices.workflow(topology, work, 3)
        rows = awx_slices.fleet_slices(out)
        assert awx_slices.check(out, 3) == [], rows
        assert rc == 0
        empty = [r for r in rows if not r["waves"]]
        assert [r["slice"] for r in empty] == ["3/3"], rows          # only the ToRs: nothing to deploy
        assert "nothing to deploy" in empty[0]["message"]
        assert all(r["waves"] for r in rows if r["slice"] != "3/3"), rows   # the others ran their fleet wave
    finally:
        awx_slices.lab(topology, "absent")
        shutil.rmtree(os.path.join(work, "awx"), ignore_errors=True)
    assert not os.path.exists(awx_slices.STATE_DIR)
