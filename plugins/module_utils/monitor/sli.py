# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SLIs: good and bad minutes per scope (NIC, host, rack, zone) from per-interval probe samples.

The same definition as the Prometheus recording rules of the ``fabric_monitor`` role
(``module_utils/monitor/rules.py``; docs/operations.md "SLI definitions"), so that a report computed
here from the agents' samples and the rules' ``fabric_monitor:bad_minute:<scope>`` agree:

- a *sample* is what one agent counted for one of its NICs over one interval: probes answered and
  probes lost (``fabric_monitor_probes_answered_total`` / ``_lost_total`` increases). Probes to an
  unreachable target (``_unreachable_total``) are neither: they are not path loss;
- a sample belongs to the minute ``floor(time / 60)`` of its ``time`` (end of the interval), and to
  the scopes of the *sending* NIC: the NIC, its host, the host's rack, the rack's zone;
- per scope and minute: resolved = answered + lost, loss = lost / resolved;
- the minute *counts* when resolved >= ``min_probes`` (default 10); it is *bad* when loss >
  ``threshold`` (default 0.01, strictly above), else *good*. A minute that does not count (agent down,
  no probes) is neither good nor bad;
- SLI = good / (good + bad) over a period; None when no minute counts.

Prometheus' ``increase()`` extrapolates at the window edges; these sums are exact, so a minute whose
loss sits right at the threshold may differ. No Ansible imports.
"""

from __future__ import annotations

import math

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, MultinicError

SCOPES = ("nic", "host", "rack", "zone")
THRESHOLD = 0.01
MIN_PROBES = 10
MINUTE = 60


class SLIError(MultinicError, ValueError):
    def __init__(self, problems):
        self.problems = list(problems)
        lines = ["invalid SLI input (%d problem%s):" % (len(self.problems), "" if len(self.problems) == 1 else "s")]
        lines.extend("  - %s" % p for p in self.problems)
        super(SLIError, self).__init__("\n".join(lines))


class Sample(object):
    """Probes one NIC of one host resolved in one interval ending at ``time``."""

    __slots__ = ("time", "host", "nic", "answered", "lost", "rack", "zone")

    def __init__(self, time, host, nic, answered, lost, rack=None, zone=None):
        self.time, self.host, self.nic = time, host, nic
        self.answered, self.lost = answered, lost
        self.rack, self.zone = rack, zone

    @classmethod
    def from_dict(cls, data, where="sample"):
        out = []
        if not isinstance(data, dict):
            raise SLIError([InputProblem(where, type(data).__name__, "expected a mapping",
                                         "give time, host, nic, answered, lost")])
        for key in data:
            if key not in cls.__slots__:
                out.append(InputProblem("%s.%s" % (where, key), data[key], "unknown key",
                                        "allowed: %s" % ", ".join(cls.__slots__)))
        s = cls(data.get("time"), data.get("host"), data.get("nic"), data.get("answered"), data.get("lost"),
                data.get("rack"), data.get("zone"))
        t = s.time
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            out.append(InputProblem(where + ".time", t, "expected epoch seconds", "the end of the interval"))
        if not isinstance(s.host, str) or not s.host:
            out.append(InputProblem(where + ".host", s.host, "expected the host's inventory name", "e.g. r1-h1"))
        if isinstance(s.nic, bool) or not isinstance(s.nic, int) or s.nic < 1:
            out.append(InputProblem(where + ".nic", s.nic, "expected a 1-based NIC index", "NIC 1 is nic_names[0]"))
        for key in ("answered", "lost"):
            v = getattr(s, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                out.append(InputProblem("%s.%s" % (where, key), v, "expected a probe count >= 0",
                                        "the increase of fabric_monitor_probes_%s_total over the interval" % key))
        if out:
            raise SLIError(out)
        return s


def check(threshold=THRESHOLD, min_probes=MIN_PROBES, scope="rack"):
    out = []
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < threshold < 1.0:
        out.append(InputProblem("threshold", threshold, "expected a loss ratio between 0 and 1",
                                "e.g. %r (the fabric_monitor role's fabric_monitor_sli_loss_threshold)" % THRESHOLD))
    if isinstance(min_probes, bool) or not isinstance(min_probes, int) or min_probes < 1:
        out.append(InputProblem("min_probes", min_probes, "expected a whole number >= 1", "e.g. %d" % MIN_PROBES))
    if scope not in SCOPES:
        out.append(InputProblem("scope", scope, "unknown scope", "use one of: %s" % ", ".join(SCOPES)))
    if out:
        raise SLIError(out)


def scope_of(sample, scope, index=None):
    """The id of ``sample``'s scope: ``host/nicN``, host, rack or zone (rack/zone from the sample's labels,
    else from the FabricIndex); None when unknown."""
    if scope == "nic":
        return "%s/nic%d" % (sample.host, sample.nic)
    if scope == "host":
        return sample.host
    label = sample.rack if scope == "rack" else sample.zone
    if label:
        return label
    if index is None:
        return None
    r = index.rack_of_host(sample.host)
    if r is None:
        return None
    return index.rack_name(r) if scope == "rack" else index.zone_name(index.zone_of_rack(r))


def minute_totals(samples, scope="rack", index=None):
    """{scope id: {minute: [answered, lost]}} (minute = epoch minute number)."""
    check(scope=scope)
    table = {}
    for s in samples:
        sid = scope_of(s, scope, index)
        if sid is None:
            continue
        per = table.setdefault(sid, {})
        cell = per.get(int(s.time // MINUTE))
        if cell is None:
            cell = per[int(s.time // MINUTE)] = [0, 0]
        cell[0] += s.answered
        cell[1] += s.lost
    return table


def classify(answered, lost, threshold=THRESHOLD, min_probes=MIN_PROBES):
    """"good", "bad" or None (the minute does not count)."""
    resolved = answered + lost
    if resolved < min_probes:
        return None
    return "bad" if float(lost) / resolved > threshold else "good"


def minutes(samples, scope="rack", threshold=THRESHOLD, min_probes=MIN_PROBES, index=None):
    """{scope id: {minute: "good" | "bad"}} for the minutes that count."""
    check(threshold, min_probes, scope)
    out = {}
    for sid, per in minute_totals(samples, scope, index).items():
        row = {}
        for m, (answered, lost) in per.items():
            verdict = classify(answered, lost, threshold, min_probes)
            if verdict is not None:
                row[m] = verdict
        out[sid] = row
    return out


def good_bad(samples, scope="rack", threshold=THRESHOLD, min_probes=MIN_PROBES, index=None, start=None, end=None):
    """{scope id: {"good", "bad", "sli", "bad_minutes": [minute start epoch seconds...]}} over
    [start, end) (epoch seconds; default: all samples)."""
    out = {}
    lo = None if start is None else int(start // MINUTE)
    hi = None if end is None else int(math.ceil(end / float(MINUTE)))
    for sid, row in minutes(samples, scope, threshold, min_probes, index).items():
        good = bad = 0
        bad_list = []
        for m in sorted(row):
            if (lo is not None and m < lo) or (hi is not None and m >= hi):
                continue
            if row[m] == "bad":
                bad += 1
                bad_list.append(m * MINUTE)
            else:
                good += 1
        out[sid] = {"good": good, "bad": bad, "sli": sli(good, bad), "bad_minutes": bad_list}
    return out


def sli(good, bad):
    total = good + bad
    return None if total == 0 else round(float(good) / total, 6)


def recording_rule_names(scope):
    """The Prometheus series that hold the same figures (the fabric_monitor role's rules)."""
    check(scope=scope)
    return {"loss_ratio": "fabric_monitor:loss_ratio:%s_1m" % scope, "counts": "fabric_monitor:minute:%s" % scope,
            "bad": "fabric_monitor:bad_minute:%s" % scope}
