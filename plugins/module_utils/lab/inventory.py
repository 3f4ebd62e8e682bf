# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's addition to the inventory, registered by the inventory plugin through the core's one
hook (``inventory_model.build_inventory(..., extensions=[LabInventory(...)])``).

It adds the storage node (group ``lab_storage``, var ``multinic_storage``), gives every fabric host
``tor_bgp_spine_networks`` (the storage prefixes the lab's first spine originates, so a ToR-policy
render of a lab spine keeps them) and, while the lab runs, points lab nodes at their namespaces
(``community.docker.nsenter`` with the PID from the lab state file).
"""

from __future__ import annotations

import json

from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import alive
from ansible_collections.netscale.multinic.plugins.module_utils.lab.section import lab_section, storage_spine_networks
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import STATE_ROOT, state_file


def read_lab_state(fabric_name, state_dir=STATE_ROOT):
    """Nodes of a running lab (``{name: {"pid": int, ...}}``), or {} when no lab is up."""
    try:
        with open(state_file(fabric_name, state_dir)) as handle:
            state = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    nodes = state.get("nodes") or {}
    # A stale state file (lab torn down uncleanly, machine rebooted) must not point Ansible at
    # some unrelated process that reused the PID: keep nodes whose PID is alive with the start
    # time the lab recorded.
    live = {}
    for name, node in nodes.items():
        pid = node.get("pid") if isinstance(node, dict) else None
        if isinstance(pid, int) and alive(pid, node.get("started")):
            live[name] = node
    return live


class LabInventory(object):
    """Inventory extension of the lab (see the module doc). ``state_dir``: where labs keep state."""

    def __init__(self, state_dir=STATE_ROOT):
        self.state_dir = state_dir or STATE_ROOT

    def __call__(self, view, context):
        section = lab_section(context.topo)
        if not section:
            return
        storage = section.get("storage")
        if isinstance(storage, dict) and storage.get("name"):
            view.add_group("lab_storage")
            view.add_host(storage["name"], ["lab_storage"], dict(context.common_vars, multinic_storage=dict(storage)))
            networks = storage_spine_networks(storage)
            if networks:
                for name in view.hosts:
                    view.hosts[name]["vars"].setdefault("tor_bgp_spine_networks", networks)
        for name, node in read_lab_state(context.topo.name, self.state_dir).items():
            if name in view.hosts:
                view.hosts[name]["vars"].update({
                    "ansible_connection": "community.docker.nsenter",
                    "ansible_nsenter_pid": node["pid"],
                    # the lab's interpreter (lab/interpreter.py) when the build installed it
                    "ansible_python_interpreter": node.get("python") or "/usr/bin/python3",
                    "multinic_lab_node": dict(node),
                })


def fabric_view(topo_data, path):
    """The inventory of a topology file as the fabric inventory plugin yields it (groups and hosts with
    their variables, lab connections included): ``topo_data`` is the file's parsed content (Ansible's
    tagged YAML types are made plain). The plugin itself calls ``fabric_inventory`` and adds the lab's
    extension only for a topology with a lab section: the same result, without importing the lab."""
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.inventory_model import fabric_inventory
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.section import STATE_DIR_OPTION
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import plain

    topo_data = plain(topo_data)
    lab = LabInventory(topo_data.get(STATE_DIR_OPTION) or STATE_ROOT)
    return fabric_inventory(topo_data, path, extensions=[lab])
