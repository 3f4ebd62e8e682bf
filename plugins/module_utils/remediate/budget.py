# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Blast-radius budget of drains (design section 10, issue 30 item 2). Pure: no I/O, no Ansible.

:func:`decide` answers one question before every drain or undrain: may this element go out (come
back) now? It returns a decision with every rule checked, the numbers behind each and, when refused,
the reasons in words. The caller journals the decision (:mod:`.journal`) whatever it says; only an
allowed decision is applied.

Elements (strings, also the journal's keys): ``nic:<host>:<plan index>``, ``host:<host>``,
``tor:<rack>``, ``spine:<spine>``.

Rules of a drain (all are checked; every one that fails is a reason):

* ``lease``: no other job holds the fabric's lease (a rollout, rollback, decommission, site run or
  another drain, design section 9). The lease itself is another module's; this rule takes its holder
  as an input (``lease``: ``None`` or ``{"job": ..., "kind": ...}``). A holder marked ``refused`` (the
  lease module refused this job, ``drain.yml`` passes its holder so that the refusal is journaled)
  refuses whatever its job id: the lease module, not the id, says who holds the fabric.
* ``last_nic`` (NIC scope): never a host's last NIC: the host's NICs already drained plus this one
  must leave at least one in service.
* ``rack_nic_share`` (NIC and host scopes): the share of a rack's NICs out at once (drained NICs, every
  NIC of a drained host, every NIC of a drained rack) after this drain is at most
  ``max_rack_nic_share``.
* ``zone_tor_share`` (ToR scope): the share of a zone's racks whose ToR is drained, after this one,
  at most ``max_zone_tor_share``.
* ``zone_spine_share`` (spine scope): the share of a zone's spines drained, after this one, at most
  ``max_zone_spine_share``, and never the zone's last spine.
* ``zone_rate`` (automatic drains only): at most ``max_auto_drains_per_zone`` automatic drains that
  took something out in the zone within the last ``rate_window`` seconds, this one included.

A drain of an element already out is allowed and changes nothing (``noop``: idempotent re-runs, a
duplicate alert); it does not count against the rate. An undrain gives capacity back: it is refused
by the lease and, when the caller passes one (``window``: the :mod:`.clean_window` verdict of the
element's probes, ``undrain.yml`` does for NIC and host scopes), by ``clean_window``: only a clean probe
window (or an operator's journaled consent to skip it) lets the element back.

A spine drain also takes, when the caller passes it (``spine_check``: the zone's view and the ToRs' observed
BGP state, :mod:`.spine_drain`; ``drain.yml`` always does for scope spine), the rule ``spine_coverage``: every
ToR of the zone still has each other rack's aggregate from at least one other spine that is up and not
drained.
"""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import spine_drain

SCOPES = ("nic", "host", "tor", "spine")
ACTIONS = ("drain", "undrain")
DEFAULT_POLICY = {
    "max_rack_nic_share": 0.25,
    "max_zone_tor_share": 0.25,
    "max_zone_spine_share": 0.25,
    "max_auto_drains_per_zone": 3,
    "rate_window": 3600.0,
}
_SHARES = ("max_rack_nic_share", "max_zone_tor_share", "max_zone_spine_share")
_EPS = 1e-9


class BudgetError(MultinicError, ValueError):
    """Bad input to the budget (names the field, the value and the fix)."""


def check_policy(policy, prefix="drain_budget"):
    """``policy`` (None or a dict of some DEFAULT_POLICY keys) merged over the defaults and checked."""
    out = dict(DEFAULT_POLICY)
    for key, value in (policy or {}).items():
        if key not in DEFAULT_POLICY:
            raise BudgetError("%s.%s: unknown budget setting (value %r). Fix: use one of %s." % (
                prefix, key, value, ", ".join(sorted(DEFAULT_POLICY))))
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BudgetError("%s.%s: %r is not a number. Fix: set a number (default %s)." % (
                prefix, key, value, DEFAULT_POLICY[key]))
        out[key] = value
    for key in _SHARES:
        if not 0.0 <= out[key] <= 1.0:
            raise BudgetError("%s.%s: %r is not a share. Fix: set a value from 0 to 1 (default %s)." % (
                prefix, key, out[key], DEFAULT_POLICY[key]))
    count = out["max_auto_drains_per_zone"]
    if int(count) != count or count < 0:
        raise BudgetError("%s.max_auto_drains_per_zone: %r is not a count. Fix: set 0 (no automatic drain) or "
                          "more (default %d)." % (prefix, count, DEFAULT_POLICY["max_auto_drains_per_zone"]))
    out["max_auto_drains_per_zone"] = int(out["max_auto_drains_per_zone"])
    if not 1.0 <= out["rate_window"] <= 7 * 86400.0:
        raise BudgetError("%s.rate_window: %r seconds is out of range. Fix: set 1 to 604800 (default 3600)." % (
            prefix, out["rate_window"]))
    return out


# ------------------------------------------------------------------------------------------------
# The fabric as the budget sees it
# ------------------------------------------------------------------------------------------------
class FabricView(object):
    """Hosts (NIC count, rack), racks (zone, ToR), zones (spines): plain data.

    ``hosts``: {name: {"rack": r, "nics": n}}; ``racks``: {name: {"zone": z, "tor": t}};
    ``spines``: {name: zone}. Zones are those of the racks and spines."""

    def __init__(self, hosts, racks, spines=None):
        self.hosts = dict((h, {"rack": v["rack"], "nics": int(v["nics"])}) for h, v in hosts.items())
        self.racks = dict((r, {"zone": v["zone"], "tor": v.get("tor") or "%s-tor" % r}) for r, v in racks.items())
        self.spines = dict(spines or {})
        self.rack_hosts = {}
        for h, v in sorted(self.hosts.items()):
            if v["rack"] not in self.racks:
                raise BudgetError("fabric: host %s names rack %r, which is not in the fabric. Fix: load the fabric "
                                  "from one topology." % (h, v["rack"]))
            self.rack_hosts.setdefault(v["rack"], []).append(h)

    @classmethod
    def from_topology(cls, topo):
        """From a validated :class:`plan.topology.Topology`."""
        hosts = dict((h.name, {"rack": h.parent.name, "nics": h.nics}) for h in topo.hosts)
        racks = dict((r.name, {"zone": r.parent.name, "tor": r.pins.get("tor_name")}) for r in topo.racks)
        spines = dict((s.name, s.parent.name) for s in topo.spines)
        return cls(hosts, racks, spines)

    def rack_nics(self, rack):
        return sum(self.hosts[h]["nics"] for h in self.rack_hosts.get(rack, []))

    def zone_racks(self, zone):
        return sorted(r for r, v in self.racks.items() if v["zone"] == zone)

    def zone_spines(self, zone):
        return sorted(s for s, z in self.spines.items() if z == zone)

    def zone_of_host(self, host):
        return self.racks[self.hosts[host]["rack"]]["zone"]


def element(scope, host=None, nic=None, rack=None, spine=None):
    """The element key of a request."""
    if scope == "nic":
        return "nic:%s:%d" % (host, int(nic))
    if scope == "host":
        return "host:%s" % host
    if scope == "tor":
        return "tor:%s" % rack
    if scope == "spine":
        return "spine:%s" % spine
    raise BudgetError("scope=%r: not a drain scope. Fix: use one of %s." % (scope, ", ".join(SCOPES)))


def parse_element(key):
    """``(scope, fields)`` of an element key; fields as in :func:`element`."""
    parts = str(key).split(":")
    if parts[0] == "nic" and len(parts) == 3:
        return "nic", {"host": parts[1], "nic": int(parts[2])}
    if parts[0] == "host" and len(parts) == 2:
        return "host", {"host": parts[1]}
    if parts[0] == "tor" and len(parts) == 2:
        return "tor", {"rack": parts[1]}
    if parts[0] == "spine" and len(parts) == 2:
        return "spine", {"spine": parts[1]}
    raise BudgetError("element %r: not an element key (nic:<host>:<index>, host:<host>, tor:<rack>, "
                      "spine:<spine>)" % (key,))


def resolve(fabric, scope, host=None, nic=None, rack=None, spine=None, tor=None):
    """Check a request against the fabric. Returns ``{element, scope, host, nic, rack, zone, spine}``;
    raises BudgetError naming the field, the value and the fix. Scope tor takes the rack or its ToR's name."""
    if scope == "tor" and rack is None and tor is not None:
        found = [r for r, v in fabric.racks.items() if v["tor"] == tor]
        if not found:
            raise BudgetError("drain_tor=%r: not a ToR of this fabric. Fix: name a ToR of the inventory's tors "
                              "group, or the rack with drain_rack." % (tor,))
        rack = found[0]
    if scope not in SCOPES:
        raise BudgetError("drain_scope=%r: not a drain scope. Fix: use one of %s." % (scope, ", ".join(SCOPES)))
    out = {"scope": scope, "host": None, "nic": None, "rack": None, "zone": None, "spine": None}
    if scope in ("nic", "host"):
        if host not in fabric.hosts:
            raise BudgetError("drain_host=%r: not a GPU host of this fabric. Fix: name a host of the inventory's "
                              "gpu_hosts group." % (host,))
        out["host"] = host
        out["rack"] = fabric.hosts[host]["rack"]
        if scope == "nic":
            n = fabric.hosts[host]["nics"]
            if isinstance(nic, bool) or not isinstance(nic, int) or not 0 <= nic < n:
                raise BudgetError("drain_nic=%r: %s has NICs 0 to %d (plan indexes). Fix: set drain_nic to one of "
                                  "them." % (nic, host, n - 1))
            out["nic"] = nic
    elif scope == "tor":
        if rack not in fabric.racks:
            raise BudgetError("drain_rack=%r: not a rack of this fabric. Fix: name a rack (its ToR is "
                              "<rack>-tor unless the topology names it)." % (rack,))
        out["rack"] = rack
    else:
        if spine not in fabric.spines:
            raise BudgetError("drain_spine=%r: not a spine of this fabric. Fix: name a spine of the inventory's "
                              "spines group." % (spine,))
        out["spine"] = spine
        out["zone"] = fabric.spines[spine]
    if out["rack"] is not None:
        out["zone"] = fabric.racks[out["rack"]]["zone"]
    out["element"] = element(scope, out["host"], out["nic"], out["rack"], out["spine"])
    return out


# ------------------------------------------------------------------------------------------------
# What is out
# ------------------------------------------------------------------------------------------------
def rack_out_nics(fabric, drained, rack):
    """The NICs of ``rack`` out of service by drains: ``{(host, index)}``."""
    if "tor:%s" % rack in drained:
        return set((h, i) for h in fabric.rack_hosts.get(rack, []) for i in range(fabric.hosts[h]["nics"]))
    out = set()
    for key in drained:
        scope, f = parse_element(key)
        if scope == "nic" and f["host"] in fabric.hosts and fabric.hosts[f["host"]]["rack"] == rack:
            out.add((f["host"], f["nic"]))
        elif scope == "host" and f["host"] in fabric.hosts and fabric.hosts[f["host"]]["rack"] == rack:
            out.update((f["host"], i) for i in range(fabric.hosts[f["host"]]["nics"]))
    return out


def host_drained_nics(drained, host):
    out = set()
    for key in drained:
        scope, f = parse_element(key)
        if scope == "nic" and f["host"] == host:
            out.add(f["nic"])
    return out


def auto_drains_in_window(history, zone, now, window):
    """Times of automatic drains that took something out in ``zone`` within ``(now - window, now]``.
    ``history``: journal decision records (dicts with time, zone, action, automatic, allowed, noop)."""
    return sorted(r["time"] for r in history
                  if r.get("action") == "drain" and r.get("automatic") and r.get("allowed") and not r.get("noop")
                  and r.get("zone") == zone and now - window < r["time"] <= now + _EPS)


# ------------------------------------------------------------------------------------------------
# The decision
# ------------------------------------------------------------------------------------------------
def lease_holder(lease):
    """The lease's holder as the budget reads it: None (free) or ``{job, kind, since, description, stale}``.

    Accepts ``{job, kind, since}`` and the view of the fabric lease (``netscale.multinic.fabric_lease``
    ``state: inspected``, its ``holder``: ``{held, stale, rollout_id, group, description, members}``), plus
    ``refused: true`` when the lease module refused this job (a refused holder is never read as free)."""
    if not lease:
        return None
    if not isinstance(lease, dict):
        return {"job": str(lease)}
    if "held" in lease:
        if not lease.get("held") and not lease.get("refused"):
            return None
        return {"job": lease.get("rollout_id") or lease.get("group") or "unknown", "kind": "job",
                "description": lease.get("description"), "stale": bool(lease.get("stale")),
                "refused": bool(lease.get("refused"))}
    return dict(lease)


def _lease_check(lease, job):
    holder = lease_holder(lease)
    if holder and holder.get("job") and (holder.get("refused") or holder.get("job") != job):
        if holder.get("description"):
            who = "%s (%s)" % (holder["job"], holder["description"])
        else:
            who = "%s %s%s" % (holder.get("kind") or "job", holder["job"],
                               (" since %s" % holder["since"]) if holder.get("since") else "")
        return {"rule": "lease", "ok": False, "holder": holder,
                "reason": "the fabric lease is held by %s%s: no drain or undrain while another mutating job "
                          "(rollout, rollback, decommission, site, drain) runs" % (
                              who, ", stale: break it with consent first" if holder.get("stale") else "")}
    return {"rule": "lease", "ok": True, "holder": holder}


def _window_check(window):
    c = {"rule": "clean_window", "ok": bool(window.get("allowed")), "verdict": window.get("verdict"),
         "window_s": window.get("window"), "since": window.get("since")}
    if not c["ok"]:
        c["reason"] = "the probe window is not clean: %s%s" % (
            window.get("summary") or "; ".join(window.get("reasons") or ["no verdict"]),
            (". Fix: %s" % window["fix"]) if window.get("fix") else "")
    return c


def _coverage_check(spine_check, spine, drained):
    view, observations = spine_check
    others = set(parse_element(k)[1]["spine"] for k in drained if k.startswith("spine:"))
    cov = spine_drain.coverage(view, observations, spine, others)
    c = {"rule": "spine_coverage", "ok": cov["ok"], "tors_checked": len(cov["tors"]),
         "carriers": dict((t, v["carriers"]) for t, v in cov["tors"].items())}
    if not cov["ok"]:
        c["reason"] = "the other spines must carry every rack aggregate first: %s" % "; ".join(cov["reasons"])
    return c


def decide(fabric, request, drained, history, lease=None, policy=None, now=0.0, job=None, window=None,
           spine_check=None):
    """The budget's verdict on ``request`` (a :func:`resolve` result plus ``action`` and ``automatic``).

    ``drained``: the set of element keys out now (the journal's state); ``history``: the journal's
    decision records (for the rate); ``lease``: the fabric lease's holder or None; ``job``: this job's id
    (a lease held by this job does not refuse it); ``window``: for an undrain, the clean-window verdict
    (``{"verdict", "allowed", "window", "since", "reasons", "summary"}``) or None (not checked);
    ``spine_check``: for a spine drain, ``(view, observations)`` (:func:`.spine_drain.coverage`) or None (not
    checked). Returns::

        {allowed, noop, action, element, scope, host, nic, rack, zone, spine, automatic, time,
         reasons [str], checks [{rule, ok, ...numbers}], numbers {...}}
    """
    p = check_policy(policy)
    action = request.get("action")
    if action not in ACTIONS:
        raise BudgetError("action=%r: use drain or undrain." % (action,))
    automatic = bool(request.get("automatic"))
    el = request["element"]
    drained = set(drained)
    checks = [_lease_check(lease, job)]
    numbers = {}
    noop = (el in drained) if action == "drain" else (el not in drained)
    if action == "undrain" and not noop and window is not None:
        checks.append(_window_check(window))
    if action == "drain" and not noop:
        scope = request["scope"]
        if scope == "nic":
            host = request["host"]
            total = fabric.hosts[host]["nics"]
            before = host_drained_nics(drained, host)
            after = before | {request["nic"]}
            ok = len(after) < total
            c = {"rule": "last_nic", "ok": ok, "host_nics": total, "host_drained_before": len(before),
                 "host_in_service_after": total - len(after)}
            if not ok:
                c["reason"] = ("never a host's last NIC: %s has %d NIC%s, %d already drained (%s); draining NIC %d "
                               "would leave none in service" % (
                                   host, total, "" if total == 1 else "s", len(before),
                                   ", ".join(str(i) for i in sorted(before)) or "none", request["nic"]))
            checks.append(c)
        if scope in ("nic", "host"):
            rack = request["rack"]
            total = fabric.rack_nics(rack)
            before = rack_out_nics(fabric, drained, rack)
            add = {(request["host"], request["nic"])} if scope == "nic" else set(
                (request["host"], i) for i in range(fabric.hosts[request["host"]]["nics"]))
            after = before | add
            share = float(len(after)) / total if total else 1.0
            ok = share <= p["max_rack_nic_share"] + _EPS
            c = {"rule": "rack_nic_share", "ok": ok, "rack": rack, "rack_nics": total, "out_before": len(before),
                 "out_after": len(after), "share_after": round(share, 4), "max_share": p["max_rack_nic_share"]}
            if not ok:
                c["reason"] = ("at most %g of a rack's NICs out at once: rack %s has %d NICs, %d out now, %d after "
                               "this drain (%.2f)" % (p["max_rack_nic_share"], rack, total, len(before), len(after),
                                                      share))
            checks.append(c)
        if scope == "tor":
            zone = request["zone"]
            racks = fabric.zone_racks(zone)
            before = [r for r in racks if "tor:%s" % r in drained]
            share = float(len(before) + 1) / len(racks)
            ok = share <= p["max_zone_tor_share"] + _EPS
            c = {"rule": "zone_tor_share", "ok": ok, "zone": zone, "zone_racks": len(racks),
                 "out_before": len(before), "out_after": len(before) + 1, "share_after": round(share, 4),
                 "max_share": p["max_zone_tor_share"]}
            if not ok:
                c["reason"] = ("at most %g of a zone's racks (ToRs) out at once: zone %s has %d racks, %d drained "
                               "now, %d after this drain (%.2f)" % (p["max_zone_tor_share"], zone, len(racks),
                                                                    len(before), len(before) + 1, share))
            checks.append(c)
        if scope == "spine":
            zone = request["zone"]
            spines = fabric.zone_spines(zone)
            before = [s for s in spines if "spine:%s" % s in drained]
            share = float(len(before) + 1) / len(spines)
            ok = share <= p["max_zone_spine_share"] + _EPS and len(before) + 1 < len(spines)
            c = {"rule": "zone_spine_share", "ok": ok, "zone": zone, "zone_spines": len(spines),
                 "out_before": len(before), "out_after": len(before) + 1, "share_after": round(share, 4),
                 "max_share": p["max_zone_spine_share"]}
            if not ok:
                c["reason"] = ("at most %g of a zone's spines out at once, never the last: zone %s has %d spine%s, "
                               "%d drained now, %d after this drain (%.2f)" % (
                                   p["max_zone_spine_share"], zone, len(spines), "" if len(spines) == 1 else "s",
                                   len(before), len(before) + 1, share))
            checks.append(c)
            if spine_check is not None:
                checks.append(_coverage_check(spine_check, request["spine"], drained))
        if automatic:
            zone = request["zone"]
            recent = auto_drains_in_window(history, zone, now, p["rate_window"])
            n = p["max_auto_drains_per_zone"]
            ok = len(recent) + 1 <= n
            c = {"rule": "zone_rate", "ok": ok, "zone": zone, "auto_drains_in_window": len(recent),
                 "max_per_window": n, "window_s": p["rate_window"]}
            if not ok:
                nxt = (recent[len(recent) - n] + p["rate_window"]) if n and len(recent) >= n else None
                c["reason"] = ("at most %d automatic drain%s per zone per %g s: zone %s had %d in the window%s" % (
                    n, "" if n == 1 else "s", p["rate_window"], zone, len(recent),
                    ("; the next is allowed after %.0f" % nxt) if nxt is not None else ""))
                c["next_allowed"] = nxt
            checks.append(c)
    for c in checks:
        for k, v in c.items():
            if k not in ("rule", "ok", "reason", "holder"):
                numbers["%s.%s" % (c["rule"], k)] = v
    reasons = [c["reason"] for c in checks if not c["ok"]]
    out = dict((k, request.get(k)) for k in ("element", "scope", "host", "nic", "rack", "zone", "spine"))
    out.update({"allowed": not reasons, "noop": noop and not reasons, "action": action, "automatic": automatic,
                "time": now, "reasons": reasons, "checks": checks, "numbers": numbers, "policy": p})
    if not reasons and noop:
        out["note"] = "already drained" if action == "drain" else "not drained"
    return out


def summary(decision):
    """One line for logs and playbook messages."""
    what = "%s %s" % (decision["action"], decision["element"])
    if decision["allowed"]:
        return "%s: allowed%s" % (what, (" (%s, nothing to change)" % decision["note"]) if decision.get("noop") else "")
    return "%s: REFUSED by the blast-radius budget: %s" % (what, "; ".join(decision["reasons"]))
