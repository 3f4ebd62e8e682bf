# -*- coding: utf-8 -*-
"""`molecule test` of molecule/default (create = lab build, verify = BGP + reachability, destroy)."""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))

import labsnap  # noqa: E402


def test_molecule_default(clean_before):
    p = subprocess.run([os.path.join(labsnap.VENV_BIN, "molecule"), "test"], cwd=labsnap.REPO, env=labsnap.env(),
                       capture_output=True, text=True, timeout=900, check=False)
    assert p.returncode == 0, (p.stdout[-5000:], p.stderr[-3000:])
    assert labsnap.snapshot() == clean_before
