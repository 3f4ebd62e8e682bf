# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Undrain after repair: is the drained element's probe window clean? Pure: no I/O, no Ansible.

Issue 30 item 4. A drained NIC still carries the monitoring agent's probes (the agent's sockets are bound
to the NIC, whatever the egress set; docs/remediation.md), so its paths can be judged while it is out.
:func:`judge` takes the probe counters of the element's NICs over the last ``window`` seconds (as a
Prometheus range query returns them: ``fabric_monitor_probes_answered_total`` and ``_lost_total`` per
(NIC, target) series, ``[(t, value), ...]``) and answers one of:

* ``clean``: every NIC of the element resolved probes all through the window (no stretch longer than
  ``max_gap`` without a new resolved probe, from the window's start to its end), at least ``min_probes``
  of them, and no interval lost more than ``max_loss`` of its probes;
* ``not_clean``: the evidence shows loss (an interval above ``max_loss``), whatever else is missing;
* ``no_evidence``: anything missing or partial: Prometheus could not be asked, a NIC has no series, too
  few probes, a gap, series that start after the window's start or end before its end, or the window
  not yet elapsed since the drain (evidence from before the drain is not evidence of a repair).

Only ``clean`` allows the undrain; a gate that passes on missing evidence would be a defect. Every
verdict carries its reasons in words and the figures per NIC.

Counters: an increment is ``v[i] - v[i-1]``; a negative one is a counter reset (the agent restarted):
the new value is the increment (Prometheus' convention). Probes to an unreachable target
(``_unreachable_total``) are neither answered nor lost: a window of only those has no evidence.
"""

from __future__ import annotations

import math

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError

VERDICTS = ("clean", "not_clean", "no_evidence")
DEFAULTS = {
    "window": 300.0,      # seconds of clean probes before an undrain
    "step": 15.0,         # resolution of the range query (seconds)
    "max_gap": 60.0,      # longest stretch without a resolved probe on a NIC (seconds)
    "min_probes": 10,     # resolved probes per NIC over the window, at least
    "max_loss": 0.01,     # an interval with more loss than this is lossy (the SLI threshold, strictly above)
}
_LIMITS = {
    "window": (1.0, 7 * 86400.0),
    "step": (0.1, 3600.0),
    "max_gap": (0.1, 86400.0),
    "min_probes": (1, 10 ** 9),
    "max_loss": (0.0, 0.999),
}
_MAX_LISTED = 5


class CleanWindowError(MultinicError, ValueError):
    """Bad settings or input (names the field, the value and the fix)."""


def check_settings(settings=None, prefix="drain_clean_window_settings"):
    """``settings`` (None or some DEFAULTS keys) merged over the defaults and checked."""
    out = dict(DEFAULTS)
    for key, value in (settings or {}).items():
        if key not in DEFAULTS:
            raise CleanWindowError("%s.%s: unknown setting (value %r). Fix: use one of %s." % (
                prefix, key, value, ", ".join(sorted(DEFAULTS))))
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CleanWindowError("%s.%s: %r is not a number. Fix: set a number (default %s)." % (
                prefix, key, value, DEFAULTS[key]))
        lo, hi = _LIMITS[key]
        if not lo <= value <= hi:
            raise CleanWindowError("%s.%s: %r is out of range. Fix: set %s to %s (default %s)." % (
                prefix, key, value, lo, hi, DEFAULTS[key]))
        out[key] = value
    if int(out["min_probes"]) != out["min_probes"]:
        raise CleanWindowError("%s.min_probes: %r is not a count. Fix: a whole number (default %d)." % (
            prefix, out["min_probes"], DEFAULTS["min_probes"]))
    out["min_probes"] = int(out["min_probes"])
    for key in ("window", "step", "max_gap", "max_loss"):
        out[key] = float(out[key])
    if out["max_gap"] < out["step"]:
        raise CleanWindowError("%s.max_gap: %g s is shorter than the step (%g s): every interval would be a gap. "
                               "Fix: max_gap >= step (defaults %g and %g)." % (
                                   prefix, out["max_gap"], out["step"], DEFAULTS["max_gap"], DEFAULTS["step"]))
    if out["window"] < out["max_gap"]:
        raise CleanWindowError("%s.window: %g s is shorter than max_gap (%g s): no gap could be seen. Fix: a window "
                               "of at least max_gap (default window %g s)." % (
                                   prefix, out["window"], out["max_gap"], DEFAULTS["window"]))
    return out


def _points(series, where):
    pts = []
    for p in series.get("points") or ():
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise CleanWindowError("%s: %r is not a (time, value) point. Fix: pass the range query's values." % (
                where, p))
        try:
            t, v = float(p[0]), float(p[1])
        except (TypeError, ValueError) as exc:
            raise CleanWindowError("%s: %r is not a (time, value) point of numbers. Fix: pass the range query's "
                                   "values." % (where, p)) from exc
        if math.isnan(v):   # a stale marker that made it through: no sample
            continue
        pts.append((t, v))
    pts.sort()
    return pts


def _increments(pts):
    """[(t, increment)] of a counter's points; the first point is the baseline."""
    out = []
    for (_t0, v0), (t1, v1) in zip(pts, pts[1:]):
        d = v1 - v0
        out.append((t1, v1 if d < 0 else d))
    return out


def _fmt_t(t):
    return "%.0f" % t


def judge(element, nics, answered, lost, now, window=None, since=None, settings=None, error=None):
    """The clean-window verdict of ``element`` (a string, e.g. ``nic:h1:1``).

    ``nics``: the NIC names (the agent's ``nic`` label) the element's evidence must cover, e.g. ``["eth1"]``
    for a NIC, every NIC of a host for a host; ``answered`` / ``lost``: lists of ``{"nic", "target",
    "points": [(t, counter value)]}`` (the range query from ``now - window - step`` to ``now``); ``now``:
    epoch seconds; ``window``: seconds (overrides ``settings["window"]``); ``since``: when the element was
    drained (epoch seconds; the window must start at or after it); ``error``: why the evidence could not be
    fetched (Prometheus unreachable...): then the verdict is ``no_evidence`` naming it.

    Returns ``{"element", "verdict", "clean", "reasons", "window", "start", "end", "nics": {nic: figures},
    "settings"}``."""
    cfg = dict(settings or {})
    if window is not None:
        cfg["window"] = window
    cfg = check_settings(cfg)
    if not nics:
        raise CleanWindowError("nics: no NIC to judge for %s. Fix: name the element's NICs (the agent's nic "
                               "label)." % (element,))
    win, step, max_gap = cfg["window"], cfg["step"], cfg["max_gap"]
    start, end = now - win, now
    out = {"element": element, "verdict": None, "clean": False, "reasons": [], "window": win, "start": start,
           "end": end, "since": since, "nics": {}, "settings": cfg}
    missing = []   # reasons that make it no_evidence
    lossy = []     # reasons that make it not_clean
    if error:
        missing.append("no evidence: the probe counters could not be read (%s)" % error)
    if since is not None and start < since:
        missing.append("window not yet elapsed: drained at %s, %.0f s ago; the window needs %.0f s of probes "
                       "after the drain (clean at the earliest at %s)" % (
                           _fmt_t(since), max(0.0, now - since), win, _fmt_t(since + win)))
    # evidence per NIC: increments per timestamp, summed over targets
    per = dict((n, {"answered": {}, "lost": {}, "series": 0, "first": None, "last": None}) for n in nics)
    for kind, rows in (("answered", answered or ()), ("lost", lost or ())):
        for i, s in enumerate(rows):
            if not isinstance(s, dict):
                raise CleanWindowError("%s[%d]: %r is not a series. Fix: {nic, target, points}." % (kind, i, s))
            nic = s.get("nic")
            if nic not in per:
                continue   # another NIC of the host: not this element's evidence
            pts = [p for p in _points(s, "%s[%d].points" % (kind, i)) if start - step - 1e-6 <= p[0] <= end + 1e-6]
            if not pts:
                continue
            e = per[nic]
            if kind == "answered":
                e["series"] += 1
                e["first"] = pts[0][0] if e["first"] is None else min(e["first"], pts[0][0])
                e["last"] = pts[-1][0] if e["last"] is None else max(e["last"], pts[-1][0])
            for t, d in _increments(pts):
                if t > start + 1e-6:   # probes resolved inside the window only
                    e[kind][t] = e[kind].get(t, 0.0) + d
    for nic in nics:
        e = per[nic]
        times = sorted(set(e["answered"]) | set(e["lost"]))
        resolved_at = []
        total_a = total_l = 0.0
        lossy_iv = []
        for t in times:
            a, lo = e["answered"].get(t, 0.0), e["lost"].get(t, 0.0)
            total_a += a
            total_l += lo
            if a + lo > 0:
                resolved_at.append(t)
                if lo / (a + lo) > cfg["max_loss"]:
                    lossy_iv.append((t, lo, a + lo))
        gaps = []
        marks = [start] + resolved_at + [end]
        for t0, t1 in zip(marks, marks[1:]):
            if t1 - t0 > max_gap + 1e-6:
                gaps.append((t0, t1))
        fig = {"series": e["series"], "answered": int(total_a), "lost": int(total_l),
               "resolved": int(total_a + total_l), "intervals": len(times), "lossy_intervals": len(lossy_iv),
               "gaps": [[round(a, 3), round(b, 3)] for a, b in gaps[:_MAX_LISTED]], "gap_count": len(gaps),
               "first": e["first"], "last": e["last"]}
        out["nics"][nic] = fig
        if e["series"] == 0:
            missing.append("no evidence for NIC %s: no probe series in the window (agent not running, not scraped, "
                           "or the NIC not in its pinglist)" % nic)
            continue
        if lossy_iv:
            worst = max(lossy_iv, key=lambda x: x[1] / x[2])
            lossy.append("NIC %s lost probes in %d interval%s (worst: %d of %d at %s; max_loss %g); %d lost of %d "
                         "in the window" % (nic, len(lossy_iv), "" if len(lossy_iv) == 1 else "s", worst[1], worst[2],
                                            _fmt_t(worst[0]), cfg["max_loss"], total_l, total_a + total_l))
        if total_a + total_l < cfg["min_probes"]:
            missing.append("too few probes on NIC %s: %d resolved in %.0f s (min_probes %d)" % (
                nic, total_a + total_l, win, cfg["min_probes"]))
        if gaps:
            a, b = max(gaps, key=lambda g: g[1] - g[0])
            plural = "" if len(gaps) == 1 else "es"
            missing.append("gap on NIC %s: %d stretch%s without a resolved probe longer than max_gap %g s "
                           "(longest %.0f s, %s-%s)" % (nic, len(gaps), plural, max_gap, b - a, _fmt_t(a), _fmt_t(b)))
    if lossy:
        verdict = "not_clean"
    elif missing:
        verdict = "no_evidence"
    else:
        verdict = "clean"
    out.update(verdict=verdict, clean=verdict == "clean", reasons=lossy + missing)
    return out


def summary(result):
    """One line for the journal and the refusal message."""
    verdict = result["verdict"].upper().replace("_", " ")
    head = "clean window of %s: %s (%.0f s" % (result["element"], verdict, result["window"])
    figs = ", ".join("%s %d/%d lost" % (n, f["lost"], f["resolved"]) for n, f in sorted(result["nics"].items()))
    head += (", %s)" % figs) if figs else ")"
    if result["reasons"]:
        head += ": " + "; ".join(result["reasons"])
    return head


def fix(result):
    """What to do about a verdict that is not clean ("" for a clean one)."""
    return {
        "not_clean": "the element still loses probes: repair it (the case's root cause), then run undrain.yml "
                     "again; it undrains once %.0f s of probes are clean" % result["window"],
        "no_evidence": "make the evidence whole (the monitoring agent running on the host and scraped by "
                       "Prometheus, drain_prometheus_url reachable; wait the window after the drain), then run "
                       "undrain.yml again; or, as an operator who checked the element, undrain without the "
                       "window with -e drain_undrain_without_clean_window=true (journaled)",
    }.get(result["verdict"], "")


def refusal(result):
    """The message of a refused undrain: which element, the window, what was seen, the fix."""
    return "undrain of %s REFUSED: %s. Nothing was changed; the element stays drained. Fix: %s." % (
        result["element"], summary(result), fix(result))


def queries(host, nics):
    """The two range queries of a host's NICs: ``{"answered": expr, "lost": expr}`` (the agent's counters,
    one series per (NIC, target))."""
    sel = 'job="fabric_monitor",host="%s",nic=~"%s"' % (host, "|".join(sorted(nics)))
    return {"answered": "fabric_monitor_probes_answered_total{%s}" % sel,
            "lost": "fabric_monitor_probes_lost_total{%s}" % sel}


def series_from_matrix(response, what="query_range"):
    """``[{"nic", "target", "host", "points"}]`` of a Prometheus ``/api/v1/query_range`` JSON answer; raises
    :class:`CleanWindowError` on an answer that is not a successful matrix (naming what came back)."""
    if not isinstance(response, dict) or response.get("status") != "success":
        err = response.get("error") if isinstance(response, dict) else response
        raise CleanWindowError("%s: Prometheus answered %r, not a success. Fix: check the query and the "
                               "server (drain_prometheus_url)." % (what, str(err)[:200]))
    data = response.get("data") or {}
    if data.get("resultType") != "matrix":
        raise CleanWindowError("%s: result type %r, not a matrix. Fix: use /api/v1/query_range." % (
            what, data.get("resultType")))
    out = []
    for r in data.get("result") or ():
        m = r.get("metric") or {}
        out.append({"nic": m.get("nic"), "target": m.get("target"), "host": m.get("host"),
                    "points": [(float(t), float(v)) for t, v in r.get("values") or ()]})
    return out
