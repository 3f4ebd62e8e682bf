# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Interfaces (addresses of the loopback, ToR host ports and uplinks / spine downlinks)."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.names import host_bits, strict_net


def renders_interfaces(opts, caps):
    return bool(opts["render_interfaces"] and caps.get("render_interfaces", True))


def loopback(node, families):
    lo = node.get("loopback") or {}
    return {"name": "lo", "description": "loopback",
            "addresses": [("%s/%d" % (lo[f], host_bits(f)), f) for f in families if f in lo]}


def tor_interfaces(rack, families):
    tor = rack["tor"]
    out = [loopback(tor, families)]
    for h in rack["hosts"]:
        for nic in h["nics"]:
            addrs = []
            for f in families:
                length = strict_net(nic["subnet"][f]).prefixlen
                addrs.append(("%s/%d" % (nic["gateway"][f], length), f))
            out.append({"name": nic["tor_port"], "description": "%s %s" % (h["name"], nic["name"]),
                        "addresses": addrs, "host_port": True})
    for up in tor["uplinks"]:
        out.append({"name": up["interface"], "description": "%s" % up["spine"],
                    "addresses": [("%s/%d" % (up[f]["tor"], up[f]["length"]), f) for f in families if f in up]})
    return out


def spine_interfaces(spine, families):
    out = [loopback(spine, families)]
    for d in spine["downlinks"]:
        out.append({"name": d["interface"], "description": d["tor"],
                    "addresses": [("%s/%d" % (d[f]["spine"], d[f]["length"]), f) for f in families if f in d]})
    return out
