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
  - A topology that fails to parse stops the run (rc 1, its problems listed) whatever C([inventory]
    unparsed_is_failed) and C(any_unparsed_is_failed) say - the plugin sets the latter for the run.
  - Built for fleets (100K to 1M GPUs) - see C(docs/topology.md), "The inventory at fleet scale".
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

from ansible import constants as C
from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin
from ansible.module_utils.common.text.converters import to_native

try:
    from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
    from ansible_collections.netscale.multinic.plugins.module_utils.gcpause import gc_paused
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.inventory_model import fabric_inventory
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import read_topology_or
    HAS_NETADDR = True
    import netaddr  # noqa: F401  pylint: disable=unused-import
except ImportError:
    HAS_NETADDR = False

# The topology keys of the lab add-on (module_utils/lab/section.py): the lab package is imported, and
# its inventory extension run, only for a topology that has a lab section.
LAB_SECTION = "lab"
LAB_STATE_DIR_OPTION = "lab_state_dir"


class InventoryModule(BaseInventoryPlugin):
    NAME = "netscale.multinic.fabric"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith((".yml", ".yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        # A region's inventory is millions of small dicts and lists built at once: the cyclic garbage
        # collector is paused while it is built (its full collections over the growing heap were 60 %
        # of the load), then one collection frees the planner's topology and gc.freeze() keeps the
        # inventory, which lives as long as the run, out of later collections (module_utils/gcpause.py).
        try:
            with gc_paused(freeze=True):
                self._parse(loader, path)
        except Exception:
            # Ansible turns a source that fails to parse into a [WARNING] and runs the play on no hosts
            # (rc 0) unless [inventory] any_unparsed_is_failed is set. A fabric whose topology does not
            # parse must stop every playbook whatever the user's configuration says: force that setting
            # for this run, so that the inventory manager raises its "Completely failed to parse" error
            # after listing our problems (ansible/inventory/manager.py, parse_source).
            C.INVENTORY_ANY_UNPARSED_IS_FAILED = True
            raise

    def _parse(self, loader, path):
        if not HAS_NETADDR:
            raise AnsibleParserError("the netscale.multinic.fabric inventory plugin needs the python library "
                                     "netaddr on the controller (pip install netaddr)")
        data = self._load(loader, path)
        if not isinstance(data, dict) or data.get("plugin") != self.NAME:
            raise AnsibleParserError("%s is not a fabric topology (plugin: %s missing)" % (path, self.NAME))
        # The file is both the plugin's config and the topology: lab_state_dir, the only option, is an
        # add-on key of the topology that the lab's inventory extension reads.
        extensions = []
        if data.get(LAB_SECTION):
            from ansible_collections.netscale.multinic.plugins.module_utils.lab.inventory import LabInventory
            from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import STATE_ROOT
            extensions.append(LabInventory(data.get(LAB_STATE_DIR_OPTION) or STATE_ROOT))
        try:
            view = fabric_inventory(data, path, extensions=extensions)
        except MultinicError as exc:
            raise AnsibleParserError(to_native(exc))
        self._populate(view)

    @staticmethod
    def _load(loader, path):
        """The topology file's content as plain data: PyYAML's safe (C) loader, the same YAML schema as
        Ansible's loader without its per-value origin tags (a fleet's file is ~10x faster this way); a
        vault-encrypted file or one with Ansible's YAML tags (!vault, !unsafe) goes through Ansible's
        loader."""
        return read_topology_or(path, lambda p: loader.load_from_file(p, cache="none"))

    def _populate(self, view):
        # Ansible 2.19 wraps the inventory of a plugin in a proxy whose set_variable deep-copies every
        # value and tags each nested str/int/dict/list with its origin (AnsibleVariableVisitor); with
        # a region's host variables that walk was 65 % of a play's start-up and most of its memory.
        # Our values are plain data (dict, list, str, int, bool, None) built by the core, never
        # templates (untrusted either way: a plain str is not templated in 2.19), and never mutated
        # after this point, so they are set on the inventory data itself, shared between hosts as the
        # core built them. docs/performance.md, "Fleet scale", says what this leaves out (the origin
        # tag that error messages quote).
        #
        # Hosts join their groups before the groups are linked to their parents: a host added to a
        # linked group walks the group's ancestors (rack, zone, building, region) once per host, a
        # group linked afterwards hands its new ancestors to its hosts in one pass. Same memberships.
        inventory = getattr(self.inventory, "__wrapped__", self.inventory)
        groups = sorted(view.groups.items())
        for group, _parent in groups:
            inventory.add_group(group)
        for host, entry in view.hosts.items():
            inventory.add_host(host)
            for group in entry["groups"]:
                inventory.add_child(group, host)
            for key, value in entry["vars"].items():
                inventory.set_variable(host, key, value)
        for group, parent in groups:
            if parent:
                inventory.add_child(parent, group)
