# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hierarchical dual-stack address planner.

Every address is a pure function of (pools, capacities, ids): prefix lengths come from the
capacities (``ceil(log2(capacity))`` bits per level), an entity's prefix is its parent's plus
``(id - 1)`` in that level's bits. Adding, removing or reordering entities therefore never moves
another one. Arithmetic is on integers; strings are made only when structured data is asked for.

Layout of one NIC subnet (``S`` = task slots rounded up to a power of two, at least 4)::

    offset 0        network (IPv4)          offset S .. S+slots-1     container address per slot
    offset 1        ToR gateway             offset 2S .. 2S+slots-1   task IPs (NIC 0's subnet only)
    offset 2        host NIC address

Task IPs live in NIC 0's subnet: without BGP the task IP is still reachable over NIC 0 through the
connected subnet route (graceful degradation), and the rack aggregate covers it.
"""

from __future__ import annotations

import dataclasses
import socket

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, TopologyError

LEVELS = ("region", "building", "zone", "rack", "host", "nic")
ROUTER_ID_FALLBACK_BASE = 0xF0000000  # 240.0.0.0/4: reserved, never routed; only an identifier


def clog2(n):
    """Bits needed for n distinct values (1 -> 0)."""
    return (n - 1).bit_length() if n > 1 else 0


def fmt_addr(value, version):
    """Canonical text of an address integer (RFC 5952 compression for IPv6)."""
    if version == 6:
        return socket.inet_ntop(socket.AF_INET6, value.to_bytes(16, "big"))
    return socket.inet_ntop(socket.AF_INET, value.to_bytes(4, "big"))


def fmt_net(value, length, version):
    return "%s/%d" % (fmt_addr(value, version), length)


class FamilyLayout(object):
    """Prefix lengths and arithmetic for one address family of the fabric pool."""

    def __init__(self, version, pool, capacity, nic_len):
        self.version = version
        self.bits = 128 if version == 6 else 32
        self.pool_net, self.pool_len = pool
        self.slot_block = 1 << clog2(max(capacity["task_slots"], 4))
        self.nic_len = nic_len
        lengths = {"nic": nic_len}
        lengths["host"] = nic_len - clog2(capacity["nics"])
        lengths["rack"] = lengths["host"] - clog2(capacity["hosts"])
        lengths["zone"] = lengths["rack"] - clog2(capacity["racks"])
        lengths["building"] = lengths["zone"] - clog2(capacity["zones"])
        lengths["region"] = lengths["building"] - clog2(capacity["buildings"])
        self.lengths = lengths
        self.region_net = self.pool_net

    def step(self, level):
        return 1 << (self.bits - self.lengths[level])

    def node_net(self, topo, node):
        """Network integer of a building, zone or rack node (honours pins)."""
        pin = node.pins.get(self.version)
        if pin is not None:
            return pin[0]
        parent_net = self.region_net if node.parent is None else self.node_net(topo, node.parent)
        return parent_net + node.index * self.step(node.kind)

    def parent_net(self, topo, node):
        if node.parent is None:
            return self.region_net, self.lengths["region"]
        return self.node_net(topo, node.parent), self.lengths[node.parent.kind]


def _family_layout(version, topo, out):
    pool = topo.parsed_pools.get(("fabric", version))
    if pool is None:
        return None
    if version == 6:
        nic_len = topo.addressing.get("ipv6_nic_prefix_length", 64)
    else:
        nic_len = 32 - clog2(4 * (1 << clog2(max(topo.capacity["task_slots"], 4))))
    layout = FamilyLayout(version, pool, topo.capacity, nic_len)
    if layout.lengths["region"] < layout.pool_len:
        ls = layout.lengths
        out.append(InputProblem(
            "pools.ipv%d" % version, topo.pools["ipv%d" % version],
            "pool too small for the capacities: they need a /%d (building /%d, zone /%d, rack /%d, host /%d, "
            "NIC subnet /%d)" % (ls["region"], ls["building"], ls["zone"], ls["rack"], ls["host"], ls["nic"]),
            "use a /%d or larger pool, or lower capacity.* (each halving frees one bit)" % ls["region"]))
    if version == 6 and nic_len > layout.bits - clog2(3 * layout.slot_block):
        out.append(InputProblem("addressing.ipv6_nic_prefix_length", nic_len,
                                "NIC subnet too small for %d task slots" % topo.capacity["task_slots"],
                                "use a shorter NIC prefix length (64 is the usual choice)"))
    return layout


class InfraLayout(object):
    """Loopbacks (first half of the infrastructure pool) and spine-ToR links (second half)."""

    def __init__(self, version, pool):
        self.version = version
        self.bits = 128 if version == 6 else 32
        net, length = pool
        self.pool_len = length
        self.half = 1 << (self.bits - length - 1)
        self.loopbacks = net
        self.links = net + self.half
        self.link_len = self.bits - 1


def layouts_for(topo):
    """Family layouts of the fabric pool ({6: FamilyLayout, 4: FamilyLayout}); raises on misfit."""
    problems = []
    layouts = {}
    for version in (6, 4):
        layout = _family_layout(version, topo, problems)
        if layout is not None:
            layouts[version] = layout
    if problems:
        raise TopologyError(problems, topo.source)
    return layouts


def infra_layouts_for(topo):
    problems = []
    layouts = {}
    totals = topo.totals
    for version in (6, 4):
        pool = topo.parsed_pools.get(("infra", version))
        if pool is None:
            continue
        infra = InfraLayout(version, pool)
        need_loop = 1 + totals["racks"] + totals["spines"]
        need_link = 2 * totals["racks"] * topo.capacity["spines"]
        need = max(need_loop, need_link)
        if need > infra.half:
            want = infra.bits - clog2(need) - 1
            problems.append(InputProblem(
                "pools.infrastructure.ipv%d" % version, topo.pools["infrastructure"]["ipv%d" % version],
                "too small: %d loopbacks and %d link addresses need a /%d" % (need_loop, need_link, want),
                "use a /%d or larger infrastructure pool, or lower capacity.racks/spines" % want))
        layouts[version] = infra
    if problems:
        raise TopologyError(problems, topo.source)
    return layouts


@dataclasses.dataclass(slots=True)
class HostAlloc:
    """Integer allocations of one host, per family: host prefix, NIC subnets, slot addresses."""

    host: object
    gindex: int
    # nets[v] = (host prefix, range of NIC subnet networks); task_ips[v] = range over slots;
    # containers[v][nic] = range over slots of that NIC's container addresses.
    nets: dict = dataclasses.field(default_factory=dict)
    task_ips: dict = dataclasses.field(default_factory=dict)
    containers: dict = dataclasses.field(default_factory=dict)


class FabricPlan(object):
    """The computed plan. ``allocate()`` computes every allocation; ``*_data()`` give structured data."""

    def __init__(self, topo):
        self.topo = topo
        self.layouts = layouts_for(topo)
        self.infra = infra_layouts_for(topo)
        self.allocs = {}

    # -- computation -------------------------------------------------------------------------
    def allocate(self, hosts=None):
        """Compute integer allocations for ``hosts`` (default: all). Returns self."""
        topo = self.topo
        for host in (topo.hosts if hosts is None else hosts):
            self.allocs[host.name] = self._alloc_host(host)
        return self

    def _alloc_host(self, host):
        topo = self.topo
        alloc = HostAlloc(host, topo.host_gindex(host))
        rack = host.parent
        slots = host.task_slots
        for version, lay in self.layouts.items():
            host_net = lay.node_net(topo, rack) + host.index * lay.step("host")
            nic_step = lay.step("nic")
            block = lay.slot_block
            nics = range(host_net, host_net + host.nics * nic_step, nic_step)
            alloc.nets[version] = (host_net, nics)
            # Slot addresses are contiguous blocks: a range per NIC is the exact allocation (what an
            # IPAM would record), without one Python int per address (4M at metro scale).
            first_task = nics[0] + 2 * block
            alloc.task_ips[version] = range(first_task, first_task + slots)
            alloc.containers[version] = [range(nic + block, nic + block + slots) for nic in nics]
        return alloc

    def alloc(self, host):
        a = self.allocs.get(host.name)
        if a is None:
            a = self.allocs[host.name] = self._alloc_host(host)
        return a

    # -- infrastructure ----------------------------------------------------------------------
    def _loopback(self, index):
        return {"ipv%d" % v: fmt_addr(lay.loopbacks + 1 + index, v) for v, lay in sorted(self.infra.items(), reverse=True)}

    def _router_id(self, index):
        lay = self.infra.get(4)
        value = (lay.loopbacks + 1 + index) if lay else (ROUTER_ID_FALLBACK_BASE + 1 + index)
        return fmt_addr(value, 4)

    def _link(self, rack, spine):
        topo = self.topo
        idx = topo.rack_gindex(rack) * topo.capacity["spines"] + spine.index
        out = {}
        for v, lay in sorted(self.infra.items(), reverse=True):
            base = lay.links + 2 * idx
            out["ipv%d" % v] = {"prefix": fmt_net(base, lay.link_len, v), "spine": fmt_addr(base, v),
                                "tor": fmt_addr(base + 1, v), "length": lay.link_len}
        return out

    def tor_asn(self, rack):
        return self.topo.asn["tor"] + self.topo.rack_gindex(rack)

    def spine_asn(self, zone):
        return self.topo.asn["spine"] + self.topo.zone_gindex(zone)

    def host_asn(self, host):
        return self.topo.asn["host"] + self.topo.host_gindex(host)

    # -- structured data ---------------------------------------------------------------------
    def _prefixes(self, node):
        return {"ipv%d" % v: fmt_net(lay.node_net(self.topo, node), lay.lengths[node.kind], v)
                for v, lay in sorted(self.layouts.items(), reverse=True)}

    def host_data(self, host):
        """Structured allocation of one host: what roles and templates consume."""
        a = self.alloc(host)
        rack = host.parent
        zone = rack.parent
        fams = sorted(self.layouts.items(), reverse=True)
        nics = []
        for k in range(host.nics):
            nic = {"index": k, "name": host.nic_names[k], "tor_port": tor_port_name(host, k),
                   "subnet": {}, "gateway": {}, "address": {}}
            for v, lay in fams:
                net = a.nets[v][1][k]
                key = "ipv%d" % v
                nic["subnet"][key] = fmt_net(net, lay.nic_len, v)
                nic["gateway"][key] = fmt_addr(net + 1, v)
                nic["address"][key] = fmt_addr(net + 2, v)
            nics.append(nic)
        slots = []
        for s in range(host.task_slots):
            slot = {"slot": s + 1, "netns": slot_netns(s + 1), "task_ip": {},
                    "nics": [{"index": k, "address": {}} for k in range(host.nics)]}
            for v, _lay in fams:
                key = "ipv%d" % v
                slot["task_ip"][key] = fmt_addr(a.task_ips[v][s], v)
                for k, per_nic in enumerate(a.containers[v]):
                    slot["nics"][k]["address"][key] = fmt_addr(per_nic[s], v)
            slots.append(slot)
        task_block = {}
        for v, lay in fams:
            first = a.task_ips[v][0]
            task_block["ipv%d" % v] = _cover(first, host.task_slots, v)
        return {
            "name": host.name,
            "id": host.id,
            "path": host.path,
            "region": self.topo.region,
            "building": zone.parent.name,
            "zone": zone.name,
            "rack": rack.name,
            "tor": rack.pins["tor_name"],
            "asn": self.host_asn(host),
            "tor_asn": self.tor_asn(rack),
            "nic_count": host.nics,
            "task_slot_count": host.task_slots,
            "prefix": {"ipv%d" % v: fmt_net(a.nets[v][0], lay.lengths["host"], v) for v, lay in fams},
            "task_ip_prefixes": task_block,
            "nics": nics,
            "slots": slots,
        }

    def rack_data(self, rack):
        topo = self.topo
        zone = rack.parent
        gidx = topo.rack_gindex(rack)
        spines = sorted((s for s in topo.spines if s.parent is zone), key=lambda s: s.id)
        return {
            "name": rack.name,
            "id": rack.id,
            "path": rack.path,
            "region": topo.region,
            "building": zone.parent.name,
            "zone": zone.name,
            "prefix": self._prefixes(rack),
            "tor": {
                "name": rack.pins["tor_name"],
                "platform": rack.pins["tor_platform"],
                "asn": self.tor_asn(rack),
                "router_id": self._router_id(gidx),
                "loopback": self._loopback(gidx),
                "uplinks": [dict(spine=s.name, spine_asn=self.spine_asn(zone), interface=uplink_port_name(s),
                                 **self._link(rack, s)) for s in spines],
            },
            "hosts": [self.host_data(h) for h in sorted(rack.children, key=lambda h: h.id)],
        }

    def spine_data(self, spine):
        topo = self.topo
        zone = spine.parent
        idx = topo.totals["racks"] + topo.spine_gindex(spine)
        racks = sorted(zone.children, key=lambda r: r.id)
        return {
            "name": spine.name,
            "id": spine.id,
            "path": spine.path,
            "platform": spine.data.get("platform") or "frr",
            "region": topo.region,
            "building": zone.parent.name,
            "zone": zone.name,
            "asn": self.spine_asn(zone),
            "router_id": self._router_id(idx),
            "loopback": self._loopback(idx),
            "zone_prefix": self._prefixes(zone),
            "downlinks": [dict(rack=r.name, tor=r.pins["tor_name"], tor_asn=self.tor_asn(r),
                               interface=downlink_port_name(r), rack_prefix=self._prefixes(r),
                               **self._link(r, spine)) for r in racks],
        }

    def summary(self):
        topo = self.topo
        counts = {"buildings": len(topo.buildings), "zones": len(topo.zones), "racks": len(topo.racks),
                  "spines": len(topo.spines), "hosts": len(topo.hosts),
                  "nics": sum(h.nics for h in topo.hosts), "task_slots": sum(h.task_slots for h in topo.hosts)}
        counts["task_ips"] = counts["task_slots"] * len(self.layouts)
        counts["container_addresses"] = sum(h.nics * h.task_slots for h in topo.hosts) * len(self.layouts)
        nic_mix = {}
        for h in topo.hosts:
            nic_mix[h.nics] = nic_mix.get(h.nics, 0) + 1
        fams = {}
        for v, lay in sorted(self.layouts.items(), reverse=True):
            ls = lay.lengths
            fams["ipv%d" % v] = {
                "pool": fmt_net(lay.pool_net, lay.pool_len, v),
                "region_aggregate": fmt_net(lay.region_net, ls["region"], v),
                "lengths": dict(ls),
                "slot_block": lay.slot_block,
                # Share of the region aggregate's rack prefixes in use, and of the pool.
                "rack_utilisation": round(len(topo.racks) / float(topo.totals["racks"]), 6),
                "pool_utilisation": round(2.0 ** (lay.pool_len - ls["region"]), 6),
            }
        return {"fabric": topo.name, "region": topo.region, "capacity": dict(topo.capacity),
                "counts": counts, "hosts_by_nic_count": {str(k): v for k, v in sorted(nic_mix.items())},
                "families": fams}


def _cover(first, count, version):
    """Minimal list of CIDR prefixes covering exactly ``count`` addresses from ``first``."""
    bits = 128 if version == 6 else 32
    out = []
    cur, end = first, first + count
    while cur < end:
        size = cur & -cur if cur else 1 << bits
        while size > end - cur:
            size >>= 1
        out.append(fmt_net(cur, bits - clog2(size), version))
        cur += size
    return out


def tor_port_name(host, k):
    """ToR-side interface facing NIC k of a host (at most 15 characters)."""
    # Host ids are unique per rack; the port name only needs to be unique on its ToR.
    return "host%d-%d" % (host.id, k)


def uplink_port_name(spine):
    return "up-s%d" % spine.id


def downlink_port_name(rack):
    return "down-r%d" % rack.id


def slot_netns(slot):
    """Network namespace name of a task slot's workload."""
    return "mn-slot%d" % slot
