# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: fabric_hosts
short_description: Hosts of a fabric topology file with their groups and variables
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Reads a fabric topology file exactly as the C(netscale.multinic.fabric) inventory plugin does and
    returns the requested hosts, each with its groups and host variables.
  - Used by C(playbooks/rollout.yml) to add the ToRs, spines and storage node that a job's inventory
    lacks, for example an AWX job slice (AWX gives each slice only every N-th host of the inventory,
    infrastructure included).
options:
  _terms:
    description: Path of the topology file (the inventory plugin's source).
    required: true
    type: list
    elements: path
  names:
    description: Host names to return; V(null) returns every host.
    type: list
    elements: str
  groups:
    description: Only hosts in at least one of these groups (for example V(tors), V(spines)).
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: ToRs and spines of the topology that this inventory slice lacks
  ansible.builtin.add_host:
    name: "{{ item.name }}"
    groups: "{{ item.groups }}"
    multinic_rack: "{{ item.vars.multinic_rack | default(omit) }}"
  loop: "{{ lookup('netscale.multinic.fabric_hosts', multinic_topology_file, groups=['tors', 'spines'], wantlist=true)
            | rejectattr('name', 'in', groups['all']) }}"
"""

RETURN = r"""
_list:
  description: One entry per host, in the topology's order.
  type: list
  elements: dict
  contains:
    name:
      description: Inventory host name.
      type: str
    groups:
      description: Groups the host is a direct member of.
      type: list
      elements: str
    vars:
      description: Host variables (planned allocations; lab connection variables while the lab runs).
      type: dict
"""

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.lookup import LookupBase

try:
    from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.inventory import fabric_view
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import read_topology_or
    HAS_NETADDR = True
    import netaddr  # noqa: F401  pylint: disable=unused-import
except ImportError:
    HAS_NETADDR = False


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        if not HAS_NETADDR:
            raise AnsibleError("netscale.multinic.fabric_hosts needs the python library netaddr on the controller")
        self.set_options(var_options=variables, direct=kwargs)
        names = self.get_option("names")
        groups = self.get_option("groups")
        out = []
        for path in terms:
            # the inventory plugin's reader: PyYAML's C loader, Ansible's loader for a vaulted/tagged file
            data = read_topology_or(path, lambda p: self._loader.load_from_file(p, cache="none"))
            if not isinstance(data, dict) or data.get("plugin") != "netscale.multinic.fabric":
                raise AnsibleError("%s is not a fabric topology (plugin: netscale.multinic.fabric missing)" % path)
            try:
                view = fabric_view(data, path)
            except MultinicError as exc:
                raise AnsibleError(to_native(exc))
            for name, entry in view.hosts.items():
                if names is not None and name not in names:
                    continue
                if groups is not None and not set(groups) & set(entry["groups"]):
                    continue
                out.append({"name": name, "groups": list(entry["groups"]), "vars": dict(entry["vars"])})
        return out
