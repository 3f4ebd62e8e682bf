# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gate engine, in the manner of Argo Rollouts AnalysisTemplates.

A gate is a *measurement* (a callable returning a dict of values), a *success condition* (and an
optional *failure condition*) over those values plus the gate's parameters, an *interval*, a
*count*, a *failure limit*, an *inconclusive limit* and an *error limit*.

Each measurement is classified:

- ``successful``: the success condition holds;
- ``failed``: the failure condition holds, or (no failure condition given) the success condition
  does not;
- ``inconclusive``: a failure condition is given and neither condition holds;
- ``error``: the measurement raised (no data: the device did not answer, the file is missing).

Verdict (Argo semantics, plus an optional early pass):

- ``fail`` as soon as failed measurements exceed ``failure_limit``;
- ``inconclusive`` as soon as inconclusive measurements exceed ``inconclusive_limit`` or
  *consecutive* errors exceed ``error_limit``;
- ``pass`` early once ``success_threshold`` consecutive successes were seen (a convergence wait:
  "up to count x interval seconds for N successes in a row");
- after ``count`` measurements: with a ``success_threshold`` that was never reached -> ``fail`` when
  any measurement failed, else ``inconclusive``; without one -> ``pass``.

``run_gate`` takes a ``clock``/``sleep`` pair so tests run without waiting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, ClassVar

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.gates import expr

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
VERDICTS = (PASS, FAIL, INCONCLUSIVE)

SUCCESSFUL = "successful"
FAILED = "failed"
M_INCONCLUSIVE = "inconclusive"
ERROR = "error"


class GateDefinitionError(MultinicError):
    """A gate definition is invalid (names the field, the value and the fix)."""


class MeasurementError(MultinicError):
    """A measurement produced no data (counts as an error, not as a failure)."""


@dataclass
class GateSpec:
    """One gate. ``measure`` is a callable returning a dict of values; ``params`` are thresholds
    visible to the conditions next to the measured values (measured values win on a clash)."""

    FIELDS: ClassVar[tuple] = (
        "name", "success_condition", "failure_condition", "interval", "count", "failure_limit",
        "inconclusive_limit", "error_limit", "success_threshold", "min_successful", "initial_delay", "params",
        "description")

    name: str
    measure: Callable
    success_condition: str
    failure_condition: str | None = None
    interval: float = 1.0
    count: int = 1
    failure_limit: int = 0
    inconclusive_limit: int = 0
    error_limit: int = 4
    success_threshold: int | None = None
    min_successful: int | None = None
    initial_delay: float = 0.0
    params: dict | None = None
    description: str = ""

    def __post_init__(self):
        self.failure_condition = self.failure_condition or None
        self.params = dict(self.params or {})
        self.validate()

    def validate(self):
        where = "gate %s" % (self.name or "(unnamed)")
        if not self.name or not isinstance(self.name, str):
            raise GateDefinitionError("%s: name %r must be a non-empty string" % (where, self.name))
        if not callable(self.measure):
            raise GateDefinitionError("%s: measure %r is not callable; pass a function returning a dict of "
                                      "values" % (where, self.measure))
        for field in ("success_condition", "failure_condition"):
            val = getattr(self, field)
            if val is None and field == "failure_condition":
                continue
            try:
                expr.compile_condition(val)
            except expr.ConditionError as exc:
                raise GateDefinitionError("%s: %s: %s" % (where, field, exc))
        for field, minimum in (("count", 1), ("failure_limit", 0), ("inconclusive_limit", 0), ("error_limit", 0)):
            val = getattr(self, field)
            if isinstance(val, bool) or not isinstance(val, int) or val < minimum:
                raise GateDefinitionError("%s: %s=%r must be an integer >= %d" % (where, field, val, minimum))
        for field in ("interval", "initial_delay"):
            val = getattr(self, field)
            if isinstance(val, bool) or not isinstance(val, (int, float)) or val < 0:
                raise GateDefinitionError("%s: %s=%r must be a number of seconds >= 0" % (where, field, val))
        st = self.success_threshold
        if st is not None and (isinstance(st, bool) or not isinstance(st, int) or not 1 <= st <= self.count):
            raise GateDefinitionError("%s: success_threshold=%r must be null or an integer in 1..count (%d)"
                                      % (where, st, self.count))
        ms = self.min_successful
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int) or not 1 <= ms <= self.count):
            raise GateDefinitionError("%s: min_successful=%r must be null or an integer in 1..count (%d); null = "
                                      "every measurement failure_limit does not excuse" % (where, ms, self.count))

    def required_successes(self):
        """Successful measurements a pass needs: ``min_successful``, else the success streak of a
        convergence wait, else every measurement the failure limit does not excuse (all of ``count``
        with the default ``failure_limit`` 0). A pass never rests on errors or missing data."""
        if self.min_successful is not None:
            return self.min_successful
        if self.success_threshold:
            return self.success_threshold
        return max(1, self.count - self.failure_limit)

    def as_dict(self):
        return dict((f, getattr(self, f)) for f in self.FIELDS)


def classify(spec, values):
    """Classify one set of measured values -> (phase, detail)."""
    env = dict(spec.params)
    env.update(values or {})
    ok = expr.evaluate(spec.success_condition, env)
    if ok:
        return SUCCESSFUL, "success condition holds: %s" % spec.success_condition
    if spec.failure_condition is None:
        return FAILED, "success condition does not hold: %s" % spec.success_condition
    if expr.evaluate(spec.failure_condition, env):
        return FAILED, "failure condition holds: %s" % spec.failure_condition
    return M_INCONCLUSIVE, "neither condition holds"


def run_gate(spec, clock=time.time, sleep=time.sleep, on_measurement=None):
    """Run ``spec`` to a verdict. Returns a JSON-able dict (gate, verdict, reason, values of the last
    measurement, every measurement with its phase, counters, timing)."""
    started = clock()
    if spec.initial_delay:
        sleep(spec.initial_delay)
    measurements = []
    required = spec.required_successes()
    counts = {SUCCESSFUL: 0, FAILED: 0, M_INCONCLUSIVE: 0, ERROR: 0}
    consecutive_errors = 0
    streak = 0
    verdict = None
    reason = ""
    last_values = {}
    for i in range(spec.count):
        if i:
            sleep(spec.interval)
        t = clock()
        try:
            values = spec.measure()
            if not isinstance(values, dict):
                raise MeasurementError("measurement returned %s, not a dict of values" % type(values).__name__)
            phase, detail = classify(spec, values)
            last_values = values
        except (MeasurementError, expr.ConditionError, OSError, ValueError, KeyError, TypeError) as exc:
            values, phase, detail = {}, ERROR, "%s: %s" % (type(exc).__name__, exc)
            if isinstance(exc, expr.ConditionError):
                # A condition naming a value the measurement does not produce is a definition
                # error: no amount of waiting fixes it.
                measurements.append({"index": i, "time": t, "phase": ERROR, "detail": detail, "values": {}})
                return _result(spec, INCONCLUSIVE, detail, last_values, measurements, counts, started, clock())
        counts[phase] += 1
        measurements.append({"index": i, "time": round(t, 3), "phase": phase, "detail": detail, "values": values})
        if on_measurement is not None:
            on_measurement(measurements[-1])
        consecutive_errors = consecutive_errors + 1 if phase == ERROR else 0
        streak = streak + 1 if phase == SUCCESSFUL else 0
        if counts[FAILED] > spec.failure_limit:
            verdict, reason = FAIL, "%d failed measurement(s) > failure_limit %d (last: %s)" % (
                counts[FAILED], spec.failure_limit, detail)
            break
        if counts[M_INCONCLUSIVE] > spec.inconclusive_limit:
            verdict, reason = INCONCLUSIVE, "%d inconclusive measurement(s) > inconclusive_limit %d" % (
                counts[M_INCONCLUSIVE], spec.inconclusive_limit)
            break
        if consecutive_errors > spec.error_limit:
            verdict, reason = INCONCLUSIVE, "%d consecutive measurement errors > error_limit %d (last: %s)" % (
                consecutive_errors, spec.error_limit, detail)
            break
        if spec.success_threshold and streak >= spec.success_threshold and counts[SUCCESSFUL] >= required:
            verdict, reason = PASS, "%d consecutive successful measurement(s)" % streak
            break
    if verdict is None:
        if spec.success_threshold:
            if counts[FAILED]:
                verdict = FAIL
            else:
                verdict = INCONCLUSIVE
            reason = "never %d consecutive successes in %d measurements (%d failed, %d errors, %d inconclusive)" % (
                spec.success_threshold, spec.count, counts[FAILED], counts[ERROR], counts[M_INCONCLUSIVE])
        elif counts[ERROR] == spec.count:
            verdict, reason = INCONCLUSIVE, "every measurement failed to produce data"
        elif counts[SUCCESSFUL] < required:
            # Failures stayed within the limit, but errors or inconclusive measurements left too
            # little evidence: that is not a pass.
            verdict, reason = INCONCLUSIVE, (
                "only %d of %d measurement(s) successful, %d needed (%d errors, %d inconclusive, %d failed)" % (
                    counts[SUCCESSFUL], len(measurements), required, counts[ERROR], counts[M_INCONCLUSIVE],
                    counts[FAILED]))
        else:
            verdict, reason = PASS, "%d measurement(s): %d successful (%d needed), %d failed (limit %d)" % (
                len(measurements), counts[SUCCESSFUL], required, counts[FAILED], spec.failure_limit)
    return _result(spec, verdict, reason, last_values, measurements, counts, started, clock())


def _result(spec, verdict, reason, values, measurements, counts, started, ended):
    return {
        "gate": spec.name,
        "description": spec.description,
        "verdict": verdict,
        "passed": verdict == PASS,
        "reason": reason,
        "values": values,
        "params": spec.params,
        "success_condition": spec.success_condition,
        "failure_condition": spec.failure_condition,
        "measurements": measurements,
        "counts": dict(counts),
        # what the verdict rests on: measurements taken, how many succeeded, how many a pass needs
        "evidence": {"measurements": len(measurements), "successful": counts[SUCCESSFUL],
                     "required_successes": spec.required_successes(), "errors": counts[ERROR]},
        "limits": {"count": spec.count, "interval": spec.interval, "failure_limit": spec.failure_limit,
                   "inconclusive_limit": spec.inconclusive_limit, "error_limit": spec.error_limit,
                   "success_threshold": spec.success_threshold, "min_successful": spec.min_successful},
        "started": round(started, 3),
        "seconds": round(ended - started, 3),
    }


def combine(results):
    """Verdict of several gate results: fail beats inconclusive beats pass; no result at all is
    inconclusive (nothing was judged, so nothing passed)."""
    verdicts = [r["verdict"] for r in results]
    if not verdicts:
        return INCONCLUSIVE
    if FAIL in verdicts:
        return FAIL
    if INCONCLUSIVE in verdicts:
        return INCONCLUSIVE
    return PASS


def host_verdict(results, check_mode=False):
    """A host's verdict over its gate results (the health_gates role's ``health_gates_verdict``): skipped gates do
    not count; with none left the host is ``skipped`` in check mode (nothing changed, nothing to verify) and
    ``inconclusive`` otherwise (no evidence is no pass); else :func:`combine`."""
    judged = [r for r in results or [] if r.get("verdict") != "skipped"]
    if not judged and check_mode:
        return "skipped"
    return combine(judged)
