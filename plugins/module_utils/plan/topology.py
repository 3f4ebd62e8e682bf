# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric topology: schema, validation and the in-memory model.

The topology file is the single source of truth (region > building > AI zone > rack > host).
Validation collects every problem with its path in the file (``buildings[1].zones[0].racks[3]``),
the offending value and a fix, and raises one :class:`TopologyError`. Nothing here writes files.
No Ansible imports: the planner, the inventory plugin, the modules and the benchmarks share it.
"""

from __future__ import annotations

import difflib
import re

try:
    import netaddr
except ImportError:  # pragma: no cover - reported by callers with a clear message
    netaddr = None

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, TopologyError

ASN_MAX = 4294967294
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
MAX_NICS = 16

# ---------------------------------------------------------------------------------------------
# Schema. Each mapping lists its keys as (name, kind, required, doc). Kinds: "str", "name",
# "int", "prefix6", "prefix4", "ifnames", "map:<schema>", "list:<schema>", "any-map", "add-on".
# "add-on" keys belong to a layer above the core (they are listed so that the file stays strictly
# validated); the core keeps their values opaque in ``Topology.addons`` and never reads them.
# docs/topology.md documents the same keys; tests check that every key here is documented.
# ---------------------------------------------------------------------------------------------
SCHEMA = {
    "topology": [
        ("plugin", "str", False, "Inventory plugin name (netscale.multinic.fabric) when the file is used as an inventory."),
        ("name", "name", True, "Fabric name; used in artifact headers."),
        ("region", "map:region", True, "The region the fabric's pools aggregate to."),
        ("capacity", "map:capacity", True, "Maximum children per level, fixed up front; addresses are sized from it."),
        ("pools", "map:pools", True, "Address pools: fabric (host-facing) and infrastructure (loopbacks, uplinks)."),
        ("addressing", "map:addressing", False, "Optional addressing knobs."),
        ("asn", "map:asn", True, "Private 4-byte ASN bases for spines, ToRs and hosts."),
        ("buildings", "list:building", True, "Buildings of the region."),
        ("lab", "add-on", False, "Section of the lab add-on (netscale.multinic.lab role, docs/lab.md); opaque to the core."),
        ("lab_state_dir", "add-on", False, "Inventory-plugin option of the lab add-on (where running labs keep their state); opaque to the core."),
    ],
    "region": [
        ("name", "name", True, "Region name."),
        ("id", "int", False, "Region id (informational)."),
    ],
    "capacity": [
        ("buildings", "int", True, "Maximum buildings in the region."),
        ("zones", "int", True, "Maximum AI zones per building."),
        ("racks", "int", True, "Maximum racks per AI zone (Meta: 252)."),
        ("hosts", "int", True, "Maximum GPU hosts per rack."),
        ("nics", "int", True, "Maximum NICs per host (1-16)."),
        ("task_slots", "int", True, "Task slots (workload containers) per host."),
        ("spines", "int", True, "Maximum spines per AI zone."),
    ],
    "pools": [
        ("ipv6", "prefix6", True, "Fabric IPv6 pool: region > building > zone > rack > host > NIC subnet."),
        ("ipv4", "prefix4", False, "Fabric IPv4 pool (optional: omit for an IPv6-only fabric)."),
        ("infrastructure", "map:infrastructure", True, "Pool for loopbacks and spine-ToR links."),
    ],
    "infrastructure": [
        ("ipv6", "prefix6", True, "IPv6 loopbacks (first half) and spine-ToR /127 links (second half)."),
        ("ipv4", "prefix4", False, "IPv4 loopbacks (first half) and spine-ToR /31 links (second half)."),
    ],
    "addressing": [
        ("ipv6_nic_prefix_length", "int", False, "Length of each IPv6 NIC subnet (default 64)."),
    ],
    "asn": [
        ("spine", "int", True, "ASN of zone 1's spines; zone n uses spine + n - 1 (global zone index)."),
        ("tor", "int", True, "ASN base for ToRs: tor + global rack index."),
        ("host", "int", True, "ASN base for hosts: host + global host index."),
    ],
    "building": [
        ("id", "int", True, "Stable id within the region, 1..capacity.buildings."),
        ("name", "name", True, "Unique name."),
        ("ipv6_prefix", "prefix6", False, "Pin the building's IPv6 prefix (brownfield); must lie in the region."),
        ("ipv4_prefix", "prefix4", False, "Pin the building's IPv4 prefix (brownfield); must lie in the region."),
        ("zones", "list:zone", True, "AI zones of the building."),
    ],
    "zone": [
        ("id", "int", True, "Stable id within the building, 1..capacity.zones."),
        ("name", "name", True, "Unique name."),
        ("ipv6_prefix", "prefix6", False, "Pin the zone's IPv6 prefix; must lie in its building."),
        ("ipv4_prefix", "prefix4", False, "Pin the zone's IPv4 prefix; must lie in its building."),
        ("spines", "list:spine", False, "Spine switches of the zone."),
        ("racks", "list:rack", True, "Racks of the zone."),
    ],
    "spine": [
        ("id", "int", True, "Stable id within the zone, 1..capacity.spines."),
        ("name", "name", True, "Unique inventory hostname."),
        ("platform", "str", False, "Device platform: frr (default), sonic or eos."),
    ],
    "rack": [
        ("id", "int", True, "Stable id within the zone, 1..capacity.racks."),
        ("name", "name", True, "Unique name."),
        ("ipv6_prefix", "prefix6", False, "Pin the rack's IPv6 prefix; must lie in its zone."),
        ("ipv4_prefix", "prefix4", False, "Pin the rack's IPv4 prefix; must lie in its zone."),
        ("tor", "map:tor", False, "The rack's top-of-rack switch."),
        ("hosts", "list:host", True, "GPU hosts of the rack."),
    ],
    "tor": [
        ("name", "name", False, "Inventory hostname (default: <rack>-tor)."),
        ("platform", "str", False, "Device platform: frr (default), sonic or eos."),
    ],
    "host": [
        ("id", "int", True, "Stable id within the rack, 1..capacity.hosts."),
        ("name", "name", True, "Unique inventory hostname."),
        ("nics", "int", True, "Number of NICs, 1..capacity.nics."),
        ("nic_names", "ifnames", False, "Interface names, one per NIC (default eth0..ethN-1)."),
        ("task_slots", "int", False, "Task slots in use, 1..capacity.task_slots (default: all)."),
    ],
}

PLATFORMS = ("frr", "sonic", "eos")


def _kind_schema(kind):
    return kind.split(":", 1)[1] if ":" in kind else None


def _join(path, key):
    return "%s.%s" % (path, key) if path else key


class _Collector(object):
    def __init__(self):
        self.problems = []

    def add(self, path, value, message, fix):
        self.problems.append(InputProblem(path, value, message, fix))


def _parse_prefix(text, version, path, out):
    """Parse a CIDR prefix strictly; return (network_int, prefixlen) or None."""
    if not isinstance(text, str):
        out.add(path, text, "expected an IPv%d prefix in CIDR form" % version, "write it as a string, e.g. %s"
                % ("fd00:100::/40" if version == 6 else "198.18.0.0/16"))
        return None
    try:
        net = netaddr.IPNetwork(text, version=version)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        out.add(path, text, "malformed IPv%d prefix" % version, "write an IPv%d network in CIDR form, e.g. %s"
                % (version, "fd00:100::/40" if version == 6 else "198.18.0.0/16"))
        return None
    if "/" not in text:
        out.add(path, text, "prefix length missing", "append the length, e.g. %s/%d" % (text, 48 if version == 6 else 24))
        return None
    if net.ip != net.network:
        out.add(path, text, "host bits are set", "use the network address: %s" % net.cidr)
        return None
    return int(net.network), net.prefixlen


def _check_map(data, schema_name, path, out, on_key=None):
    """Check a mapping against SCHEMA[schema_name]; unknown keys and missing keys are problems."""
    if not isinstance(data, dict):
        out.add(path, data if not isinstance(data, (list, dict)) else type(data).__name__,
                "expected a mapping", "write %s as key: value pairs" % (path or "the file"))
        return False
    fields = SCHEMA[schema_name]
    known = [f[0] for f in fields]
    for key in data:
        if key not in known:
            if key == "hosts" and schema_name != "rack":
                out.add(_join(path, key), "%d host(s)" % len(data[key]) if isinstance(data[key], list) else data[key],
                        "host outside any rack: hosts can only be listed under a rack",
                        "move these hosts under buildings[i].zones[j].racks[k].hosts")
                continue
            close = difflib.get_close_matches(str(key), known, n=1)
            out.add(_join(path, key), data[key] if not isinstance(data[key], (dict, list)) else type(data[key]).__name__,
                    "unknown key %r" % key,
                    ("did you mean %r?" % close[0]) if close else "remove it; allowed keys: %s" % ", ".join(known))
    for name, kind, required, _doc in fields:
        if name not in data or data[name] is None:
            if required:
                out.add(_join(path, name), None, "required key is missing", "add %s (%s)" % (name, _doc))
            continue
        value = data[name]
        fpath = _join(path, name)
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                out.add(fpath, value, "expected an integer", "write a whole number without quotes")
        elif kind in ("str", "name"):
            if not isinstance(value, str):
                out.add(fpath, value, "expected a string", "quote the value")
            elif kind == "name" and not NAME_RE.match(value):
                out.add(fpath, value, "not a valid name",
                        "use lowercase letters, digits and '-', 1-63 characters, starting and ending alphanumeric")
        elif kind == "ifnames":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                out.add(fpath, value, "expected a list of interface names", "write e.g. [eth0, eth1]")
            else:
                for i, v in enumerate(value):
                    if not IFNAME_RE.match(v):
                        out.add("%s[%d]" % (fpath, i), v, "not a valid Linux interface name",
                                "use at most 15 characters from letters, digits, '_', '.', '-'")
        elif kind.startswith("map:"):
            _check_map(value, _kind_schema(kind), fpath, out)
        elif kind.startswith("list:"):
            if not isinstance(value, list):
                out.add(fpath, type(value).__name__, "expected a list", "write %s as a YAML list" % name)
        elif kind in ("any-map", "add-on"):
            if kind == "any-map" and not isinstance(value, dict):
                out.add(fpath, type(value).__name__, "expected a mapping", "write %s as key: value pairs" % name)
    return True


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------
class Node(object):
    """A validated topology entity. ``index`` is ``id - 1``; ``path`` is its place in the file."""

    __slots__ = ("kind", "id", "index", "name", "path", "parent", "data", "children", "pins")

    def __init__(self, kind, data, path, parent):
        self.kind = kind
        self.data = data
        self.id = data.get("id")
        self.index = (self.id - 1) if isinstance(self.id, int) else None
        self.name = data.get("name")
        self.path = path
        self.parent = parent
        self.children = []
        self.pins = {}

    def __repr__(self):
        return "<%s %s id=%s>" % (self.kind, self.name, self.id)


class Host(Node):
    __slots__ = ("nics", "nic_names", "task_slots")


class Topology(object):
    """The validated fabric: capacities, pools and the entity tree."""

    def __init__(self, data, source=None):
        self.data = data
        self.source = source
        self.name = data["name"]
        self.region = data["region"]["name"]
        self.capacity = dict(data["capacity"])
        self.asn = dict(data["asn"])
        self.pools = data["pools"]
        self.addressing = data.get("addressing") or {}
        self.buildings = []
        self.zones = []
        self.racks = []
        self.spines = []
        self.hosts = []
        # Sections of add-ons (SCHEMA kind "add-on"), handed on untouched to the layer that owns them.
        self.addons = dict((key, data[key]) for key, kind, _req, _doc in SCHEMA["topology"]
                           if kind == "add-on" and data.get(key) is not None)
        self.names = {}  # every entity name -> its path in the file (names are fabric-unique)

    # Global indices are pure functions of ids and capacities (never of list order), so adding,
    # removing or reordering entities never moves another one.
    def zone_gindex(self, zone):
        return zone.parent.index * self.capacity["zones"] + zone.index

    def rack_gindex(self, rack):
        return self.zone_gindex(rack.parent) * self.capacity["racks"] + rack.index

    def spine_gindex(self, spine):
        return self.zone_gindex(spine.parent) * self.capacity["spines"] + spine.index

    def host_gindex(self, host):
        return self.rack_gindex(host.parent) * self.capacity["hosts"] + host.index

    @property
    def totals(self):
        c = self.capacity
        zones = c["buildings"] * c["zones"]
        return {"zones": zones, "racks": zones * c["racks"], "spines": zones * c["spines"],
                "hosts": zones * c["racks"] * c["hosts"]}

    def host_by_name(self, name):
        for h in self.hosts:
            if h.name == name:
                return h
        return None

    def rack_by_name(self, name):
        for r in self.racks:
            if r.name == name:
                return r
        return None


def _check_children(items, kind, path, cap_key, capacity, out):
    """Ids in range and unique among siblings."""
    seen = {}
    cap = capacity.get(cap_key) if isinstance(capacity.get(cap_key), int) else None
    if cap is not None and len(items) > cap:
        out.add(path, "%d %ss" % (len(items), kind),
                "more %ss than capacity.%s allows (%d)" % (kind, cap_key, cap),
                "remove %ss or raise capacity.%s (raising it renumbers the fabric: needs allow_renumber)"
                % (kind, cap_key))
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        ident = item.get("id")
        ipath = "%s[%d].id" % (path, i)
        if isinstance(ident, int) and not isinstance(ident, bool):
            if ident < 1 or (cap is not None and ident > cap):
                out.add(ipath, ident, "%s id out of range 1..%s" % (kind, cap),
                        "pick an unused id in 1..%s, or raise capacity.%s (renumbers the fabric)" % (cap, cap_key))
            elif ident in seen:
                out.add(ipath, ident, "duplicate %s id (also used by %s[%d])" % (kind, path, seen[ident]),
                        "give every %s under the same parent its own id" % kind)
            else:
                seen[ident] = i


def load_topology(data, source=None):
    """Validate ``data`` (the parsed YAML) and return a :class:`Topology`.

    Raises :class:`TopologyError` listing every problem found.
    """
    if netaddr is None:
        raise TopologyError([InputProblem("", None, "python library netaddr is missing",
                                          "install netaddr on the controller (pip install netaddr)")], source)
    out = _Collector()
    if not _check_map(data, "topology", "", out):
        raise TopologyError(out.problems, source)
    if out.problems and any(p.path.split(".")[0] in ("capacity", "pools", "asn") for p in out.problems):
        # Without sound capacities and pools the rest cannot be checked meaningfully.
        raise TopologyError(out.problems, source)

    capacity = data["capacity"]
    for key, value in capacity.items():
        if isinstance(value, int) and value < 1:
            out.add("capacity.%s" % key, value, "capacity must be at least 1", "set capacity.%s to 1 or more" % key)
    if isinstance(capacity.get("nics"), int) and capacity["nics"] > MAX_NICS:
        out.add("capacity.nics", capacity["nics"], "at most %d NICs per host are supported" % MAX_NICS,
                "set capacity.nics to %d or less" % MAX_NICS)
    nic_len6 = (data.get("addressing") or {}).get("ipv6_nic_prefix_length", 64)
    if isinstance(nic_len6, int) and not 48 <= nic_len6 <= 120:
        out.add("addressing.ipv6_nic_prefix_length", nic_len6, "NIC subnet length out of range",
                "use 48..120; 64 is the usual choice")

    topo = Topology(data, source)
    pools = data["pools"]
    parsed = {}
    for key, version in (("ipv6", 6), ("ipv4", 4)):
        if pools.get(key) is not None:
            parsed["fabric", version] = _parse_prefix(pools[key], version, "pools.%s" % key, out)
        infra = pools.get("infrastructure") or {}
        if isinstance(infra, dict) and infra.get(key) is not None:
            parsed["infra", version] = _parse_prefix(infra[key], version, "pools.infrastructure.%s" % key, out)
    if pools.get("ipv4") is not None and (pools.get("infrastructure") or {}).get("ipv4") is None:
        out.add("pools.infrastructure.ipv4", None, "the fabric has an IPv4 pool but no IPv4 infrastructure pool",
                "add pools.infrastructure.ipv4 (loopbacks and /31 uplinks), e.g. 198.19.255.0/24")
    for version in (6, 4):
        a, b = parsed.get(("fabric", version)), parsed.get(("infra", version))
        if a and b and _overlap(a, b, version):
            out.add("pools.infrastructure.ipv%d" % version, _fmt(b, version),
                    "overlaps the fabric pool pools.ipv%d (%s)" % (version, _fmt(a, version)),
                    "choose an infrastructure pool outside %s" % _fmt(a, version))
    topo.parsed_pools = parsed

    asn = data["asn"]
    for key, value in asn.items():
        if isinstance(value, int) and not 1 <= value <= ASN_MAX:
            out.add("asn.%s" % key, value, "not a valid 4-byte ASN", "use 1..%d (private: 4200000000..4294967294)" % ASN_MAX)

    claim = _claimer(topo.names, out)

    def pins(node):
        _read_pins(node, out)

    buildings = data.get("buildings") if isinstance(data.get("buildings"), list) else []
    _check_children(buildings, "building", "buildings", "buildings", capacity, out)
    for bi, bdata in enumerate(buildings):
        bpath = "buildings[%d]" % bi
        if not _check_map(bdata, "building", bpath, out):
            continue
        b = Node("building", bdata, bpath, None)
        claim(b.name, bpath)
        pins(b)
        topo.buildings.append(b)
        zones = bdata.get("zones") if isinstance(bdata.get("zones"), list) else []
        _check_children(zones, "zone", bpath + ".zones", "zones", capacity, out)
        for zi, zdata in enumerate(zones):
            zpath = "%s.zones[%d]" % (bpath, zi)
            if not _check_map(zdata, "zone", zpath, out):
                continue
            z = Node("zone", zdata, zpath, b)
            claim(z.name, zpath)
            pins(z)
            b.children.append(z)
            topo.zones.append(z)
            spines = zdata.get("spines") if isinstance(zdata.get("spines"), list) else []
            _check_children(spines, "spine", zpath + ".spines", "spines", capacity, out)
            for si, sdata in enumerate(spines):
                spath = "%s.spines[%d]" % (zpath, si)
                if not _check_map(sdata, "spine", spath, out):
                    continue
                s = Node("spine", sdata, spath, z)
                claim(s.name, spath)
                _check_platform(sdata, spath, out)
                topo.spines.append(s)
            racks = zdata.get("racks") if isinstance(zdata.get("racks"), list) else []
            _check_children(racks, "rack", zpath + ".racks", "racks", capacity, out)
            for ri, rdata in enumerate(racks):
                _load_rack(topo, z, "%s.racks[%d]" % (zpath, ri), rdata, out, claim)

    if not out.problems:
        _check_pins(topo, out)
    if not out.problems:
        _check_asn_ranges(topo, out)
    if out.problems:
        raise TopologyError(out.problems, source)
    return topo


def _claimer(names, out):
    def claim(name, path):
        if not isinstance(name, str):
            return
        if name in names:
            out.add(path, name, "duplicate name (also used at %s)" % names[name],
                    "names of buildings, zones, racks, ToRs, spines and hosts must be unique in the fabric")
        else:
            names[name] = path
    return claim


def _read_pins(node, out):
    for key, version in (("ipv6_prefix", 6), ("ipv4_prefix", 4)):
        if node.data.get(key) is not None:
            parsed_pin = _parse_prefix(node.data[key], version, "%s.%s" % (node.path, key), out)
            if parsed_pin:
                node.pins[version] = parsed_pin


def _load_rack(topo, z, rpath, rdata, out, claim):
    """Validate one rack (and its hosts) and attach it to zone node ``z``."""
    capacity = topo.capacity
    if not _check_map(rdata, "rack", rpath, out):
        return None
    r = Node("rack", rdata, rpath, z)
    claim(r.name, rpath)
    _read_pins(r, out)
    tor = rdata.get("tor") or {}
    tor_name = tor.get("name") if isinstance(tor, dict) and tor.get("name") else "%s-tor" % r.name
    if isinstance(tor, dict):
        _check_platform(tor, rpath + ".tor", out)
    claim(tor_name, rpath + ".tor.name")
    r.pins["tor_name"] = tor_name
    r.pins["tor_platform"] = (tor.get("platform") if isinstance(tor, dict) else None) or "frr"
    z.children.append(r)
    topo.racks.append(r)
    hosts = rdata.get("hosts") if isinstance(rdata.get("hosts"), list) else []
    _check_children(hosts, "host", rpath + ".hosts", "hosts", capacity, out)
    for hi, hdata in enumerate(hosts):
        hpath = "%s.hosts[%d]" % (rpath, hi)
        if not _check_map(hdata, "host", hpath, out):
            continue
        h = Host("host", hdata, hpath, r)
        claim(h.name, hpath)
        _check_host(h, hdata, hpath, capacity, out)
        r.children.append(h)
        topo.hosts.append(h)
    return r


def add_rack(topo, zone_name, rack_data):
    """Validate one new rack and add it to an already validated topology (incremental re-plan).

    Only the new rack is checked (ids and names against its siblings and the fabric, pins, capacity);
    on any problem the topology is left as it was and TopologyError is raised.
    """
    zone = next((z for z in topo.zones if z.name == zone_name), None)
    if zone is None:
        raise TopologyError([InputProblem("zone", zone_name, "no such zone", "use one of: %s"
                                          % ", ".join(z.name for z in topo.zones))], topo.source)
    out = _Collector()
    siblings = [r.data for r in zone.children] + [rack_data]
    rpath = "%s.racks[%d]" % (zone.path, len(zone.children))
    _check_children(siblings, "rack", zone.path + ".racks", "racks", topo.capacity, out)
    names = dict(topo.names)
    snapshot = (len(zone.children), len(topo.racks), len(topo.hosts))
    rack = _load_rack(topo, zone, rpath, rack_data, out, _claimer(names, out))
    if rack is not None and not out.problems:
        _check_pins(topo, out)
    if out.problems:
        del zone.children[snapshot[0]:]
        del topo.racks[snapshot[1]:]
        del topo.hosts[snapshot[2]:]
        raise TopologyError(out.problems, topo.source)
    topo.names = names
    zone.data.setdefault("racks", []).append(rack_data)
    return rack


def _check_platform(data, path, out):
    platform = data.get("platform")
    if platform is not None and platform not in PLATFORMS:
        close = difflib.get_close_matches(str(platform), PLATFORMS, n=1)
        out.add(path + ".platform", platform, "unknown platform",
                "use one of %s%s" % (", ".join(PLATFORMS), (" (did you mean %r?)" % close[0]) if close else ""))


def _check_host(h, hdata, hpath, capacity, out):
    nics = hdata.get("nics")
    max_nics = capacity.get("nics")
    h.nics = nics
    if isinstance(nics, int) and not isinstance(nics, bool) and isinstance(max_nics, int):
        if nics < 1 or nics > max_nics:
            out.add(hpath + ".nics", nics, "NIC count out of range 1..%d" % max_nics,
                    "set nics to the number of NICs the host has (1..%d), or raise capacity.nics "
                    "(renumbers the fabric)" % max_nics)
    names = hdata.get("nic_names")
    if isinstance(names, list) and isinstance(nics, int):
        if len(names) != nics:
            out.add(hpath + ".nic_names", names, "%d names for %d NICs" % (len(names), nics),
                    "list exactly one interface name per NIC, or drop nic_names for eth0..eth%d" % (nics - 1))
        elif len(set(names)) != len(names):
            out.add(hpath + ".nic_names", names, "duplicate interface names", "give every NIC its own name")
    h.nic_names = list(names) if isinstance(names, list) else ["eth%d" % k for k in range(nics if isinstance(nics, int) else 0)]
    slots = hdata.get("task_slots", capacity.get("task_slots"))
    if isinstance(slots, int) and isinstance(capacity.get("task_slots"), int):
        if slots < 1 or slots > capacity["task_slots"]:
            out.add(hpath + ".task_slots", slots, "task slots out of range 1..%d" % capacity["task_slots"],
                    "set task_slots to 1..%d or raise capacity.task_slots (renumbers the fabric)" % capacity["task_slots"])
    h.task_slots = slots


def _check_pins(topo, out):
    """Pinned prefixes must have the level's length, lie inside their parent and not collide."""
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import infra_layouts_for, layouts_for

    try:
        layouts = layouts_for(topo)
        infra_layouts_for(topo)
    except TopologyError as exc:
        out.problems.extend(exc.problems)
        return
    for version, layout in layouts.items():
        levels = (("building", topo.buildings), ("zone", topo.zones), ("rack", topo.racks))
        for level, nodes in levels:
            plen = layout.lengths[level]
            by_net = {}
            for node in nodes:
                pin = node.pins.get(version)
                key = "ipv%d_prefix" % version
                if pin is not None:
                    net, length = pin
                    if length != plen:
                        out.add("%s.%s" % (node.path, key), node.data[key],
                                "a %s prefix must be a /%d in this fabric" % (level, plen),
                                "pin a /%d (capacities fix every level's length)" % plen)
                        continue
                    parent_net, parent_len = layout.parent_net(topo, node)
                    if not _contains((parent_net, parent_len), pin, version):
                        out.add("%s.%s" % (node.path, key), node.data[key],
                                "outside its parent %s" % _fmt((parent_net, parent_len), version),
                                "pin a /%d inside %s" % (plen, _fmt((parent_net, parent_len), version)))
                        continue
            for node in nodes:
                net = layout.node_net(topo, node)
                sib_key = (id(node.parent), net)
                if sib_key in by_net:
                    other = by_net[sib_key]
                    out.add("%s.ipv%d_prefix" % (node.path, version), _fmt((net, plen), version),
                            "collides with %s (%s)" % (other.path, other.name),
                            "pin a different prefix or remove the pin so the id decides")
                else:
                    by_net[sib_key] = node


def _check_asn_ranges(topo, out):
    totals = topo.totals
    asn = topo.asn
    ranges = {"spine": (asn["spine"], asn["spine"] + totals["zones"] - 1),
              "tor": (asn["tor"], asn["tor"] + totals["racks"] - 1),
              "host": (asn["host"], asn["host"] + totals["hosts"] - 1)}
    for key, (lo, hi) in ranges.items():
        if hi > ASN_MAX:
            out.add("asn.%s" % key, asn[key], "range %d..%d runs past the largest ASN" % (lo, hi),
                    "lower asn.%s to at most %d" % (key, ASN_MAX - (hi - lo)))
    keys = sorted(ranges, key=lambda k: ranges[k][0])
    for a, b in zip(keys, keys[1:]):
        if ranges[a][1] >= ranges[b][0]:
            out.add("asn.%s" % b, asn[b], "ASN range %d..%d overlaps asn.%s's range %d..%d"
                    % (ranges[b][0], ranges[b][1], a, ranges[a][0], ranges[a][1]),
                    "move asn.%s to %d or above" % (b, ranges[a][1] + 1))


def _overlap(a, b, version):
    bits = 128 if version == 6 else 32
    (na, la), (nb, lb) = a, b
    short = min(la, lb)
    return (na >> (bits - short)) == (nb >> (bits - short))


def _contains(parent, child, version):
    bits = 128 if version == 6 else 32
    (np_, lp), (nc, lc) = parent, child
    return lc >= lp and (nc >> (bits - lp)) == (np_ >> (bits - lp))


def _fmt(prefix, version):
    net, length = prefix
    return "%s/%d" % (netaddr.IPAddress(net, version), length)
