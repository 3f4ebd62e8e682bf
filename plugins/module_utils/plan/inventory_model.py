# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory view of a fabric plan: groups and host variables, computed once for the whole fabric.

The inventory plugin is a thin wrapper around :func:`build_inventory`; keeping the logic here
lets unit tests and the benchmarks use it without Ansible.

Layers above the core (the lab) add to the inventory through one hook, ``extensions``: each is a
callable ``extension(view, context)`` run after the fabric's own hosts and groups are in place, with
an :class:`InventoryContext`. The lab's is ``lab.inventory.LabInventory``; the inventory plugin
registers it. The core never names an extension.
"""

from __future__ import annotations

import dataclasses
import os
import re

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan

_GROUP_RE = re.compile(r"[^A-Za-z0-9_]")


def group_name(prefix, name):
    """Ansible-safe group name: ``rack_lab_r1`` for rack ``lab-r1``."""
    return "%s_%s" % (prefix, _GROUP_RE.sub("_", name))


@dataclasses.dataclass
class InventoryView:
    """Hosts, groups (with parents) and host vars for one fabric."""

    groups: dict = dataclasses.field(default_factory=dict)   # group -> parent group (or None)
    hosts: dict = dataclasses.field(default_factory=dict)    # host -> {"groups": [...], "vars": {...}}

    def add_group(self, name, parent=None):
        if name not in self.groups or (parent and self.groups[name] is None):
            self.groups[name] = parent
        return name

    def add_host(self, name, groups, hostvars):
        entry = self.hosts.setdefault(name, {"groups": [], "vars": {}})
        for group in groups:
            if group not in entry["groups"]:
                entry["groups"].append(group)
        entry["vars"].update(hostvars)


@dataclasses.dataclass(frozen=True)
class InventoryContext:
    """What an inventory extension may read: the topology, its plan and the vars every host gets."""

    topo: object
    plan: FabricPlan
    common_vars: dict


def fabric_inventory(topo_data, topology_file, extensions=()):
    """Plan topology ``topo_data`` (the parsed file, plain types) and build its inventory view:
    :func:`build_inventory` of the plan, with ``extensions``. Raises TopologyError listing every problem.

    The view's variables are plain Python data (dict, list, str, int, bool, None) and share their
    parts: a GPU host's ``multinic_host`` is the same object as its entry in its ToR's
    ``multinic_rack["hosts"]``, and the vars every host gets are one dict's values. Nothing may mutate
    a view's variables after it is built (the inventory plugin hands them to Ansible as they are)."""
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import plan_topology

    plan = plan_topology(topo_data, source=topology_file)
    return build_inventory(plan.topo, os.path.abspath(topology_file), plan=plan, extensions=extensions)


def build_inventory(topo, topology_file, plan=None, extensions=()):
    """Compute the inventory view of ``topo``. ``topology_file`` is recorded for roles.

    ``extensions``: callables ``extension(view, context)`` applied in order (see the module doc).
    """
    plan = plan or FabricPlan(topo)
    view = InventoryView()
    common = {"multinic_fabric_name": topo.name, "multinic_topology_file": os.path.abspath(topology_file)}
    region = view.add_group(group_name("region", topo.region))
    for top in ("gpu_hosts", "tors", "spines"):
        view.add_group(top)

    for rack in topo.racks:
        zone = rack.parent
        building = zone.parent
        building_group = view.add_group(group_name("building", building.name), region)
        zone_group = view.add_group(group_name("zone", zone.name), building_group)
        rack_group = view.add_group(group_name("rack", rack.name), zone_group)
        rack_data = plan.rack_data(rack)
        tor = rack_data["tor"]
        platform_group = view.add_group(group_name("platform", tor["platform"]))
        tor_vars = dict(common, multinic_rack=rack_data, multinic_platform=tor["platform"])
        view.add_host(tor["name"], ["tors", rack_group, platform_group], tor_vars)
        for host in rack_data["hosts"]:
            nic_group = view.add_group("nics_%d" % host["nic_count"])
            view.add_host(host["name"], ["gpu_hosts", rack_group, nic_group], dict(common, multinic_host=host))

    for spine in topo.spines:
        zone = spine.parent
        building_group = view.add_group(group_name("building", zone.parent.name), region)
        zone_group = view.add_group(group_name("zone", zone.name), building_group)
        data = plan.spine_data(spine)
        platform_group = view.add_group(group_name("platform", data["platform"]))
        spine_vars = dict(common, multinic_spine=data, multinic_platform=data["platform"])
        view.add_host(spine.name, ["spines", zone_group, platform_group], spine_vars)

    context = InventoryContext(topo=topo, plan=plan, common_vars=common)
    for extension in extensions:
        extension(view, context)
    return view
