# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live correlator: the agents' detection events in, the case file and the current cases out.

One process (``netscale-case-correlator``, shipped from this module by ``scripts/build-host-programs.py``; in the
lab started by ``lab_monitoring`` beside Prometheus) runs :class:`Live` in a loop:

1. **read** every agent's events file (:class:`FileTail`: complete lines only, across rotation - the agent
   renames the file to ``.1`` and starts a new one - and truncation); a line that is neither an agent event
   nor a detection record is counted (``bad_lines`` per source) and logged (the first few per source, then
   every 100th), never fed and never fatal;
2. **feed** the detections of the step to :class:`.correlate.Correlator` in time order, then **tick** it
   on wall time (windows are decided when the clock passes them, not when the next detection arrives);
3. **write** one :func:`.correlate.case_event` line per case that opened, changed or closed to the case file
   (appended, flushed; the EDA source ``netscale.multinic.case_file`` tails it), and the current cases
   (open and closed within ``recent`` seconds) as one JSON document, written atomically
   (:func:`..writing.atomic_write`) when it changed and at least every ``heartbeat`` seconds (its
   ``updated_at`` tells a reader the correlator is alive).

A case absorbed by a wider one (``absorbed`` of :func:`.correlate.case_dict`) leaves the open set
without closing in the engine: it gets a ``closed`` line, and ``absorbed_into`` in the current cases.
The engine's state is in memory: after a restart the tails start at the end of the files (old detections
are not replayed), and the cases the last snapshot still had open are listed as ``closed`` with
``ended_by: correlator restart``. No Ansible imports.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem, MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import correlate as corrmod
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import (
    Detection, DetectionError, from_agent_event)
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.fabric import FabricIndex
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

SCHEMA_VERSION = 1
MAX_LINE = 1 << 20           # a line longer than this (no newline in sight) is dropped, never buffered on
MAX_READ = 4 << 20           # bytes read from one file per step: a backlog is read over several steps
LOGGED_BAD_LINES = 5         # per source, then every 100th
# Keys only the agent's events carry (module_utils/monitor/agent.py emit()): such a line is an agent event.
AGENT_KEYS = ("scope", "rack", "zone", "slot", "target_host", "detail")
DEFAULTS = {"interval": 2.0, "heartbeat": 10.0, "recent": 3600.0, "start_at": "end", "agent_poll": 15.0}


class LiveError(MultinicError, ValueError):
    def __init__(self, problems):
        self.problems = list(problems)
        lines = ["invalid live correlator settings (%d problem%s):" % (
            len(self.problems), "" if len(self.problems) == 1 else "s")]
        lines.extend("  - %s" % p for p in self.problems)
        super(LiveError, self).__init__("\n".join(lines))


# -- reading ------------------------------------------------------------------------------------
class FileTail(object):
    """Complete lines appended to one file, across rotation (a new inode at the path) and truncation.

    ``start_at``: ``end`` skips what the file holds when the tail starts (old events), ``beginning``
    reads it. A file that appears (or reappears) later holds new lines only and is read from its start.
    A rotated file is read to its end before the new one. ``poll()`` returns the complete lines (str,
    without the newline) read since the last call; an unterminated last line waits for its newline."""

    def __init__(self, path, start_at="end", max_line=MAX_LINE, max_read=MAX_READ):
        if start_at not in ("end", "beginning"):
            raise LiveError([InputProblem("start_at", start_at, "not a start point", "use end or beginning")])
        self.path = path
        self.max_line = max_line
        self.max_read = max_read
        self.handle = None
        self.inode = None
        self.pos = 0
        self.buf = b""
        self.stats = {"lines": 0, "rotations": 0, "truncations": 0, "dropped_long": 0, "dropped_partial": 0,
                      "read_errors": 0}
        self.error = None
        self.skip_rest = False   # the end of an over-long line, dropped, is still to come
        self._open(skip=start_at == "end")

    def _open(self, skip=False):
        try:
            handle = open(self.path, "rb")
        except OSError as exc:
            self.error = "%s: %s" % (self.path, exc.strerror or exc)
            return False
        st = os.fstat(handle.fileno())
        start = st.st_size if skip else 0
        handle.seek(start)
        self.handle, self.inode, self.pos, self.buf, self.error = handle, st.st_ino, start, b"", None
        self.skip_rest = False
        return True

    @property
    def present(self):
        return self.handle is not None

    def close(self):
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def poll(self):
        out = []
        if self.handle is None and not self._open():
            return out
        out.extend(self._read())
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return out    # rotated away, the new file not there yet: keep the old handle
        except OSError as exc:
            self.stats["read_errors"] += 1
            self.error = "%s: %s" % (self.path, exc.strerror or exc)
            return out
        if st.st_ino != self.inode:
            out.extend(self._read(limit=None))   # the rest of the old file first
            if self.buf:
                self.stats["dropped_partial"] += 1
            self.close()
            self.stats["rotations"] += 1
            if self._open():
                out.extend(self._read())
        elif st.st_size < self.pos:
            self.stats["truncations"] += 1
            if self.buf:
                self.stats["dropped_partial"] += 1
            self.handle.seek(0)
            self.pos, self.buf = 0, b""
            out.extend(self._read())
        return out

    def _read(self, limit=-1):
        out = []
        try:
            data = self.handle.read(self.max_read if limit == -1 else -1)
        except OSError as exc:
            self.stats["read_errors"] += 1
            self.error = "%s: %s" % (self.path, exc.strerror or exc)
            return out
        if not data:
            return out
        self.pos += len(data)
        self.buf += data
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                if len(self.buf) > self.max_line:
                    self.stats["dropped_long"] += 1
                    self.buf = b""
                    self.skip_rest = True
                break
            raw, self.buf = self.buf[:nl], self.buf[nl + 1:]
            if self.skip_rest:
                # the end of an over-long line dropped before: not a line of its own
                self.skip_rest = False
                continue
            self.stats["lines"] += 1
            out.append(raw.decode("utf-8", "replace"))
        return out


def parse_line(line, index=None, where="events"):
    """The detections of one line: an agent event (``module_utils/monitor/agent.py``) or a detection
    record (``detections.Detection``). [] for a blank line or a recovery event. Raises
    :class:`DetectionError` for anything else."""
    line = line.strip()
    if not line:
        return []
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise DetectionError([InputProblem("", line[:80], "not JSON: %s" % exc, "one JSON object per line")], where)
    if isinstance(data, dict) and (data.get("source") == "fabric_monitor" or any(k in data for k in AGENT_KEYS)):
        try:
            return from_agent_event(data, index)
        except DetectionError as exc:
            raise DetectionError(exc.problems, where)
    return [Detection.from_dict(data, where)]


def agent_down_detections(result, now):
    """``agent_down`` detections from a Prometheus instant query of ``fabric_monitor:agent_down``
    (the API's JSON): one per host listed. Raises ValueError for an answer it cannot read."""
    if not isinstance(result, dict) or result.get("status") != "success":
        raise ValueError("Prometheus answered %r" % (str(result)[:200],))
    out = []
    for series in result.get("data", {}).get("result", []):
        host = series.get("metric", {}).get("host")
        if host:
            out.append(Detection(float(now), "agent_down", host=host, source="prometheus"))
    return sorted(out, key=lambda d: d.host)


# -- the topology ------------------------------------------------------------------------------
def index_data(racks, spines=()):
    """The part of the plan's rack and spine data correlation reads (names, NIC counts and names, ids,
    uplinks' spines): what a process that runs the correlator is given, nothing else (no address, no key)."""
    out_racks = []
    for r in racks:
        out_racks.append({
            "name": r["name"], "zone": r["zone"], "building": r.get("building"),
            "tor": {"name": r["tor"]["name"],
                    "uplinks": [{"spine": u["spine"]} for u in r["tor"].get("uplinks") or ()]},
            "hosts": [{"name": h["name"], "nic_count": h["nic_count"], "id": h["id"],
                       "nics": [{"name": n["name"]} for n in h.get("nics") or ()]} for h in r["hosts"]]})
    out_spines = [{"name": s["name"], "zone": s["zone"], "building": s.get("building")} for s in spines]
    return {"racks": out_racks, "spines": out_spines}


def load_index(path):
    """A FabricIndex from ``path``: a JSON file ``{"racks": [...], "spines": [...]}`` in the plan's rack/spine
    data form (:func:`index_data`, ``intended/plan/racks/*.yml``), or the plan directory ``intended/plan``
    itself (needs PyYAML)."""
    problems = []
    try:
        if os.path.isdir(path):
            import yaml  # pylint: disable=import-outside-toplevel
            racks, spines = [], []
            for sub, into in (("racks", racks), ("spines", spines)):
                folder = os.path.join(path, sub)
                for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
                    if name.endswith(".yml"):
                        with open(os.path.join(folder, name)) as handle:
                            into.append(yaml.safe_load(handle))
            data = {"racks": racks, "spines": spines}
        else:
            with open(path) as handle:
                data = json.load(handle)
        if not isinstance(data, dict) or not data.get("racks"):
            problems.append(InputProblem("topology", path, "no racks in it",
                                         "give the plan directory (intended/plan) or a JSON file with racks and spines"))
        else:
            return FabricIndex.from_plan_data(data["racks"], data.get("spines") or ())
    except (OSError, ValueError, KeyError, TypeError, ImportError) as exc:
        problems.append(InputProblem("topology", path, "cannot read it: %s" % exc,
                                     "give the plan directory (intended/plan) or a JSON file with racks and spines"))
    raise LiveError(problems)


# -- the loop step -----------------------------------------------------------------------------
def _signature(d):
    return (d["detections"], d["last"], d["repeats"], tuple(d["absorbed"]), json.dumps(d["scope"], sort_keys=True))


class Live(object):
    """One live correlator. ``sources``: {name: events file path}; ``case_file``: the JSON-lines case
    file; ``snapshot``: the current-cases JSON file. ``step(now)`` does one read-feed-tick-write round."""

    def __init__(self, index, sources, case_file, snapshot, options=None, recent=DEFAULTS["recent"],
                 heartbeat=DEFAULTS["heartbeat"], start_at=DEFAULTS["start_at"], log=None, clock=time.time):
        problems = []
        if not isinstance(sources, dict) or not sources:
            problems.append(InputProblem("events", sources, "no events file to read",
                                         "give every GPU host's events file (name=path)"))
        for name, value in (("recent", recent), ("heartbeat", heartbeat)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                problems.append(InputProblem(name, value, "expected seconds > 0", "default: %r" % DEFAULTS[name]))
        for name, value in (("case_file", case_file), ("snapshot", snapshot)):
            if not value or not isinstance(value, str):
                problems.append(InputProblem(name, value, "a file path is required", "e.g. <dir>/%s" % (
                    "cases.jsonl" if name == "case_file" else "cases.json")))
        if problems:
            raise LiveError(problems)
        self.index = index
        self.corr = corrmod.Correlator(index, **dict(options or {}))
        self.max_listed = self.corr.opt["max_listed"]
        self.tails = dict((name, FileTail(path, start_at)) for name, path in sorted(sources.items()))
        self.bad = dict((name, 0) for name in self.tails)
        self.detections = dict((name, 0) for name in self.tails)
        self.case_file = case_file
        self.snapshot_path = snapshot
        self.recent = float(recent)
        self.heartbeat = float(heartbeat)
        self.log = log or (lambda msg: None)
        self.clock = clock
        self.known = {}        # id -> (signature, Case) of the open cases as last written
        self.closed = {}       # id -> case dict (closed, kept ``recent`` seconds)
        self.lines_written = 0
        self.agent_errors = 0
        self.engine_errors = 0
        self.started_at = clock()
        self.last_written = None
        self._last_snapshot = None
        os.makedirs(os.path.dirname(os.path.abspath(case_file)), exist_ok=True)
        self.out = open(case_file, "a")
        self._restarted(self.started_at)

    def _restarted(self, now):
        """Cases the previous run's snapshot still had open: closed by the restart (their evidence is gone)."""
        try:
            with open(self.snapshot_path) as handle:
                before = json.load(handle)
        except (OSError, ValueError):
            return
        for d in (before.get("open") or []) if isinstance(before, dict) else []:
            if isinstance(d, dict) and isinstance(d.get("id"), str) and isinstance(d.get("scope"), dict):
                d = dict(d, status="closed", end=d.get("last"), closed_at=now, ended_by="correlator restart")
                self.closed[d["id"]] = d
                self._write(d, "closed")

    # -- one round
    def read(self):
        """Detections read from every source since the last call (time order), bad lines counted."""
        dets = []
        for name, tail in self.tails.items():
            for line in tail.poll():
                try:
                    got = parse_line(line, self.index, "%s (%s)" % (name, tail.path))
                except DetectionError as exc:
                    self.bad[name] += 1
                    n = self.bad[name]
                    if n <= LOGGED_BAD_LINES or n % 100 == 0:
                        self.log("bad line #%d from %s: %s" % (n, name, str(exc).replace("\n", " ")))
                    continue
                self.detections[name] += len(got)
                dets.extend(got)
        dets.sort(key=corrmod._order)  # pylint: disable=protected-access
        return dets

    def step(self, now=None, extra=()):
        """Read, feed (with ``extra`` detections, e.g. agent_down from Prometheus), tick, write.
        Returns the case events written in this round."""
        now = self.clock() if now is None else now
        closed = []
        dets = self.read()
        if extra:
            dets = sorted(list(dets) + list(extra), key=corrmod._order)  # pylint: disable=protected-access
        for det in dets:
            closed.extend(self._guarded(self.corr.feed, det, "detection %r" % (det,)))
        closed.extend(self._guarded(self.corr.tick, now, "tick %.3f" % now))
        events = self._diff(closed, now)
        self._write_snapshot(now, force=bool(events))
        return events

    def _guarded(self, call, arg, what):
        """An engine error (a defect: the input was checked) is counted (``engine_errors``) and logged with its
        traceback; the process and the next rounds go on, so one defect never stops correlation."""
        try:
            return call(arg)
        except Exception as exc:  # pylint: disable=broad-except
            import traceback  # pylint: disable=import-outside-toplevel
            self.engine_errors += 1
            if self.engine_errors <= LOGGED_BAD_LINES or self.engine_errors % 100 == 0:
                self.log("correlation error #%d on %s: %s: %s" % (self.engine_errors, what, type(exc).__name__,
                                                                  traceback.format_exc().replace("\n", " | ")))
            return []

    def _dict(self, case):
        return corrmod.case_dict(case, self.index, self.max_listed)

    def _diff(self, closed, now):
        events = []
        current = dict((c.id, c) for c in self.corr.open_cases())
        closed_ids = set()
        for case in closed:
            d = self._dict(case)
            if case.id not in self.known:
                events.extend(self._write(d, "open"))
            closed_ids.add(case.id)
            self.known.pop(case.id, None)
            self.closed[case.id] = d
            events.extend(self._write(d, "closed"))
        for cid in sorted(current, key=lambda i: (current[i].start, i)):
            d = self._dict(current[cid])
            sig = _signature(d)
            have = self.known.get(cid)
            if have is None:
                events.extend(self._write(d, "open"))
            elif have[0] != sig:
                events.extend(self._write(d, "updated"))
            self.known[cid] = (sig, current[cid])
        for cid in sorted(set(self.known) - set(current) - closed_ids):
            # absorbed by a wider case: it ends here, its detections live on in the wider one
            case = self.known.pop(cid)[1]
            wider = sorted(i for i, c in current.items() if cid in c.absorbed)
            d = dict(self._dict(case), status="closed", end=case.last, closed_at=now,
                     absorbed_into=wider[0] if wider else None)
            self.closed[cid] = d
            events.extend(self._write(d, "closed"))
        for cid in [i for i, d in self.closed.items() if (d.get("closed_at") or 0) < now - self.recent]:
            del self.closed[cid]
        if events:
            self.out.flush()
        return events

    def _write(self, d, state):
        event = corrmod.case_event(d, state)
        if event is None:
            return []
        self.out.write(json.dumps(event, sort_keys=True) + "\n")
        self.lines_written += 1
        return [event]

    def current(self, now):
        """The current cases document (what the snapshot file holds)."""
        open_cases = sorted((self._dict(c) for c in self.corr.open_cases()), key=lambda d: (d["start"], d["id"]))
        closed = sorted(self.closed.values(), key=lambda d: (-(d.get("closed_at") or 0), d["id"]))
        sources = {}
        for name, tail in self.tails.items():
            sources[name] = dict(tail.stats, path=tail.path, present=tail.present, error=tail.error,
                                 bad_lines=self.bad[name], detections=self.detections[name])
        return {"schema": SCHEMA_VERSION, "updated_at": round(now, 3), "started_at": round(self.started_at, 3),
                "pid": os.getpid(), "case_file": self.case_file, "case_lines_written": self.lines_written,
                "recent_s": self.recent, "open": open_cases, "closed": closed,
                "stats": dict(self.corr.stats), "sources": sources, "agent_poll_errors": self.agent_errors,
                "engine_errors": self.engine_errors}

    def _write_snapshot(self, now, force=False):
        doc = self.current(now)
        body = json.dumps(dict(doc, updated_at=None), sort_keys=True)
        if not force and body == self._last_snapshot and self.last_written is not None \
                and now - self.last_written < self.heartbeat:
            return False
        atomic_write(self.snapshot_path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        self._last_snapshot = body
        self.last_written = now
        return True

    def close(self, now=None):
        """Flush and close the case file, write the snapshot a last time, close the tails."""
        now = self.clock() if now is None else now
        try:
            self.out.flush()
            self._write_snapshot(now, force=True)
        finally:
            self.out.close()
            for tail in self.tails.values():
                tail.close()


# -- the program -------------------------------------------------------------------------------
def _query_agent_down(url, now, timeout=3.0):
    """GET Prometheus's ``fabric_monitor:agent_down`` (http.client: the program runs on a bare python3)."""
    import http.client  # pylint: disable=import-outside-toplevel
    import urllib.parse  # pylint: disable=import-outside-toplevel
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("--prometheus %r is not an http(s) URL" % (url,))
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", "%s/api/v1/query?%s" % (parts.path.rstrip("/"), urllib.parse.urlencode(
            {"query": "fabric_monitor:agent_down"})))
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise ValueError("HTTP %d: %s" % (answer.status, body[:200]))
        return agent_down_detections(json.loads(body.decode("utf-8")), now)
    finally:
        conn.close()


def parse_args(argv=None):
    import argparse  # pylint: disable=import-outside-toplevel
    p = argparse.ArgumentParser(prog="netscale-case-correlator", description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--topology", required=True,
                   help="the plan directory (intended/plan) or a JSON file {racks, spines} in its data form")
    p.add_argument("--events", action="append", default=[], metavar="NAME=PATH",
                   help="an agent's events file (repeat for every host); NAME labels it in the snapshot")
    p.add_argument("--case-file", required=True, help="the case file (JSON lines, appended)")
    p.add_argument("--snapshot", required=True, help="the current cases (JSON, written atomically)")
    p.add_argument("--interval", type=float, default=DEFAULTS["interval"], help="seconds between two rounds")
    p.add_argument("--heartbeat", type=float, default=DEFAULTS["heartbeat"],
                   help="the snapshot is rewritten at least this often (its updated_at)")
    p.add_argument("--recent", type=float, default=DEFAULTS["recent"], help="closed cases kept this many seconds")
    p.add_argument("--start-at", choices=("end", "beginning"), default=DEFAULTS["start_at"])
    p.add_argument("--options", default="{}", help="Correlator options as JSON (docs/operations.md)")
    p.add_argument("--prometheus", default="", help="Prometheus URL: its fabric_monitor:agent_down is fed as agent_down")
    p.add_argument("--agent-poll", type=float, default=DEFAULTS["agent_poll"])
    p.add_argument("--exit-after", type=float, default=0.0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)

    def log(msg):
        sys.stdout.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), msg))
        sys.stdout.flush()
    try:
        problems = []
        sources = {}
        for item in args.events:
            name, sep, path = item.partition("=")
            if not sep:
                name, path = os.path.basename(os.path.dirname(item)) or item, item
            if not path or name in sources:
                problems.append(InputProblem("--events", item, "expected NAME=PATH with a unique NAME",
                                             "e.g. --events r1-h1=/var/log/netscale-multinic/fabric-monitor-events.jsonl"))
            sources[name] = path
        if args.interval <= 0 or args.interval > 60:
            problems.append(InputProblem("--interval", args.interval, "expected 0 < seconds <= 60", "default: 2"))
        try:
            options = json.loads(args.options)
            corrmod.check_options(options)
        except (ValueError, corrmod.CorrelationError) as exc:
            problems.append(InputProblem("--options", args.options, str(exc).replace("\n", " "), "see docs/operations.md"))
            options = {}
        if problems:
            raise LiveError(problems)
        live = Live(load_index(args.topology), sources, args.case_file, args.snapshot, options, recent=args.recent,
                    heartbeat=args.heartbeat, start_at=args.start_at, log=log)
    except (LiveError, corrmod.CorrelationError) as exc:
        sys.stderr.write("%s\n" % exc)
        return 2
    stop = []

    def on_signal(signum, _frame):
        stop.append(signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log("correlating %d sources into %s (snapshot %s)" % (len(sources), args.case_file, args.snapshot))
    next_poll = 0.0
    t_end = time.monotonic() + args.exit_after if args.exit_after > 0 else None
    try:
        while not stop:
            t0 = time.monotonic()
            now = time.time()
            extra = []
            if args.prometheus and t0 >= next_poll:
                next_poll = t0 + args.agent_poll
                try:
                    extra = _query_agent_down(args.prometheus, now)
                except Exception as exc:  # pylint: disable=broad-except
                    live.agent_errors += 1
                    if live.agent_errors <= LOGGED_BAD_LINES or live.agent_errors % 100 == 0:
                        log("agent_down from %s: %s (#%d)" % (args.prometheus, exc, live.agent_errors))
            try:
                for event in live.step(now, extra):
                    case = event["case"]
                    log("case %s %s: %s" % (case["state"], case["id"], case["root_cause"]))
            except (OSError, ValueError) as exc:
                # the case file or the current cases cannot be written (disk full...): said, retried next round
                log("round failed: %s" % exc)
            if t_end is not None and time.monotonic() >= t_end:
                break
            # bounded wait; a signal ends it early (the handler runs, the loop sees ``stop``)
            time.sleep(max(0.05, args.interval - (time.monotonic() - t0)))
    finally:
        live.close()
        log("stopped (%s): %d case lines written" % (
            "signal %d" % stop[0] if stop else "exit", live.lines_written))
    return 0
