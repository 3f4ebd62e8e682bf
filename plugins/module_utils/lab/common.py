# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Open a lab from its topology file (shared by the lab modules, tests and benchmarks)."""

from __future__ import annotations

import os

from ansible_collections.netscale.multinic.plugins.module_utils.lab.engine import Lab
from ansible_collections.netscale.multinic.plugins.module_utils.lab.section import lab_section
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError
from ansible_collections.netscale.multinic.plugins.module_utils.lab.spec import LabSpec
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import STATE_ROOT
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import plan_topology


def load_yaml(path):
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
        raise LabError("PyYAML is needed to read %s" % path)
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except OSError as e:
        raise LabError("topology: cannot read %s (%s); pass the path of the fabric file, e.g. "
                       "inventories/lab/fabric.yml" % (path, e.strerror))


# Options every lab_* module takes (docs: the netscale.multinic.lab_node doc fragment).
NODE_ARGUMENT_SPEC = {
    "topology": {"type": "path", "required": True},
    "state_root": {"type": "path", "default": STATE_ROOT},
}


def open_lab(topology, state_root=STATE_ROOT, **kw):
    path = os.path.abspath(topology)
    plan = plan_topology(load_yaml(path), path)
    if not lab_section(plan.topo):
        raise LabError("topology %s has no 'lab' section (value: None); a lab needs "
                       "lab: {storage: {name: ..., ipv6: ..., ipv4: ...}}" % path)
    return Lab(LabSpec(plan.topo, plan, path, tor_config_dir=kw.pop("tor_config_dir", None),
                       md5_keys=kw.pop("md5_keys", None)), state_root=state_root, **kw)
