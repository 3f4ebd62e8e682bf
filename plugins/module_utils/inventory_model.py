# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory view of a fabric plan: groups and host variables, computed once for the whole fabric.

The inventory plugin is a thin wrapper around :func:`build_inventory`; keeping the logic here
lets unit tests and the benchmarks use it without Ansible.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import alive
from ansible_collections.netscale.multinic.plugins.module_utils.planner import FabricPlan

LAB_STATE_DIR = "/run/netscale-multinic/lab"
_GROUP_RE = re.compile(r"[^A-Za-z0-9_]")


def group_name(prefix, name):
    """Ansible-safe group name: ``rack_lab_r1`` for rack ``lab-r1``."""
    return "%s_%s" % (prefix, _GROUP_RE.sub("_", name))


def lab_state_path(fabric_name, state_dir=LAB_STATE_DIR):
    return os.path.join(state_dir, fabric_name, "state.json")


def read_lab_state(fabric_name, state_dir=LAB_STATE_DIR):
    """Nodes of a running lab (``{name: {"pid": int, ...}}``), or {} when no lab is up."""
    path = lab_state_path(fabric_name, state_dir)
    try:
        with open(path) as handle:
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


class InventoryView(object):
    """Hosts, groups (with parents) and host vars for one fabric."""

    def __init__(self):
        self.groups = {}      # group -> parent group (or None)
        self.hosts = {}       # host -> {"groups": [...], "vars": {...}}

    def add_group(self, name, parent=None):
        if name not in self.groups or (parent and self.groups[name] is None):
            self.groups[name] = parent
        return name

    def add_host(self, name, groups, hostvars):
        entry = self.hosts.setdefault(name, {"groups": [], "vars": {}})
        for g in groups:
            if g not in entry["groups"]:
                entry["groups"].append(g)
        entry["vars"].update(hostvars)


def build_inventory(topo, topology_file, state_dir=LAB_STATE_DIR, plan=None):
    """Compute the inventory view of ``topo``. ``topology_file`` is recorded for roles."""
    plan = plan or FabricPlan(topo)
    view = InventoryView()
    common = {"multinic_fabric_name": topo.name, "multinic_topology_file": os.path.abspath(topology_file)}
    region = view.add_group(group_name("region", topo.region))
    for top in ("gpu_hosts", "tors", "spines"):
        view.add_group(top)
    lab_nodes = read_lab_state(topo.name, state_dir) if topo.lab else {}

    for rack in topo.racks:
        zone = rack.parent
        building = zone.parent
        bgroup = view.add_group(group_name("building", building.name), region)
        zgroup = view.add_group(group_name("zone", zone.name), bgroup)
        rgroup = view.add_group(group_name("rack", rack.name), zgroup)
        rack_data = plan.rack_data(rack)
        tor = rack_data["tor"]
        pgroup = view.add_group(group_name("platform", tor["platform"]))
        tor_vars = dict(common, multinic_rack=rack_data, multinic_platform=tor["platform"])
        view.add_host(tor["name"], ["tors", rgroup, pgroup], tor_vars)
        for host in rack_data["hosts"]:
            ngroup = view.add_group("nics_%d" % host["nic_count"])
            view.add_host(host["name"], ["gpu_hosts", rgroup, ngroup], dict(common, multinic_host=host))

    for spine in topo.spines:
        zone = spine.parent
        bgroup = view.add_group(group_name("building", zone.parent.name), region)
        zgroup = view.add_group(group_name("zone", zone.name), bgroup)
        data = plan.spine_data(spine)
        pgroup = view.add_group(group_name("platform", data["platform"]))
        spine_vars = dict(common, multinic_spine=data, multinic_platform=data["platform"])
        view.add_host(spine.name, ["spines", zgroup, pgroup], spine_vars)

    storage = topo.lab.get("storage") if isinstance(topo.lab, dict) else None
    if isinstance(storage, dict) and storage.get("name"):
        view.add_group("lab_storage")
        view.add_host(storage["name"], ["lab_storage"], dict(common, multinic_storage=dict(storage)))

    for name, node in lab_nodes.items():
        if name in view.hosts:
            view.hosts[name]["vars"].update({
                "ansible_connection": "community.docker.nsenter",
                "ansible_nsenter_pid": node["pid"],
                "ansible_python_interpreter": "/usr/bin/python3",
                "multinic_lab_node": dict(node),
            })
    return view
