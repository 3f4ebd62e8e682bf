# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host side of BFD on the sidecar's BGP sessions (issue 12 item 1).

ExaBGP has no BFD. Every (slot, NIC) BGP session runs from the slot's network namespace, local
address = the container's NIC-k address, peer = the ToR's gateway on NIC k; the ToR's bgpd asks its
bfdd for a BFD session between exactly these two addresses. The responder therefore runs **per slot
network namespace**, beside the sidecar: FRR's zebra + bfdd (bfdd needs zebra for interfaces and
addresses), started as systemd units with ``NetworkNamespacePath=/run/netns/mn-slot<s>``, one BFD
peer per session with the same addresses and timers as the ToR's profile. Pure Python, no Ansible.

``render_bfd(host, slot, options)`` returns the daemons' configuration files of one slot.
"""

from __future__ import annotations

import ipaddress
import os

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError

DEFAULTS = {
    "enabled": False,
    "profile": "multinic-hosts",
    # the ToR policy's defaults (tor_policy options.bfd): 100 ms x 3 = 300 ms detection
    "interval_ms": 100,
    "multiplier": 3,
    # single-hop BFD (RFC 5881: TTL 255, UDP 3784) as the ToR's bgpd chooses for a directly connected
    # eBGP neighbor; true only when the ToR uses ebgp-multihop (then bgpd asks for multihop BFD, 4784)
    "multihop": False,
    # passive: wait for the ToR's control packets before sending (the ToR starts the session)
    "passive": False,
    "config_dir": "/etc/netscale-vipinjector",
    # not under the sidecar's runtime directory: systemd removes that one whenever the sidecar stops
    "runtime_dir": "/run/netscale-vipinjector-bfd",
}


class BfdRenderError(MultinicError, ValueError):
    """Bad input: names the field, the value and the fix."""


def _fail(field, value, message, fix):
    raise BfdRenderError("vipinjector_bfd.%s: %s (value: %r). Fix: %s" % (field, message, value, fix))


def merge_options(options):
    o = dict(DEFAULTS)
    for k, v in (options or {}).items():
        if k not in DEFAULTS:
            _fail(k, v, "unknown BFD option", "use one of: %s" % ", ".join(sorted(DEFAULTS)))
        if v is not None:
            o[k] = v
    for k in ("enabled", "multihop", "passive"):
        if not isinstance(o[k], bool):
            _fail(k, o[k], "must be true or false", "set a boolean")
    for k, lo, hi, fix in (("interval_ms", 10, 60000, "use 100 (the ToR profile's interval)"),
                           ("multiplier", 2, 255, "use 3 (the ToR profile's multiplier)")):
        v = o[k]
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            _fail(k, v, "must be an integer %d..%d" % (lo, hi), fix)
    p = o["profile"]
    if not isinstance(p, str) or not p or not all(c.isalnum() or c in "-_." for c in p):
        _fail("profile", p, "must be a simple name", "use letters, digits, '-', '_', '.'")
    return o


def instance_paths(options, slot):
    name = "slot%d" % int(slot)
    cdir = os.path.join(options["config_dir"], name, "bfd")
    rdir = os.path.join(options["runtime_dir"], name)
    return {
        "config_dir": cdir,
        "zebra_conf": os.path.join(cdir, "zebra.conf"),
        "bfdd_conf": os.path.join(cdir, "bfdd.conf"),
        "runtime_dir": rdir,
        "vty_socket": rdir,
        "zserv": os.path.join(rdir, "zserv.api"),
        "bfdctl": os.path.join(rdir, "bfdd.sock"),
    }


def peers(host, slot, session_family="auto"):
    """One BFD peer per (slot, NIC) BGP session: the same two addresses as the BGP session."""
    sd = None
    for s in host.get("slots") or []:
        if int(s["slot"]) == int(slot):
            sd = s
    if sd is None:
        _fail("slot", slot, "host %s has no such task slot" % host.get("name"),
              "use one of %s" % [s["slot"] for s in host.get("slots") or []])
    fam = session_family
    if fam == "auto":
        fam = "ipv6" if host["nics"][0].get("gateway", {}).get("ipv6") else "ipv4"
    addr = dict((int(n["index"]), n["address"]) for n in sd["nics"])
    out = []
    for nic in host["nics"]:
        k = int(nic["index"])
        gw = (nic.get("gateway") or {}).get(fam)
        local = (addr.get(k) or {}).get(fam)
        if not gw or not local:
            _fail("session_family", fam, "NIC %d of %s has no %s gateway/address in the plan" % (k, host["name"], fam),
                  "use the family of the BGP sessions (vipinjector_session_family)")
        ipaddress.ip_address(gw)
        ipaddress.ip_address(local)
        out.append({"nic": k, "interface": nic.get("name", "eth%d" % k), "peer": gw, "local": local})
    return out


def render_bfdd_conf(host, slot, o, session_family="auto"):
    name = "%s-slot%d-bfd" % (host["name"], int(slot))
    lines = [
        "! netscale.multinic: BFD responder of %s slot %d (host side of the ToR's BFD on its BGP sessions)." % (
            host["name"], int(slot)),
        "! Rendered by Ansible (roles/vipinjector) from the fabric plan; do not edit.",
        "frr defaults traditional",
        "hostname %s" % name,
        "log stdout informational",
        "!",
        "bfd",
        " profile %s" % o["profile"],
        "  detect-multiplier %d" % o["multiplier"],
        "  receive-interval %d" % o["interval_ms"],
        "  transmit-interval %d" % o["interval_ms"],
    ]
    if o["passive"]:
        lines.append("  passive-mode")
    lines += [" exit", " !"]
    for p in peers(host, slot, session_family):
        if o["multihop"]:
            head = " peer %s multihop local-address %s" % (p["peer"], p["local"])
        else:
            head = " peer %s local-address %s interface %s" % (p["peer"], p["local"], p["interface"])
        lines += [" ! nic%d %s: BGP session %s -> %s" % (p["nic"], p["interface"], p["local"], p["peer"]),
                  head, "  profile %s" % o["profile"], " exit", " !"]
    lines += ["exit", "!", ""]
    return "\n".join(lines)


def render_zebra_conf(host, slot):
    return "\n".join([
        "! netscale.multinic: zebra for the BFD responder of %s slot %d (interfaces and addresses for bfdd;" % (
            host["name"], int(slot)),
        "! it installs no routes). Rendered by Ansible (roles/vipinjector); do not edit.",
        "frr defaults traditional",
        "hostname %s-slot%d-zebra" % (host["name"], int(slot)),
        "log stdout warnings",
        "no zebra nexthop kernel enable",
        "!",
        "",
    ])


def render_bfd(host, slot, options=None, session_family="auto"):
    """``{"model": {...}, "files": {"zebra.conf": str, "bfdd.conf": str}}`` of one slot."""
    o = merge_options(options)
    return {
        "model": {"slot": int(slot), "options": o, "paths": instance_paths(o, slot),
                  "peers": peers(host, slot, session_family)},
        "files": {"zebra.conf": render_zebra_conf(host, slot),
                  "bfdd.conf": render_bfdd_conf(host, slot, o, session_family)},
    }
