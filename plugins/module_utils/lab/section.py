# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's keys in a topology file (the core keeps them opaque in ``Topology.addons``)."""

from __future__ import annotations

# ``lab: {storage: {name, ipv6, ipv4}}`` and the inventory plugin's ``lab_state_dir`` option.
SECTION = "lab"
STATE_DIR_OPTION = "lab_state_dir"


def lab_section(topo):
    """The topology's ``lab`` section ({} when the fabric has none)."""
    section = topo.addons.get(SECTION)
    return section if isinstance(section, dict) else {}


def storage_spine_networks(storage):
    """``spine_networks`` ToR-policy option for the storage prefixes: {family: [prefix]}."""
    return dict((family, [storage[family]]) for family in ("ipv4", "ipv6") if storage.get(family))
