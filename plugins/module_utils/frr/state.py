# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read FRR's state from ``vtysh ... json`` into compact facts (sessions, routes, ECMP width).

Pure Python, no Ansible imports. ``collect(run, target)`` runs vtysh through the caller's
``run(argv) -> (rc, stdout, stderr)``; the ``parse_*`` functions take the decoded JSON and are
unit-tested on recorded output. Used by the frr_facts module, the live tests and the rollout's
health gates (sessions Established per host NIC, ECMP width per task IP, zero host routes on spines).
"""

from __future__ import annotations

import ipaddress
import json
import re

AFS = {"ipv4": "ipv4Unicast", "ipv6": "ipv6Unicast"}


def split_json_stream(text):
    """Decode concatenated JSON documents (``vtysh -c A -c B`` prints one per command)."""
    dec = json.JSONDecoder()
    out = []
    i, n = 0, len(text or "")
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        obj, i = dec.raw_decode(text, i)
        out.append(obj)
    return out


def parse_neighbors(data):
    """``show bgp neighbors json`` -> {address: session facts}."""
    out = {}
    for addr, n in (data or {}).items():
        if not isinstance(n, dict) or "bgpState" not in n:
            continue
        afi = n.get("addressFamilyInfo") or {}
        accepted, limit = {}, {}
        for fam, key in AFS.items():
            a = afi.get(key)
            if isinstance(a, dict):
                accepted[fam] = a.get("acceptedPrefixCounter", 0)
                if "prefixAllowedMax" in a:
                    limit[fam] = a["prefixAllowedMax"]
        out[addr] = {
            "state": n.get("bgpState"),
            "established": n.get("bgpState") == "Established",
            "remote_as": n.get("remoteAs"),
            "peer_group": n.get("peerGroup"),
            "description": n.get("nbrDesc"),
            "uptime_ms": n.get("bgpTimerUpMsec", 0) if n.get("bgpState") == "Established" else 0,
            "accepted": accepted,
            "maximum_prefix": limit,
            "families": sorted(accepted),
            "connections_established": n.get("connectionsEstablished", 0),
            "connections_dropped": n.get("connectionsDropped", 0),
            "last_reset": n.get("lastResetDueTo"),
            "graceful_restart": (n.get("gracefulRestartInfo") or {}).get("localGrMode"),
            "authentication": bool(n.get("authenticationEnabled")),
            "last_notification": n.get("lastNotificationReason"),
            # FRR 8.4 (measured): after a maximum-prefix tear-down the peer sits in Idle with
            # lastResetDueTo "BGP Notification send", lastErrorCodeSubcode "0601" and
            # lastNotificationReason "Cease/Maximum Number of Prefixes Reached" until the restart
            # timer or a clear; the notification fields survive a later re-establishment.
            "max_prefix_tripped": n.get("bgpState") != "Established" and _max_prefix_notification(n),
        }
    return out


def _max_prefix_notification(n):
    """Was the last NOTIFICATION of this peer Cease / Maximum Number of Prefixes Reached (6/1)?"""
    return str(n.get("lastErrorCodeSubcode", "")) == "0601" or \
        "Maximum Number of Prefixes" in str(n.get("lastNotificationReason", ""))


def parse_received(data):
    """``show bgp <af> unicast neighbors X received-routes json`` -> list of prefixes received
    before policy (needs soft-reconfiguration inbound)."""
    routes = (data or {}).get("receivedRoutes") or {}
    return sorted(routes)


def parse_routes(data, protocol=None):
    """``show ip[v6] route json`` -> {prefix: {protocol, selected, installed, nexthops, via}}.

    ``nexthops`` counts next hops that are active and in the FIB (what forwarding uses)."""
    out = {}
    for prefix, entries in (data or {}).items():
        for e in entries or []:
            if protocol and e.get("protocol") != protocol:
                continue
            if not e.get("selected") and prefix in out:
                continue
            hops = [h for h in e.get("nexthops") or [] if h.get("active") and h.get("fib")]
            out[prefix] = {
                "protocol": e.get("protocol"),
                "selected": bool(e.get("selected")),
                "installed": bool(e.get("installed")),
                "nexthops": len(hops),
                "via": sorted("%s%%%s" % (h.get("ip", h.get("afi", "")), h.get("interfaceName", ""))
                              for h in hops),
            }
    return out


def parse_bgp_rib(data):
    """``show bgp <af> unicast json`` -> {prefix: {paths, multipath, best_from}}."""
    out = {}
    for prefix, paths in ((data or {}).get("routes") or {}).items():
        paths = paths or []
        out[prefix] = {
            "paths": len(paths),
            "multipath": sum(1 for p in paths if p.get("multipath") or p.get("bestpath")),
            "peers": sorted({p.get("peerId") for p in paths if p.get("peerId")}),
        }
    return out


def more_specifics(prefixes, aggregates):
    """Prefixes strictly inside (longer than) any of ``aggregates``: host routes leaking upstream."""
    nets = [ipaddress.ip_network(a) for a in aggregates]
    out = []
    for p in prefixes:
        n = ipaddress.ip_network(p)
        for agg in nets:
            if n.version == agg.version and n.prefixlen > agg.prefixlen and n.subnet_of(agg):
                out.append(p)
                break
    return sorted(out)


def collect(run, target, families=("ipv4", "ipv6"), received=False, neighbors=None):
    """Facts of one FRR instance. ``received``: also count routes received before policy per
    neighbor (one vtysh call for all neighbors); ``neighbors``: restrict that to these addresses."""
    cmds = ["show bgp neighbors json"]
    for fam in families:
        cmds.append("show %s route json" % ("ip" if fam == "ipv4" else "ipv6"))
        cmds.append("show bgp %s unicast json" % fam)
    argv = target.vtysh()
    for c in cmds:
        argv += ["-c", c]
    rc, out, err = run(argv)
    if rc != 0:
        raise RuntimeError("vtysh failed (rc %d): %s" % (rc, (err or out or "")[:500]))
    docs = split_json_stream(out)
    if len(docs) != len(cmds):
        raise RuntimeError("vtysh returned %d JSON documents for %d commands" % (len(docs), len(cmds)))
    facts = {"neighbors": parse_neighbors(docs[0]), "routes": {}, "bgp": {}}
    for i, fam in enumerate(families):
        facts["routes"][fam] = parse_routes(docs[1 + 2 * i])
        facts["bgp"][fam] = parse_bgp_rib(docs[2 + 2 * i])
    if received:
        addrs = [a for a in facts["neighbors"] if neighbors is None or a in neighbors]
        addrs = [a for a in addrs if facts["neighbors"][a]["established"]]
        pairs = [(a, fam) for a in addrs for fam in families if fam in facts["neighbors"][a]["families"]]
        if pairs:
            argv = target.vtysh()
            for a, fam in pairs:
                argv += ["-c", "show bgp %s unicast neighbors %s received-routes json" % (fam, a)]
            rc, out, err = run(argv)
            docs = split_json_stream(out) if rc == 0 else []
            for (a, fam), doc in zip(pairs, docs):
                n = facts["neighbors"][a]
                got = parse_received(doc)
                n.setdefault("received", {})[fam] = len(got)
                n.setdefault("rejected", {})[fam] = max(0, len(got) - n["accepted"].get(fam, 0))
                n.setdefault("received_prefixes", {})[fam] = got
    facts["summary"] = summarize(facts)
    return facts


def summarize(facts):
    nb = facts["neighbors"]
    out = {
        "neighbors": len(nb),
        "established": sum(1 for n in nb.values() if n["established"]),
        "routes": {fam: len(r) for fam, r in facts["routes"].items()},
        "bgp_routes": {fam: sum(1 for r in rs.values() if r["protocol"] == "bgp")
                       for fam, rs in facts["routes"].items()},
    }
    if any("rejected" in n for n in nb.values()):
        out["rejected"] = sum(sum(n.get("rejected", {}).values()) for n in nb.values())
    out["max_prefix_tripped"] = sorted(a for a, n in nb.items() if n.get("max_prefix_tripped"))
    return out


def ecmp_width(facts, prefix):
    """Next hops installed for ``prefix`` (0 when absent)."""
    fam = "ipv6" if ":" in prefix else "ipv4"
    r = facts["routes"].get(fam, {}).get(prefix)
    return r["nexthops"] if r else 0


def sessions_by_group(facts):
    """{peer group: {"total": n, "established": m}}: per-host session health."""
    out = {}
    for n in facts["neighbors"].values():
        g = out.setdefault(n.get("peer_group") or "", {"total": 0, "established": 0})
        g["total"] += 1
        g["established"] += 1 if n["established"] else 0
    return out


_SLOT_GROUP_RE = re.compile(r"^HOST-(?P<host>.+)-S(?P<slot>[0-9]+)(?:-IPV[46])?$")


def slot_of_group(name):
    """``HOST-<host>-S<slot>[-IPV4|-IPV6]`` (tor_policy's per-slot peer-group) -> (host, slot), else None."""
    m = _SLOT_GROUP_RE.match(name or "")
    return (m.group("host"), int(m.group("slot"))) if m else None


def sessions_by_host(facts):
    """{host: {"total": n, "established": m, "slots": {slot: {"total", "established"}}}} from the
    per-slot peer-groups: the health gate "every host NIC's session Established" per host."""
    out = {}
    for n in facts["neighbors"].values():
        hs = slot_of_group(n.get("peer_group"))
        if hs is None:
            continue
        h = out.setdefault(hs[0], {"total": 0, "established": 0, "slots": {}})
        sl = h["slots"].setdefault(hs[1], {"total": 0, "established": 0})
        up = 1 if n["established"] else 0
        h["total"] += 1
        h["established"] += up
        sl["total"] += 1
        sl["established"] += up
    return out
