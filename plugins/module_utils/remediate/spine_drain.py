# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Spine drain (issue 30 item 1): BGP graceful shutdown of one spine, checked on the zone's ToRs. Pure.

A spine is drained by ``bgp graceful-shutdown`` in its ``router bgp``: FRR re-announces every path to its
eBGP peers with the GRACEFUL_SHUTDOWN community (65535:0), and a receiving FRR (the ToRs) gives such a path
local-preference 0 by itself (measured on FRR 8.4.4: ``locPrf: 0``, bestpath reason "Local Pref", the
spine's next hop gone from the ToR's FIB while another spine carries the aggregate). The drained spine
keeps its sessions and keeps announcing: if it were the last path to an aggregate it would still be used,
so the traffic is moved, never dropped. FRR 8.4 has no per-neighbor graceful shutdown.

Here:

* :func:`zone_view`: from the plan, what each ToR of the spine's zone must see: every other rack's
  aggregate (per family) and the uplink address of each spine (the ToR's BGP neighbor, ``peerId``).
* :func:`parse_observation`: a ToR's ``show bgp <af> unicast json``, ``show ip[v6] route json`` and
  ``show bgp neighbors json`` reduced to the aggregates' paths (peer, valid, selected, graceful
  shutdown) and FIB next hops, and the sessions.
* :func:`coverage`: before a drain, every ToR of the zone still has each other rack's aggregate from at
  least one OTHER spine that is up (session Established, not drained in the journal, its path not
  already in graceful shutdown). Missing evidence (a ToR not observed) is a failure.
* :func:`verdict`: after the change, ``drained`` (the spine's paths neither selected nor in the FIB, the
  aggregate still selected and installed via another spine) or ``undrained`` (the spine's path selected
  and in the FIB: back in the ECMP).
* :func:`with_graceful_shutdown`: a running config with the line added to (removed from) the default
  VRF's ``router bgp`` block, for the FRR apply helpers (``frr/apply.py``).
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError

GSHUT = "bgp graceful-shutdown"
FAMILIES = ("ipv4", "ipv6")
# The marker a drained spine keeps in its FRR config directory: frr_config honours it (a re-deploy of the
# spine's rendered config keeps the drain), spine_drain writes and removes it.
MARKER = "netscale-drain.json"


class SpineDrainError(MultinicError, ValueError):
    """Bad input or a config the drain cannot be applied to (names the field, the value and the fix)."""


# ------------------------------------------------------------------------------------------------
# Config text
# ------------------------------------------------------------------------------------------------
_ROUTER_BGP = re.compile(r"^router bgp (\d+)\s*$")


def _bgp_block(lines):
    """(start, end) line indexes of the default VRF's ``router bgp`` block (end: its ``exit`` or the next
    top-level line), or None."""
    for i, line in enumerate(lines):
        if _ROUTER_BGP.match(line.rstrip()):
            j = i + 1
            while j < len(lines) and (not lines[j] or lines[j][0].isspace() or lines[j].startswith("!")):
                j += 1
            return i, j
    return None


def has_graceful_shutdown(text):
    lines = (text or "").split("\n")
    blk = _bgp_block(lines)
    return bool(blk) and any(line.strip() == GSHUT for line in lines[blk[0] + 1:blk[1]])


def with_graceful_shutdown(text, on, field="config"):
    """``text`` with ``bgp graceful-shutdown`` in (``on``) or out of the default VRF's ``router bgp`` block
    (right after ``bgp router-id`` when there is one, as FRR shows it). Unchanged when already so."""
    lines = (text or "").split("\n")
    blk = _bgp_block(lines)
    if blk is None:
        raise SpineDrainError("%s: no 'router bgp <asn>' block (default VRF) in the config. Fix: drain a spine "
                              "that runs BGP (its rendered config has one); nothing was changed." % field)
    start, end = blk
    inside = [k for k in range(start + 1, end) if lines[k].strip() == GSHUT]
    if on and not inside:
        at = start + 1
        for k in range(start + 1, end):
            if lines[k].strip().startswith("bgp router-id"):
                at = k + 1
                break
        lines.insert(at, " " + GSHUT)
    elif not on and inside:
        lines = [line for k, line in enumerate(lines) if k not in inside]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# What the ToRs must see
# ------------------------------------------------------------------------------------------------
def zone_view(plan, spine_name):
    """``{spine, zone, spines: [names], tors: {tor: {tor, rack, prefixes: {prefix: rack}, uplinks: {spine: [addr]},
    interfaces: {spine: ToR port}}}}`` from a :class:`plan.planner.FabricPlan`: every ToR of the spine's zone, the
    other racks' aggregates it must carry, its BGP neighbor address (per family) on each spine of the zone and its
    port to each spine (an IPv6 FIB next hop is the spine's link-local address: mapped by the port)."""
    topo = plan.topo
    found = [s for s in topo.spines if s.name == spine_name]
    if not found:
        raise SpineDrainError("drain_spine=%r: not a spine of this fabric. Fix: name a spine of the inventory's "
                              "spines group." % (spine_name,))
    zone = found[0].parent
    spines = sorted((s for s in topo.spines if s.parent is zone), key=lambda s: s.id)
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import uplink_port_name
    racks = {}
    for s in spines:
        d = plan.spine_data(s)
        for down in d["downlinks"]:
            r = racks.setdefault(down["tor"], {"rack": down["rack"], "own": down["rack_prefix"], "uplinks": {},
                                               "interfaces": {}})
            r["uplinks"][d["name"]] = sorted(down[f]["spine"] for f in FAMILIES if f in down)
            r["interfaces"][d["name"]] = uplink_port_name(s)
    tors = {}
    for tor, r in sorted(racks.items()):
        prefixes = {}
        for other in racks.values():
            if other["rack"] != r["rack"]:
                for f in FAMILIES:
                    if other["own"].get(f):
                        prefixes[other["own"][f]] = other["rack"]
        tors[tor] = {"tor": tor, "rack": r["rack"], "prefixes": prefixes, "uplinks": r["uplinks"],
                     "interfaces": r["interfaces"]}
    return {"spine": spine_name, "zone": zone.name, "spines": [s.name for s in spines], "tors": tors}


def check_view(view, field="view"):
    """A ToR's part of :func:`zone_view` as a module receives it; raises naming the field."""
    if not isinstance(view, dict) or not isinstance(view.get("prefixes"), dict) \
            or not isinstance(view.get("uplinks"), dict) or not view["uplinks"]:
        raise SpineDrainError("%s=%r: not a ToR's spine view ({rack, prefixes: {prefix: rack}, uplinks: {spine: "
                              "[address]}}). Fix: pass spine_view.tors[<tor>] of drain_budget." % (field, view))
    for p in view["prefixes"]:
        try:
            ipaddress.ip_network(p)
        except ValueError as exc:
            raise SpineDrainError("%s.prefixes: %r is not a prefix. Fix: pass the view drain_budget returns."
                                  % (field, p)) from exc
    return view


# ------------------------------------------------------------------------------------------------
# What a ToR sees
# ------------------------------------------------------------------------------------------------
def _gshut_path(p):
    comm = p.get("community")
    text = comm.get("string", "") if isinstance(comm, dict) else str(comm or "")
    return p.get("locPrf") == 0 or "graceful-shutdown" in text or "65535:0" in text


def _bgp_paths(doc, prefix):
    """The paths of ``prefix`` from ``show bgp <af> unicast json`` (table: ``routes``) or ``show bgp <af>
    unicast <prefix> json`` (one prefix: ``paths``, ``bestpath.overall``, ``peer.peerId``)."""
    doc = doc or {}
    if "routes" in doc:
        return [{"peer": p.get("peerId"), "valid": bool(p.get("valid")),
                 "selected": bool(p.get("bestpath") or p.get("multipath")), "gshut": _gshut_path(p)}
                for p in (doc["routes"].get(prefix) or [])]
    if doc.get("prefix") not in (None, prefix):
        return []
    out = []
    for p in doc.get("paths") or []:
        best = p.get("bestpath")
        best = bool(best.get("overall")) if isinstance(best, dict) else bool(best)
        out.append({"peer": (p.get("peer") or {}).get("peerId", p.get("peerId")), "valid": bool(p.get("valid")),
                    "selected": best or bool(p.get("multipath")), "gshut": _gshut_path(p)})
    return out


def _fib(doc, prefix):
    fib = set()
    for e in (doc or {}).get(prefix) or []:
        if e.get("selected") and e.get("installed"):
            fib.update("%s%%%s" % (h.get("ip") or "", h.get("interfaceName") or "") for h in e.get("nexthops") or []
                       if h.get("active") and h.get("fib") and (h.get("ip") or h.get("interfaceName")))
    return sorted(fib)


def parse_observation(prefix_docs, neighbors_doc):
    """``{sessions: {address: established}, routes: {prefix: {paths: [{peer, valid, selected, gshut}], fib:
    ["<next hop address>%<interface>"]}}}``. ``prefix_docs``: {prefix: (decoded ``show bgp <af> unicast <prefix> json``, decoded
    ``show ip[v6] route <prefix> json``)}; ``neighbors_doc``: decoded ``show bgp neighbors json``."""
    routes = dict((prefix, {"paths": _bgp_paths(b, prefix), "fib": _fib(r, prefix)})
                  for prefix, (b, r) in sorted((prefix_docs or {}).items()))
    sessions = dict((a, n.get("bgpState") == "Established") for a, n in (neighbors_doc or {}).items()
                    if isinstance(n, dict) and "bgpState" in n)
    return {"sessions": sessions, "routes": routes}


def observe(run, target, view):
    """One vtysh call on a ToR: its sessions and, per aggregate of ``view``, the BGP paths and the FIB.
    ``run(argv) -> (rc, out, err)``; ``target``: :class:`frr.apply.FrrTarget`. Raises SpineDrainError."""
    from ansible_collections.netscale.multinic.plugins.module_utils.frr.state import split_json_stream
    prefixes = sorted(view["prefixes"])
    cmds = ["show bgp neighbors json"]
    for prefix in prefixes:
        v6 = ipaddress.ip_network(prefix).version == 6
        cmds.append("show bgp %s unicast %s json" % ("ipv6" if v6 else "ipv4", prefix))
        cmds.append("show %s route %s json" % ("ipv6" if v6 else "ip", prefix))
    argv = target.vtysh()
    for c in cmds:
        argv += ["-c", c]
    rc, out, err = run(argv)
    if rc != 0:
        raise SpineDrainError("vtysh failed (rc %d): %s" % (rc, (err or out or "").strip()[:500]))
    try:
        docs = split_json_stream(out)
    except ValueError as exc:
        raise SpineDrainError("vtysh printed something that is not JSON: %s" % exc) from exc
    if len(docs) != len(cmds):
        raise SpineDrainError("vtysh returned %d JSON documents for %d commands" % (len(docs), len(cmds)))
    pd = dict((prefix, (docs[1 + 2 * i], docs[2 + 2 * i])) for i, prefix in enumerate(prefixes))
    return parse_observation(pd, docs[0])


def _same_addr(a, b):
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


def _spine_of(view, addr):
    for s, addrs in view["uplinks"].items():
        if any(_same_addr(addr, a) for a in addrs):
            return s
    return None


def _fib_spine(view, hop):
    """The spine of a FIB next hop ``address%interface``: by address, else by the ToR's port to it (IPv6 next hops
    are link-local); the hop itself when neither matches."""
    addr, _sep, ifname = str(hop).partition("%")
    s = _spine_of(view, addr) if addr else None
    if s is None and ifname:
        found = [sp for sp, port in (view.get("interfaces") or {}).items() if port == ifname]
        s = found[0] if found else None
    return s or hop


def _up(view, obs, spine, addr_family):
    """Is the ToR's session to ``spine`` of this family Established?"""
    for a in view["uplinks"].get(spine, []):
        if (":" in a) == (addr_family == 6):
            for k, up in obs.get("sessions", {}).items():
                if _same_addr(k, a):
                    return bool(up)
    return False


def tor_coverage(tor, view, obs, spine, drained=()):
    """Before draining ``spine``: for each aggregate the ToR must carry, the OTHER spines that can carry it
    (session up, not in ``drained``, a valid path not in graceful shutdown). Returns ``{ok, missing, carriers,
    reasons}``."""
    carriers, missing, reasons = {}, [], []
    if obs is None:
        return {"ok": False, "missing": sorted(view["prefixes"]), "carriers": {},
                "reasons": ["%s: not observed (no BGP state from the ToR); nothing can show that the other "
                            "spines carry the rack aggregates" % tor]}
    for prefix, rack in sorted(view["prefixes"].items()):
        fam = ipaddress.ip_network(prefix).version
        got = set()
        for p in (obs["routes"].get(prefix) or {}).get("paths", []):
            s = _spine_of(view, p.get("peer"))
            if s is None or s == spine or s in drained or not p.get("valid") or p.get("gshut"):
                continue
            if _up(view, obs, s, fam):
                got.add(s)
        carriers[prefix] = sorted(got)
        if not got:
            missing.append(prefix)
            others = sorted(s for s in view["uplinks"] if s != spine)
            reasons.append("%s: rack %s's aggregate %s has no path from a spine other than %s that is up and not "
                           "drained (other spines: %s)" % (tor, rack, prefix, spine, ", ".join(
                               "%s%s" % (s, " (drained)" if s in drained else "") for s in others) or "none"))
    return {"ok": not missing, "missing": missing, "carriers": carriers, "reasons": reasons}


def coverage(view, observations, spine, drained=()):
    """:func:`tor_coverage` over every ToR of the zone (``observations``: {tor: observation}). Returns
    ``{ok, tors: {tor: ...}, reasons}``; a ToR without an observation fails it."""
    drained = set(drained) - {spine}
    tors = dict((t, tor_coverage(t, v, (observations or {}).get(t), spine, drained))
                for t, v in sorted(view["tors"].items()))
    reasons = [r for t in sorted(tors) for r in tors[t]["reasons"]]
    if not tors:
        reasons.append("zone %s has no ToR to check" % view.get("zone"))
    return {"ok": not reasons, "tors": tors, "reasons": reasons}


def verdict(tor, view, obs, spine, expect):
    """After the change, on one ToR. ``expect``: ``drained`` - for every aggregate no selected path and no FIB
    next hop from ``spine``, and a selected path and a FIB next hop from another spine; ``undrained`` - a
    selected path and a FIB next hop from ``spine``. Returns ``{ok, reasons, prefixes: {prefix: {selected,
    fib}}}`` (spines by name)."""
    if expect not in ("drained", "undrained"):
        raise SpineDrainError("expect=%r: use drained or undrained." % (expect,))
    reasons, seen = [], {}
    for prefix, rack in sorted(view["prefixes"].items()):
        r = obs["routes"].get(prefix) or {"paths": [], "fib": []}
        sel = sorted(set(_spine_of(view, p.get("peer")) or str(p.get("peer")) for p in r["paths"]
                         if p.get("selected") and p.get("valid")))
        fib = sorted(set(_fib_spine(view, a) for a in r["fib"]))
        seen[prefix] = {"selected": sel, "fib": fib}
        if expect == "drained":
            if spine in sel or spine in fib:
                reasons.append("%s: %s (rack %s) still uses %s (selected from %s, FIB via %s)" % (
                    tor, prefix, rack, spine, ", ".join(sel) or "none", ", ".join(fib) or "none"))
            elif not [s for s in sel if s != spine and s in view["uplinks"]] \
                    or not [s for s in fib if s != spine and s in view["uplinks"]]:
                reasons.append("%s: %s (rack %s) is not reachable via another spine (selected from %s, FIB via %s)"
                               % (tor, prefix, rack, ", ".join(sel) or "none", ", ".join(fib) or "none"))
        elif spine not in sel or spine not in fib:
            reasons.append("%s: %s (rack %s) is not back via %s (selected from %s, FIB via %s)" % (
                tor, prefix, rack, spine, ", ".join(sel) or "none", ", ".join(fib) or "none"))
    return {"ok": not reasons, "reasons": reasons, "prefixes": seen}


def wait(run, target, tor, view, spine, expect, timeout=30.0, interval=0.5, clock=None, sleep=None):
    """Observe ``tor`` until :func:`verdict` holds for ``expect`` or ``timeout`` seconds passed. Returns the last
    verdict with ``observation``, ``attempts``, ``elapsed``; a failed vtysh call is a failed attempt (its error in
    the reasons), never a pass."""
    import time
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    t0 = clock()
    attempts = 0
    while True:
        attempts += 1
        try:
            obs = observe(run, target, view)
            v = verdict(tor, view, obs, spine, expect)
        except SpineDrainError as exc:
            obs, v = None, {"ok": False, "reasons": ["%s: %s" % (tor, exc)], "prefixes": {}}
        v.update(observation=obs, attempts=attempts, elapsed=round(clock() - t0, 3))
        if v["ok"] or clock() - t0 >= timeout:
            return v
        sleep(interval)


# ------------------------------------------------------------------------------------------------
# On the spine
# ------------------------------------------------------------------------------------------------
def running_config(run, target):
    """The running config as a config file (vtysh's ``Building configuration...`` header and ``end`` dropped)."""
    rc, out, err = run(target.vtysh("-c", "show running-config"))
    if rc != 0:
        raise SpineDrainError("vtysh show running-config failed (rc %d): %s" % (rc, (err or out or "").strip()[:300]))
    lines = [line for line in (out or "").split("\n")
             if line.strip() not in ("Building configuration...", "Current configuration:", "end")]
    return "\n".join(lines).strip("\n") + "\n"


def converge(run, target, state, marker_path, check_mode=False, candidate_path=None, marker=None,
             apply_config=None):
    """Bring the spine to ``state`` (``drained``: ``bgp graceful-shutdown`` in its running config and the marker
    at ``marker_path``; ``undrained``: neither). The config goes through ``apply_config(text, check_mode,
    candidate_path)`` (default :func:`frr.apply.converge`: validated, diffed and applied with frr-reload.py,
    which also saves it to frr.conf, so a restart of FRR keeps it). ``marker``: the dict written (job, reason,
    case, time). Returns ``{changed, config_changed, marker_changed, diff, was_drained}``."""
    import json
    import os

    from ansible_collections.netscale.multinic.plugins.module_utils.frr import apply as frr_apply
    from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write
    if state not in ("drained", "undrained"):
        raise SpineDrainError("state=%r: use drained or undrained." % (state,))
    apply_config = apply_config or (lambda text, check, path: frr_apply.converge(
        run, target, text, check_mode=check, candidate_path=path))
    on = state == "drained"
    running = running_config(run, target)
    was = has_graceful_shutdown(running)
    candidate = with_graceful_shutdown(running, on, field="running config")
    res = {"changed": False, "diff": ""}
    if was != on:
        try:
            res = apply_config(candidate, check_mode, candidate_path)
        except frr_apply.FrrApplyError as exc:
            raise SpineDrainError("applying '%s%s' failed: %s" % ("" if on else "no ", GSHUT, exc)) from exc
    has_marker = os.path.exists(marker_path)
    marker_changed = has_marker != on
    if marker_changed and not check_mode:
        if on:
            atomic_write(marker_path, json.dumps(dict(marker or {}, drained=True), sort_keys=True) + "\n", mode=0o600)
        else:
            os.unlink(marker_path)
    diff = res.get("diff") or ""
    if marker_changed:
        diff += "%s marker %s\n" % ("+" if on else "-", marker_path)
    return {"changed": bool(res.get("changed")) or marker_changed, "config_changed": bool(res.get("changed")),
            "marker_changed": marker_changed, "diff": diff, "was_drained": was}


def honour_marker(content, confdir):
    """A deploy's intended config with the drain kept: ``content`` with ``bgp graceful-shutdown`` when the
    spine's marker is in ``confdir`` (and the config has a ``router bgp``). Returns ``(content, kept)``."""
    import os
    if not confdir or not os.path.exists(os.path.join(confdir, MARKER)):
        return content, False
    lines = (content or "").split("\n")
    if _bgp_block(lines) is None:
        return content, False
    return with_graceful_shutdown(content, True), True
