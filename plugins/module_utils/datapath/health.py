# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gray-failure detection of the NIC watcher: gateway liveness per NIC, hold-down and dampening.

Pure logic (no I/O, unit-tested); the watcher feeds it and applies what it decides.

Liveness: the watcher sends one probe per NIC every ``interval_ms`` (an ARP request for the NIC's
IPv4 gateway, or an IPv6 neighbour solicitation for the gateway when the NIC has no IPv4) and
reports each reply from the gateway. A NIC whose gateway has not answered for
``interval_ms * multiplier`` (default 100 ms x 3, like BFD) is dead; so is a NIC whose link lost
carrier or was set down, or whose gateway the kernel marks FAILED (neighbour events), at once.
BFD (``bfd``, :mod:`.bfdstate`): a NIC whose BFD sessions (the per-slot responders beside the
sidecars) that have been Up are all Down is dead at once and stays dead - gateway replies do not
revive it - until one session is Up again (``block`` / ``unblock``).

The egress set: a dead NIC leaves it at once. It comes back only when (1) its gateway has answered
continuously for ``hold_down`` seconds and (2) it is not suppressed. Dampening (BGP style): every
death adds ``penalty`` to the NIC's figure of merit, which decays with ``half_life``; above
``suppress`` the NIC is suppressed until the figure decays below ``reuse``; the figure is capped at
``max_penalty`` so a suppressed NIC returns at most half_life * log2(max_penalty / reuse) seconds
after its last flap (defaults: 2 s x log2(4) = 4 s). One flap costs 1000 (< suppress 2000): the NIC
returns after the hold-down; three flaps within ~1.5 s suppress it, so a flap storm (10 flaps in
5 s) keeps it out instead of churning routes.

The last NIC is never taken out: when every NIC is dead the datapath keeps using all of them
(``effective_out``), as without detection.

eBPF mode: NIC_OUT (bit 2 of mn_nics.flags) marks a NIC that is out; the program treats it as
unusable (also when its gateway lookup returns NO_NEIGH). Kernel mode: the NIC's own default route
(metric ``metric_own`` in its table) is deleted and the NIC is left out of every fallback multipath
default route (metric ``metric_fallback``), so the per-NIC tables fall through to the survivors.
"""

from __future__ import annotations

import struct

NIC_OUT = 4          # mn_nics flags bit (bit 0: gw4 valid, bit 1: gw6 valid)
NIC_VAL = "<II4s16s"  # struct nic_val

# The watcher publishes the effective egress set here (JSON, rewritten on every change and every
# REASSERT second while a NIC is out, so a reader can tell a live state from one left by a stopped
# watcher). The vipinjector helper reads it and withdraws the task IP on the BGP session of every NIC
# that is out: the ToR stops sending on a NIC the host found dead, also when only the host can see the
# fault (ToR -> host loss, lost ARP/ND replies). /run: per host, gone at reboot.
EGRESS_STATE_FILE = "/run/netscale-multinic/egress-state.json"

DEFAULTS = {
    "enabled": True,
    "interval_ms": 100,
    "multiplier": 3,
    "hold_down": 1.0,
    "penalty": 1000,
    "suppress": 2000,
    "reuse": 1000,
    "half_life": 2.0,
    "max_penalty": 4000,
    # BFD session state of the vipinjector role's per-slot responders (bfdd control sockets
    # <bfd_dir>/slot<s>/bfdd.sock; the role's units use /run/netscale-vipinjector-bfd)
    "bfd": True,
    "bfd_dir": "/run/netscale-vipinjector-bfd",
}

# The option type of each parameter in the multinic_datapath module's argument spec (``detection``
# suboptions, built by option_spec from here: DEFAULTS is the one source of these defaults; the module's
# DOCUMENTATION, the host_datapath role's argument specs and README are checked against it by
# tests/unit/core/test_defaults.py).
TYPES = {
    "enabled": "bool",
    "interval_ms": "int",
    "multiplier": "int",
    "hold_down": "float",
    "penalty": "int",
    "suppress": "int",
    "reuse": "int",
    "half_life": "float",
    "max_penalty": "int",
    "bfd": "bool",
    "bfd_dir": "path",
}


def option_spec():
    """The ``detection`` suboptions of an Ansible argument spec: every parameter with its type and its
    default from DEFAULTS (a new dict on each call)."""
    return dict((key, {"type": TYPES[key], "default": DEFAULTS[key]}) for key in DEFAULTS)


# (key, minimum, maximum) of the numeric parameters
_RANGES = (("interval_ms", 10, 10000), ("multiplier", 1, 100), ("hold_down", 0.0, 3600.0),
           ("penalty", 0, 100000), ("suppress", 1, 1000000), ("reuse", 1, 1000000),
           ("half_life", 0.1, 3600.0), ("max_penalty", 1, 1000000))


def check_params(params, prefix="host_datapath_detection"):
    """``params`` (None or a dict of some DEFAULTS keys) merged over DEFAULTS and checked.

    Raises ValueError naming the field, the value and the fix.
    """
    out = dict(DEFAULTS)
    for key, value in (params or {}).items():
        if key not in DEFAULTS:
            raise ValueError("%s.%s: unknown parameter (value %r). Fix: use one of %s." % (
                prefix, key, value, ", ".join(sorted(DEFAULTS))))
        if value is None:
            continue
        if key in ("enabled", "bfd"):
            if not isinstance(value, bool):
                raise ValueError("%s.%s: %r is not a boolean. Fix: set true or false." % (prefix, key, value))
            out[key] = value
            continue
        if key == "bfd_dir":
            if not isinstance(value, str) or not value.startswith("/") or "\n" in value:
                raise ValueError("%s.bfd_dir: %r is not an absolute path. Fix: set the directory of the BFD "
                                 "responders' slot<s>/bfdd.sock (default %s)." % (prefix, value, DEFAULTS[key]))
            out[key] = value.rstrip("/") or "/"
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("%s.%s: %r is not a number. Fix: set a number (default %s)." % (
                prefix, key, value, DEFAULTS[key]))
        out[key] = value
    for key, lo, hi in _RANGES:
        if not lo <= out[key] <= hi:
            raise ValueError("%s.%s: %r is out of range. Fix: set a value from %s to %s (default %s)." % (
                prefix, key, out[key], lo, hi, DEFAULTS[key]))
    if out["reuse"] >= out["suppress"]:
        raise ValueError("%s.reuse: %r is not below suppress (%r). Fix: set reuse < suppress (defaults %d < %d)." % (
            prefix, out["reuse"], out["suppress"], DEFAULTS["reuse"], DEFAULTS["suppress"]))
    if out["max_penalty"] < out["suppress"]:
        raise ValueError("%s.max_penalty: %r is below suppress (%r). Fix: set max_penalty >= suppress "
                         "(default %d)." % (prefix, out["max_penalty"], out["suppress"], DEFAULTS["max_penalty"]))
    return out


class _Nic(object):
    def __init__(self, now):
        self.alive = True
        self.last_reply = now
        self.healthy_since = now
        self.in_set = True
        self.penalty = 0.0
        self.pen_t = now
        self.suppressed = False
        self.blocked = {}   # cause -> reason: dead until every cause is lifted (BFD down)


class Detector(object):
    """Per-NIC liveness and egress-set membership. Times are ``time.monotonic()`` seconds.

    Every input returns the transitions it caused: ``[(nic, "out" | "in", reason)]``.
    """

    def __init__(self, names, params=None, now=0.0):
        self.p = check_params(params)
        self.nics = dict((n, _Nic(now)) for n in names)

    @property
    def dead_after(self):
        return self.p["interval_ms"] * self.p["multiplier"] / 1000.0

    def _decay(self, s, now):
        if now > s.pen_t:
            s.penalty *= 0.5 ** ((now - s.pen_t) / self.p["half_life"])
        s.pen_t = now
        return s.penalty

    def penalty(self, nic, now):
        return self._decay(self.nics[nic], now)

    def _dead(self, nic, now, reason):
        s = self.nics[nic]
        if not s.alive:
            return []
        s.alive = False
        s.penalty = min(self._decay(s, now) + self.p["penalty"], self.p["max_penalty"])
        if s.penalty >= self.p["suppress"] and not s.suppressed:
            s.suppressed = True
            reason += "; suppressed (penalty %d >= %d)" % (s.penalty, self.p["suppress"])
        if s.in_set:
            s.in_set = False
            return [(nic, "out", reason)]
        return []

    def reply(self, nic, now):
        """The gateway of ``nic`` answered a probe."""
        s = self.nics.get(nic)
        if s is None:
            return []
        s.last_reply = now
        if not s.alive and not s.blocked:
            s.alive = True
            s.healthy_since = now
        return []

    def block(self, nic, now, cause, reason):
        """Dead at once and held dead (gateway replies do not revive it) until ``unblock(cause)``."""
        s = self.nics.get(nic)
        if s is None or cause in s.blocked:
            return []
        s.blocked[cause] = reason
        return self._dead(nic, now, reason)

    def unblock(self, nic, now, cause):
        """``cause`` is lifted; the NIC is alive again when nothing else holds it and its gateway has
        answered within the dead-after time (then the hold-down runs from now, see ``tick``)."""
        s = self.nics.get(nic)
        if s is None or s.blocked.pop(cause, None) is None:
            return []
        if not s.blocked and not s.alive and now - s.last_reply <= self.dead_after:
            s.alive = True
            s.healthy_since = now
        return []

    def down(self, nic, now, reason):
        """Immediate death: carrier lost, admin down, the gateway's neighbour entry FAILED."""
        if nic not in self.nics:
            return []
        return self._dead(nic, now, reason)

    def tick(self, now):
        """Time passes: dead NICs leave the egress set, healed ones return."""
        out = []
        for nic in sorted(self.nics):
            s = self.nics[nic]
            if s.alive and now - s.last_reply > self.dead_after:
                out += self._dead(nic, now, "gateway silent for %d ms" % round((now - s.last_reply) * 1000))
            if s.suppressed and self._decay(s, now) < self.p["reuse"]:
                s.suppressed = False
            if not s.in_set and s.alive and not s.suppressed and now - s.healthy_since >= self.p["hold_down"]:
                s.in_set = True
                out.append((nic, "in", "gateway answering for %.1f s, penalty %d" % (
                    now - s.healthy_since, s.penalty)))
        return out

    def out(self):
        return set(n for n, s in self.nics.items() if not s.in_set)


def effective_out(out, names, drained=()):
    """The NICs to take out of the egress set: the admin-drained ones (``drained``, the host's drain
    marker, module_utils/drain_marker.py) and the dead ones, but never all of them: a drain that would cover
    every NIC is ignored (the budget never allows one), and dead NICs are left in when every NIC that is
    not drained is dead (as without detection)."""
    names = set(names)
    admin = set(drained) & names
    if len(admin) >= len(names):
        admin = set()
    rest = names - admin
    dead = set(out) & rest
    if len(dead) >= len(rest):
        dead = set()
    return admin | dead


def egress_state(out, index, now, drained=()):
    """The published state (EGRESS_STATE_FILE) for the effective out set ``out`` (NIC names);
    ``index``: {NIC name: plan index}, ``now``: wall-clock seconds; ``drained``: the admin-drained NICs
    among them (names), published as plan indexes (key ``drained``, present only when some are)."""
    st = {"version": 1, "out": sorted(int(index[n]) for n in out), "out_nics": sorted(out),
          "updated": round(float(now), 3)}
    drained = set(drained) & set(out)
    if drained:
        st["drained"] = sorted(int(index[n]) for n in drained)
    return st


def nic_flag_updates(dump, out_indexes):
    """mn_nics entries to rewrite so that exactly ``out_indexes`` carry NIC_OUT.

    dump: {key bytes: value bytes} of the pinned map. Returns [(key, new value)]; unused entries
    (ifindex 0) are left alone.
    """
    ops = []
    for key, val in sorted(dump.items()):
        if len(key) != 4 or len(val) != struct.calcsize(NIC_VAL):
            continue
        idx = struct.unpack("<I", key)[0]
        ifindex, flags, gw4, gw6 = struct.unpack(NIC_VAL, val)
        if not ifindex:
            continue
        want = (flags | NIC_OUT) if idx in out_indexes else (flags & ~NIC_OUT)
        if want != flags:
            ops.append((key, struct.pack(NIC_VAL, ifindex, want, gw4, gw6)))
    return ops


def kernel_route_lines(detect, out_names):
    """Kernel mode: ``ip -batch`` lines per family flag ('-4', '-6') that make the per-NIC tables
    match the egress set (all NICs but ``out_names``). Idempotent (replace; deletes run with -force)."""
    nics = detect["nics"]
    live = [n for n in nics if n["name"] not in out_names]
    lines = {}
    for fam, key in (("-4", "gw4"), ("-6", "gw6")):
        members = [n for n in nics if n.get(key)]
        if not members:
            continue
        for n in members:
            table = n["table"]
            if n["name"] in out_names:
                lines.setdefault(fam, []).append("route del default table %d metric %d" % (table, detect["metric_own"]))
            else:
                lines.setdefault(fam, []).append("route replace default table %d metric %d via %s dev %s" % (
                    table, detect["metric_own"], n[key], n["name"]))
            if len(members) < 2:
                continue
            nhs = [m for m in live if m.get(key)] or members
            if len(nhs) == 1:
                via = "via %s dev %s" % (nhs[0][key], nhs[0]["name"])
            else:
                via = " ".join("nexthop via %s dev %s" % (m[key], m["name"]) for m in nhs)
            lines[fam].append("route replace default table %d metric %d %s" % (table, detect["metric_fallback"], via))
    return lines
