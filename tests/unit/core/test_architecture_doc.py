# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/architecture.md's picture of module_utils is the code's: regenerated, it does not change."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(REPO, "scripts", "gen-architecture-doc.py")


def test_architecture_picture_is_current():
    run = subprocess.run([sys.executable, SCRIPT, "--check"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_picture_has_no_arrow_pointing_up():
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("gen_architecture_doc", SCRIPT)
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
    finally:
        sys.path.pop(0)
    rooms, arrows, floors, upward = gen.picture(gen.sources())
    assert "plan" in rooms and "frr" in rooms
    assert upward == []
    assert all(floors[src] > floors[dst] for (src, dst) in arrows)
