# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The topology that correlation reads: host -> rack/ToR/zone, NIC -> ToR port, zone -> spines.

Built from the plan (:class:`FabricPlan` or its :class:`Topology`) or from the plan's structured
data (``rack_data``/``spine_data`` dictionaries, as written under intended/plan). Compact on
purpose: a 125K-host region is a few dicts of tuples. No Ansible imports.
"""

from __future__ import annotations


class FabricIndex(object):
    """Lookups by name. Racks and zones are numbered in the order they were added."""

    __slots__ = ("hosts", "racks", "tor_rack", "zones", "zone_index", "spines", "nic_names")

    def __init__(self):
        self.hosts = {}       # host -> (rack index, NIC count, host id)
        self.racks = []       # rack index -> (rack name, ToR name, zone index, [host names])
        self.tor_rack = {}    # ToR name and rack name -> rack index
        self.zones = []       # zone index -> (zone name, building, [rack indices], [spine names])
        self.zone_index = {}  # zone name -> zone index
        self.spines = {}      # spine -> zone index
        self.nic_names = {}   # host -> [interface names], only where they differ from eth0..ethN-1

    # -- building -----------------------------------------------------------------------------
    def _zone(self, name, building):
        z = self.zone_index.get(name)
        if z is None:
            z = self.zone_index[name] = len(self.zones)
            self.zones.append((name, building, [], []))
        return z

    def add_rack(self, name, tor, zone, building, hosts):
        """hosts: iterable of (name, NIC count, host id[, interface names])."""
        z = self._zone(zone, building)
        r = len(self.racks)
        names = []
        for entry in hosts:
            host, nics, hid = entry[:3]
            self.hosts[host] = (r, nics, hid)
            if len(entry) > 3 and entry[3] and list(entry[3]) != ["eth%d" % k for k in range(nics)]:
                self.nic_names[host] = list(entry[3])
            names.append(host)
        self.racks.append((name, tor, z, names))
        self.tor_rack[tor] = r
        self.tor_rack[name] = r
        self.zones[z][2].append(r)
        return r

    def add_spine(self, name, zone, building=None):
        z = self._zone(zone, building)
        self.spines[name] = z
        self.zones[z][3].append(name)

    @classmethod
    def from_topology(cls, topo):
        """From a validated :class:`Topology` (``FabricPlan.topo``); no address is computed."""
        idx = cls()
        for rack in topo.racks:
            zone = rack.parent
            idx.add_rack(rack.name, rack.pins.get("tor_name") or "%s-tor" % rack.name, zone.name, zone.parent.name,
                         ((h.name, h.nics, h.id, h.nic_names) for h in sorted(rack.children, key=lambda h: h.id)))
        for spine in topo.spines:
            idx.add_spine(spine.name, spine.parent.name, spine.parent.parent.name)
        return idx

    @classmethod
    def from_plan(cls, plan):
        return cls.from_topology(plan.topo)

    @classmethod
    def from_plan_data(cls, racks, spines=()):
        """From ``FabricPlan.rack_data()`` / ``spine_data()`` dictionaries (the intended/plan files)."""
        idx = cls()
        for rack in racks:
            idx.add_rack(rack["name"], rack["tor"]["name"], rack["zone"], rack.get("building"),
                         ((h["name"], h["nic_count"], h["id"], [n["name"] for n in h.get("nics") or ()])
                          for h in rack["hosts"]))
            for up in rack["tor"].get("uplinks") or ():
                if up["spine"] not in idx.spines:
                    idx.add_spine(up["spine"], rack["zone"], rack.get("building"))
        for spine in spines:
            if spine["name"] not in idx.spines:
                idx.add_spine(spine["name"], spine["zone"], spine.get("building"))
        return idx

    # -- lookups ------------------------------------------------------------------------------
    def rack_of_host(self, host):
        ref = self.hosts.get(host)
        return None if ref is None else ref[0]

    def rack_of_tor(self, tor):
        return self.tor_rack.get(tor)

    def tor_name(self, r):
        return self.racks[r][1]

    def rack_name(self, r):
        return self.racks[r][0]

    def zone_of_rack(self, r):
        return self.racks[r][2]

    def zone_name(self, z):
        return self.zones[z][0]

    def rack_hosts(self, r):
        return self.racks[r][3]

    def zone_racks(self, z):
        return self.zones[z][2]

    def zone_spines(self, z):
        return self.zones[z][3]

    def nic_count(self, host):
        ref = self.hosts.get(host)
        return None if ref is None else ref[1]

    def nic_index(self, host, name):
        """1-based index of interface ``name`` on ``host`` (None when unknown)."""
        names = self.nic_names.get(host)
        if names is not None:
            return names.index(name) + 1 if name in names else None
        if isinstance(name, str) and name.startswith("eth") and name[3:].isdigit():
            k = int(name[3:]) + 1
            nics = self.nic_count(host)
            return k if nics is None or k <= nics else None
        return None

    def tor_port(self, host, nic):
        """The ToR interface facing 1-based NIC ``nic`` of ``host`` (planner.tor_port_name)."""
        ref = self.hosts.get(host)
        if ref is None or nic is None:
            return None
        return "host%d-%d" % (ref[2], nic - 1)
