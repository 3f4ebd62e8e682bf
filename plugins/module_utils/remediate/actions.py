# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Monitoring case -> remediation action, and what the Event-Driven Ansible side does with it.

Pure: no I/O, no Ansible. The collection's event source (``extensions/eda/plugins/event_source/
case_file.py``) feeds every case event through :func:`decide` and journals the outcome
(:mod:`.eda_journal`); the rulebook (``extensions/eda/rulebooks/remediate.yml``) only starts the playbook
the outcome names. One place maps a case to an action: :func:`plan_action`.

Case event contract (written by the correlation, one JSON object per line)::

    {"case": {"id": str, "state": "open" | "updated" | "closed",
              "scope": {"kind": "nic" | "host" | "tor" | "uplink" | "spine" | "zone" | "agent",
                        "host": str|None, "nic": int|None, "tor": str|None, "spine": str|None,
                        "zone": str|None},
              "root_cause": str, "detections": int, "start": float, "end": float|None,
              "repeats": int}}

Mapping (:func:`plan_action`), for an open or updated case:

* ``nic`` -> drain ``drain_scope=nic drain_host=HOST drain_nic=K``
* ``host`` -> drain ``drain_scope=host drain_host=HOST``
* ``tor`` -> drain ``drain_scope=tor drain_tor=TOR``
* ``uplink`` and ``spine`` -> drain ``drain_scope=spine drain_spine=SPINE`` (an uplink case without a spine
  is reported only)
* ``zone`` -> report only (a whole zone is never drained automatically)
* ``agent`` -> report only, never a drain (an agent that is down is its own signal, not network loss)

A closed case whose drain this side queued (scopes nic and host) starts the undrain, in mode ``auto``:
``undrain.yml`` with the same element and ``drain_case``; that playbook undrains only after the element's
clean probe window (``drain_clean_window``) and refuses otherwise (journaled in the drain journal; the
failed run is journaled here and retried, :meth:`.eda_journal.Dispatcher.poll_undrain_retries`). In modes
``approve`` and ``report`` the closed case is reported with the command an operator runs. Any other closed
case starts nothing.

Outcomes of :func:`decide` (``outcome`` key):

* ``queued``: the rulebook starts the drain now (mode ``auto``, or an approved request);
* ``pending``: mode ``approve``; a request waits for an operator (:func:`approve`); nothing changes;
* ``would_drain``: mode ``report``; recorded, nothing changes;
* ``refused``: the pre-queue budget said no (reasons given); recorded and reported, nothing changes;
* ``reported``: the case's scope is report-only (zone, agent, an uplink without a spine);
* ``duplicate``: this case already had its action (one action per case, whatever the number of events); a case
  recorded ``would_drain`` in mode report is decided again on its next event once the mode is auto or approve;
* ``ignored``: a closed case this side queued no drain for, or a closed/updated case this side never saw open
  and has nothing to do for.

An undrain outcome carries ``"action": "undrain"`` (its own request id, :func:`undrain_request_id`); it never
counts against the pre-queue budget (it gives capacity back), and one closed case queues one undrain.

Snapshots (:func:`snapshot`): the ``open`` event of a case also queues one snapshot of its devices
(``playbooks/case_snapshot.yml``, read-only), in every mode; its own request id (:func:`snapshot_request_id`),
once per case (a re-sent ``open`` line or a replay is a duplicate), never on ``updated`` or ``closed``, never
counted against the pre-queue budget (it changes nothing on a device).

The pre-queue budget (the seam): :func:`decide` and :func:`approve` take ``budget``, a callable
``budget(request, history, now) -> (allowed, reasons)``. The default, :func:`zone_rate_budget`, bounds
how many drains the rulebook queues per zone within a window (the ``max_auto_drains_per_zone`` /
``rate_window`` rule of the blast-radius budget) from the EDA journal alone, so an event storm queues no
more than that; the full blast-radius budget (last NIC, rack and zone shares, the fabric's lease) is
checked again by the drain playbook itself, before it changes anything. A caller that has the fabric view
passes a callable wrapping the remediation budget's ``decide`` instead.
"""

from __future__ import annotations

import hashlib
import re

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError

MODES = ("auto", "approve", "report")
STATES = ("open", "updated", "closed")
KINDS = ("nic", "host", "tor", "uplink", "spine", "zone", "agent")
DRAIN_SCOPES = ("nic", "host", "tor", "spine")
OUTCOMES = ("queued", "pending", "would_drain", "refused", "reported", "duplicate", "ignored")
# outcomes after which another event of the same case starts nothing (one action per case); a refused
# case is decided again on its next event (the budget may allow it by then), and so is a would_drain case
# once the mode is no longer report (report recorded what it would do; it started nothing)
FINAL_OUTCOMES = ("queued", "pending", "would_drain", "reported")
# scopes whose drain comes back automatically when the case closes (their probes judge the clean window)
UNDRAIN_SCOPES = ("nic", "host")
DEFAULT_POLICY = {
    # the same rule and defaults as the remediation budget's zone rate (drain_budget)
    "max_auto_drains_per_zone": 3,
    "rate_window": 3600.0,
}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")
_NO_ZONE = "(no zone)"


class CaseError(MultinicError, ValueError):
    """A case event that breaks the contract (names the field, the value and the fix)."""


def _name(scope, field, where):
    value = scope.get(field)
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise CaseError("%s.%s: %r is not a name. Fix: the correlation must set %s for a case of kind %r "
                        "(letters, digits and _.:@/-, at most 128)." % (where, field, value, field, scope.get("kind")))
    return value


def check_case(event):
    """The case of a case event (``{"case": {...}}`` or the bare case), checked against the contract."""
    case = event.get("case") if isinstance(event, dict) and "case" in event else event
    if not isinstance(case, dict):
        raise CaseError("case: %r is not an object. Fix: write one JSON object {\"case\": {...}} per line." % (case,))
    cid = case.get("id")
    if not isinstance(cid, str) or not _NAME_RE.match(cid):
        raise CaseError("case.id: %r is not a case id. Fix: a string of letters, digits and _.:@/- "
                        "(at most 128)." % (cid,))
    if case.get("state") not in STATES:
        raise CaseError("case.state: %r (case %s) is not a case state. Fix: one of %s." % (
            case.get("state"), cid, ", ".join(STATES)))
    scope = case.get("scope")
    if not isinstance(scope, dict) or scope.get("kind") not in KINDS:
        raise CaseError("case.scope.kind: %r (case %s) is not a scope kind. Fix: one of %s." % (
            scope.get("kind") if isinstance(scope, dict) else scope, cid, ", ".join(KINDS)))
    for field in ("detections", "repeats"):
        value = case.get(field, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CaseError("case.%s: %r (case %s) is not a count. Fix: an integer >= 0." % (field, value, cid))
    zone = scope.get("zone")
    if zone is not None and (not isinstance(zone, str) or not _NAME_RE.match(zone)):
        raise CaseError("case.scope.zone: %r (case %s) is not a zone name. Fix: a name or null." % (zone, cid))
    return case


def plan_action(case):
    """The action for one checked case: the ONE place that maps a case to what the rulebook runs.

    Returns ``{"case", "state", "kind", "zone", "action": "drain" | "report" | "none", "element",
    "extra_vars", "reason"}``; ``extra_vars`` are the drain playbook's variables (``playbooks/drain.yml``)."""
    cid, state, scope = case["id"], case["state"], case["scope"]
    kind = scope["kind"]
    where = "case.scope"
    out = {"case": cid, "state": state, "kind": kind, "zone": scope.get("zone"), "root_cause": case.get("root_cause"),
           "action": "none", "element": None, "extra_vars": None, "reason": ""}
    if state == "closed":
        out["reason"] = "case closed: undrain follows the clean probe window (undrain.yml), not this event"
        return out
    if kind == "agent":
        out.update(action="report", reason="agent case: an agent that is down is its own signal, never a drain")
        return out
    if kind == "zone":
        out.update(action="report", reason="zone case: a whole zone is never drained automatically")
        return out
    if kind == "nic":
        host = _name(scope, "host", where)
        nic = scope.get("nic")
        if isinstance(nic, bool) or not isinstance(nic, int) or nic < 0:
            raise CaseError("case.scope.nic: %r (case %s) is not a NIC index. Fix: the plan index of the NIC, an "
                            "integer >= 0." % (nic, cid))
        xv = {"drain_scope": "nic", "drain_host": host, "drain_nic": nic}
        element = "nic:%s:%d" % (host, nic)
    elif kind == "host":
        host = _name(scope, "host", where)
        xv = {"drain_scope": "host", "drain_host": host}
        element = "host:%s" % host
    elif kind == "tor":
        tor = _name(scope, "tor", where)
        xv = {"drain_scope": "tor", "drain_tor": tor}
        element = "tor:%s" % tor
    else:  # uplink, spine
        if kind == "uplink" and not scope.get("spine"):
            out.update(action="report", reason="uplink case without a spine: reported only (nothing to drain by name)")
            return out
        spine = _name(scope, "spine", where)
        xv = {"drain_scope": "spine", "drain_spine": spine}
        element = "spine:%s" % spine
    xv["drain_case"] = cid
    out.update(action="drain", element=element, extra_vars=xv,
               reason="%s case (%s): drain %s" % (kind, case.get("root_cause") or "no root cause", element))
    return out


def request_id(case_id):
    """The id of a case's one action request: stable (a replayed event finds the same request), safe as a
    file name."""
    return "req-" + hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:16]


def undrain_request_id(case_id):
    """The id of a closed case's undrain request (distinct from its drain's)."""
    return "req-" + hashlib.sha256((case_id + "#undrain").encode("utf-8")).hexdigest()[:16]


def snapshot_request_id(case_id):
    """The id of a case's snapshot request (distinct from its drain's and its undrain's)."""
    return "req-" + hashlib.sha256((case_id + "#snapshot").encode("utf-8")).hexdigest()[:16]


def snapshot(event, history):
    """The snapshot of one case event: ``{"case", "state", "kind", "zone", "element", "outcome", "request",
    "extra_vars", "reasons", "action": "snapshot"}`` with outcome ``queued`` (the ``open`` event of a case not
    snapshot yet), ``duplicate`` (its snapshot was queued before: a re-sent or replayed ``open`` line) or
    ``ignored`` (``updated`` and ``closed`` events: the snapshot is the state when the problem was detected).
    ``history["snapshots"]``: {case id: outcome} (:func:`.eda_journal.fold`). Raises :class:`CaseError` like
    :func:`decide`. ``extra_vars`` are ``playbooks/case_snapshot.yml``'s: ``case_snapshot_case`` (the case)."""
    case = check_case(event)
    cid = case["id"]
    out = {"case": cid, "state": case["state"], "kind": case["scope"]["kind"], "zone": case["scope"].get("zone"),
           "root_cause": case.get("root_cause"), "action": "snapshot", "element": "snapshot:%s" % cid,
           "request": snapshot_request_id(cid), "extra_vars": None, "reasons": [], "mode": None}
    if case["state"] != "open":
        out.update(outcome="ignored", reasons=["case %s: a snapshot is taken on its open event only" % case["state"]])
        return out
    last = history.get("snapshots", {}).get(cid)
    if last == "queued":
        out.update(outcome="duplicate", reasons=["snapshot of case %s already queued" % cid])
        return out
    out.update(outcome="queued", extra_vars={"case_snapshot_case": dict(case)})
    return out


def throttle_key(plan):
    """What the rulebook's ``throttle`` groups by (``group_by_attributes``): the case and its element."""
    return {"case": plan["case"], "element": plan["element"] or "(none)"}


def check_policy(policy, prefix="netscale_eda_budget"):
    """The pre-queue budget's settings merged over :data:`DEFAULT_POLICY`, checked."""
    out = dict(DEFAULT_POLICY)
    for key, value in (policy or {}).items():
        if key not in DEFAULT_POLICY:
            raise CaseError("%s.%s: unknown setting (value %r). Fix: use one of %s." % (
                prefix, key, value, ", ".join(sorted(DEFAULT_POLICY))))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CaseError("%s.%s: %r is not a number. Fix: set a number (default %s)." % (
                prefix, key, value, DEFAULT_POLICY[key]))
        out[key] = value
    if int(out["max_auto_drains_per_zone"]) != out["max_auto_drains_per_zone"] or out["max_auto_drains_per_zone"] < 0:
        raise CaseError("%s.max_auto_drains_per_zone: %r is not a count. Fix: 0 (queue no drain) or more (default %d)."
                        % (prefix, out["max_auto_drains_per_zone"], DEFAULT_POLICY["max_auto_drains_per_zone"]))
    out["max_auto_drains_per_zone"] = int(out["max_auto_drains_per_zone"])
    if not 1.0 <= float(out["rate_window"]) <= 7 * 86400.0:
        raise CaseError("%s.rate_window: %r seconds is out of range. Fix: 1 to 604800 (default 3600)." % (
            prefix, out["rate_window"]))
    out["rate_window"] = float(out["rate_window"])
    return out


def check_mode(mode, prefix="netscale_eda_mode"):
    if mode not in MODES:
        raise CaseError("%s: %r is not a remediation mode. Fix: one of %s." % (prefix, mode, ", ".join(MODES)))
    return mode


def zone_rate_budget(policy=None):
    """The default pre-queue budget: at most ``max_auto_drains_per_zone`` drains queued per zone within
    ``rate_window`` seconds (``history["queued"]``: ``[{"zone", "time", "element"}]``). A drain of an element
    already queued within the window is not counted twice. A case without a zone counts in one shared bucket."""
    pol = check_policy(policy)

    def budget(request, history, now):
        zone = request.get("zone") or _NO_ZONE
        recent = [q for q in history.get("queued", ())
                  if (q.get("zone") or _NO_ZONE) == zone and now - q["time"] < pol["rate_window"]]
        if any(q.get("element") == request.get("element") for q in recent):
            return True, []
        if len(recent) + 1 > pol["max_auto_drains_per_zone"]:
            return False, ["zone_rate: %d drain%s already queued in zone %s within %g s (max_auto_drains_per_zone %d)"
                           % (len(recent), "" if len(recent) == 1 else "s", zone, pol["rate_window"],
                              pol["max_auto_drains_per_zone"])]
        return True, []
    return budget


def _result(plan, outcome, mode, reasons=(), request=None):
    out = dict(plan)
    out.update(outcome=outcome, mode=mode, reasons=list(reasons), request=request)
    return out


def _closed(case, plan, mode, history):
    """A closed case: the undrain of what its drain took out (auto), reported (approve, report), or nothing."""
    cid = case["id"]
    if history.get("cases", {}).get(cid) != "queued":
        return _result(plan, "ignored", mode)
    opened = plan_action(dict(case, state="open"))
    if opened["action"] != "drain":
        return _result(plan, "ignored", mode)
    req = undrain_request_id(cid)
    undrain = dict(opened, state="closed", action="undrain",
                   reason="case closed: undrain %s after its clean probe window" % opened["element"])
    if case["scope"]["kind"] not in UNDRAIN_SCOPES:
        return _result(dict(undrain, action="report", extra_vars=None), "reported", mode, [
            "case closed: a %s drain is taken back by an operator (playbooks/undrain.yml)" % case["scope"]["kind"]])
    last = history.get("undrains", {}).get(cid)
    if last == "queued":
        return _result(undrain, "duplicate", mode, ["undrain of case %s already %s" % (cid, last)], req)
    if mode != "auto":
        cmd = "ansible-playbook playbooks/undrain.yml " + " ".join(
            "-e %s=%s" % (k, v) for k, v in sorted(opened["extra_vars"].items()))
        return _result(dict(undrain, extra_vars=None), "reported", mode, [
            "mode %s: the undrain waits for an operator: %s" % (mode, cmd)], req)
    return _result(undrain, "queued", mode, [], req)


def decide(event, mode, history, now, budget=None):
    """What to do with one case event. ``history`` is the EDA journal folded (:func:`.eda_journal.fold`):
    ``{"cases": {case id: last outcome}, "queued": [...], "requests": {...}, "undrains": {case id: outcome}}``.
    Raises :class:`CaseError` on a case that breaks the contract (the caller records it as rejected: nothing is
    started)."""
    check_mode(mode)
    case = check_case(event)
    plan = plan_action(case)
    if case["state"] == "closed":
        return _closed(case, plan, mode, history)
    last = history.get("cases", {}).get(case["id"])
    if plan["action"] == "none":
        return _result(plan, "ignored", mode)
    if last in FINAL_OUTCOMES and not (last == "would_drain" and mode != "report"):
        return _result(plan, "duplicate", mode, ["case %s already %s" % (case["id"], last)],
                       request_id(case["id"]) if plan["action"] == "drain" else None)
    if plan["action"] == "report":
        return _result(plan, "reported", mode, [plan["reason"]])
    req = request_id(case["id"])
    if mode == "report":
        return _result(plan, "would_drain", mode, ["mode report: nothing changes"], req)
    if mode == "approve":
        return _result(plan, "pending", mode, ["mode approve: waits for an operator (request %s)" % req], req)
    allowed, reasons = (budget or zone_rate_budget())(plan, history, now)
    if not allowed:
        return _result(plan, "refused", mode, reasons, req)
    return _result(plan, "queued", mode, [], req)


def approve(pending, history, now, budget=None):
    """An operator approved the pending request ``pending`` (the record :func:`decide` returned): queue it,
    unless the pre-queue budget refuses it now or it was already decided."""
    state = history.get("requests", {}).get(pending["request"], {}).get("state")
    if state not in (None, "pending"):
        return _result(pending, "duplicate", "approve", ["request %s already %s" % (pending["request"], state)],
                       pending["request"])
    allowed, reasons = (budget or zone_rate_budget())(pending, history, now)
    if not allowed:
        return _result(pending, "refused", "approve", reasons, pending["request"])
    return _result(pending, "queued", "approve", ["approved"], pending["request"])


def rulebook_event(result):
    """The event the source puts on the rulebook's queue for one decision: ``{"netscale": {...}}``.

    ``dispatch`` is what the rulebook does: ``drain`` (start the drain playbook with ``extra_vars``), ``undrain``,
    ``snapshot`` (start the snapshot playbook), or ``report`` (print ``summary``; nothing changes). Duplicates and
    ignored events are not sent at all."""
    if result["outcome"] in ("duplicate", "ignored"):
        return None
    if result["outcome"] == "queued":
        dispatch = result.get("action") if result.get("action") in ("undrain", "snapshot") else "drain"
    else:
        dispatch = "report"
    summary = "case %s (%s): %s" % (result["case"], result["kind"], result["outcome"])
    if result["element"]:
        summary += " %s" % result["element"]
    if result["outcome"] == "pending":
        summary += ("; approve with: ansible-playbook playbooks/eda_approve.yml -e netscale_eda_state_dir=STATE_DIR "
                    "-e eda_request=%s" % result["request"])
    if result["reasons"]:
        summary += " (%s)" % "; ".join(result["reasons"])
    ev = {"dispatch": dispatch, "outcome": result["outcome"], "mode": result["mode"], "case": result["case"],
          "kind": result["kind"], "zone": result["zone"], "element": result["element"] or "(none)",
          "request": result["request"], "extra_vars": result["extra_vars"] or {}, "summary": summary}
    return {"netscale": ev}
