# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""VipInjector sidecar helper: the process ExaBGP runs as its ``process`` (one per task slot).

Shipped to hosts as ``/opt/netscale-vipinjector/bin/vipinjector-helper``, a single file bundled
from this module and its imports (``scripts/build-host-programs.py``; the hosts have no Ansible). The
decisions are in :mod:`.guard` (pure); this module is the I/O around them (see docs/vipinjector.md):

* announces the instance's task IP (/32 and /128) on every BGP session (one per NIC) with that
  NIC's container address as next hop, only while the workload health check passes (rise/fall,
  interval), no drain file exists and that NIC's path check passes;
* withdraws on a drain file, on health failure, on SIGTERM, and per session on a path failure
  (``neighbor ADDR withdraw route ...``) or when the host's NIC watcher has taken that session's NIC
  out of the egress set (its published state: re-read at once when inotify reports a change of it
  (:class:`EgressWatch`), and polled every ``egress_state.poll`` s as the fallback - every
  ``EGRESS_RECHECK`` s while the wake-up runs; a state older than ``stale_after`` s counts as nothing out);
* reads every line ExaBGP writes back (``done``/``error``/``shutdown``, neighbor state changes)
  on a separate thread so the pipe never blocks;
* runs the guard over the ExaBGP configuration at start (``--check-config`` before ExaBGP starts);
* writes a JSON status file and a Prometheus text-file metric;
* watches ExaBGP (``watchdog``): every command it sends must be acknowledged within ``timeout``
  seconds, and while idle it sends a harmless comment command (``#``, answered ``done``) every
  ``interval`` seconds. When an ack is overdue ExaBGP is hung (SIGSTOP, a stuck reactor): the helper
  SIGKILLs it, the kernel closes its BGP sessions (the ToR drops the routes at once) and systemd's
  ``Restart=always`` brings the instance back.
"""

from __future__ import annotations

import collections
import ipaddress
import json
import os
import queue
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector.guard import (
    Allocation, GuardError, HelperCore, config_findings, egress_out, prometheus_text)
from ansible_collections.netscale.multinic.plugins.module_utils import drain_marker as marker
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write


# --------------------------------------------------------------------------------------------
# Probes (I/O)
# --------------------------------------------------------------------------------------------
def probe_health(spec, timeout_default=1.0):
    """Run the workload health check. Returns (ok, detail)."""
    kind = (spec or {}).get("type", "none")
    timeout = float(spec.get("timeout", timeout_default)) if spec else timeout_default
    try:
        if kind == "none":
            return True, "no health check configured"
        if kind == "command":
            argv = spec["command"]
            if isinstance(argv, str):
                argv = shlex.split(argv)
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=timeout, check=False)
            return r.returncode == 0, "command exit %d" % r.returncode
        if kind == "tcp":
            with socket.create_connection((spec["host"], int(spec["port"])), timeout=timeout):
                return True, "tcp %s:%s connected" % (spec["host"], spec["port"])
        if kind == "http":
            code = _http_status(spec["url"], timeout)
            expect = spec.get("expect_status")
            ok = (code in expect) if expect else (200 <= code < 400)
            return ok, "http %s -> %d" % (spec["url"], code)
        return False, "unknown health check type %r" % kind
    except subprocess.TimeoutExpired:
        return False, "timed out after %.1fs" % timeout
    except Exception as exc:  # pylint: disable=broad-except
        # fails closed: a check that cannot run is a failing check
        return False, "%s: %s" % (type(exc).__name__, exc)


def _http_status(url, timeout):
    """Status code of a GET on a local health endpoint. http.client directly: a workload probe must
    not go through the proxies urllib would take from the environment."""
    import http.client
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", (parts.path or "/") + ("?" + parts.query if parts.query else ""))
        return conn.getresponse().status
    finally:
        conn.close()


def _ip_bin():
    for cand in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"):
        if os.access(cand, os.X_OK):
            return cand
    return "ip"


def _ip_json(args, timeout=2.0):
    r = subprocess.run([_ip_bin(), "-j"] + args, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=timeout, check=False, text=True)
    if r.returncode != 0:
        raise OSError("ip %s: %s" % (" ".join(args), r.stderr.strip() or r.returncode))
    return json.loads(r.stdout or "[]")


def _ip_batch(commands, timeout=2.0):
    """Run ``ip -j -force -batch -`` over ``commands`` (one process for all of them). Returns one entry per
    command: its parsed JSON output, or an ``OSError`` naming why it failed (``-force`` goes on after a failed
    command; ip reports it on stderr as ``Command failed -:LINE`` and prints nothing for it on stdout)."""
    r = subprocess.run([_ip_bin(), "-j", "-force", "-batch", "-"], input="".join(c + "\n" for c in commands),
                       capture_output=True, timeout=timeout, check=False, text=True)
    failed, said = {}, []
    for line in r.stderr.splitlines():
        m = re.match(r"Command failed -:(\d+)", line.strip())
        if m:
            failed[int(m.group(1))] = "; ".join(said) or "failed"
            said = []
        elif line.strip():
            said.append(line.strip())
    if r.returncode != 0 and not failed:
        raise OSError("ip -batch: %s" % (r.stderr.strip() or r.returncode))
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    if len(lines) != len(commands) - len(failed):
        raise OSError("ip -batch: %d outputs for %d commands (%d failed)" % (len(lines), len(commands), len(failed)))
    out, it = [], iter(lines)
    for n, cmd in enumerate(commands, 1):
        if n in failed:
            out.append(OSError("ip %s: %s" % (cmd, failed[n])))
        else:
            out.append(json.loads(next(it)))
    return out


def _route_path(local, peer, links, route, neighbours):
    """The ``route`` path check of one session, from the kernel's state read once for the round."""
    owner = None
    for link in links:
        for a in link.get("addr_info", []):
            if a.get("local") == local:
                owner = link
    if owner is None:
        return False, "local address %s is not configured" % local
    dev = owner["ifname"]
    flags = owner.get("flags", [])
    if "UP" not in flags or "NO-CARRIER" in flags or "LOWER_UP" not in flags:
        return False, "interface %s is down (%s)" % (dev, ",".join(flags))
    if isinstance(route, Exception):
        raise route
    if not route:
        return False, "no route to %s" % peer
    rdev = route[0].get("dev")
    if rdev != dev:
        return False, "route to %s from %s leaves via %s, not %s" % (peer, local, rdev, dev)
    gw = route[0].get("gateway", peer)
    for n in neighbours:
        if n.get("dst") == gw and n.get("dev") == dev and "FAILED" in n.get("state", []):
            return False, "neighbour %s on %s is FAILED" % (gw, dev)
    return True, "route via %s" % dev


def probe_paths(spec, sessions):
    """Per-NIC path checks of one round, ``{peer: (ok, detail)}`` for ``sessions`` (dicts of peer, local, nic).

    ``route`` (default): the interface holding the session's local address is up with carrier, the route to
    the peer from that address leaves through that interface, and the peer's (or the route's gateway's)
    neighbour entry there is not FAILED. The addresses, the neighbours and every session's route come from one
    ``ip -batch`` process per round: three ``ip`` processes per session and second cost a 4-NIC sidecar ~1.6 %
    of a core (bench/sidecar_idle_cpu.py). ``command``: argv with {peer} {local} {nic} substituted, per
    session. ``tcp``: connect to {peer}:port from the local address, per session. ``none``: always up.
    """
    kind = (spec or {}).get("type", "route")
    if kind != "route":
        return dict((str(s["peer"]), probe_path(spec, s)) for s in sessions)
    sessions = list(sessions)
    try:
        lookups = ["route get %s from %s" % (s["peer"], s["local"]) for s in sessions]
        res = _ip_batch(["addr show", "neigh show"] + lookups)
        for r in res[:2]:
            if isinstance(r, Exception):
                raise r
    except subprocess.TimeoutExpired:
        return dict((str(s["peer"]), (False, "timed out")) for s in sessions)
    except Exception as exc:  # pylint: disable=broad-except
        return dict((str(s["peer"]), (False, "%s: %s" % (type(exc).__name__, exc))) for s in sessions)
    out = {}
    for s, route in zip(sessions, res[2:]):
        try:
            out[str(s["peer"])] = _route_path(str(s["local"]), str(s["peer"]), res[0], route, res[1])
        except Exception as exc:  # pylint: disable=broad-except
            out[str(s["peer"])] = (False, "%s: %s" % (type(exc).__name__, exc))
    return out


def probe_path(spec, session):
    """Per-NIC path check of one session. Returns (ok, detail): the checks of :func:`probe_paths`."""
    kind = (spec or {}).get("type", "route")
    peer, local, nic = str(session["peer"]), str(session["local"]), session["nic"]
    timeout = float((spec or {}).get("timeout", 1.0))
    try:
        if kind == "none":
            return True, "no path check"
        if kind == "command":
            argv = spec["command"]
            if isinstance(argv, str):
                argv = shlex.split(argv)
            argv = [a.format(peer=peer, local=local, nic=nic) for a in argv]
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=timeout, check=False)
            return r.returncode == 0, "command exit %d" % r.returncode
        if kind == "tcp":
            fam = socket.AF_INET6 if ":" in peer else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_STREAM)
            try:
                s.settimeout(timeout)
                s.bind((local, 0))
                s.connect((peer, int(spec.get("port", 179))))
            finally:
                s.close()
            return True, "tcp connect ok"
        if kind == "route":
            return probe_paths(spec, [session])[peer]
        return False, "unknown path check type %r" % kind
    except subprocess.TimeoutExpired:
        return False, "timed out"
    except Exception as exc:  # pylint: disable=broad-except
        return False, "%s: %s" % (type(exc).__name__, exc)


# --------------------------------------------------------------------------------------------
# Wake-up on the egress state (inotify)
# --------------------------------------------------------------------------------------------
# <sys/inotify.h>
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)   # IN_CLOEXEC is O_CLOEXEC
EGRESS_WATCH_MASK = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM
# While the wake-up runs, a change of the file reaches the helper at once; the poll is then only what notices a
# state going stale (``stale_after``, 5 s by default: noticed 5-6 s after the watcher's last write), so it runs
# every second instead of every ``poll`` (0.05 s: 20 wake-ups a second of every idle sidecar).
EGRESS_RECHECK = 1.0
# struct inotify_event: int wd; uint32_t mask, cookie, len; char name[len] (NUL-padded, len may be 0)
_INOTIFY_EVENT = struct.Struct("=iIII")


def parse_inotify_events(buf):
    """The events of one ``read()`` of an inotify descriptor (there may be several):
    ``[(wd, mask, cookie, name)]``, ``name`` without its NUL padding, ``""`` for an event of the watched
    directory itself. The kernel returns whole events only; an incomplete tail is ignored."""
    events = []
    pos = 0
    head = _INOTIFY_EVENT.size
    while pos + head <= len(buf):
        wd, mask, cookie, length = _INOTIFY_EVENT.unpack_from(buf, pos)
        if pos + head + length > len(buf):
            break
        name = bytes(buf[pos + head:pos + head + length]).split(b"\0", 1)[0]
        events.append((wd, mask, cookie, os.fsdecode(name)))
        pos += head + length
    return events


def _inotify_libc():
    """libc's ``(inotify_init1, inotify_add_watch, inotify_rm_watch, get_errno)`` through ctypes.
    Raises OSError saying why they cannot be had (not Linux, no ctypes, no such symbols): the helper
    also runs its unit tests on other systems, and must never fail because of the wake-up."""
    if not sys.platform.startswith("linux"):
        raise OSError("not Linux (%s)" % sys.platform)
    try:
        import ctypes
    except Exception as exc:  # pylint: disable=broad-except
        # ImportError, or a MemoryError of a ctypes that cannot set itself up
        raise OSError("no ctypes (%s: %s)" % (type(exc).__name__, exc)) from exc
    libc = None
    for name in (None, "libc.so.6"):   # None: the symbols the interpreter already has (its libc)
        try:
            cand = ctypes.CDLL(name, use_errno=True)
        except Exception:  # pylint: disable=broad-except
            continue
        if hasattr(cand, "inotify_init1"):
            libc = cand
            break
    if libc is None:
        raise OSError("no inotify_init1 in libc")
    init1, add, rm = libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch
    init1.argtypes, init1.restype = [ctypes.c_int], ctypes.c_int
    add.argtypes, add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
    rm.argtypes, rm.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return init1, add, rm, ctypes.get_errno


class EgressWatch(object):
    """Wakes the helper as soon as the host NIC watcher rewrites its egress state.

    Linux inotify on the file's directory (the watcher replaces the file by a rename, so a watch on the
    file itself would follow the old inode): a daemon thread blocks on ``read()`` and, for each read that
    names the file (closed after writing, renamed in or out, created, deleted) or reports lost events
    (queue overflow), puts one ``("egress", None)`` on the helper's event queue; the main loop then calls
    :meth:`Helper.read_egress` at once. The poll stays: it is the fallback when inotify cannot be used
    (no ctypes or libc symbols, no directory yet, the inotify limits reached: one log line, nothing
    raised) and it is what notices a state going stale. A directory that appears after the start (the
    helper started before the NIC watcher first published, as at boot) is watched from the first poll
    that finds it (:meth:`retry`, once).
    """

    def __init__(self, path, events, log):
        self.path = path
        self.folder = os.path.dirname(path) or "."
        self.name = os.path.basename(path)
        self.events = events
        self.log = log
        self.fd = None
        self.wd = None
        self.thread = None
        self.closing = False
        self.retried = False
        self._rm = None
        self._lock = threading.Lock()

    def start(self, poll=None):
        """Set the watch up and start its thread. Returns True when the wake-up runs; False (logged
        once) when inotify cannot be used, the poll alone then follows the file."""
        fd = -1
        try:
            init1, add, rm, get_errno = _inotify_libc()
            fd = init1(IN_CLOEXEC)
            if fd < 0:
                err = get_errno()
                raise OSError(err, "inotify_init1: %s" % os.strerror(err))
            wd = add(fd, os.fsencode(self.folder), EGRESS_WATCH_MASK)
            if wd < 0:
                err = get_errno()
                raise OSError(err, "inotify_add_watch %s: %s" % (self.folder, os.strerror(err)))
            self.fd, self.wd, self._rm = fd, wd, rm
            thread = threading.Thread(target=self._run, name="egress-inotify", daemon=True)
            thread.start()
            self.thread = thread
        except Exception as exc:  # pylint: disable=broad-except
            if fd >= 0 and self.thread is None:
                self.fd = None
                os.close(fd)
            self.log("egress state: no inotify wake-up (%s); polling %s%s only" % (
                exc, self.path, "" if poll is None else " every %gs" % poll))
            return False
        return True

    def retry(self, poll=None):
        """Called at each poll: when the first start failed and the directory now exists, start once
        more (once only, so a lasting failure such as the inotify limits is logged once more at most).
        Returns True when the wake-up started now."""
        if self.thread is not None or self.retried or self.closing or not os.path.isdir(self.folder):
            return False
        self.retried = True
        if self.start(poll):
            self.log("egress state: %s appeared; inotify wake-up on" % self.folder)
            return True
        return False

    def _run(self):
        fd = self.fd
        try:
            while True:
                buf = os.read(fd, 65536)
                if not buf:
                    break
                wake = gone = False
                for dummy_wd, mask, dummy_cookie, name in parse_inotify_events(buf):
                    if mask & IN_IGNORED:      # watch removed: close(), or the directory went away
                        gone = True
                    elif mask & IN_Q_OVERFLOW:  # events were lost: re-read to be sure
                        wake = True
                    elif name == self.name:
                        wake = True
                if gone and not self.closing:
                    self.log("egress state: %s is gone; polling %s only" % (self.folder, self.path))
                if wake and not self.closing:
                    self.events.put(("egress", None))
                if gone or self.closing:
                    break
        except Exception as exc:  # pylint: disable=broad-except
            if not self.closing:
                self.log("egress state: inotify wake-up stopped (%s: %s); polling %s only"
                         % (type(exc).__name__, exc, self.path))
        finally:
            with self._lock:
                self.fd = None
                os.close(fd)
            if not self.closing:
                # ended without close() (the directory went away, the read failed): wake the helper once ``live``
                # is False, so that its loop, which may sleep up to EGRESS_RECHECK s, polls at once and every
                # ``poll`` s from then on
                self.events.put(("egress", None))

    @property
    def live(self):
        """Whether the wake-up runs (its thread reads the descriptor; both are gone once it stopped)."""
        return self.thread is not None and self.fd is not None and not self.closing

    def close(self):
        """Stop the thread: removing the watch makes the kernel queue IN_IGNORED, which ends its read."""
        self.closing = True
        with self._lock:
            if self.fd is not None and self._rm is not None:
                self._rm(self.fd, self.wd)


# --------------------------------------------------------------------------------------------
# The process
# --------------------------------------------------------------------------------------------
def _parent_config_path():
    """The configuration file ExaBGP (our parent) was started with: ``... server CONF``."""
    try:
        with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    cands = [a for a in argv[1:] if not a.startswith("-") and os.path.isfile(a)
             and not a.endswith((".py", "exabgp"))]
    return cands[-1] if cands else None


def _write_status_file(path, text):
    """Status and metric files are read by others while the helper runs: never a partial file.
    The directories are systemd's (RuntimeDirectory, ReadWritePaths): they are not created here."""
    if path:
        atomic_write(path, text, mode=0o644, makedirs=False)


class Helper(object):
    def __init__(self, cfg, out=sys.stdout, inp=sys.stdin, log=sys.stderr):
        self.cfg = cfg
        self.out = out
        self.inp = inp
        self.logf = log
        self.instance = cfg.get("instance", "vipinjector")
        self.alloc = Allocation(cfg["allocation"], cfg["sessions"])
        h = cfg.get("health") or {}
        p = cfg.get("path_check") or {}
        self.core = HelperCore(self.alloc, rise=h.get("rise", 2), fall=h.get("fall", 3),
                               path_rise=p.get("rise", 2), path_fall=p.get("fall", 2))
        self.interval = float(h.get("interval", 1.0))
        self.path_interval = float(p.get("interval", self.interval))
        self.drain_files = list(cfg.get("drain_files") or [])
        self.drain_poll = float(cfg.get("drain_poll", min(0.1, self.interval)))
        # The host NIC watcher's egress set (datapath/health.EGRESS_STATE_FILE): off when file is null.
        e = cfg.get("egress_state") or {}
        self.egress_file = e.get("file")
        self.egress_poll = float(e.get("poll", 0.05))
        self.egress_stale = float(e.get("stale_after", 5.0))
        self.egress_seen = (None, None)  # (stat key, parsed JSON or None)
        # The host's admin-drain marker (module_utils/drain_marker.py), polled with the drain files: persistent, read
        # directly (not through the watcher's state, which goes stale when the watcher stops). null = off.
        self.admin_file = (cfg.get("admin_drain") or {}).get("file")
        self.admin_seen = None
        self.egress_note = None
        self.events = queue.Queue()
        self.egress_watch = None
        self.acks = {"done": 0, "error": 0}
        self.pending = 0
        self.stop = threading.Event()
        self.exabgp_gone = False
        # The watchdog: send times of the commands still waiting for their ack (ExaBGP acks in order).
        w = cfg.get("watchdog") or {}
        self.wd_interval = float(w.get("interval", 0.25))
        self.wd_timeout = float(w.get("timeout", 1.0))
        # Until the first ack: ExaBGP may still be starting (imports, config parsing on a busy host).
        self.wd_start_timeout = max(self.wd_timeout, float(w.get("start_timeout", 10.0)))
        self.wd_enabled = bool(w.get("enabled", True)) and self.wd_timeout > 0
        self.unacked = collections.deque()
        self.first_ack = False
        self.next_probe = 0.0
        self.watchdog_fired = None
        self.exabgp_pid = os.getppid()

    def log(self, msg):
        try:
            self.logf.write("vipinjector[%s]: %s\n" % (self.instance, msg))
            self.logf.flush()
        except (OSError, ValueError):
            pass

    # --- ExaBGP -> helper
    def reader(self):
        for raw in self.inp:
            line = raw.strip()
            if not line:
                continue
            self.events.put(("line", line))
        self.events.put(("eof", None))

    def handle_line(self, line):
        low = line.lower()
        if low == "done" or low.startswith('{ "answer": "done"'):
            self.acks["done"] += 1
            self.pending = max(0, self.pending - 1)
            self._acked()
            return
        if low == "error" or low.startswith('{ "answer": "error"'):
            self.acks["error"] += 1
            self.pending = max(0, self.pending - 1)
            self._acked()
            self.log("ExaBGP answered error to a command")
            return
        if low.startswith("shutdown") or low.startswith('{ "answer": "shutdown"'):
            self.log("ExaBGP is shutting down")
            self.exabgp_gone = True
            self.stop.set()
            return
        peer, state = None, None
        if line.startswith("{"):
            try:
                msg = json.loads(line)
            except ValueError:
                return
            if msg.get("type") == "state":
                n = msg.get("neighbor", {})
                peer = n.get("address", {}).get("peer")
                state = n.get("state")
        else:
            m = re.match(r"^neighbor (\S+) (up|down|connected)\b", line)
            if m:
                peer, state = m.group(1), m.group(2)
        if peer and state:
            try:
                pa = ipaddress.ip_address(peer)
            except ValueError:
                return
            self.core.session_event(pa, state)
            self.log("session %s %s" % (peer, state))
            if state == "up" and self.core.refused:
                self.send(self.core.refused_withdraws_for(pa))

    # --- helper -> ExaBGP
    def send(self, cmds):
        for c in cmds:
            try:
                self.alloc.check(c, self.core.withdrawable())
            except GuardError as exc:  # (check turns any error into a GuardError: fails closed)
                self.core.refusals += 1
                self.log("guard: %s" % exc)
                continue
            if not self._write(c):
                return
            self.log(c)

    def _write(self, c, now=None):
        try:
            self.out.write(c + "\n")
            self.out.flush()
            self.pending += 1
            self.unacked.append(time.monotonic() if now is None else now)
        except (OSError, ValueError):
            self.exabgp_gone = True
            self.stop.set()
            return False
        return True

    # --- the watchdog
    def _acked(self):
        self.first_ack = True
        if self.unacked:
            self.unacked.popleft()

    def watchdog(self, now):
        """One watchdog step. Returns the monotonic time of the next step (or None when off).

        Idle (nothing waiting for an ack) and due: send the probe, a comment command ExaBGP answers
        ``done`` without doing anything. The oldest unacknowledged command older than the timeout
        (the start timeout before ExaBGP's first ack): ExaBGP is hung, kill it."""
        if not self.wd_enabled or self.stop.is_set():
            return None
        limit = self.wd_timeout if self.first_ack else self.wd_start_timeout
        if self.unacked:
            age = now - self.unacked[0]
            if age > limit:
                self.fire_watchdog(age)
                return None
            return self.unacked[0] + limit + 0.001
        if now >= self.next_probe:
            # not through the guard: a comment, it announces nothing (ExaBGP logs it at DEBUG only)
            if not self._write("# vipinjector watchdog", now):
                return None
            self.next_probe = now + self.wd_interval
            return now + limit + 0.001
        return self.next_probe

    def fire_watchdog(self, age):
        """ExaBGP stopped answering: SIGKILL it (works on a stopped process too). The kernel closes
        its TCP sessions, the ToR drops the routes; the helper then sees EOF and exits, and the
        supervisor (systemd Restart=always) starts the instance again."""
        pid = self.exabgp_pid
        self.watchdog_fired = {"age": round(age, 3), "pid": pid, "at": time.time()}
        self.log("watchdog: ExaBGP (pid %d) has not acknowledged a command for %.2fs (limit %.2fs): killing it"
                 % (pid, age, self.wd_timeout if self.first_ack else self.wd_start_timeout))
        # only our own parent: a helper re-parented to init (ExaBGP already gone) kills nothing
        if pid > 1 and os.getppid() == pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as exc:
                self.log("watchdog: cannot kill ExaBGP: %s" % exc)
        self.exabgp_gone = True
        self.stop.set()

    def write_status(self):
        st = self.core.status()
        st["instance"] = self.instance
        st["acks"] = dict(self.acks)
        st["watchdog"] = {"enabled": self.wd_enabled, "interval": self.wd_interval, "timeout": self.wd_timeout,
                          "unacked": len(self.unacked), "fired": self.watchdog_fired}
        st["pid"] = os.getpid()
        try:
            _write_status_file(self.cfg.get("status_file"), json.dumps(st, indent=1, sort_keys=True) + "\n")
            if self.cfg.get("metrics_file"):
                _write_status_file(self.cfg["metrics_file"], prometheus_text(st, self.instance))
        except OSError as exc:
            self.log("cannot write status: %s" % exc)

    def drained(self):
        return any(os.path.exists(p) for p in self.drain_files)

    def read_admin(self):
        """Re-read the admin-drain marker when it changed (stat key) into the core. Returns True when
        what it drains changed."""
        if not self.admin_file:
            return False
        try:
            st = os.stat(self.admin_file)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            key = None
        if key == self.admin_seen:
            return False
        self.admin_seen = key
        nics, host, note = marker.parse(marker.read(self.admin_file) if key else None)
        if note != "admin drain ok" and key is not None:
            self.log("%s (%s)" % (note, self.admin_file))
        changed = self.core.set_admin(nics, host)
        if changed:
            self.log("admin drain: host %s, NICs %s" % ("drained" if host else "not drained", sorted(nics) or "none"))
        return changed

    def egress_interval(self):
        """Seconds between two polls of the egress state: ``poll`` (the fallback), or EGRESS_RECHECK while the
        inotify wake-up runs (it brings every change at once; the poll then only notices a stale state)."""
        if self.egress_watch is not None and self.egress_watch.live:
            return max(self.egress_poll, EGRESS_RECHECK)
        return self.egress_poll

    def read_egress(self, now=None):
        """Poll the watcher's egress state (re-read only when the file changed) into the core.
        Returns True when the set of NICs out changed."""
        if not self.egress_file:
            return False
        try:
            st = os.stat(self.egress_file)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            key = None
        if key != self.egress_seen[0]:
            data = None
            if key is not None:
                try:
                    with open(self.egress_file) as f:
                        data = json.load(f)
                except (OSError, ValueError):
                    data = {}   # unreadable or half-written: malformed, nothing out
            self.egress_seen = (key, data)
        out, note = egress_out(self.egress_seen[1], time.time() if now is None else now, self.egress_stale)
        if note != self.egress_note:
            if note != "egress state ok" or self.egress_note is not None:
                self.log("%s (%s)" % (note, self.egress_file))
            self.egress_note = note
        changed = self.core.set_nic_out(out)
        if changed:
            self.log("host egress set: NICs out %s" % (sorted(out) or "none"))
        return changed

    def handle_event(self, kind, payload):
        """One event of the queue: a line from ExaBGP, ``eof`` (ExaBGP is gone: stop) or ``egress`` (the
        watcher's egress state changed: read it now, not at the next poll). Returns whether the status
        changed."""
        if kind == "eof":
            self.exabgp_gone = True
            self.stop.set()
            return False
        if kind == "egress":
            return self.read_egress()
        before = dict(self.core.session_state)
        self.handle_line(payload)
        return before != self.core.session_state

    def guard_config(self):
        # Only an explicit JSON false switches the scan off (a test of the ToR's own filter does).
        if self.cfg.get("guard_config", True) is False:
            return
        path = self.cfg.get("exabgp_config") or _parent_config_path()
        if not path:
            self.log("guard: cannot find the ExaBGP configuration to scan; refusing to announce")
            self.core.set_refused([{"kind": "unknown-config", "value": "",
                                    "message": "ExaBGP configuration not found"}])
            return
        try:
            with open(path) as f:
                text = f.read()
        except (OSError, ValueError) as exc:
            self.core.set_refused([{"kind": "unreadable-config", "value": path, "message": str(exc)}])
            return
        findings = config_findings(text, self.cfg, self.alloc)  # never raises: errors are findings
        if findings:
            for fnd in findings:
                self.log("guard: REFUSED %s" % fnd["message"])
            self.core.set_refused(findings)

    def check_task_ip_local(self):
        if not self.cfg.get("require_local_task_ip", False):
            return
        try:
            local = set()
            for link in _ip_json(["addr", "show"]):
                for a in link.get("addr_info", []):
                    local.add(a.get("local"))
        except Exception as exc:  # pylint: disable=broad-except
            # Fail closed: an ownership check that could not run is not a pass (ip missing, failing,
            # timing out, unparsable output: whatever the error).
            self.log("cannot list local addresses: %s" % exc)
            self.core.set_refused(self.core.refused + [{
                "kind": "task-ip-unverified", "value": str(exc)[:200],
                "message": "cannot list this namespace's addresses (%s): refusing to announce a task IP "
                           "it could not verify" % str(exc)[:200]}])
            return
        missing = [str(p.network_address) for p in self.alloc.prefixes if str(p.network_address) not in local]
        if missing:
            self.core.set_refused(self.core.refused + [{
                "kind": "task-ip-not-local", "value": ",".join(missing),
                "message": "task IP(s) %s are not configured in this namespace: refusing to "
                           "announce an address this workload does not hold" % ", ".join(missing)}])

    def run(self):
        signal.signal(signal.SIGTERM, lambda *dummy: self.stop.set())
        signal.signal(signal.SIGINT, lambda *dummy: self.stop.set())
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        self.guard_config()
        self.check_task_ip_local()
        t = threading.Thread(target=self.reader, name="exabgp-reader", daemon=True)
        t.start()
        if self.egress_file:
            self.egress_watch = EgressWatch(self.egress_file, self.events, self.log)
            self.egress_watch.start(self.egress_poll)
        health_spec = self.cfg.get("health") or {}
        path_spec = self.cfg.get("path_check") or {}
        next_health = 0.0
        next_path = 0.0
        next_drain = 0.0
        last_egress = float("-inf")
        self.write_status()
        while not self.stop.is_set():
            now = time.monotonic()
            dirty = False
            if now >= next_drain:
                d = self.drained()
                if d != self.core.drained:
                    self.core.drained = d
                    self.log("drain file %s" % ("present" if d else "removed"))
                    dirty = True
                if self.read_admin():
                    dirty = True
                next_drain = now + self.drain_poll
            if self.egress_file and now >= last_egress + self.egress_interval():
                if self.egress_watch is not None:
                    self.egress_watch.retry(self.egress_poll)
                if self.read_egress():
                    dirty = True
                last_egress = now
            if now >= next_health:
                ok, detail = probe_health(health_spec)
                if self.core.health.feed(ok, detail):
                    self.log("health %s (%s)" % ("up" if ok else "down", detail))
                    dirty = True
                next_health = time.monotonic() + self.interval
            if now >= next_path:
                results = probe_paths(path_spec, [{"peer": peer, "local": sess["local"], "nic": sess["nic"]}
                                                  for peer, sess in self.alloc.sessions.items()])
                for peer, sess in self.alloc.sessions.items():
                    ok, detail = results[str(peer)]
                    if self.core.paths[peer].feed(ok, detail):
                        self.log("path nic%s (%s) %s: %s" % (sess["nic"], peer, "up" if ok else "down", detail))
                        dirty = True
                next_path = time.monotonic() + self.path_interval
            cmds = self.core.reconcile()
            if cmds:
                self.send(cmds)
                dirty = True
            if dirty:
                self.write_status()
            next_wd = self.watchdog(time.monotonic())
            if self.stop.is_set():
                break
            due = [next_drain, next_health, next_path] + ([next_wd] if next_wd is not None else []) + (
                [last_egress + self.egress_interval()] if self.egress_file else [])
            timeout = max(0.0, min(due) - time.monotonic())
            try:
                kind, line = self.events.get(timeout=timeout)
            except queue.Empty:
                continue
            while True:
                if self.handle_event(kind, line):
                    dirty = True
                if kind == "eof":
                    break
                try:
                    kind, line = self.events.get_nowait()
                except queue.Empty:
                    break
            cmds = self.core.reconcile()
            if cmds:
                self.send(cmds)
            if dirty or cmds:
                self.write_status()
        if self.egress_watch is not None:
            self.egress_watch.close()
        # Stopping: withdraw everything we announced (ExaBGP may already be gone).
        self.core.stopping = True
        if not self.exabgp_gone:
            self.send(self.core.reconcile())
            deadline = time.monotonic() + 0.5
            while self.pending and time.monotonic() < deadline:
                try:
                    kind, line = self.events.get(timeout=0.05)
                except queue.Empty:
                    continue
                if kind == "eof":
                    break
                if kind == "line":   # (an egress wake-up changes nothing now: everything goes)
                    self.handle_line(line)
        else:
            for peer in self.core.announced:
                self.core.announced[peer] = set()
        self.write_status()
        return 0


def check_config_main(helper_cfg, exabgp_conf):
    """``--check-config``: the guard run before ExaBGP starts (systemd ExecStartPre)."""
    with open(exabgp_conf) as f:
        findings = config_findings(f.read(), helper_cfg)  # never raises: errors are findings
    for fnd in findings:
        sys.stderr.write("vipinjector guard: REFUSED %s\n" % fnd["message"])
    return 1 if findings else 0


def exabgp_main(argv):
    """``vipinjector-helper exabgp ARGS``: run ExaBGP (of this venv) in this process with Nagle's algorithm
    off on the BGP sessions it opens (the systemd unit's ExecStart).

    Why: ExaBGP sets TCP_NODELAY on the sessions it accepts but not on those it opens (5.0.15:
    ``# nagle(self.io,self.peer)`` in reactor/network/outgoing.py), and the sidecar opens all of its
    sessions. With Nagle on, of two UPDATEs written back to back (the task IP's IPv4 and IPv6
    withdraws are one per address family) the second waits until the first is acknowledged. When the
    ToR -> host direction of a NIC is lost, that ACK never comes, so the ToR withdrew IPv4 at once but
    kept IPv6 until its BFD timed out: 0.59-0.64 s instead of 0.35-0.42 s on the stack lab (the same
    runs with TCP_NODELAY). BGP messages are small and latency-bound, so batching them gains nothing.
    If this ExaBGP has no such hook, it runs unchanged (logged)."""
    import socket as socket_mod
    try:
        from exabgp.reactor.network import outgoing  # pylint: disable=import-error
        setup = outgoing.Outgoing._setup
    except (ImportError, AttributeError) as exc:
        sys.stderr.write("vipinjector: cannot turn Nagle's algorithm off for ExaBGP's sessions (%s); "
                         "running ExaBGP unchanged\n" % exc)
    else:
        def setup_nodelay(self):
            issue = setup(self)
            if issue is None and getattr(self, "io", None) is not None:
                self.io.setsockopt(socket_mod.IPPROTO_TCP, socket_mod.TCP_NODELAY, 1)
            return issue
        outgoing.Outgoing._setup = setup_nodelay
    from exabgp.application.main import main as run_exabgp  # pylint: disable=import-error
    sys.argv = ["exabgp"] + list(argv)
    return run_exabgp()


def main(argv=None):
    import argparse
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["exabgp"]:
        return exabgp_main(argv[1:])
    ap = argparse.ArgumentParser(description="VipInjector ExaBGP process-API helper")
    ap.add_argument("--config", required=True, help="helper JSON configuration")
    ap.add_argument("--check-config", metavar="EXABGP_CONF",
                    help="only run the guard over an ExaBGP configuration and exit 0 (clean) or 1")
    args = ap.parse_args(argv)
    if args.check_config:
        try:
            with open(args.config) as f:
                cfg = json.load(f)
            return check_config_main(cfg, args.check_config)
        except Exception as exc:  # pylint: disable=broad-except
            # fail closed: a pre-start check that cannot run keeps ExaBGP from starting
            sys.stderr.write("vipinjector guard: REFUSED, the check could not run (%s: %s)\n"
                             % (type(exc).__name__, exc))
            return 1
    with open(args.config) as f:
        cfg = json.load(f)
    return Helper(cfg).run()
