# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time to repair per case (issue 30 item 4). Pure: no I/O, no Ansible.

Stages of a case, from the correlation's case dict and the drain journal (:mod:`.journal` records):

* **detected**: the case's ``start`` (its first detection: when the probes first saw the fault);
  ``opened`` is its ``opened_at`` (when the correlation opened it), shown beside it;
* **mitigated**: the drain that the case started took the element out: the time of the successful
  ``outcome`` of the allowed drain decision journaled with ``case`` = this case (the job links them);
  an allowed drain that found the element already out (``noop``) mitigates at its decision's time;
* **repaired**: the element came back: the first successful undrain ``outcome`` of that element after
  it was mitigated (the clean-window undrain, or an operator's).

Split: ``detect_to_mitigate`` = mitigated - detected, ``mitigate_to_repair`` = repaired - mitigated,
``total`` = repaired - detected. A stage not reached yet is ``None`` (shown as open) and so is every
duration that needs it. With an SLO (seconds, on ``total``): a repaired case is ``within`` or ``missed``;
a case not repaired yet is ``missed`` once ``now - detected`` exceeds the SLO, else ``pending`` (not
counted); attainment = within / (within + missed), ``None`` when nothing counts yet.
"""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError


class TtrError(MultinicError, ValueError):
    """Bad input (names the field, the value and the fix)."""


def _num(value, field):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TtrError("%s: %r is not a time. Fix: epoch seconds or null." % (field, value))
    return float(value)


def _sub(a, b):
    return None if a is None or b is None else a - b


def check_slo(slo, field="slo"):
    if slo is None:
        return None
    if isinstance(slo, bool) or not isinstance(slo, (int, float)) or slo <= 0:
        raise TtrError("%s: %r is not a duration. Fix: seconds > 0 (e.g. 3600), or null for no SLO." % (field, slo))
    return float(slo)


def _mitigations(records):
    """{case id: (time mitigated or None, element, decision)} from the drain journal."""
    outcomes = {}
    for r in records:
        if r.get("type") == "outcome" and r.get("action") == "drain" and r.get("ok"):
            outcomes.setdefault((r.get("job"), r.get("element")), []).append(float(r["time"]))
    out = {}
    for r in records:
        if r.get("type") != "decision" or r.get("action") != "drain" or not r.get("case") or not r.get("allowed"):
            continue
        t = float(r["time"])
        if r.get("noop"):
            mit = t
        else:
            later = [x for x in outcomes.get((r.get("job"), r.get("element")), ()) if x >= t]
            mit = min(later) if later else None
        prev = out.get(r["case"])
        if prev is None or (prev[0] is None and mit is not None) or (
                mit is not None and prev[0] is not None and mit < prev[0]):
            out[r["case"]] = (mit, r.get("element"), r)
    return out


def _undrains(records):
    """{element: sorted times of successful undrain outcomes}."""
    out = {}
    for r in records:
        if r.get("type") == "outcome" and r.get("action") == "undrain" and r.get("ok"):
            out.setdefault(r.get("element"), []).append(float(r["time"]))
    for v in out.values():
        v.sort()
    return out


def rows(cases, journal_records, now, slo=None):
    """One row per case: ``{"case", "kind", "scope", "element", "detected", "opened", "mitigated", "repaired",
    "detect_to_mitigate", "mitigate_to_repair", "total", "status", "slo"}``; status ``repaired``, ``mitigated``
    (drained, not back yet) or ``open`` (not mitigated); slo ``within`` / ``missed`` / ``pending`` / None."""
    slo = check_slo(slo)
    mits = _mitigations(journal_records or ())
    backs = _undrains(journal_records or ())
    out = []
    for i, c in enumerate(cases or ()):
        if not isinstance(c, dict) or not c.get("id"):
            raise TtrError("cases[%d]: %r is not a case with an id. Fix: pass correlate.case_dict records." % (i, c))
        detected = _num(c.get("start"), "cases[%d].start" % i)
        opened = _num(c.get("opened_at"), "cases[%d].opened_at" % i)
        if detected is None:
            detected = opened
        mit, element, _dec = mits.get(c["id"], (None, None, None))
        repaired = None
        if mit is not None and element:
            later = [t for t in backs.get(element, ()) if t >= mit]
            repaired = later[0] if later else None
        scope = c.get("scope") or {}
        row = {"case": c["id"], "kind": scope.get("kind"), "scope": scope.get("id"), "element": element,
               "detected": detected, "opened": opened, "mitigated": mit, "repaired": repaired,
               "detect_to_mitigate": _sub(mit, detected), "mitigate_to_repair": _sub(repaired, mit),
               "total": _sub(repaired, detected),
               "status": "repaired" if repaired is not None else ("mitigated" if mit is not None else "open"),
               "slo": None}
        if slo is not None:
            if row["total"] is not None:
                row["slo"] = "within" if row["total"] <= slo else "missed"
            elif detected is not None and now - detected > slo:
                row["slo"] = "missed"
            else:
                row["slo"] = "pending"
        out.append(row)
    out.sort(key=lambda r: (r["detected"] if r["detected"] is not None else float("inf"), r["case"]))
    return out


def attainment(rows_, slo):
    """``{"slo", "within", "missed", "pending", "attainment"}`` of :func:`rows` computed with that SLO."""
    slo = check_slo(slo)
    within = sum(1 for r in rows_ if r["slo"] == "within")
    missed = sum(1 for r in rows_ if r["slo"] == "missed")
    pending = sum(1 for r in rows_ if r["slo"] == "pending")
    return {"slo": slo, "within": within, "missed": missed, "pending": pending,
            "attainment": (within / float(within + missed)) if within + missed else None}


def repairs(cases, journal_records, now, slo=None):
    """What :func:`.monitor.report.build` takes as ``repairs=``: ``{"rows": [...], "slo": {...} or None}``."""
    r = rows(cases, journal_records, now, slo)
    return {"rows": r, "slo": attainment(r, slo) if slo is not None else None}
