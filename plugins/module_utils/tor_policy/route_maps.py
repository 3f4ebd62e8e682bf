# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Route-map names: inbound per task slot on a ToR, inbound per rack on a spine.

The route-map bodies (match the slot's prefix-list, tag the host communities; deny everything else)
are in the templates; the model only names them.
"""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.names import slot_name


def slot_route_maps_in(host, slot, families):
    return {fam: "RM-HOST-%s-%s-IN" % (slot_name(host["name"], slot["slot"]), fam.upper()) for fam in families}


def spine_rack_route_map_in(rack_name, family):
    return "RM-TOR-%s-%s-IN" % (rack_name, family.upper())
