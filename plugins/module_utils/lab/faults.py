# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gray-failure injection on a lab NIC's ToR port (nftables netdev hooks) and flap storms.

Every drop is installed on the ToR port, never on the host NIC: in eBPF mode the host's tc ingress
program runs before the netfilter ingress hook and redirects workload traffic past it, so a drop
at the host NIC would not see that traffic. On the ToR port the netdev ``ingress`` hook drops what
the host sends (``to_tor``) and the netdev ``egress`` hook what the ToR sends (``to_host``).

One table per (port, direction, kind): ``mnf_<port>_<in|out>_<all|arpnd>``; the state of a NIC is
the set of these tables on its port, so a setting is applied by adding the missing tables and
deleting the others (idempotent). Kinds: ``all`` drops everything (silent loss), ``arp_nd`` only
ARP replies and ICMPv6 neighbour advertisements (resolution fails, traffic to known neighbours
still flows), ``bfd`` only BFD control packets (UDP 3784 single hop, 4784 multihop; ARP/ND, BGP and
traffic still flow, so only BFD can tell), ``random`` drops ``percent`` % of every packet at random (nft
``numgen random mod 100 < percent``: gray loss, e.g. the issue's 2 %).

The same tables go on a ToR's uplink port toward a spine (:func:`set_uplink_fault`): ``to_tor`` is then
what the spine sends (ingress hook), ``to_spine`` what the ToR sends (egress hook).
"""

from __future__ import annotations

import re
import time

DIRS = {"to_tor": "in", "to_host": "out"}
HOOKS = {"in": "ingress", "out": "egress"}
KINDS = {"all": "all", "arp_nd": "arpnd", "bfd": "bfd", "random": "rnd"}
RULES = {"all": " policy drop;\n", "arpnd": " policy accept;\n  arp operation reply drop\n"
                                            "  icmpv6 type nd-neighbor-advert drop\n",
         "bfd": " policy accept;\n  udp dport { 3784, 4784 } drop\n"}
PREFIX = "mnf_"
UPLINK_DIRS = {"both": "both", "to_tor": "to_tor", "to_spine": "to_host"}   # uplink port: egress = to the spine


def random_rule(percent):
    """The nft rule that drops ``percent`` % of packets at random (1..99, an integer: numgen draws 0..99)."""
    if isinstance(percent, bool) or not isinstance(percent, int) or not 1 <= percent <= 99:
        raise ValueError("loss_percent: %r is not an integer from 1 to 99; give the share of packets to drop, "
                         "e.g. 2 (kind random)" % (percent,))
    return " policy accept;\n  numgen random mod 100 < %d drop\n" % percent


def _port(dev):
    return re.sub(r"[^A-Za-z0-9_]", "_", dev)


def table_name(dev, direction, kind):
    return "%s%s_%s_%s" % (PREFIX, _port(dev), DIRS[direction], KINDS[kind])


def wanted_tables(dev, present, direction="both", kind="all", percent=None):
    """{table name: nft script} that a loss setting needs on ToR port ``dev`` (``percent``: kind random only)."""
    if not present:
        return {}
    if direction not in ("both", "to_tor", "to_host"):
        raise ValueError("loss_direction: %r is not one of both, to_tor, to_host" % (direction,))
    if kind not in KINDS:
        raise ValueError("loss_kind: %r is not one of %s" % (kind, ", ".join(sorted(KINDS))))
    if kind == "random":
        body = random_rule(percent)
    elif percent is not None:
        raise ValueError("loss_percent: %r is only for loss_kind random (got loss_kind %s); drop it or use "
                         "loss_kind random" % (percent, kind))
    else:
        body = RULES[KINDS[kind]]
    out = {}
    for d in (("to_tor", "to_host") if direction == "both" else (direction,)):
        name = table_name(dev, d, kind)
        hook = HOOKS[DIRS[d]]
        out[name] = ('table netdev %s {\n chain %s {\n  type filter hook %s device "%s" priority -500;%s }\n}\n'
                     % (name, hook, hook, dev, body))
    return out


def ours(dev, tables):
    """The tables of ``tables`` (names listed in the namespace) that belong to port ``dev``."""
    return sorted(t for t in tables if t.startswith(PREFIX + _port(dev) + "_"))


def plan(dev, present, direction, kind, existing, percent=None):
    """(add {name: script}, delete [name]) that turn ``existing`` (table names) into the setting.

    Tables are compared by name: a random-loss table already there with another ``percent`` is kept as it is
    (remove the fault first, ``present`` false, to change its share)."""
    want = wanted_tables(dev, present, direction, kind, percent)
    have = set(ours(dev, existing))
    return dict((n, s) for n, s in want.items() if n not in have), sorted(have - set(want))


def uplink_plan(dev, present, direction, kind, existing, percent=None):
    """:func:`plan` for a ToR's uplink port: ``direction`` both, to_tor (what the spine sends, ingress hook) or
    to_spine (what the ToR sends, egress hook)."""
    if direction not in UPLINK_DIRS:
        raise ValueError("uplink loss_direction: %r is not one of both, to_tor, to_spine" % (direction,))
    return plan(dev, present, UPLINK_DIRS[direction], kind, existing, percent)


def uplink_port(racks, tor, spine=None):
    """(rack name, interface, spine) of ``tor``'s uplink toward ``spine`` (its first uplink when None), from the
    plan's rack data (``racks``: [{name, tor: {name, uplinks: [{spine, interface}]}}])."""
    rack = next((r for r in racks if r["tor"]["name"] == tor), None)
    if rack is None:
        raise ValueError("tor: %r is not a ToR of this fabric; use one of %s"
                         % (tor, ", ".join(r["tor"]["name"] for r in racks)))
    ups = rack["tor"].get("uplinks") or []
    up = next((u for u in ups if spine is None or u["spine"] == spine), None)
    if up is None:
        raise ValueError("spine: %r is not an uplink of %s; use one of %s"
                         % (spine, tor, ", ".join(u["spine"] for u in ups) or "(none)"))
    return rack["name"], up["interface"], up["spine"]


def flap_schedule(count, seconds):
    """[(offset s, up?)] of ``count`` flaps spread over ``seconds``: down at k*T/N, up half a period later."""
    if count < 1 or seconds <= 0:
        raise ValueError("flap_storm: count must be >= 1 and seconds > 0 (got count=%r, seconds=%r)" % (count, seconds))
    period = float(seconds) / count
    out = []
    for k in range(count):
        out.append((round(k * period, 6), False))
        out.append((round(k * period + period / 2, 6), True))
    return out


def run_schedule(schedule, set_up, clock=time.monotonic, sleep=time.sleep):
    """Run ``schedule`` calling ``set_up(bool)`` at each offset; returns the offsets actually hit."""
    t0 = clock()
    hit = []
    for offset, up in schedule:
        wait = t0 + offset - clock()
        if wait > 0:
            sleep(wait)
        set_up(up)
        hit.append(round(clock() - t0, 3))
    return hit


# ---------------------------------------------------------------- on a running lab
def _nft(ns, args, input_text=None, check=True):
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run
    return run(["ip", "netns", "exec", ns, "nft"] + args, input_text=input_text, check=check)


def _tor_end(lab, host, nic):
    from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name
    h, n = ops.nic_ref(lab, host, nic)
    return netns_name(h["tor"]), n["tor_port"], n["name"]


def list_tables(ns):
    out = _nft(ns, ["list", "tables", "netdev"])[1]
    return [line.split()[2] for line in out.splitlines() if line.startswith("table netdev ")]


def _apply(ns, add, delete, check):
    done = ["%s: delete table netdev %s" % (ns, t) for t in delete] + \
        ["%s: add table netdev %s" % (ns, t) for t in sorted(add)]
    if not check:
        for t in delete:
            _nft(ns, ["delete", "table", "netdev", t])
        if add:
            _nft(ns, ["-f", "-"], input_text="".join(add[t] for t in sorted(add)))
    return done


def set_uplink_fault(lab, tor, present, spine=None, direction="both", kind="all", percent=None, check=False):
    """Loss on ``tor``'s uplink port toward ``spine`` (its first uplink when None), inside the ToR's namespace:
    the same tables as :func:`set_fault` (kinds all, arp_nd, bfd, random with ``percent``)."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name
    dummy, port, spine = uplink_port(lab.spec.racks, tor, spine)
    ns = netns_name(tor)
    add, delete = uplink_plan(port, present, direction, kind, list_tables(ns), percent)
    done = _apply(ns, add, delete, check)
    return {"changed": bool(done), "actions": done, "tor": tor, "spine": spine, "port": port, "loss": bool(present),
            "direction": direction if present else None, "kind": kind if present else None,
            "percent": percent if present else None}


def set_fault(lab, host, nic, present, direction="both", kind="all", check=False, percent=None):
    """Loss (``kind`` all), ARP/ND reply loss (``kind`` arp_nd), BFD loss (``kind`` bfd) or ``percent`` % random loss
    (``kind`` random) on the NIC's ToR port."""
    ns, port, name = _tor_end(lab, host, nic)
    add, delete = plan(port, present, direction, kind, list_tables(ns), percent)
    done = _apply(ns, add, delete, check)
    return {"changed": bool(done), "actions": done, "host": host, "nic": name, "tor_port": port,
            "loss": bool(present), "direction": direction if present else None, "kind": kind if present else None,
            "percent": percent if present else None}


def flap_storm(lab, host, nic, count, seconds, side="tor", check=False):
    """``count`` link flaps (down, then up half a period later) within ``seconds``, ending up."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name
    h, n = ops.nic_ref(lab, host, nic)
    ns, dev = (netns_name(h["name"]), n["name"]) if side == "host" else (netns_name(h["tor"]), n["tor_port"])
    sched = flap_schedule(count, seconds)
    if check:
        return {"changed": True, "netns": ns, "dev": dev, "flaps": count, "seconds": seconds, "offsets": []}
    hit = run_schedule(sched, lambda up: run(["ip", "-n", ns, "link", "set", "dev", dev, "up" if up else "down"]))
    return {"changed": True, "netns": ns, "dev": dev, "flaps": count, "seconds": seconds, "offsets": hit}
