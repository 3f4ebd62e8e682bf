# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The detection record: what a host agent (or an exporter adapter) emits, what correlation reads.

One detection is one observation that something in the fabric looked wrong during one interval:
a probe path that lost packets, a NIC the watcher took out, a BFD or BGP session that went down, a
counter that moved, a ToR whose FRR stopped answering, an agent that stopped reporting. Detections
are many and cheap; :mod:`.correlate` folds them into a few cases.

Wire form (JSON lines, one object per detection; ``to_dict``/``from_dict``)::

    {"time": 1795000000.0, "kind": "path_loss", "host": "r1-h1", "nic": 2, "tor": null,
     "spine": null, "target": "r3-h1", "value": 0.02, "source": "probe"}

Fields (all keys are accepted missing except ``time``, ``kind`` and ``source``; unknown keys are an
error so that a typo does not silently drop evidence):

- ``time``: epoch seconds (float) at the end of the observed interval.
- ``kind``: one of :data:`KINDS` (below).
- ``host``: inventory hostname of the host the detection is about (the probing host for
  ``path_loss``/``path_latency``); None for ToR/spine-side detections.
- ``nic``: 1-based NIC index on ``host`` (NIC 1 is ``nic_names[0]``, attached to ToR port 1 of the
  host's slot); None when the detection is about the whole host.
- ``tor``: inventory hostname of the ToR (``<rack>-tor`` by default) for ToR-side detections.
- ``spine``: inventory hostname of the spine, for ``uplink_loss`` (with ``tor``: that one link).
- ``target``: the probe's target host (``path_loss``/``path_latency``); may name a configured
  target outside the plan (storage), which correlation then treats as an opaque endpoint.
- ``target_nic``: optional, 1-based NIC index of ``target`` the probe was addressed to (added to the
  brief's contract, backward compatible: records without it stay valid). With it, loss toward one NIC
  of a target is pinned to that NIC; without it, the target side of a path is the whole target host.
- ``value``: the measurement, when there is one (loss ratio 0..1 for ``path_loss`` and
  ``uplink_loss``, seconds of RTT for ``path_latency``, a counter delta for ``nic_errors``...).
- ``source``: what produced it: ``probe``, ``watcher``, ``bfd``, ``bgp``, ``counters``, ``agent``,
  ``frr_exporter``, or another short lowercase word (free, for provenance only).

No Ansible imports: the host agent ships this file as-is.
"""

from __future__ import annotations

import math
import re

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, MultinicError

# kind -> (what it means, the fields it needs besides time/kind/source). The order of this table is
# the order of docs/operations.md "Detection kinds" (a test checks both agree).
KINDS = {
    "path_loss": ("Probes from host/nic to target lost packets over an interval; value = loss ratio 0..1 "
                  "(nic null: from every NIC, e.g. a target unreachable on all of them).", ("host", "target")),
    "path_latency": ("Probes from host/nic to target saw a high RTT over an interval; value = seconds.",
                     ("host", "target")),
    "nic_out": ("The NIC watcher took host/nic out of the egress set.", ("host", "nic")),
    "bfd_down": ("A BFD session of host/nic (a slot's responder) went Down.", ("host", "nic")),
    "bgp_down": ("A BGP session of host/nic (host or slot speaker) left Established.", ("host", "nic")),
    "nic_errors": ("NIC error counters of host/nic moved; value = counter delta.", ("host", "nic")),
    "carrier_change": ("The carrier of host/nic changed (link flap); value = changes in the interval.", ("host", "nic")),
    "spoof_drop": ("The datapath dropped packets with a foreign source on host/nic; value = packets.", ("host", "nic")),
    "tor_down": ("FRR on the ToR is unreachable or stopped (exporter or probe of the ToR).", ("tor",)),
    "uplink_loss": ("Loss or a BGP session down on one ToR-to-spine link; value = loss ratio if measured.",
                    ("tor", "spine")),
    "agent_down": ("The monitoring agent of host stopped reporting. Never network loss.", ("host",)),
}

FIELDS = ("time", "kind", "host", "nic", "tor", "spine", "target", "value", "source", "target_nic")
SOURCE_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
MAX_NIC = 16


class DetectionError(MultinicError, ValueError):
    """A detection record is invalid. Carries every problem found (field, value, fix)."""

    def __init__(self, problems, where=None):
        self.problems = list(problems)
        head = "invalid detection" + (" %s" % where if where else "")
        lines = ["%s (%d problem%s):" % (head, len(self.problems), "" if len(self.problems) == 1 else "s")]
        lines.extend("  - %s" % p for p in self.problems)
        super(DetectionError, self).__init__("\n".join(lines))


class Detection(object):
    """One detection. Immutable by convention; construct through :meth:`make` or :meth:`from_dict`
    to validate (the plain constructor does not validate: the bench and correlation build millions)."""

    # ``alternatives``: not on the wire (``to_dict``), set by :func:`from_agent_event` for a path detection whose
    # target end is not known for sure: the sorted (host, target NIC) pairs the lost probes may have gone to
    # (every host of a rack probed as the agent's rotating rack target, or the hosts one event named), else
    # None. Correlation takes the detections of one such event as one observation (docs/monitoring.md).
    __slots__ = FIELDS + ("alternatives",)

    def __init__(self, time, kind, host=None, nic=None, tor=None, spine=None, target=None, value=None,
                 source="agent", target_nic=None, alternatives=None):
        self.time = time
        self.kind = kind
        self.host = host
        self.nic = nic
        self.tor = tor
        self.spine = spine
        self.target = target
        self.value = value
        self.source = source
        self.target_nic = target_nic
        self.alternatives = alternatives

    @classmethod
    def make(cls, time, kind, host=None, nic=None, tor=None, spine=None, target=None, value=None, source="agent",
             target_nic=None):
        """Build and validate; raise :class:`DetectionError` listing every problem."""
        det = cls(time, kind, host, nic, tor, spine, target, value, source, target_nic)
        problems = det.problems()
        if problems:
            raise DetectionError(problems)
        return det

    @classmethod
    def from_dict(cls, data, where=None):
        """Parse the wire form. ``where`` (e.g. ``"events.jsonl line 12"``) prefixes the error."""
        if not isinstance(data, dict):
            raise DetectionError([InputProblem("", type(data).__name__, "expected a mapping",
                                               "emit one JSON object per detection with keys %s" % ", ".join(FIELDS))],
                                 where)
        problems = []
        for key in data:
            if key not in FIELDS:
                problems.append(InputProblem(str(key), data[key], "unknown key",
                                             "remove it; allowed keys: %s" % ", ".join(FIELDS)))
        det = cls(data.get("time"), data.get("kind"), data.get("host"), data.get("nic"), data.get("tor"),
                  data.get("spine"), data.get("target"), data.get("value"), data.get("source"), data.get("target_nic"))
        problems.extend(det.problems())
        if problems:
            raise DetectionError(problems, where)
        return det

    def to_dict(self):
        """The wire form; ``target_nic`` only when set (so records stay those of the brief's contract)."""
        out = {name: getattr(self, name) for name in FIELDS}
        if out["target_nic"] is None:
            del out["target_nic"]
        return out

    def problems(self):
        """Every problem of this record as :class:`InputProblem` (empty list when valid)."""
        out = []
        t = self.time
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            out.append(InputProblem("time", t, "expected epoch seconds (a finite number >= 0)",
                                    "emit time.time() at the end of the observed interval"))
        if self.kind not in KINDS:
            out.append(InputProblem("kind", self.kind, "unknown detection kind",
                                    "use one of: %s" % ", ".join(KINDS)))
        if not isinstance(self.source, str) or not SOURCE_RE.match(self.source):
            out.append(InputProblem("source", self.source, "expected a short lowercase word",
                                    "use e.g. probe, watcher, bfd, bgp, counters, agent, frr_exporter"))
        for name in ("host", "tor", "spine", "target"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or not v):
                out.append(InputProblem(name, v, "expected an inventory hostname (non-empty string) or null",
                                        "write the name the plan gives it, e.g. r1-h1 / r1-tor / z1-spine1"))
        for name in ("nic", "target_nic"):
            n = getattr(self, name)
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_NIC):
                out.append(InputProblem(name, n, "expected a 1-based NIC index 1..%d or null" % MAX_NIC,
                                        "NIC 1 is the host's first interface (nic_names[0])"))
        if self.target_nic is not None and self.target is None:
            out.append(InputProblem("target_nic", self.target_nic, "target_nic without target",
                                    "set target to the probed host, or drop target_nic"))
        v = self.value
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            out.append(InputProblem("value", v, "expected a finite number or null",
                                    "emit the measurement (loss ratio 0..1, RTT seconds, counter delta)"))
        if self.kind in KINDS:
            for name in KINDS[self.kind][1]:
                if getattr(self, name) is None:
                    out.append(InputProblem(name, None, "required for kind %s" % self.kind,
                                            "set %s (%s)" % (name, KINDS[self.kind][0])))
            if self.kind in ("path_loss", "uplink_loss") and isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and not 0 <= v <= 1:
                out.append(InputProblem("value", v, "a loss ratio must lie in 0..1",
                                        "emit lost/sent, e.g. 0.02 for 2 %"))
        return out

    def __eq__(self, other):
        return isinstance(other, Detection) and all(getattr(self, f) == getattr(other, f) for f in FIELDS)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(tuple(getattr(self, f) for f in FIELDS))

    def __repr__(self):
        shown = ["%s=%r" % (f, getattr(self, f)) for f in FIELDS if getattr(self, f) is not None]
        return "Detection(%s)" % ", ".join(shown)


def parse_lines(lines, where="detections"):
    """Detections from JSON lines (blank lines skipped). Raises :class:`DetectionError` naming the line."""
    import json

    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise DetectionError([InputProblem("", line[:80], "not JSON: %s" % exc, "emit one JSON object per line")],
                                 "%s line %d" % (where, number))
        yield Detection.from_dict(data, "%s line %d" % (where, number))


# -- the fabric_monitor agent's events (roles/fabric_monitor, module_utils/monitor/agent.py) ----------
# Its events carry context (rack, zone, slot, scope, detail) and name NICs by interface; kinds map so:
AGENT_EVENT_KINDS = {
    "probe_loss": "path_loss",
    "target_unreachable": "path_loss",   # every NIC of the target silent: value 1.0, NIC unknown
    "egress_out": "nic_out",
    "nic_missing": "nic_out",
    "nic_carrier_change": "carrier_change",
    "nic_errors": "nic_errors",
    "bfd_session_down": "bfd_down",
    "bfd_session_gone": "bfd_down",
    "bgp_session_down": "bgp_down",
    "bgp_session_gone": "bgp_down",
    "spoofed_packets": "spoof_drop",
}
AGENT_EVENT_SOURCES = {"path_loss": "probe", "nic_out": "watcher", "carrier_change": "counters",
                       "nic_errors": "counters", "spoof_drop": "counters"}
# Recoveries and bookkeeping: not detections. Nor are drops (``nic_drops``): a drop counter moves on a healthy NIC
# that is simply full - the eBPF datapath's redirect into a NIC whose queue is full counts as that NIC's tx
# "dropped", an rx backlog overflow as rx "dropped" - so every NIC of a host at line rate (a checkpoint) looked like a
# host fault (seen on the lab at a 200 Mbit/s line rate: a host case, and a host drain queued). A bad link shows as
# errors, carrier changes, probe loss or the watcher taking the NIC out; the drops stay in the agent's events and
# metrics (fabric_monitor_nic_*_drops_total) for a person to read.
AGENT_EVENT_IGNORED = ("egress_in", "nic_present", "bfd_session_up", "bgp_session_up", "nic_drops")


def from_agent_event(event, index=None):
    """Detections (a list: ``target_unreachable`` names several hosts) from one agent event, [] for a
    recovery. ``index`` (a FabricIndex) maps interface names to NIC indexes; without it ``ethN`` is
    NIC N+1. Raises :class:`DetectionError` for an event it cannot read."""
    if not isinstance(event, dict):
        raise DetectionError([InputProblem("", type(event).__name__, "expected an event mapping",
                                           "pass one JSON object of the agent's events file")])
    kind = event.get("kind")
    if kind in AGENT_EVENT_IGNORED:
        return []
    if kind not in AGENT_EVENT_KINDS:
        raise DetectionError([InputProblem("kind", kind, "unknown agent event kind",
                                           "one of: %s" % ", ".join(sorted(AGENT_EVENT_KINDS) + list(AGENT_EVENT_IGNORED)))])
    host = event.get("host")

    def nic_of(h, name):
        if name is None or isinstance(name, int):
            return name
        if index is not None:
            return index.nic_index(h, name)
        return int(name[3:]) + 1 if isinstance(name, str) and name.startswith("eth") and name[3:].isdigit() else None

    out_kind = AGENT_EVENT_KINDS[kind]
    value = event.get("value")
    nic = nic_of(host, event.get("nic"))
    source = AGENT_EVENT_SOURCES.get(out_kind, out_kind[:3])
    targets = [None]
    if out_kind == "path_loss":
        raw = event.get("target_host") or event.get("target")
        targets = [t for t in str(raw or "").split(",") if t] or [None]
        if kind == "target_unreachable":
            value, nic = 1.0, None
    alternatives = _alternatives(index, nic, event.get("target"), targets) if out_kind == "path_loss" else None
    out = []
    for target in targets:
        det = Detection(event.get("time"), out_kind, host=host, nic=nic, target=target,
                        value=None if isinstance(value, str) else value, source=source,
                        target_nic=_paired_nic(index, nic, target), alternatives=alternatives)
        problems = det.problems()
        if problems:
            raise DetectionError(problems, "agent event %s" % kind)
        out.append(det)
    return out


def _paired_nic(index, nic, target):
    """The target NIC a probe from local NIC ``nic`` (1-based) was addressed to: the pinglist pairs local NIC
    ``i`` with the target's NIC ``i mod n`` (monitor/pinglist.py), so for a target in the plan it is known;
    None without an index, a NIC or a plan host (a configured target such as storage)."""
    if index is None or isinstance(nic, bool) or not isinstance(nic, int) or nic < 1 or target is None:
        return None
    count = index.nic_count(target)
    return (nic - 1) % count + 1 if count else None


def _alternatives(index, nic, label, targets):
    """The candidate (host, target NIC) pairs of a probe event toward target ``label`` whose hosts were
    ``targets``, or None when the event's target is certain. The agent probes a rack of its zone as one target
    (``label`` is the rack's name) whose host rotates, notes a probe's host when it sends it and counts its
    loss when it times out: an event's loss may belong to the host of the previous rotation step, whichever
    host it names. Every host of such a rack is a candidate (a rack of one host has no rotation); the hosts of
    an event that names several are, too."""
    hosts = [t for t in targets if t is not None]
    if index is not None and isinstance(label, str):
        r = index.rack_of_tor(label)
        if r is not None and index.rack_name(r) == label and len(index.rack_hosts(r)) > 1:
            hosts = sorted(set(hosts) | set(index.rack_hosts(r)))
    if len(hosts) < 2:
        return None
    return tuple((h, _paired_nic(index, nic, h)) for h in sorted(hosts))
