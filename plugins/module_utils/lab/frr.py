# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""FRR configuration of the lab's spine and ToRs.

The ToR text here is a PLACEHOLDER (announce the rack aggregate to the spine, nothing else) until
the ToR-policy renderer exists: it lives in the single template TOR_PLACEHOLDER, and the engine
takes a rendered config file per ToR instead when one is given (``tor_config_dir``).
"""

from __future__ import annotations

import ipaddress

DAEMONS = ("zebra", "staticd", "bgpd", "bfdd")

# One small template so issue 4's renderer can replace it wholesale. Fields come from
# FabricPlan.rack_data(rack) (see tor_placeholder_context).
TOR_PLACEHOLDER = """\
frr version 8.4
frr defaults traditional
hostname {name}
log file /var/run/frr/frr.log informational
service integrated-vtysh-config
no zebra nexthop kernel enable
!
ip route {rack4} blackhole
ipv6 route {rack6} blackhole
!
ip prefix-list MNL-RACK seq 10 permit {rack4}
ipv6 prefix-list MNL-RACK6 seq 10 permit {rack6}
!
route-map MNL-TO-SPINE-V4 permit 10
 match ip address prefix-list MNL-RACK
exit
route-map MNL-TO-SPINE-V6 permit 10
 match ipv6 address prefix-list MNL-RACK6
exit
route-map MNL-FROM-SPINE permit 10
exit
!
router bgp {asn}
 bgp router-id {router_id}
 no bgp default ipv4-unicast
 bgp bestpath as-path multipath-relax
{neighbors}
 !
 address-family ipv4 unicast
  network {rack4}
  maximum-paths 8
{af4}
 exit-address-family
 !
 address-family ipv6 unicast
  network {rack6}
  maximum-paths 8
{af6}
 exit-address-family
exit
!
end
"""


def _neighbor(addr, asn, desc):
    return [
        " neighbor %s remote-as %s" % (addr, asn),
        " neighbor %s description %s" % (addr, desc),
        " neighbor %s timers 3 9" % addr,
        " neighbor %s timers connect 1" % addr,
    ]


def tor_placeholder_context(rack):
    tor = rack["tor"]
    neigh, af4, af6 = [], [], []
    for up in tor["uplinks"]:
        for fam, af in (("ipv4", af4), ("ipv6", af6)):
            if fam not in up:
                continue
            peer = up[fam]["spine"]
            neigh += _neighbor(peer, up["spine_asn"], up["spine"])
            af += [
                "  neighbor %s activate" % peer,
                "  neighbor %s route-map MNL-FROM-SPINE in" % peer,
                "  neighbor %s route-map MNL-TO-SPINE-V%s out" % (peer, fam[-1]),
            ]
    return {
        "name": tor["name"],
        "asn": tor["asn"],
        "router_id": tor["router_id"],
        "rack4": rack["prefix"]["ipv4"],
        "rack6": rack["prefix"]["ipv6"],
        "neighbors": "\n".join(neigh),
        "af4": "\n".join(af4),
        "af6": "\n".join(af6),
    }


def render_tor_placeholder(rack):
    return TOR_PLACEHOLDER.format(**tor_placeholder_context(rack))


def render_spine(spine, storage=None):
    """Spine: eBGP to every ToR (v6 over the /127, v4 over the /31); accepts only that rack's
    aggregate from each ToR; announces the storage prefixes (when attached here) and passes the
    rack aggregates on."""
    lines = [
        "frr version 8.4",
        "frr defaults traditional",
        "hostname %s" % spine["name"],
        "log file /var/run/frr/frr.log informational",
        "service integrated-vtysh-config",
        "no zebra nexthop kernel enable",
        "!",
    ]
    neigh, af = [], {"ipv4": [], "ipv6": []}
    for d in spine["downlinks"]:
        for fam in ("ipv4", "ipv6"):
            if fam not in d:
                continue
            v = fam[-1]
            pl = "MNL-FROM-%s-V%s" % (d["rack"], v)
            kw = "ip" if fam == "ipv4" else "ipv6"
            lines += [
                "%s prefix-list %s seq 10 permit %s" % (kw, pl, d["rack_prefix"][fam]),
                "route-map %s permit 10" % pl,
                " match %s address prefix-list %s" % (kw, pl),
                "exit",
            ]
            peer = d[fam]["tor"]
            neigh += _neighbor(peer, d["tor_asn"], d["tor"])
            af[fam] += [
                "  neighbor %s activate" % peer,
                "  neighbor %s route-map %s in" % (peer, pl),
                "  neighbor %s route-map MNL-TO-TOR out" % peer,
            ]
    lines += ["route-map MNL-TO-TOR permit 10", "exit", "!"]
    lines += ["router bgp %s" % spine["asn"], " bgp router-id %s" % spine["router_id"],
              " no bgp default ipv4-unicast", " bgp bestpath as-path multipath-relax"]
    lines += neigh
    for fam in ("ipv4", "ipv6"):
        lines += [" !", " address-family %s unicast" % fam]
        if storage and fam in storage:
            lines.append("  network %s" % storage[fam]["prefix"])
        lines.append("  maximum-paths 8")
        lines += af[fam]
        lines.append(" exit-address-family")
    lines += ["exit", "!", "end", ""]
    return "\n".join(lines)


DAEMONS_FILE = """\
# Written by the netscale.multinic lab: the daemons of this lab node (started directly, no init).
zebra=yes
bgpd=yes
ospfd=no
ospf6d=no
ripd=no
ripngd=no
isisd=no
pimd=no
ldpd=no
nhrpd=no
eigrpd=no
babeld=no
sharpd=no
pbrd=no
bfdd=yes
fabricd=no
vrrpd=no
pathd=no
staticd=yes
vtysh_enable=yes
zebra_options="  -A 127.0.0.1 -s 90000000"
bgpd_options="   -A 127.0.0.1"
staticd_options="-A 127.0.0.1"
bfdd_options="   -A 127.0.0.1"
"""

VTYSH_CONF = "service integrated-vtysh-config\n"

DAEMON_ARGS = {
    "zebra": ["-s", "90000000"],
}


def daemon_argv(daemon):
    """Command line of one FRR daemon with Debian's default paths (/etc/frr, /var/run/frr)."""
    return ["/usr/lib/frr/%s" % daemon, "-d", "-F", "traditional", "-A", "127.0.0.1"] + DAEMON_ARGS.get(daemon, [])


def storage_addresses(lab_storage):
    """Spine side ::1 / .1 and storage ::10 / .10 of the lab storage prefixes."""
    out = {}
    for fam in ("ipv6", "ipv4"):
        if fam not in lab_storage:
            continue
        net = ipaddress.ip_network(lab_storage[fam], strict=True)
        out[fam] = {
            "prefix": str(net),
            "length": net.prefixlen,
            "spine": str(net.network_address + 1),
            # ::10 for IPv6, .10 for IPv4 (hex and decimal "10", as people write them)
            "storage": str(net.network_address + (0x10 if fam == "ipv6" else 10)),
        }
    return out
