# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate, plan and write: the whole ``plan`` stage as one call (used by the action plugin,
the command line and the benchmarks)."""

from __future__ import annotations

import os

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core on every controller
    HAS_YAML = False

from ansible_collections.netscale.multinic.plugins.module_utils.plan_store import write_plan
from ansible_collections.netscale.multinic.plugins.module_utils.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.topology import load_topology


def read_topology_file(path):
    with open(path) as handle:
        data = yaml.safe_load(handle)
    if isinstance(data, dict):
        data.pop("lab_state_dir", None)
    return data


def run_plan(topology_path, dest, allow_renumber=False, check_mode=False, per_fabric=False):
    """Returns the write result plus the plan summary. Raises MultinicError subclasses.

    ``per_fabric``: write under ``dest/<fabric name>/`` so several fabrics (the lab, a region, an
    example) can share one intended/ without their plans being compared with each other.
    """
    topo = load_topology(read_topology_file(topology_path), source=topology_path)
    plan = FabricPlan(topo).allocate()
    base = os.path.join(dest, topo.name) if per_fabric else dest
    result = write_plan(plan, base, allow_renumber=allow_renumber, check_mode=check_mode)
    result["summary"] = plan.summary()
    result["plan_dir"] = os.path.join(base, "plan")
    return result
