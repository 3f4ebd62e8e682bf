# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Correlation: detections in, cases out.

Detections are bucketed into fixed windows (``window`` seconds, aligned to the epoch, so the order of
detections inside a window never matters). A window is decided once the stream has moved ``slack``
seconds past its end (late detections up to ``slack`` are still in time). Deciding a window:

1. **Thresholds.** Path loss below ``loss_threshold``, path latency below ``latency_threshold`` and
   counter deltas below ``counter_threshold`` are noise: counted, never in a case.
2. **Agent down.** A path whose end is a host whose agent is down (an ``agent_down`` within
   ``agent_grace`` seconds either side) belongs to that host's *agent* case: the agent runs the probe
   responder, so probes toward it lose. Never network loss. Exception: a rack whose ToR is reported
   down (``tor_down``) - there the agents are unreachable *because* of the network.
3. **Tomography vote.** Each lossy path has two suspect ends (a host's NIC, the host when the NIC is
   unknown, or an opaque target outside the plan). The end with the most distinct lossy peers (far
   hosts) is blamed for all its paths, its peers lose that vote, and so on (greedy hitting set) while
   an end has the peers it needs: ``min_peers``, or ``peer_share`` of the hosts its probes meet per
   window (the pinglist: its rack, one host per other rack of its zone, both ways), whichever is
   larger - so random isolated losses do not add up to a case in a large zone. Ends with local
   evidence (NIC watcher, BFD, BGP, carrier, counters) or inside an open case start with what they
   need. Paths nobody explains wait ``hold`` seconds for more evidence, then count as noise.
4. **Scope.** Per rack: the ToR if a ``tor_down`` names it, or at least ``tor_min_hosts`` and
   ``tor_host_share`` of its hosts are blamed with intra-rack loss or local port events; the ToR's
   uplinks if as many hosts are blamed but only on paths leaving the rack (the spine named when an
   ``uplink_loss`` names it); else per host: the host when at least ``host_min_nics`` and
   ``host_nic_share`` of its NICs are hit, else the one NIC (its ToR port). ``uplink_loss`` from
   ``spine_min_tors`` and ``spine_tor_share`` of a zone's ToRs -> the spine; rack-level problems in
   ``zone_min_racks`` and ``zone_rack_share`` of a zone's racks -> the zone.
5. **Cases.** A detection attributed to a scope joins the open case of that scope or of an enclosing
   one (NIC < host < ToR < zone; uplink < ToR, spine < zone). A new wider case absorbs the open
   narrower cases it encloses (``absorbed``). A case ends when ``quiet`` seconds pass without a new
   detection; a burst after ``repeat_gap`` seconds of silence counts as a repeat.

Every detection that passes the thresholds ends in exactly one case or in the ``unattributed``
tally; ``Correlator.stats`` has the counts. Memory is bounded by the open cases, the buffered
windows and the ``hold`` horizon, not by the stream. No Ansible imports.
"""

from __future__ import annotations

import heapq
import math

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import Detection

PATH_KINDS = ("path_loss", "path_latency")
HARD_PORT_KINDS = ("nic_out", "bfd_down", "bgp_down", "carrier_change")
SOFT_PORT_KINDS = ("nic_errors", "spoof_drop")
# Scope kinds, widest first (the order attributions are applied in, so that wider cases absorb first).
SCOPE_ORDER = ("zone", "spine", "tor", "uplink", "host", "nic", "target", "agent")
ANY_SPINE = "*"

DEFAULTS = {
    "window": 60.0, "slack": 30.0, "quiet": 600.0, "hold": 180.0, "repeat_gap": 120.0, "agent_grace": 120.0,
    "loss_threshold": 0.01, "latency_threshold": 0.005, "counter_threshold": 1.0,
    "min_peers": 2, "peer_share": 0.1, "min_soft": 2,
    "host_min_nics": 2, "host_nic_share": 0.5,
    "tor_min_hosts": 2, "tor_host_share": 0.5,
    "spine_min_tors": 2, "spine_tor_share": 0.5,
    "zone_min_racks": 3, "zone_rack_share": 0.5,
    "record": False, "max_listed": 20,
}
_SECONDS = ("window", "slack", "quiet", "hold", "repeat_gap", "agent_grace")
_SHARES = ("peer_share", "host_nic_share", "tor_host_share", "spine_tor_share", "zone_rack_share", "loss_threshold")
_COUNTS = ("min_peers", "min_soft", "host_min_nics", "tor_min_hosts", "spine_min_tors", "zone_min_racks",
           "max_listed")


class CorrelationError(MultinicError, ValueError):
    def __init__(self, problems):
        self.problems = list(problems)
        lines = ["invalid correlation options (%d problem%s):" % (len(self.problems), "" if len(self.problems) == 1 else "s")]
        lines.extend("  - %s" % p for p in self.problems)
        super(CorrelationError, self).__init__("\n".join(lines))


def check_options(options):
    """Defaults merged with ``options``; raises :class:`CorrelationError` listing every problem."""
    options = dict(options or {})
    out = []
    for key in options:
        if key not in DEFAULTS:
            out.append(InputProblem(key, options[key], "unknown option", "use one of: %s" % ", ".join(DEFAULTS)))
    merged = dict(DEFAULTS)
    merged.update((k, v) for k, v in options.items() if k in DEFAULTS)
    numeric = set()
    for key in _SECONDS + _SHARES + ("latency_threshold", "counter_threshold") + _COUNTS:
        v = merged[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            out.append(InputProblem(key, v, "expected a finite number >= 0", "default: %r" % DEFAULTS[key]))
        else:
            numeric.add(key)
    if "window" in numeric and merged["window"] <= 0:
        out.append(InputProblem("window", merged["window"], "the window must be positive", "e.g. 60 (seconds)"))
    for key in _SHARES:
        if key in numeric and merged[key] > 1:
            out.append(InputProblem(key, merged[key], "a share or ratio must lie in 0..1", "e.g. %r" % DEFAULTS[key]))
    for key in _COUNTS:
        if key in numeric and (merged[key] != int(merged[key]) or merged[key] < 1):
            out.append(InputProblem(key, merged[key], "expected a whole number >= 1", "default: %r" % DEFAULTS[key]))
    if {"quiet", "window"} <= numeric and merged["quiet"] < merged["window"]:
        out.append(InputProblem("quiet", merged["quiet"], "the quiet period is shorter than the window",
                                "use quiet >= window (%r)" % merged["window"]))
    if not isinstance(merged["record"], bool):
        out.append(InputProblem("record", merged["record"], "expected true or false", "default: false"))
    if out:
        raise CorrelationError(out)
    for key in _COUNTS:
        merged[key] = int(merged[key])
    return merged


class Case(object):
    """One case: a scope, its evidence and the detections it absorbed (counted; listed with ``record``)."""

    __slots__ = ("key", "start", "last", "opened_at", "closed_at", "count", "repeats", "kinds", "hosts", "nics",
                 "peers", "spines", "absorbed", "notes", "members", "status", "values", "_cap", "_id")

    def __init__(self, key, opened_at, record, cap):
        self.key = key
        self.start = None
        self.last = None
        self.opened_at = opened_at
        self.closed_at = None
        self.count = 0
        self.repeats = 0
        self.kinds = {}
        self.hosts = set()
        self.nics = set()      # (host, nic)
        self.peers = set()     # far ends of lossy paths
        self.spines = set()
        self.absorbed = []     # ids of narrower cases merged in
        self.notes = set()
        self.members = [] if record else None
        self.status = "open"
        self.values = [0.0, 0]  # sum and count of loss ratios seen
        self._cap = cap
        self._id = None

    @property
    def id(self):
        """Stable for the case's life (set from its first detection; a later, earlier-stamped detection
        or an absorbed case moves ``start``, not the id): consumers key one action per case on it."""
        if self._id is None:
            return "%s@%d" % (scope_id(self.key), int(self.start or 0))
        return self._id

    def _add(self, collection, item):
        if len(collection) < self._cap:
            collection.add(item)

    def add(self, det, ends, repeat_gap):
        t = det.time
        if self.last is None:
            self.start = self.last = t
            self.repeats = 1
        else:
            if t - self.last > repeat_gap:
                self.repeats += 1
            if t > self.last:
                self.last = t
            if t < self.start:
                self.start = t
        self.count += 1
        self.kinds[det.kind] = self.kinds.get(det.kind, 0) + 1
        if det.kind in PATH_KINDS:
            # The near end is the suspect side of the path; ``ends`` holds the far one.
            if ends and ends[0] == det.host:
                near, nic = det.target, det.target_nic
            else:
                near, nic = det.host, det.nic
            for end in ends:
                self._add(self.peers, end)
        else:
            near, nic = det.host, det.nic
        if near is not None:
            self._add(self.hosts, near)
            if nic is not None:
                self._add(self.nics, (near, nic))
        if det.spine is not None:
            self.spines.add(det.spine)
        if det.kind in ("path_loss", "uplink_loss") and det.value is not None:
            self.values[0] += det.value
            self.values[1] += 1
        if self.members is not None:
            self.members.append(det)

    def merge(self, other, repeat_gap):
        """Absorb ``other`` (a narrower open case)."""
        self.absorbed.append(other.id)
        self.absorbed.extend(other.absorbed)
        if self.last is None:
            self.start, self.last, self.repeats = other.start, other.last, other.repeats
        else:
            self.start = min(self.start, other.start)
            self.last = max(self.last, other.last)
            self.repeats = max(self.repeats, other.repeats)
        self.opened_at = min(self.opened_at, other.opened_at)
        self.count += other.count
        for k, v in other.kinds.items():
            self.kinds[k] = self.kinds.get(k, 0) + v
        for mine, theirs in ((self.hosts, other.hosts), (self.nics, other.nics), (self.peers, other.peers)):
            for item in theirs:
                self._add(mine, item)
        self.spines |= other.spines
        self.notes |= other.notes
        self.values[0] += other.values[0]
        self.values[1] += other.values[1]
        if self.members is not None and other.members is not None:
            self.members.extend(other.members)


# -- scopes ------------------------------------------------------------------------------------
def scope_id(key):
    kind = key[0]
    if kind == "nic":
        return "%s/nic%d" % (key[1], key[2])
    if kind == "uplink":
        # Only letters, digits and _.:@/- (the EDA case contract's id): <tor>/<spine>, <tor>/any-spine.
        return "%s/%s" % (key[1], "any-spine" if key[2] == ANY_SPINE else key[2])
    return "%s" % key[1]


class Correlator(object):
    """Streaming correlation. ``feed(det)`` returns the cases that closed; ``finish()`` the rest."""

    def __init__(self, index, **options):
        self.index = index
        self.opt = check_options(options)
        self.window = float(self.opt["window"])
        self.buckets = {}
        self.horizon = None          # latest detection time seen
        self.done_until = None       # windows ending at or before this are decided
        self.open = {}               # scope key -> Case
        self.open_by_zone = {}       # zone index or None -> set of scope keys
        self.pending = []            # (det) waiting for more evidence: paths and soft port detections
        self.agent_times = {}        # host -> sorted-ish list of agent_down times
        self.tor_down_times = {}     # rack index -> list of tor_down times
        self.stats = {"detections": 0, "below_threshold": 0, "in_cases": 0, "unattributed": 0, "late": 0,
                      "cases_opened": 0, "cases_absorbed": 0}
        self.now = None
        self.decided_at = None
        self._need_cache = {}

    # -- input --------------------------------------------------------------------------------
    def feed(self, det):
        st = self.stats
        st["detections"] += 1
        if not self._significant(det):
            st["below_threshold"] += 1
            return []
        t = det.time
        if det.kind == "agent_down" and det.host is not None:
            self.agent_times.setdefault(det.host, []).append(t)
        elif det.kind == "tor_down":
            r = self.index.rack_of_tor(det.tor)
            if r is not None:
                self.tor_down_times.setdefault(r, []).append(t)
        b = int(t // self.window)
        if self.done_until is not None and b < self.done_until:
            # Later than the slack allows: join an open case covering it, else unattributed.
            st["late"] += 1
            self._late(det)
            return []
        bucket = self.buckets.get(b)
        if bucket is None:
            bucket = self.buckets[b] = []
        bucket.append(det)
        if self.horizon is None or t > self.horizon:
            self.horizon = t
            return self._advance(self.horizon - self.opt["slack"])
        return []

    def feed_many(self, detections):
        for det in detections:
            yield from self.feed(det)

    def tick(self, now):
        """The clock moved to ``now`` (epoch seconds) without a detection: decide the windows that
        ended ``slack`` ago and return the cases that closed. A live consumer calls it every few
        seconds, so that a window is decided on time even when no later detection arrives."""
        if self.horizon is None or now > self.horizon:
            self.horizon = now
        return self._advance(now - self.opt["slack"])

    def finish(self, now=None):
        """Decide every buffered window; close cases quiet at ``now`` (default: last detection + quiet,
        which closes all). Returns the cases left: closed ones and, with ``now``, the still-open ones."""
        out = []
        w = self.window
        if self.buckets:
            out.extend(self._advance((max(self.buckets) + 1) * w))
        for _step in range(int(self.opt["hold"] // w) + 2):
            if not self.pending or (now is not None and (self.done_until + 1) * w > now):
                break
            out.extend(self._advance((self.done_until + 1) * w))
        end = now if now is not None else (self.horizon or 0) + self.opt["quiet"] + self.window
        out.extend(self._close(end))
        self._expire(float("inf") if now is None else now)
        if now is not None:
            out.extend(sorted(self.open.values(), key=lambda c: (c.start, scope_id(c.key))))
        return out

    def open_cases(self):
        return list(self.open.values())

    # -- helpers ------------------------------------------------------------------------------
    def _significant(self, det):
        kind, v, o = det.kind, det.value, self.opt
        if kind == "path_loss":
            return v is None or v >= o["loss_threshold"]
        if kind == "path_latency":
            return v is None or v >= o["latency_threshold"]
        if kind in SOFT_PORT_KINDS:
            return v is None or v >= o["counter_threshold"]
        if kind == "uplink_loss":
            return v is None or v >= o["loss_threshold"]
        return True

    def _advance(self, until):
        """Decide every window that ends at or before ``until``: those with detections, and the empty
        ones while detections wait in ``pending`` (they are voted again). Windows with neither are
        skipped in one step."""
        out = []
        w = self.window
        if self.done_until is None:
            if not self.buckets:
                return out
            self.done_until = min(self.buckets)
        b = self.done_until
        while (b + 1) * w <= until:
            dets = self.buckets.pop(b, None)
            if dets is None and not self.pending:
                later = [k for k in self.buckets if k > b]
                b = min(later + [int(until // w)])
                self.done_until = max(self.done_until, b)
                continue
            self.done_until = b + 1
            self.now = (b + 1) * w
            # When the window is decided in a live stream: its end plus the slack (deterministic: it
            # does not depend on which detection moved the stream on; see tick()).
            self.decided_at = self.now + self.opt["slack"]
            out.extend(self._close(self.now))
            self._decide(dets or [], self.now)
            self._expire(self.now)
            b += 1
        out.extend(self._close(self.done_until * w))
        return out

    def _close(self, now):
        quiet = self.opt["quiet"]
        closed = [c for c in self.open.values() if c.last is not None and c.last <= now - quiet]
        for case in sorted(closed, key=lambda c: (c.start, scope_id(c.key))):
            self._drop_open(case.key)
            case.status = "closed"
            case.closed_at = case.last + quiet
        return sorted(closed, key=lambda c: (c.start, scope_id(c.key)))

    def _expire(self, now):
        hold = self.opt["hold"]
        keep = []
        for det in self.pending:
            if det.time <= now - hold:
                self.stats["unattributed"] += 1
            else:
                keep.append(det)
        self.pending = keep
        grace = self.opt["agent_grace"]
        horizon = now - self.opt["quiet"] - grace
        for table in (self.agent_times, self.tor_down_times):
            for key in [k for k, times in table.items() if max(times) < horizon]:
                del table[key]

    def _near(self, table, key, t):
        times = table.get(key)
        if not times:
            return False
        g = self.opt["agent_grace"]
        # Only what lies before the end of the window being decided: later windows may be half fed,
        # and what they hold would make the decision depend on arrival order. An agent_down reported
        # later still wins through the inbound-only wait (agent_grace) of _decide.
        limit = self.now
        return any(t - g <= x <= t + g and x < limit for x in times)

    def _agent_down(self, host, t):
        if not self._near(self.agent_times, host, t):
            return False
        r = self.index.rack_of_host(host)
        return not (r is not None and self._tor_down(r, t))

    def _tor_down(self, r, t):
        return self._near(self.tor_down_times, r, t) or ("tor", self.index.tor_name(r)) in self.open

    # -- scopes -------------------------------------------------------------------------------
    def _zone_of_key(self, key):
        idx, kind = self.index, key[0]
        if kind in ("nic", "host"):
            r = idx.rack_of_host(key[1])
        elif kind in ("tor", "uplink"):
            r = idx.rack_of_tor(key[1])
        elif kind == "spine":
            return idx.spines.get(key[1])
        elif kind == "zone":
            return idx.zone_index.get(key[1])
        else:
            return None
        return None if r is None else idx.zone_of_rack(r)

    def _ancestors(self, key):
        idx, kind = self.index, key[0]
        out = []
        r = None
        if kind == "nic":
            out.append(("host", key[1]))
            r = idx.rack_of_host(key[1])
        elif kind == "host":
            r = idx.rack_of_host(key[1])
        elif kind == "uplink":
            if key[2] != ANY_SPINE:
                out.append(("uplink", key[1], ANY_SPINE))
            r = idx.rack_of_tor(key[1])
        elif kind == "spine":
            z = idx.spines.get(key[1])
            if z is not None:
                out.append(("zone", idx.zone_name(z)))
            return out
        elif kind == "tor":
            r = idx.rack_of_tor(key[1])
            if r is not None:
                out.append(("zone", idx.zone_name(idx.zone_of_rack(r))))
            return out
        else:
            return out
        if r is not None:
            out.append(("tor", idx.tor_name(r)))
            if kind == "uplink" and key[2] != ANY_SPINE:
                out.append(("spine", key[2]))
            out.append(("zone", idx.zone_name(idx.zone_of_rack(r))))
        return out

    def _covering(self, key):
        if key in self.open:
            return self.open[key]
        for anc in self._ancestors(key):
            if anc in self.open:
                return self.open[anc]
        return None

    def _host_in_case(self, host):
        """An open network case covers the host or one of its NICs."""
        if self._covering(("host", host)) is not None:
            return True
        nics = self.index.nic_count(host) or 0
        return any(("nic", host, n) in self.open for n in range(1, nics + 1))

    def _need(self, host):
        """Distinct lossy peers an end needs to be blamed: min_peers, or peer_share of the peers its
        probes meet in a window (pinglist of issue 29: its rack's hosts both ways, one host of every
        other rack of its zone each way), whichever is larger."""
        need = self._need_cache.get(host)
        if need is None:
            idx = self.index
            r = idx.rack_of_host(host)
            fanout = 0
            if r is not None:
                fanout = len(idx.rack_hosts(r)) - 1 + 2 * (len(idx.zone_racks(idx.zone_of_rack(r))) - 1)
            need = self._need_cache[host] = max(self.opt["min_peers"], int(math.ceil(self.opt["peer_share"] * fanout)))
        return need

    def _favoured(self, end, qualified):
        """An end starts the vote with min_peers: local evidence or an open case on it."""
        host, nic = end
        if nic is None:
            return host in qualified or self._host_in_case(host)
        return any(d.nic == nic for d in qualified.get(host, ())) or self._covering(("nic", host, nic)) is not None

    def _drop_open(self, key):
        del self.open[key]
        z = self._zone_of_key(key)
        keys = self.open_by_zone.get(z)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.open_by_zone[z]

    def _attach(self, key, dets, note=None):
        """Put ``dets`` (list of (det, ends)) into the case of ``key`` or of an open enclosing scope."""
        if not dets:
            return
        case = self._covering(key)
        if case is None:
            case = Case(key, self.decided_at, self.opt["record"], self.opt["max_listed"] * 50)
            self.stats["cases_opened"] += 1
            z = self._zone_of_key(key)
            if key[0] not in ("agent", "target"):
                for other in list(self.open_by_zone.get(z, ())):
                    if key in self._ancestors(other):
                        narrower = self.open[other]
                        self._drop_open(other)
                        case.merge(narrower, self.opt["repeat_gap"])
                        self.stats["cases_absorbed"] += 1
            self.open[key] = case
            self.open_by_zone.setdefault(z, set()).add(key)
        if note:
            case.notes.add(note)
        gap = self.opt["repeat_gap"]
        for det, ends in sorted(dets, key=lambda p: _order(p[0])):
            case.add(det, ends, gap)
        if case._id is None:
            case._id = case.id
        self.stats["in_cases"] += len(dets)

    def _late(self, det):
        key = self._port_key(det)
        case = self._covering(key) if key is not None else None
        if case is None and det.kind in PATH_KINDS and det.target is not None:
            case = self._covering(("host", det.target))
            # a rack target's event: any candidate's open case explains it (restated toward that candidate)
            for host, nic in det.alternatives or ():
                if case is not None:
                    break
                case = self._covering(("nic", host, nic) if nic is not None else ("host", host))
                if case is not None:
                    det = _as_toward(det, (host, nic))
                    # its near side in the case is the candidate, its far end the prober
                    case.add(det, (det.host,), self.opt["repeat_gap"])
                    self.stats["in_cases"] += 1
                    return
        if case is None:
            self.stats["unattributed"] += 1
            return
        case.add(det, (det.target,) if det.kind in PATH_KINDS else (), self.opt["repeat_gap"])
        self.stats["in_cases"] += 1

    def _port_key(self, det):
        kind = det.kind
        if kind == "agent_down":
            return ("agent", det.host)
        if kind == "tor_down":
            return ("tor", det.tor)
        if kind == "uplink_loss":
            return ("uplink", det.tor, det.spine or ANY_SPINE)
        if det.host is None:
            return None
        return ("nic", det.host, det.nic) if det.nic is not None else ("host", det.host)

    # -- one window ---------------------------------------------------------------------------
    def _decide(self, dets, now):
        idx, o = self.index, self.opt
        dets.sort(key=_order)
        attributions = []          # (key, [(det, ends)], note)
        paths = []                 # (det, end a, end b)
        local = {}                 # host -> [det] (port kinds)
        tor_dets = {}              # rack -> [det]
        uplinks = {}               # (tor, spine) -> [det]
        agent = {}                 # host -> [(det, ends)]
        carried = self.pending
        self.pending = []
        for det in carried + dets:
            kind = det.kind
            if kind in PATH_KINDS:
                a = det.host
                b = det.target
                if a == b:
                    attributions.append((("nic", a, det.nic), [(det, ())], "probe to its own host lost"))
                    continue
                down = [end for end in det.alternatives or () if self._agent_down(end[0], det.time)]
                if self._agent_down(b, det.time):
                    agent.setdefault(b, []).append((det, (a,)))
                elif down:
                    # a rack target's event: a candidate whose agent (the responder) is down explains it
                    agent.setdefault(down[0][0], []).append((_as_toward(det, down[0]), (a,)))
                elif self._agent_down(a, det.time):
                    agent.setdefault(a, []).append((det, (b,)))
                else:
                    paths.append(det)
            elif kind in HARD_PORT_KINDS or kind in SOFT_PORT_KINDS:
                local.setdefault(det.host, []).append(det)
            elif kind == "tor_down":
                r = idx.rack_of_tor(det.tor)
                if r is None:
                    attributions.append((("tor", det.tor), [(det, ())], "ToR not in the plan"))
                else:
                    tor_dets.setdefault(r, []).append(det)
            elif kind == "uplink_loss":
                uplinks.setdefault((det.tor, det.spine), []).append(det)
            elif kind == "agent_down":
                r = idx.rack_of_host(det.host)
                if r is not None and self._tor_down(r, det.time):
                    tor_dets.setdefault(r, []).append(det)
                else:
                    agent.setdefault(det.host, []).append((det, ()))
        for host, items in agent.items():
            attributions.append((("agent", host), items,
                                 "agent down: its probes and responder stopped; probes toward it are not network loss"))

        # Local evidence qualifies a host for the vote: hard port events, or enough soft ones.
        qualified = {}
        for host, items in local.items():
            hard = [d for d in items if d.kind in HARD_PORT_KINDS]
            soft = [d for d in items if d.kind in SOFT_PORT_KINDS]
            per_port = {}
            for d in soft:
                per_port[d.nic] = per_port.get(d.nic, 0) + 1
            keep = list(hard)
            for d in soft:
                if per_port[d.nic] >= o["min_soft"] or self._covering(("nic", host, d.nic) if d.nic else ("host", host)):
                    keep.append(d)
                else:
                    self.pending.append(d)
            if keep:
                qualified[host] = keep

        # Racks whose ToR has a lossy uplink (exporter, or an open uplink case): their hosts are the
        # suspects of paths leaving them (two racks alone in a zone are otherwise symmetric).
        up_racks = {idx.rack_of_tor(k[0]) for k in uplinks}
        up_racks.update(idx.rack_of_tor(k[1]) for k in self.open if k[0] == "uplink")
        up_racks.discard(None)
        paths = _observations(paths)
        need = {}
        bonus = {}
        for _dets, a, bs in paths:
            for b in bs:
                cross = idx.rack_of_host(a[0]) != idx.rack_of_host(b[0])
                for end in (a, b):
                    if end not in need:
                        need[end] = self._need(end[0])
                        bonus[end] = need[end] if self._favoured(end, qualified) else 0
                    if cross and not bonus[end] and idx.rack_of_host(end[0]) in up_racks:
                        bonus[end] = need[end]
        blamed_ends, leftover = _vote(paths, bonus, need)
        blamed = {}
        for end, got in blamed_ends.items():
            blamed.setdefault(end[0], []).extend(got)
        for dets, _a, _bs in leftover:
            self.pending.extend(dets)

        # A host blamed only by probes toward it, with nothing from the host itself (its own probes
        # would lose too on a bad NIC), may be a host whose agent (the responder) just died: Prometheus
        # reports that later than the probes fail. Such paths wait up to agent_grace for an agent_down.
        for host in list(blamed):
            got = blamed[host]
            if host in qualified or host not in idx.hosts or self._host_in_case(host):
                continue
            if all(d.target == host for d, _f in got):
                if now - min(d.time for d, _f in got) < o["agent_grace"]:
                    self.pending.extend(d for d, _f in got)
                    del blamed[host]

        # Per host: its detections with the far ends and the NICs hit on its side.
        host_ev = {}
        for host in set(blamed) | set(qualified):
            entries = []
            nics = set()
            intra = False
            r_self = idx.rack_of_host(host)
            for det, far in blamed.get(host, ()):
                far = far[0]
                entries.append((det, (far,)))
                nic = det.nic if det.host == host else det.target_nic
                if nic is not None:
                    nics.add(nic)
                if r_self is not None and idx.rack_of_host(far) == r_self:
                    intra = True
            hard = False
            for det in qualified.get(host, ()):
                entries.append((det, ()))
                if det.nic is not None:
                    nics.add(det.nic)
                hard = hard or det.kind in HARD_PORT_KINDS
            host_ev[host] = (entries, nics, intra, hard)

        # Racks.
        by_rack = {}
        unknown_hosts = []
        for host in host_ev:
            r = idx.rack_of_host(host)
            if r is None:
                unknown_hosts.append(host)
            else:
                by_rack.setdefault(r, []).append(host)
        rack_level = {}  # rack -> key of its rack-level attribution
        uplink_used = set()
        for r in sorted(set(by_rack) | set(tor_dets), key=lambda x: x):
            hosts = sorted(by_rack.get(r, ()))
            tor = idx.tor_name(r)
            n = max(1, len(idx.rack_hosts(r)))
            many = len(hosts) >= o["tor_min_hosts"] and len(hosts) >= o["tor_host_share"] * n
            inside = any(host_ev[h][2] or host_ev[h][3] for h in hosts)
            mine = [k for k in uplinks if k[0] == tor]
            open_up = sorted(k for k in self.open_by_zone.get(idx.zone_of_rack(r), ()) if k[0] == "uplink" and k[1] == tor)
            if hosts and open_up and not inside and r not in tor_dets:
                # An open uplink case keeps the rack's cross-rack loss, however many hosts show it now.
                items = []
                for h in hosts:
                    items.extend(host_ev[h][0])
                for k in mine:
                    items.extend((d, ()) for d in uplinks[k])
                    uplink_used.add(k)
                attributions.append((open_up[0], items, None))
                rack_level[r] = open_up[0]
            elif r in tor_dets or (many and inside) or (hosts and ("tor", tor) in self.open):
                items = [(d, ()) for d in tor_dets.get(r, ())]
                for h in hosts:
                    items.extend(host_ev[h][0])
                for k in mine:
                    items.extend((d, ()) for d in uplinks[k])
                    uplink_used.add(k)
                note = ("ToR reported down (%s)" % tor) if r in tor_dets else \
                    ("%d of %d hosts of rack %s hit, with loss inside the rack or port events" % (len(hosts), n, idx.rack_name(r)))
                attributions.append((("tor", tor), items, note))
                rack_level[r] = ("tor", tor)
            elif many:
                spines = {}
                for k in mine:
                    spines[k[1]] = spines.get(k[1], 0) + len(uplinks[k])
                spine = sorted(spines.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if spines else ANY_SPINE
                items = []
                for h in hosts:
                    items.extend(host_ev[h][0])
                for k in mine:
                    if k[1] == spine:
                        items.extend((d, ()) for d in uplinks[k])
                        uplink_used.add(k)
                attributions.append((("uplink", tor, spine), items,
                                     "%d of %d hosts of rack %s lose only on paths leaving the rack" % (len(hosts), n, idx.rack_name(r))))
                rack_level[r] = ("uplink", tor, spine)
            else:
                for h in hosts:
                    self._host_attribution(h, host_ev[h], attributions)
        for h in unknown_hosts:
            self._host_attribution(h, host_ev[h], attributions)

        # Uplinks not taken by a rack, then spines.
        by_spine = {}
        for k in sorted(k for k in uplinks if k not in uplink_used):
            by_spine.setdefault(k[1], []).append(k)
        for spine, keys in sorted(by_spine.items()):
            z = idx.spines.get(spine)
            tors = {k[0] for k in keys}
            zone_racks = len(idx.zone_racks(z)) if z is not None else 1
            if z is not None and len(tors) >= o["spine_min_tors"] and len(tors) >= o["spine_tor_share"] * zone_racks:
                items = [(d, ()) for k in keys for d in uplinks[k]]
                attributions.append((("spine", spine), items, "uplink loss toward spine %s from %d ToRs" % (spine, len(tors))))
            else:
                for k in keys:
                    attributions.append((("uplink", k[0], k[1]), [(d, ()) for d in uplinks[k]],
                                         "ToR-spine link reported lossy or down"))
                    r = idx.rack_of_tor(k[0])
                    if r is not None:
                        rack_level.setdefault(r, ("uplink", k[0], k[1]))

        # Zones: rack-level problems in enough racks of one zone (open rack-level cases count too).
        per_zone = {}
        for r in rack_level:
            per_zone.setdefault(idx.zone_of_rack(r), set()).add(r)
        for key in self.open:
            if key[0] in ("tor", "uplink"):
                r = idx.rack_of_tor(key[1])
                if r is not None and idx.zone_of_rack(r) in per_zone:
                    per_zone[idx.zone_of_rack(r)].add(r)
        zone_keys = set()
        for z, racks in per_zone.items():
            total = len(idx.zone_racks(z))
            if len(racks) >= o["zone_min_racks"] and len(racks) >= o["zone_rack_share"] * total:
                zone_keys.add(z)
        if zone_keys:
            merged = []
            for key, items, note in attributions:
                z = self._zone_of_key(key)
                if z in zone_keys and key[0] in ("tor", "uplink", "host", "nic", "spine"):
                    merged.append((("zone", idx.zone_name(z)), items,
                                   "%d of %d racks of zone %s hit" % (len(per_zone[z]), len(idx.zone_racks(z)), idx.zone_name(z))))
                else:
                    merged.append((key, items, note))
            attributions = merged

        for key, items, note in sorted(attributions, key=lambda a: (SCOPE_ORDER.index(a[0][0]), _key_sort(a[0]))):
            self._attach(key, items, note)

    def _host_attribution(self, host, ev, attributions):
        entries, nics, _intra, hard = ev
        o = self.opt
        if host not in self.index.hosts and not hard and not any(d.host == host for d, _e in entries):
            attributions.append((("target", host), entries, "probes toward %s (outside the plan) lost" % host))
            return
        total = self.index.nic_count(host) or max(nics or {1})
        if len(nics) >= o["host_min_nics"] and len(nics) >= o["host_nic_share"] * total:
            attributions.append((("host", host), entries, "%d of %d NICs of %s hit" % (len(nics), total, host)))
        elif len(nics) == 1:
            nic = next(iter(nics))
            # Entries without a NIC on this side (probes toward the host, target NIC unknown) follow.
            attributions.append((("nic", host, nic), entries, None))
        elif not nics:
            attributions.append((("host", host), entries, "probes toward %s lost (NIC unknown)" % host))
        else:
            # Several NICs but under the host thresholds: one case per NIC; NIC-less entries to the first.
            by_nic = {nic: [] for nic in nics}
            first = min(nics)
            for det, ends in entries:
                nic = det.nic if det.host == host else det.target_nic
                by_nic[nic if nic in by_nic else first].append((det, ends))
            for nic in sorted(by_nic):
                attributions.append((("nic", host, nic), by_nic[nic], None))


def _order(det):
    return (det.time, det.kind, det.host or "", det.nic or 0, det.target or "", det.target_nic or 0, det.tor or "",
            det.spine or "", det.value if det.value is not None else -1.0, det.source or "")


def _key_sort(key):
    return tuple(str(k) for k in key)


def _observations(dets):
    """Path detections -> observations ``(dets, near end, [far ends])``, one per probe result: a detection
    alone is ``([det], (host, nic), [(target, target_nic)])``; the detections of one agent event whose target
    is not certain (``alternatives``: the rotating rack target) are one observation with one far end per
    candidate, in the order of ``dets``."""
    out = []
    groups = {}
    for det in dets:
        if det.alternatives is None:
            out.append(([det], (det.host, det.nic), [(det.target, det.target_nic)]))
            continue
        key = (det.time, det.kind, det.host, det.nic, det.value, det.source, det.alternatives)
        obs = groups.get(key)
        if obs is None or any(d.target == det.target for d in obs[0]):
            obs = groups[key] = ([], (det.host, det.nic), list(det.alternatives))
            out.append(obs)
        obs[0].append(det)
    return out


def _as_toward(det, end):
    """``det`` restated toward far end ``end`` (host, NIC) that explains its observation (each detection of
    an observation is counted once, all of them on the end blamed for it)."""
    if (det.target, det.target_nic) == end:
        return det
    return Detection(det.time, det.kind, host=det.host, nic=det.nic, tor=det.tor, spine=det.spine, target=end[0],
                     value=det.value, source=det.source, target_nic=end[1], alternatives=det.alternatives)


def _vote(paths, bonus, need):
    """Greedy tomography vote over path ends ((host, nic or None)); a peer is a distinct far host.

    ``paths``: observations of :func:`_observations`. The near end of an observation is certain; a far end is
    certain only when the observation has one. An ambiguous observation (several candidate far ends: the lost
    probes went to one or more of them) gives its near end the hosts it names as peers and no peer to any
    candidate: it cannot tell which candidate lost, so it is no evidence against any one of them (issue 29: the
    rack-mate of a host with a bad NIC looked bad through it). It is explained, and taken, by whichever of its
    ends is blamed. Returns ({end: [(det, far end)]}, unexplained observations)."""
    remaining = {}
    by_end = {}
    for i, (dets, a, bs) in enumerate(paths):
        if len(bs) == 1:
            remaining.setdefault(a, set()).add(bs[0][0])
            remaining.setdefault(bs[0], set()).add(a[0])
        else:
            remaining.setdefault(a, set()).update(det.target for det in dets)
            for b in bs:
                remaining.setdefault(b, set())
        by_end.setdefault(a, []).append(i)
        for b in bs:
            by_end.setdefault(b, []).append(i)
    score = {e: len(p) + bonus.get(e, 0) for e, p in remaining.items()}
    # Ties are broken by the end's (host, NIC), a NIC-less end (None) first: comparing the ends themselves would
    # compare None with a NIC number when one host is an end both with and without a NIC (TypeError).
    heap = [(-s, e[0], -1 if e[1] is None else e[1], e) for e, s in score.items()]
    heapq.heapify(heap)
    taken = [False] * len(paths)
    blamed = {}

    def drop_peer(end, peer):
        peers = remaining.get(end)
        if peers is not None and peer in peers and end in score:
            peers.discard(peer)
            score[end] = len(peers) + bonus.get(end, 0)
            heapq.heappush(heap, (-score[end], end[0], -1 if end[1] is None else end[1], end))

    while heap:
        s, _host, _nic, end = heapq.heappop(heap)
        s = -s
        if s != score.get(end) or s < need[end]:
            continue
        del score[end]
        got = blamed.setdefault(end, [])
        for i in by_end[end]:
            if taken[i]:
                continue
            taken[i] = True
            dets, a, bs = paths[i]
            if a == end:
                got.extend((det, (det.target, det.target_nic)) for det in dets)
                if len(bs) == 1:
                    drop_peer(bs[0], end[0])
            else:
                got.extend((_as_toward(det, end), a) for det in dets)
                for det in dets:
                    drop_peer(a, det.target)
        if not got:
            del blamed[end]
    leftover = [p for i, p in enumerate(paths) if not taken[i]]
    return blamed, leftover


def root_cause(case, index=None):
    """A sentence: the suspected element and why."""
    key = case.key
    kind = key[0]
    k = case.kinds
    paths = sum(k.get(x, 0) for x in PATH_KINDS)
    local = ", ".join("%s x%d" % (x, k[x]) for x in HARD_PORT_KINDS + SOFT_PORT_KINDS if k.get(x))
    peers = len(case.peers)
    if kind == "nic":
        port = index.tor_port(key[1], key[2]) if index else None
        r = index.rack_of_host(key[1]) if index else None
        where = (" or its cable / ToR port %s:%s" % (index.tor_name(r), port)) if port and r is not None else ""
        text = "NIC %d of %s%s" % (key[2], key[1], where)
    elif kind == "host":
        text = "host %s (NICs hit: %s): host side (NIC driver, PCIe, kernel, power) rather than one link" % (
            key[1], ", ".join(str(n) for h, n in sorted(case.nics) if h == key[1]) or "unknown")
    elif kind == "tor":
        r = index.rack_of_tor(key[1]) if index else None
        mine = [h for h in case.hosts if r is None or index.rack_of_host(h) == r]
        text = "ToR %s: %d hosts of its rack hit" % (key[1], len(mine))
        if k.get("tor_down"):
            text += "; its FRR reported down"
    elif kind == "uplink":
        text = ("ToR-spine link %s - %s" % (key[1], key[2])) if key[2] != ANY_SPINE else \
            "uplinks of ToR %s (loss only on paths leaving the rack; spine not identified)" % key[1]
    elif kind == "spine":
        text = "spine %s: its links to several ToRs lossy or down" % key[1]
    elif kind == "zone":
        text = "zone %s: many racks hit at once (spine layer, power or a fabric-wide change)" % key[1]
    elif kind == "agent":
        return "monitoring agent on %s down: not network loss (%d probe detections toward it absorbed)" % (
            key[1], paths)
    else:
        text = "target %s (outside the plan)" % key[1]
    ev = []
    if paths:
        ev.append("%d lossy/slow probe intervals with %d distinct far ends" % (paths, peers))
    if local:
        ev.append(local)
    for x in ("tor_down", "uplink_loss", "agent_down"):
        if k.get(x):
            ev.append("%s x%d" % (x, k[x]))
    return text + (" - evidence: " + "; ".join(ev) if ev else "")


def case_dict(case, index=None, max_listed=20):
    """The case as plain data (JSON-ready)."""
    key = case.key
    scope = {"kind": key[0], "id": scope_id(key)}
    if key[0] == "nic":
        # nic: the plan's index (0-based: host_data nics[].index, drain.yml's drain_nic, the EDA case
        # contract); nic_number: the detections' 1-based NIC (the id shows it).
        scope.update(host=key[1], nic=key[2] - 1, nic_number=key[2])
        if index is not None:
            scope["port"] = index.tor_port(key[1], key[2])
    elif key[0] in ("host", "agent"):
        scope["host"] = key[1]
    elif key[0] == "tor":
        scope["tor"] = key[1]
    elif key[0] == "uplink":
        scope.update(tor=key[1], spine=None if key[2] == ANY_SPINE else key[2])
    elif key[0] == "spine":
        scope["spine"] = key[1]
    elif key[0] == "zone":
        scope["zone"] = key[1]
    if index is not None:
        r = None
        if "host" in scope:
            r = index.rack_of_host(scope["host"])
        elif "tor" in scope:
            r = index.rack_of_tor(scope["tor"])
        if r is not None:
            scope.setdefault("tor", index.tor_name(r))
            scope["rack"] = index.rack_name(r)
            scope["zone"] = index.zone_name(index.zone_of_rack(r))
        elif "spine" in scope and scope["spine"] in index.spines:
            scope["zone"] = index.zone_name(index.spines[scope["spine"]])
    mean_loss = round(case.values[0] / case.values[1], 6) if case.values[1] else None
    return {
        "id": case.id,
        "scope": scope,
        "status": case.status,
        "root_cause": root_cause(case, index),
        "start": case.start,
        "end": case.last if case.status == "closed" else None,
        "last": case.last,
        "opened_at": case.opened_at,
        "closed_at": case.closed_at,
        "detections": case.count,
        "repeats": case.repeats,
        "evidence": {
            "kinds": dict(sorted(case.kinds.items())),
            "hosts": sorted(case.hosts)[:max_listed],
            "hosts_total": len(case.hosts),
            "nics": ["%s/nic%d" % hn for hn in sorted(case.nics)[:max_listed]],
            "far_ends": sorted(case.peers)[:max_listed],
            "far_ends_total": len(case.peers),
            "spines": sorted(case.spines)[:max_listed],
            "mean_loss": mean_loss,
            "notes": sorted(case.notes),
        },
        "absorbed": sorted(case.absorbed),
    }


def correlate(detections, index, now=None, **options):
    """Batch form: sort ``detections`` (any order), correlate, return (cases as dicts, stats)."""
    corr = Correlator(index, **options)
    cases = []
    for det in sorted(detections, key=_order):
        cases.extend(corr.feed(det))
    cases.extend(corr.finish(now))
    return [case_dict(c, index, corr.opt["max_listed"]) for c in cases], dict(corr.stats)


EVENT_KINDS = ("nic", "host", "tor", "uplink", "spine", "zone", "agent")


def case_event(case, state):
    """One line of the case file the EDA source ``netscale.multinic.case_file`` tails:
    ``{"case": {...}}`` with ``state`` open, updated or closed (docs/remediation-eda.md). ``case`` is a
    :func:`case_dict`. Cases of a target outside the plan have nothing to drain: None (not written)."""
    if state not in ("open", "updated", "closed"):
        raise CorrelationError([InputProblem("state", state, "not a case state", "use open, updated or closed")])
    if case["scope"]["kind"] not in EVENT_KINDS:
        return None
    body = dict((k, case[k]) for k in ("id", "scope", "root_cause", "detections", "start", "end", "repeats",
                                       "opened_at", "evidence", "absorbed"))
    body["state"] = state
    return {"case": body}
