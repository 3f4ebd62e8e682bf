# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""netscale.multinic fabric monitoring agent (installed by the fabric_monitor role, run by systemd).

Shipped to hosts as ``/usr/lib/netscale-multinic/netscale-fabric-monitor.py``, one file bundled from
this module and its imports (``scripts/build-host-programs.py``; the hosts have no Ansible).

One process per host:

* active (:mod:`.probe`, :mod:`.pinglist`): every ``interval`` seconds, a probe from every NIC to
  every target of the pinglist (within the ``max_pps`` budget), each probe pinned to its NIC; a
  responder on every NIC answers the probes of the other hosts. Loss and RTT per (NIC, target).
  A target whose probes were all lost on every NIC for ``HOLD_ROUNDS`` rounds, while the same NICs got
  answers from other targets, is *unreachable* (its host, its agent or all of its NICs are down): those probes are
  counted apart (``fabric_monitor_probes_unreachable_total``), not as path loss of this host's NICs;
* passive (:mod:`.passive`): NIC counters, the NIC watcher's egress set, the sidecars' BGP sessions,
  the BFD responders' sessions, the datapath's spoof counters, every ``passive_interval`` seconds;
* exports Prometheus metrics (:mod:`.exporter`) on ``metrics_address:metrics_port`` (and optionally
  a node_exporter textfile) and appends events (JSON lines) to ``events_file``.

Every wait is bounded: sockets are non-blocking, the loop sleeps at most 50 ms, a probe is resolved
(answered or lost) ``timeout`` seconds after it was sent, passive reads have deadlines.

Event (one JSON object per line; the detection format of docs/operations.md):
``{"time", "source": "fabric_monitor", "kind", "scope", "host", "rack", "zone", "nic", "slot",
"target", "target_host", "value", "detail"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import threading
import time

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import exporter
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import passive
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import pinglist as pl
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import probe
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

SOURCE = "fabric_monitor"
# Windows a target silent on every NIC is held before its lost probes are counted (close_round).
HOLD_ROUNDS = 3
DEFAULTS = {
    "interval": 1.0,            # seconds between rounds (each pair probed once a round)
    "timeout": 1.0,             # a probe unanswered after this is lost
    "max_pps": 100,             # probe budget of the host (probes a second)
    "port": probe.PORT,
    "metrics_address": "0.0.0.0",
    "metrics_port": 9581,
    "textfile": "",             # node_exporter textfile (optional)
    "events_file": "/var/log/netscale-multinic/fabric-monitor-events.jsonl",
    "events_max_bytes": 16 * 1024 * 1024,
    "event_interval": 10.0,     # probe-loss events: one per (NIC, target) per window with loss
    "loss_event_ratio": 0.0,    # ... when its loss over the window is above this
    "passive_interval": 2.0,
    "egress_state_file": passive.EGRESS_STATE_FILE,
    "sidecar_dir": passive.SIDECAR_DIR,
    "bfd_dir": passive.BFD_DIR,
    "datapath_state_dir": "/var/lib/netscale-multinic",
    "bpffs_root": "/sys/fs/bpf",
    "sys_class_net": "/sys/class/net",
}
_RANGES = (("interval", 0.05, 3600.0), ("timeout", 0.01, 60.0), ("max_pps", 1, 100000), ("port", 1, 65535),
           ("metrics_port", 1, 65535), ("event_interval", 0.1, 86400.0), ("loss_event_ratio", 0.0, 1.0),
           ("passive_interval", 0.1, 3600.0), ("events_max_bytes", 4096, 1 << 40))


class ConfigError(ValueError):
    pass


def check_config(cfg, prefix="fabric_monitor"):
    """Defaults filled in and ranges checked; raises ConfigError naming the field, value and fix."""
    out = dict(DEFAULTS)
    unknown = sorted(set(cfg) - set(DEFAULTS) - {"pinglist"})
    if unknown:
        raise ConfigError("%s: unknown settings %s; fix: use only %s" % (prefix, unknown, sorted(DEFAULTS)))
    out.update(cfg)
    for key, low, high in _RANGES:
        try:
            value = float(out[key])
        except (TypeError, ValueError):
            value = None
        if value is None or not low <= value <= high:
            raise ConfigError("%s_%s: %r; fix: use a number from %s to %s" % (prefix, key, out[key], low, high))
    if float(out["timeout"]) > 10 * float(out["interval"]):
        raise ConfigError("%s_timeout: %r is more than 10 x the interval %r; fix: lower it (outstanding probes "
                          "are bounded by timeout x rate)" % (prefix, out["timeout"], out["interval"]))
    return out


class Agent(object):
    def __init__(self, cfg, pinglist, clock=time.monotonic, wall=time.time, log=None):
        self.cfg = cfg
        self.pl = pinglist
        self.clock = clock
        self.wall = wall
        self._log = log or (lambda m: sys.stdout.write(m + "\n") or sys.stdout.flush())
        self.base = {"host": pinglist["host"], "rack": pinglist["rack"], "zone": pinglist["zone"]}
        self.ledger = probe.Ledger(timeout=float(cfg["timeout"]),
                                   max_outstanding=int(max(1024, float(cfg["max_pps"]) * float(cfg["timeout"]) * 4)))
        self.token = int.from_bytes(os.urandom(4), "big")
        self.lock = threading.Lock()
        self.counters = {}          # (nic, target) -> {"sent", "answered", "lost", "unreachable", "rtt_sum"}
        self.last = {}              # (nic, target) -> {"loss_ratio", "rtt_max"}
        self.event_window = {}      # (nic, target) -> [answered, lost, target hosts]
        self.passive = None
        self.passive_counts = {"egress": {}, "bgp": {}, "bfd": {}}
        self.events = 0
        self.heartbeat = wall()
        self.probers = {}           # nic name -> socket
        self.responders = {}        # nic name -> socket
        self.sock_errors = {}       # nic name -> last error (logged once)
        self.sock_retry = 0.0
        self.round_no = 0
        self.queue = []             # [(due, nic, target, target host, address)]
        self.unreachable = set()    # targets in the unreachable state (one event when they enter it)
        self.pending_unreachable = []
        self.held = {}              # target -> windows [(nic, stats)] of a silent target, not yet counted
        self.recent_answers = []    # the last HOLD_ROUNDS windows' {nic: targets that answered}
        self.stop = threading.Event()

    # ------------------------------------------------------------------ events
    def log(self, msg):
        self._log(msg)

    def emit(self, kind, scope, nic=None, slot=None, target=None, target_host=None, value=None, detail=""):
        ev = {"time": round(self.wall(), 3), "source": SOURCE, "kind": kind, "scope": scope,
              "host": self.base["host"], "rack": self.base["rack"], "zone": self.base["zone"], "nic": nic,
              "slot": slot, "target": target, "target_host": target_host, "value": value, "detail": detail}
        line = json.dumps(ev, sort_keys=True) + "\n"
        path = self.cfg["events_file"]
        if path:
            try:
                if os.path.exists(path) and os.path.getsize(path) + len(line) > int(self.cfg["events_max_bytes"]):
                    os.replace(path, path + ".1")
                d = os.path.dirname(path)
                if d and not os.path.isdir(d):
                    os.makedirs(d, exist_ok=True)
                with open(path, "a") as f:
                    f.write(line)
            except (IOError, OSError) as e:
                self.log("events: %s: %s" % (path, e))
        with self.lock:
            self.events += 1
        return ev

    # ------------------------------------------------------------------ sockets
    def open_sockets(self, now):
        if now < self.sock_retry:
            return
        self.sock_retry = now + 5.0
        for nic in self.pl["nics"]:
            name = nic["name"]
            for table, port in ((self.probers, 0), (self.responders, int(self.cfg["port"]))):
                if name in table:
                    continue
                try:
                    table[name] = probe.nic_socket(name, nic["address"], port)
                    self.sock_errors.pop((name, port), None)
                except OSError as e:
                    if (name, port) not in self.sock_errors:
                        self.log("socket on %s (%s port %d): %s (retrying every 5 s)" % (name, nic["address"], port, e))
                    self.sock_errors[(name, port)] = str(e)

    def close(self):
        for table in (self.probers, self.responders):
            for s in table.values():
                s.close()
            table.clear()

    # ------------------------------------------------------------------ probing
    def pairs(self, round_no):
        return probe.schedule(pl.probe_pairs(self.pl, round_no), float(self.cfg["interval"]),
                              float(self.cfg["max_pps"]), round_no)

    def plan_round(self, start):
        todo = self.pairs(self.round_no)
        self.round_no += 1
        step = float(self.cfg["interval"]) / max(1, len(todo))
        self.queue.extend((start + i * step, nic["name"], target, host, addr)
                          for i, (nic, target, host, addr) in enumerate(todo))

    def _counter(self, key):
        c = self.counters.get(key)
        if c is None:
            c = self.counters[key] = {"sent": 0, "answered": 0, "lost": 0, "unreachable": 0, "rtt_sum": 0.0}
        return c

    def send_due(self, now):
        while self.queue and self.queue[0][0] <= now:
            dummy, nic, target, host, addr = self.queue.pop(0)
            key = (nic, target)
            seq = self.ledger.sent(key, now)
            self.event_window.setdefault(key, [0, 0, set()])[2].add(host)
            s = self.probers.get(nic)
            if s is None:
                continue   # no socket on this NIC: the probe times out, the path is unusable
            try:
                s.sendto(probe.encode(probe.REQUEST, self.token, seq), (addr, int(self.cfg["port"])))
            except OSError:
                pass       # ENETUNREACH, ENETDOWN...: lost, like a probe dropped on the way

    def receive(self, sock, now):
        while True:
            try:
                data = sock.recv(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            d = probe.decode(data)
            if d is None or d[0] != probe.REPLY or d[1] != self.token:
                continue
            self.ledger.reply(d[2], now)

    def close_round(self):
        """Fold the probes resolved since the last call into the counters, telling path loss from an
        unreachable target (see the module docstring).

        A target that answered on no NIC in this window is held, not counted, for up to ``HOLD_ROUNDS``
        windows: probes are spread over the interval, so one window may hold no answer from any other
        target on a NIC even when that NIC works. The held windows become *unreachable* once the target
        stayed silent for ``HOLD_ROUNDS`` windows while every NIC that probed it had answers from other
        targets in the last ``HOLD_ROUNDS`` windows; they become path loss as soon as the target answers
        again on any NIC (a short outage of the target is counted as loss), or after ``HOLD_ROUNDS``
        windows when a NIC that lost it had no other answer (this host's NIC is the suspect)."""
        window = self.ledger.take_window()
        answered = {}               # nic -> targets that answered it in this window
        by_target = {}
        for (nic, target), s in window.items():
            if s.answered:
                answered.setdefault(nic, set()).add(target)
            by_target.setdefault(target, []).append((nic, s))
        self.recent_answers.append(answered)
        del self.recent_answers[:-HOLD_ROUNDS]

        def answered_by_other(nic, target):
            return any(t != target for seen in self.recent_answers for t in seen.get(nic, ()))

        with self.lock:
            for target, items in sorted(by_target.items()):
                hosts = set()
                for nic, s in items:
                    key = (nic, target)
                    c = self._counter(key)
                    c["sent"] += s.answered + s.lost
                    c["answered"] += s.answered
                    c["rtt_sum"] += s.rtt_sum
                    hosts |= self.event_window.setdefault(key, [0, 0, set()])[2]
                if not any(s.answered or s.lost for dummy, s in items):
                    continue            # nothing toward it resolved in this window: no evidence, no decision
                dead = not any(s.answered for dummy, s in items)
                held = self.held.pop(target, []) + [items]
                others = all(answered_by_other(nic, target) for w in held for nic, dummy in w)
                if dead and len(held) < HOLD_ROUNDS and target not in self.unreachable:
                    self.held[target] = held          # not decided yet
                elif dead and others:
                    for w in held:
                        self._count_lost(target, w, unreachable=True)
                    if target not in self.unreachable:
                        self.unreachable.add(target)
                        self.pending_unreachable.append((target, ",".join(sorted(hosts))))
                else:
                    self.unreachable.discard(target)
                    for w in held:
                        self._count_lost(target, w, unreachable=False)
        while self.pending_unreachable:
            target, hosts = self.pending_unreachable.pop(0)
            self.emit("target_unreachable", "target", target=target, target_host=hosts,
                      detail="no answer on any NIC from %s for %d rounds while other targets answered: its host, its "
                             "agent or every NIC of it is down (counted apart, not as path loss)" % (target, HOLD_ROUNDS))

    def _count_lost(self, target, items, unreachable):
        """Count one window's lost probes to ``target`` as path loss or as an unreachable target's."""
        for nic, s in items:
            key = (nic, target)
            c = self._counter(key)
            if unreachable:
                c["unreachable"] += s.lost
            else:
                c["lost"] += s.lost
                ew = self.event_window.setdefault(key, [0, 0, set()])
                ew[0] += s.answered
                ew[1] += s.lost
                self.last[key] = {"loss_ratio": s.loss_ratio(), "rtt_max": s.rtt_max}

    def loss_events(self):
        with self.lock:
            window, self.event_window = self.event_window, {}
        for (nic, target), (answered, lost, hosts) in sorted(window.items()):
            done = answered + lost
            if not lost or not done:
                continue
            ratio = float(lost) / done
            if ratio > float(self.cfg["loss_event_ratio"]):
                self.emit("probe_loss", "path", nic=nic, target=target, target_host=",".join(sorted(hosts)),
                          value=round(ratio, 4),
                          detail="%d of %d probes from %s to %s lost in %.0f s" % (lost, done, nic, target,
                                                                                   float(self.cfg["event_interval"])))

    # ------------------------------------------------------------------ passive
    def collect(self):
        names = [n["name"] for n in self.pl["nics"]]
        return {"nics": passive.read_nic_counters(names, self.cfg["sys_class_net"]),
                "egress": passive.read_egress(self.cfg["egress_state_file"], self.wall()),
                "bgp": passive.read_sidecars(self.cfg["sidecar_dir"], self.pl["nics"]),
                "bfd": passive.read_bfd(self.pl["nics"], self.cfg["bfd_dir"]),
                "spoof": passive.read_spoof(self.cfg["datapath_state_dir"], self.cfg["bpffs_root"])}

    def passive_step(self):
        snap = self.collect()
        evs = passive.changes(self.passive, snap)
        with self.lock:
            for kind, nic, dummy, dummy2, dummy3 in evs:
                if kind.startswith("egress_"):
                    self.passive_counts["egress"][nic] = self.passive_counts["egress"].get(nic, 0) + 1
                elif kind.startswith("bgp_") or kind.startswith("bfd_"):
                    table = self.passive_counts[kind[:3]]
                    table[nic] = table.get(nic, 0) + 1
            self.passive = snap
        for kind, nic, slot, value, detail in evs:
            self.emit(kind, "nic" if nic else "host", nic=nic, slot=slot, value=value, detail=detail)

    def passive_loop(self):
        while not self.stop.is_set():
            try:
                self.passive_step()
            except Exception as e:  # pylint: disable=broad-except  # a bad read must not stop the agent
                self.log("passive: %s: %s" % (type(e).__name__, e))
            self.stop.wait(float(self.cfg["passive_interval"]))

    # ------------------------------------------------------------------ metrics
    def samples(self):
        out = []
        b = self.base
        with self.lock:
            for (nic, target), c in sorted(self.counters.items()):
                lab = dict(b, nic=nic, target=target)
                out += [("fabric_monitor_probes_sent_total", lab, c["sent"]),
                        ("fabric_monitor_probes_answered_total", lab, c["answered"]),
                        ("fabric_monitor_probes_lost_total", lab, c["lost"]),
                        ("fabric_monitor_probes_unreachable_total", lab, c["unreachable"]),
                        ("fabric_monitor_probe_rtt_seconds_total", lab, c["rtt_sum"])]
                last = self.last.get((nic, target))
                if last:
                    out += [("fabric_monitor_probe_loss_ratio", lab, last["loss_ratio"]),
                            ("fabric_monitor_probe_rtt_max_seconds", lab, last["rtt_max"])]
            snap = self.passive
            if snap:
                bgp = passive.sessions_per_nic(snap["bgp"], snap["nics"])
                bfd = passive.sessions_per_nic(snap["bfd"], snap["nics"])
                for nic, c in sorted(snap["nics"].items()):
                    lab = dict(b, nic=nic)
                    out.append(("fabric_monitor_nic_up", lab, 1 if c.get("present") and c.get("carrier") == 1 else 0))
                    for name, key in (("carrier_changes_total", "carrier_changes"),
                                      ("receive_errors_total", "rx_errors"), ("transmit_errors_total", "tx_errors"),
                                      ("receive_drops_total", "rx_dropped"), ("transmit_drops_total", "tx_dropped")):
                        if c.get(key) is not None:
                            out.append(("fabric_monitor_nic_" + name, lab, c[key]))
                    out += [("fabric_monitor_nic_egress_out", lab, 1 if nic in snap["egress"]["out"] else 0),
                            ("fabric_monitor_nic_egress_transitions_total", lab,
                             self.passive_counts["egress"].get(nic, 0)),
                            ("fabric_monitor_bgp_sessions", lab, bgp[nic][1]),
                            ("fabric_monitor_bgp_sessions_up", lab, bgp[nic][0]),
                            ("fabric_monitor_bgp_session_changes_total", lab, self.passive_counts["bgp"].get(nic, 0)),
                            ("fabric_monitor_bfd_sessions", lab, bfd[nic][1]),
                            ("fabric_monitor_bfd_sessions_up", lab, bfd[nic][0]),
                            ("fabric_monitor_bfd_session_changes_total", lab, self.passive_counts["bfd"].get(nic, 0))]
                out.append(("fabric_monitor_spoofed_packets_total", dict(b), sum(snap["spoof"].values())))
            out += [("fabric_monitor_probe_rate_limit_per_second", dict(b), float(self.cfg["max_pps"])),
                    ("fabric_monitor_probe_pairs", dict(b), len(pl.probe_pairs(self.pl, 0))),
                    ("fabric_monitor_events_total", dict(b), self.events),
                    ("fabric_monitor_agent_heartbeat_timestamp_seconds", dict(b), round(self.heartbeat, 3))]
        return out

    def metrics_text(self):
        return exporter.render(self.samples())

    # ------------------------------------------------------------------ loop
    def step(self, now, wait=0.0):
        """One pass of the probe loop: sockets, due probes, replies, expiry. ``wait``: the longest the
        select may block (bounded by the next due probe)."""
        self.open_sockets(now)
        self.send_due(now)
        self.ledger.expire(now)
        socks = list(self.probers.values()) + list(self.responders.values())
        if self.queue:
            wait = max(0.0, min(wait, self.queue[0][0] - now))
        try:
            ready = select.select(socks, [], [], wait)[0] if socks else []
        except (OSError, ValueError):
            ready = []
        if not socks and wait:
            time.sleep(wait)
        responders = set(self.responders.values())
        now = self.clock()
        for s in ready:
            if s in responders:
                probe.answer(s)
            else:
                self.receive(s, now)

    def run(self):
        interval = float(self.cfg["interval"])
        # a start is not a detection (docs/operations.md reads every event as one): logged, not emitted
        self.log("fabric monitor started: %d NICs, %d targets, %d pairs, budget %s probes/s"
                 % (len(self.pl["nics"]), len(self.pl["targets"]), len(pl.probe_pairs(self.pl, 0)), self.cfg["max_pps"]))
        threading.Thread(target=self.passive_loop, name="passive", daemon=True).start()
        now = self.clock()
        next_round = now
        next_close = now + interval + float(self.cfg["timeout"])
        next_events = now + float(self.cfg["event_interval"])
        while not self.stop.is_set():
            now = self.clock()
            if now >= next_round:
                if now - next_round > interval:   # we fell behind (suspended): skip, do not burst
                    next_round = now
                self.plan_round(next_round)
                next_round += interval
            if now >= next_close:
                self.ledger.expire(now)
                self.close_round()
                next_close += interval
                self.heartbeat = self.wall()
                if self.cfg["textfile"]:
                    try:
                        atomic_write(self.cfg["textfile"], self.metrics_text(), mode=0o644)
                    except (IOError, OSError) as e:
                        self.log("textfile: %s" % e)
            if now >= next_events:
                self.loss_events()
                next_events += float(self.cfg["event_interval"])
            self.step(now, wait=min(0.05, max(0.0, next_round - now)))
        self.close()


class Responder(object):
    """Responder only (storage and other targets without a pinglist): answers probes on ``binds``
    [(device or "", address)]."""

    def __init__(self, binds, port):
        self.socks = [probe.nic_socket(dev, addr, port) for dev, addr in binds]
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for s in select.select(self.socks, [], [], 0.2)[0]:
                probe.answer(s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--config", default="/etc/netscale-multinic/fabric-monitor.json",
                    help="agent settings and pinglist (JSON, written by the fabric_monitor role)")
    ap.add_argument("--responder-only", action="append", default=[], metavar="[DEV%]ADDRESS",
                    help="only answer probes on this address (repeat); no pinglist, no metrics")
    ap.add_argument("--port", type=int, default=probe.PORT)
    ap.add_argument("--check", action="store_true", help="check the config and print the probe cost, then exit")
    args = ap.parse_args(argv)
    if args.responder_only:
        binds = [tuple(b.split("%", 1)) if "%" in b else ("", b) for b in args.responder_only]
        resp = Responder(binds, args.port)
        signal.signal(signal.SIGTERM, lambda *a: resp.stop.set())
        sys.stdout.write("fabric monitor responder on %s port %d\n" % (", ".join(args.responder_only), args.port))
        sys.stdout.flush()
        resp.run()
        return 0
    try:
        with open(args.config) as f:
            raw = json.load(f)
        cfg = check_config(raw.get("settings") or {})
        plist = raw["pinglist"]
    except (IOError, OSError, ValueError, KeyError) as e:
        sys.stderr.write("fabric monitor: %s: %s\n" % (args.config, e))
        return 2
    pairs = len(pl.probe_pairs(plist, 0))
    c = probe.cost(pairs, float(cfg["interval"]), float(cfg["max_pps"]), plist.get("family", "ipv6"))
    if args.check:
        sys.stdout.write(json.dumps(c, sort_keys=True) + "\n")
        return 0
    agent = Agent(cfg, plist)
    signal.signal(signal.SIGTERM, lambda *a: agent.stop.set())
    signal.signal(signal.SIGINT, lambda *a: agent.stop.set())
    server = exporter.serve(cfg["metrics_address"], int(cfg["metrics_port"]), agent.metrics_text)
    agent.log("fabric monitor: %s, %d pairs, %.1f probes/s (%.0f B/s each way), metrics on %s:%s"
              % (plist["host"], pairs, c["probes_per_second"], c["host_bytes_per_second"],
                 cfg["metrics_address"], cfg["metrics_port"]))
    try:
        agent.run()
    finally:
        server.shutdown()
    return 0
