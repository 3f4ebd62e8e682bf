# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: fabric
short_description: Hosts and groups from a netscale.multinic fabric topology file
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Reads a fabric topology file (the single source of truth of region, buildings, AI zones, racks,
    ToRs, spines and GPU hosts), validates it and plans its addresses.
  - Yields every GPU host, ToR and spine as an inventory host, grouped by region, building, AI zone,
    rack, role (C(gpu_hosts), C(tors), C(spines)), NIC count (C(nics_2), C(nics_4)) and platform
    (C(platform_frr), C(platform_eos)).
  - Each host carries its planned allocation as host variables, computed once for the whole fabric
    (no loops over hostvars in Jinja). GPU hosts get C(multinic_host), ToRs C(multinic_rack) (their
    rack including every host), spines C(multinic_spine).
  - When the topology has a C(lab) section and the lab is running (see the C(netscale.multinic.lab)
    role), lab nodes also get C(ansible_connection=community.docker.nsenter) and
    C(ansible_nsenter_pid) so the same roles run against lab hosts and SSH hosts.
  - "The file itself is the inventory source; it must contain C(plugin: netscale.multinic.fabric) and
    end in C(.yml) or C(.yaml)."
options:
  plugin:
    description: Token that ensures this is a source file for the C(fabric) plugin.
    required: true
    type: str
    choices: [netscale.multinic.fabric]
  lab_state_dir:
    description: Directory holding running labs' state files (C(<fabric>/state.json)).
    type: path
    default: /run/netscale-multinic/lab
notes:
  - Every other key of the file is the fabric topology, documented in C(docs/topology.md) of the
    collection. Invalid topologies fail with every problem listed by its path in the file.
requirements:
  - netaddr
"""

EXAMPLES = r"""
# inventories/example/fabric.yml (excerpt)
# plugin: netscale.multinic.fabric
# name: example
# region: {name: rgn1}
# ...
#
# ansible-inventory -i inventories/example/fabric.yml --graph
# ansible -i inventories/example/fabric.yml gpu_hosts -m ansible.builtin.debug -a var=multinic_host.nics
"""

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin
from ansible.module_utils.common.text.converters import to_native

try:
    from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.inventory import fabric_view
    HAS_NETADDR = True
    import netaddr  # noqa: F401  pylint: disable=unused-import
except ImportError:
    HAS_NETADDR = False


class InventoryModule(BaseInventoryPlugin):
    NAME = "netscale.multinic.fabric"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith((".yml", ".yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        if not HAS_NETADDR:
            raise AnsibleParserError("the netscale.multinic.fabric inventory plugin needs the python library "
                                     "netaddr on the controller (pip install netaddr)")
        data = loader.load_from_file(path, cache="none")
        if not isinstance(data, dict) or data.get("plugin") != self.NAME:
            raise AnsibleParserError("%s is not a fabric topology (plugin: %s missing)" % (path, self.NAME))
        # The file is both the plugin's config and the topology: lab_state_dir, the only option, is an
        # add-on key of the topology that the lab's inventory extension reads.
        try:
            view = fabric_view(data, path)
        except MultinicError as exc:
            raise AnsibleParserError(to_native(exc))
        for group, parent in sorted(view.groups.items()):
            self.inventory.add_group(group)
        for group, parent in sorted(view.groups.items()):
            if parent:
                self.inventory.add_child(parent, group)
        for host, entry in view.hosts.items():
            self.inventory.add_host(host)
            for group in entry["groups"]:
                self.inventory.add_child(group, host)
            for key, value in entry["vars"].items():
                self.inventory.set_variable(host, key, value)
