# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build step "links": sysctls, veth pairs, addresses and the hosts' default routes.

veth pairs are created directly inside both namespaces (never visible in the machine's); addresses
and routes go in as one ``ip -batch`` per node.
"""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.lab import netns
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name

ROUTER_SYSCTLS = [
    ("net.ipv6.conf.all.keep_addr_on_down", 1), ("net.ipv6.conf.default.keep_addr_on_down", 1),
    ("net.ipv4.ip_forward", 1), ("net.ipv6.conf.all.forwarding", 1),
    ("net.ipv4.fib_multipath_hash_policy", 1), ("net.ipv6.fib_multipath_hash_policy", 1),
    # As tor_bgp sets on a Linux ToR: dead-carrier next hops leave ECMP groups at once.
    ("net.ipv4.conf.all.ignore_routes_with_linkdown", 1), ("net.ipv6.conf.all.ignore_routes_with_linkdown", 1),
    ("net.ipv4.conf.default.ignore_routes_with_linkdown", 1),
    ("net.ipv6.conf.default.ignore_routes_with_linkdown", 1),
]
END_SYSCTLS = [("net.ipv6.conf.all.keep_addr_on_down", 1), ("net.ipv6.conf.default.keep_addr_on_down", 1)]


class IpBatch(object):
    """``ip`` commands collected per node, run as one batch per node."""

    def __init__(self):
        self.lines = {}

    def add(self, node, line):
        self.lines.setdefault(node, []).append(line)

    def address(self, node, dev, fam, address, length):
        self.add(node, "address add %s/%s dev %s%s" % (address, length, dev, " nodad" if fam == "ipv6" else ""))

    def run(self):
        for node, lines in self.lines.items():
            run_batch(node, lines)


def run_batch(node, lines):
    if lines:
        run(["ip", "-n", netns_name(node), "-batch", "-"], input_text="\n".join(lines) + "\n")


def nsexec(node, argv, **kw):
    return run(["nsenter", "--net=/run/netns/%s" % netns_name(node), "--"] + argv, **kw)


def set_sysctls(node, pairs):
    netns.sysctl(netns_name(node), pairs)


def veth(lab, a_node, a_dev, b_node, b_dev, owner=None):
    """A veth pair a_node:a_dev <-> b_node:b_dev, recorded first; ``owner``: the node it belongs to
    (a GPU host's NIC links: removed with the host by an incremental change)."""
    rec = dict(type="link", netns=netns_name(a_node), dev=a_dev, peer_netns=netns_name(b_node), peer=b_dev)
    if owner:
        rec["node"] = owner
    lab.state.add(**rec)
    netns.veth_pair(netns_name(a_node), a_dev, netns_name(b_node), b_dev)


def wire(lab):
    spec = lab.spec
    for s in spec.spines:
        set_sysctls(s["name"], ROUTER_SYSCTLS)
    for r in spec.racks:
        set_sysctls(r["tor"]["name"], ROUTER_SYSCTLS)
    set_sysctls(spec.storage_name, END_SYSCTLS)
    for h in spec.hosts:
        set_sysctls(h["name"], END_SYSCTLS)
    batch = IpBatch()
    _spine_tor_links(lab, batch)
    _storage_link(lab, batch)
    _host_links(lab, batch, spec.hosts)
    batch.run()
    if lab.host_default_route:
        for h in spec.hosts:
            run_batch(h["name"], _default_routes(h))


def wire_hosts(lab, hosts, tors=()):
    """The links of ToRs (to the spines) and GPU hosts started after the build (an incremental change)."""
    for t in tors:
        set_sysctls(t, ROUTER_SYSCTLS)
    for h in hosts:
        set_sysctls(h["name"], END_SYSCTLS)
    batch = IpBatch()
    if tors:
        _spine_tor_links(lab, batch, set(tors))
    _host_links(lab, batch, hosts)
    batch.run()
    if lab.host_default_route:
        for h in hosts:
            run_batch(h["name"], _default_routes(h))


def fabric_links(spines, racks, hosts=None, tors=None):
    """The fabric's point-to-point links, from the plan's spine and rack data: every spine-ToR uplink, then every
    GPU host NIC to its ToR port, each ``{a, a_dev, b, b_dev, addresses: [(family, a address, b address, prefix
    length)], owner}`` (``owner``: the node a link belongs to). ``tors``, ``hosts``: only links of those (names;
    None - all). One description for every lab that wires a fabric: the engine's nodes and the bare-namespace
    harnesses (each names its own namespaces)."""
    out = []
    for s in spines:
        for d in s["downlinks"]:
            if tors is not None and d["tor"] not in tors:
                continue
            rack = next(r for r in racks if r["name"] == d["rack"])
            up = next(u for u in rack["tor"]["uplinks"] if u["spine"] == s["name"])
            out.append(dict(a=s["name"], a_dev=d["interface"], b=d["tor"], b_dev=up["interface"], owner=d["tor"],
                            addresses=[(fam, d[fam]["spine"], d[fam]["tor"], d[fam]["length"])
                                       for fam in ("ipv6", "ipv4") if fam in d]))
    for r in racks:
        for h in r["hosts"]:
            if hosts is not None and h["name"] not in hosts:
                continue
            for nic in h["nics"]:
                out.append(dict(a=r["tor"]["name"], a_dev=nic["tor_port"], b=h["name"], b_dev=nic["name"],
                                owner=h["name"], addresses=[
                                    (fam, nic["gateway"][fam], nic["address"][fam], nic["subnet"][fam].split("/")[1])
                                    for fam in ("ipv6", "ipv4") if fam in nic["subnet"]]))
    return out


def _links(lab, batch, links):
    for link in links:
        veth(lab, link["a"], link["a_dev"], link["b"], link["b_dev"], owner=link["owner"])
        for fam, a_addr, b_addr, length in link["addresses"]:
            batch.address(link["a"], link["a_dev"], fam, a_addr, length)
            batch.address(link["b"], link["b_dev"], fam, b_addr, length)
        batch.add(link["a"], "link set %s up" % link["a_dev"])
        batch.add(link["b"], "link set %s up" % link["b_dev"])


def _spine_tor_links(lab, batch, tors=None):
    _links(lab, batch, fabric_links(lab.spec.spines, lab.spec.racks, hosts=(), tors=tors))


def _storage_link(lab, batch):
    spine = lab.spec.spines[0]["name"]
    storage = lab.spec.storage_name
    veth(lab, spine, "storage", storage, "eth0")
    for fam, a in lab.spec.storage_addr.items():
        batch.address(spine, "storage", fam, a["spine"], a["length"])
        batch.address(storage, "eth0", fam, a["storage"], a["length"])
    batch.add(spine, "link set storage up")
    batch.add(storage, "link set eth0 up")
    for fam, a in lab.spec.storage_addr.items():
        batch.add(storage, "route add %s via %s dev eth0" % ("::/0" if fam == "ipv6" else "0.0.0.0/0", a["spine"]))


def _host_links(lab, batch, hosts):
    _links(lab, batch, fabric_links((), lab.spec.racks, hosts=set(h["name"] for h in hosts)))


def _default_routes(host):
    """An ECMP default route over every NIC's gateway, per family."""
    lines = []
    for fam in ("ipv6", "ipv4"):
        hops = " ".join("nexthop via %s dev %s" % (n["gateway"][fam], n["name"])
                        for n in host["nics"] if fam in n["gateway"])
        if hops:
            lines.append("route add %s proto static %s" % ("::/0" if fam == "ipv6" else "0.0.0.0/0", hops))
    return lines
