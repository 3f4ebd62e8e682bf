# -*- coding: utf-8 -*-
"""The helper wakes on the watcher's egress-state file (inotify on its directory) instead of waiting for
the next poll; the poll stays as the fallback and for staleness, and a helper without inotify (no
directory, no ctypes/libc, not Linux) polls only and never fails because of it."""
import io
import json
import os
import queue
import struct
import sys
import time

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render, sidecar
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

NONE = {"type": "none"}
NAME = "egress-state.json"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux only")


def _event(wd, mask, cookie, name, padded_to=0):
    raw = name.encode() + b"\0"
    raw += b"\0" * max(0, padded_to - len(raw))
    return struct.pack("=iIII", wd, mask, cookie, len(raw) if name or padded_to else 0) + (
        raw if name or padded_to else b"")


class Log(object):
    def __init__(self):
        self.lines = []

    def __call__(self, msg):
        self.lines.append(msg)


@pytest.fixture
def watch(tmp_path):
    """A started watch on tmp_path (closed and its thread joined afterwards, also on failure)."""
    made = []

    def start(path=None):
        w = sidecar.EgressWatch(str(path or tmp_path / NAME), queue.Queue(), Log())
        made.append(w)
        return w, w.start(0.05)
    yield start
    for w in made:
        w.close()
        if w.thread is not None:
            w.thread.join(5)
            assert not w.thread.is_alive()
        assert w.fd is None


def _index(h):
    return dict(("eth%d" % int(s["nic"]), int(s["nic"])) for s in h.alloc.sessions.values())


def _wait_until(predicate):
    """Until ``predicate()`` holds (False after 20 s: a bound on a hang, not a measure of speed)."""
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def _wait_for(out, prefix):
    """Until the helper has sent a command starting with ``prefix`` (False after 20 s: a bound on a hang,
    not a measure of speed)."""
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        if any(c.startswith(prefix) for c in out.getvalue().splitlines()):
            return True
        time.sleep(0.01)
    return False


def _helper(host, state_file, log=None):
    opts = {"health": NONE, "path_check": NONE, "egress_state": {"file": str(state_file)}}
    cfg = json.loads(render.render_instance(host, 1, opts)["files"]["helper.json"])
    out = io.StringIO()
    h = sidecar.Helper(cfg, out=out, inp=io.StringIO(""), log=log or open(os.devnull, "w"))
    return h, out


def _runnable(h, tmp_path):
    """What run() needs off a host: a status file in tmp_path, no scan of an ExaBGP configuration, no
    check that the task IP is configured here, no systemd watchdog."""
    h.cfg["status_file"] = str(tmp_path / "status.json")
    h.cfg["guard_config"] = False
    h.cfg["require_local_task_ip"] = False
    h.wd_enabled = False


def test_parse_several_events_with_padded_names():
    buf = (_event(1, sidecar.IN_CREATE, 0, ".egress-state.json.x1.tmp", 32)
           + _event(1, sidecar.IN_CLOSE_WRITE, 0, ".egress-state.json.x1.tmp", 32)
           + _event(1, sidecar.IN_MOVED_FROM, 77, ".egress-state.json.x1.tmp", 32)
           + _event(1, sidecar.IN_MOVED_TO, 77, NAME, 32)
           + _event(1, sidecar.IN_IGNORED, 0, ""))
    assert sidecar.parse_inotify_events(buf) == [
        (1, sidecar.IN_CREATE, 0, ".egress-state.json.x1.tmp"),
        (1, sidecar.IN_CLOSE_WRITE, 0, ".egress-state.json.x1.tmp"),
        (1, sidecar.IN_MOVED_FROM, 77, ".egress-state.json.x1.tmp"),
        (1, sidecar.IN_MOVED_TO, 77, NAME),
        (1, sidecar.IN_IGNORED, 0, ""),
    ]
    assert len(_event(1, sidecar.IN_MOVED_TO, 0, NAME, 32)) == 16 + 32
    # an incomplete tail (never from the kernel) is dropped, not misread
    whole = _event(2, sidecar.IN_DELETE, 0, NAME, 32)
    assert sidecar.parse_inotify_events(whole + whole[:20]) == [(2, sidecar.IN_DELETE, 0, NAME)]
    assert sidecar.parse_inotify_events(b"") == []


@linux_only
def test_atomic_write_and_delete_of_the_file_wake_the_helper(tmp_path, watch):
    w, ok = watch()
    assert ok is True and w.log.lines == []
    atomic_write(str(tmp_path / NAME), '{"out": [1], "updated": 1.0}\n', makedirs=False)
    assert w.events.get(timeout=5) == ("egress", None)
    os.unlink(str(tmp_path / NAME))
    assert w.events.get(timeout=5) == ("egress", None)


@linux_only
def test_another_file_in_the_directory_wakes_nothing(tmp_path, watch):
    w, ok = watch()
    assert ok is True
    atomic_write(str(tmp_path / "other.json"), "{}\n", makedirs=False)
    (tmp_path / ("x" + NAME)).write_text("{}")
    os.unlink(str(tmp_path / "other.json"))
    # Removing the watch queues IN_IGNORED behind the events above: once the thread has ended it has
    # read all of them (no sleep needed to know that nothing was coming).
    w.close()
    w.thread.join(5)
    assert not w.thread.is_alive()
    assert w.events.empty()
    assert w.log.lines == []


@linux_only
def test_directory_removed_wakes_once_and_the_thread_ends(tmp_path, watch):
    run = tmp_path / "run"
    run.mkdir()
    w, ok = watch(run / NAME)
    assert ok is True
    run.rmdir()
    assert w.events.get(timeout=5) == ("egress", None)
    w.thread.join(5)
    assert not w.thread.is_alive() and w.fd is None
    assert len(w.log.lines) == 1 and "is gone; polling" in w.log.lines[0]


def _fds():
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


def test_missing_directory_falls_back_to_polling(tmp_path, watch):
    before = _fds()
    w, ok = watch(tmp_path / "not-yet" / NAME)
    assert ok is False and w.thread is None and w.fd is None
    assert len(w.log.lines) == 1
    assert "no inotify wake-up" in w.log.lines[0] and "polling %s every 0.05s only" % (
        tmp_path / "not-yet" / NAME) in w.log.lines[0]
    assert _fds() - before == set()          # the inotify descriptor was closed


@pytest.mark.parametrize("broken", ["not-linux", "no-libc"])
def test_no_inotify_falls_back_to_polling(tmp_path, watch, monkeypatch, broken):
    if broken == "not-linux":
        monkeypatch.setattr(sidecar.sys, "platform", "darwin")
    else:
        def no_libc():
            raise MemoryError("ctypes cannot allocate its closures")
        monkeypatch.setattr(sidecar, "_inotify_libc", no_libc)
    w, ok = watch()
    assert ok is False and w.thread is None
    assert len(w.log.lines) == 1 and "no inotify wake-up" in w.log.lines[0]
    w.close()   # closing a watch that never started is harmless


def test_egress_event_reads_the_state_at_once(host, tmp_path, egress):
    """The run loop's seam: an ("egress", None) event re-reads the state now (no poll is due), and the
    next reconcile withdraws the out NIC's session."""
    p = tmp_path / NAME
    h, dummy = _helper(host, p)
    egress.healthy(h)
    h.core.reconcile()
    assert h.read_egress() is False            # no file yet: the state as of the last poll
    egress.publish(p, {"eth1"}, _index(h), time.time())
    calls = []
    real = h.read_egress
    h.read_egress = lambda *a: calls.append(a) or real(*a)
    assert h.handle_event("egress", None) is True
    assert calls == [()] and h.core.nic_out == {1}
    cmds = h.core.reconcile()
    assert sorted(c.split()[1] for c in cmds) == [str(egress.by_nic(h)[1])] * 2
    assert all(" withdraw route " in c for c in cmds)
    # an unchanged file: nothing new; ExaBGP lines and eof go where they went
    assert h.handle_event("egress", None) is False and h.core.reconcile() == []
    peer = next(iter(h.alloc.sessions))
    assert h.handle_event("line", "neighbor %s down" % peer) is True
    assert h.handle_event("eof", None) is False and h.stop.is_set() and h.exabgp_gone


@pytest.mark.parametrize("wake", ["inotify", "queued"])
def test_run_loop_withdraws_on_the_wake_up_not_the_poll(host, tmp_path, monkeypatch, wake, egress):
    """The whole loop with the poll pushed out of reach (1 h): the out NIC is withdrawn only because of
    the wake-up, through the real watch ("inotify", Linux) or an event put on the queue ("queued")."""
    if wake == "inotify" and not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux only")
    if wake == "queued":
        monkeypatch.setattr(sidecar.EgressWatch, "start", lambda self, poll=None: False)
    p = tmp_path / NAME
    log = io.StringIO()
    h, out = _helper(host, p, log=log)
    h.egress_poll = 3600.0
    _runnable(h, tmp_path)
    nic1 = str(egress.by_nic(h)[1])
    seen = {}

    class Inp(object):
        def __iter__(self):
            for peer in h.alloc.sessions:
                yield "neighbor %s up\n" % peer
            seen["announced"] = _wait_for(out, "neighbor %s announce route " % nic1)
            # the main loop takes the sessions up before the NIC goes out: had it drained the lines and the
            # wake-up in one pass, nic1 would come up already out, with nothing to withdraw (no withdraw
            # command: a race of this test, not of the helper)
            seen["up"] = _wait_until(lambda: all(v == "up" for v in h.core.session_state.values()))
            egress.publish(p, {"eth1"}, _index(h), time.time())
            if wake == "queued":
                h.events.put(("egress", None))
            seen["withdrawn"] = _wait_for(out, "neighbor %s withdraw route " % nic1)
    h.inp = Inp()
    assert h.run() == 0
    assert seen == {"announced": True, "up": True, "withdrawn": True}
    assert h.core.status()["egress_out"] == [1]
    if wake == "inotify":
        assert "no inotify" not in log.getvalue()
        assert h.egress_watch.thread is not None
        h.egress_watch.thread.join(5)             # run() removed the watch: its thread ends
        assert not h.egress_watch.thread.is_alive() and h.egress_watch.fd is None
    else:
        assert h.egress_watch.thread is None


def test_run_with_missing_directory_polls_and_does_not_fail(host, tmp_path):
    log = io.StringIO()
    h, out = _helper(host, tmp_path / "absent" / NAME, log=log)
    _runnable(h, tmp_path)
    h.inp = io.StringIO("".join("neighbor %s up\n" % peer for peer in h.alloc.sessions))
    assert h.run() == 0
    assert log.getvalue().count("no inotify wake-up") == 1
    assert h.egress_watch.thread is None


@linux_only
def test_directory_that_appears_later_is_watched_from_the_next_poll(tmp_path, watch):
    """The helper started before the watcher made its directory (boot order): the first start falls back,
    the first poll that finds the directory starts the wake-up, and a write then wakes the helper."""
    folder = tmp_path / "later"
    w, started = watch(folder / NAME)
    assert started is False and w.thread is None
    assert w.retry(0.05) is False and not w.retried       # still no directory: nothing tried
    folder.mkdir()
    assert w.retry(0.05) is True and w.thread is not None
    assert "appeared; inotify wake-up on" in w.log.lines[-1]
    assert w.retry(0.05) is False                          # running: nothing more
    atomic_write(str(folder / NAME), "{}")
    assert w.events.get(timeout=5) == ("egress", None)


def test_a_failed_retry_is_not_repeated(tmp_path, watch, monkeypatch):
    folder = tmp_path / "later"
    w, started = watch(folder / NAME)
    folder.mkdir()

    def no_inotify():
        raise OSError("inotify limits")
    monkeypatch.setattr(sidecar, "_inotify_libc", no_inotify)
    assert w.retry(0.05) is False and w.retried and w.thread is None
    assert w.retry(0.05) is False
    assert sum("no inotify wake-up" in line for line in w.log.lines) == 2   # the start, the one retry


def test_wake_up_while_stopping_is_ignored(host, tmp_path, egress):
    """A wake-up queued after the main loop ended (SIGTERM: the helper is withdrawing everything and
    waits for ExaBGP's acks) is not an ExaBGP line and changes nothing."""
    h, out = _helper(host, tmp_path / NAME)
    _runnable(h, tmp_path)
    nic0 = str(egress.by_nic(h)[0])
    seen = {}

    class Inp(object):
        def __iter__(self):
            for peer in h.alloc.sessions:
                yield "neighbor %s up\n" % peer
            seen["announced"] = _wait_for(out, "neighbor %s announce route " % nic0)
            h.stop.set()                          # as the SIGTERM handler does
            seen["withdrawn"] = _wait_for(out, "neighbor %s withdraw route " % nic0)
            h.events.put(("egress", None))        # the stop loop is waiting for acks now
    h.inp = Inp()
    assert h.run() == 0
    assert seen == {"announced": True, "withdrawn": True}
    assert not any(s["announced"] for s in h.core.status()["sessions"])


@linux_only
def test_the_poll_slows_to_the_recheck_only_while_the_wake_up_runs(host, tmp_path, watch):
    """With the wake-up running, the egress state is polled every EGRESS_RECHECK s (it only notices a stale
    state then); without it (never started, or stopped), every ``poll`` s as before."""
    h, dummy = _helper(host, tmp_path / NAME)
    assert h.egress_poll == 0.05 and sidecar.EGRESS_RECHECK == 1.0
    assert h.egress_interval() == 0.05                       # no watch yet
    h.egress_watch, started = watch()
    assert started is True and h.egress_watch.live
    assert h.egress_interval() == 1.0
    h.egress_poll = 2.0                                      # a slower poll than the recheck stays as it is
    assert h.egress_interval() == 2.0
    h.egress_poll = 0.05
    h.egress_watch.close()
    h.egress_watch.thread.join(5)
    assert not h.egress_watch.live and h.egress_interval() == 0.05
    assert h.egress_watch.events.empty()                     # close() wakes nobody
    h.egress_watch, started = watch(tmp_path / "absent" / NAME)
    assert started is False and not h.egress_watch.live and h.egress_interval() == 0.05


def test_a_wake_up_that_stops_by_itself_wakes_the_helper_once(tmp_path):
    """The thread's read ends (here: its descriptor reports end of file) without close(): the helper is woken
    once, so that its loop, which may sleep up to EGRESS_RECHECK s, polls at once and every ``poll`` s after."""
    r, w_end = os.pipe()
    w = sidecar.EgressWatch(str(tmp_path / NAME), queue.Queue(), Log())
    w.fd, w.wd = r, 1
    w.thread = sidecar.threading.Thread(target=w._run, daemon=True)
    w.thread.start()
    assert w.live
    os.close(w_end)
    w.thread.join(5)
    assert not w.thread.is_alive() and w.fd is None and not w.live
    assert w.events.get(timeout=5) == ("egress", None)
    assert w.events.empty()


@linux_only
def test_the_wake_up_for_a_removed_directory_comes_once_the_watch_is_down(tmp_path, watch):
    """The helper is woken after the watch stopped (not before: it would go back to sleep for EGRESS_RECHECK s
    with nothing left to wake it), and once. Taking the watch down is slowed (its lock), so that a wake-up sent
    before it is down would be seen while the watch is still live."""
    run = tmp_path / "run"
    run.mkdir()
    w, ok = watch(run / NAME)
    assert ok is True and w.live

    class SlowLock(object):
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            time.sleep(0.3)
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)
    w._lock = SlowLock(w._lock)
    run.rmdir()
    assert w.events.get(timeout=5) == ("egress", None)
    assert not w.live
    w.thread.join(5)
    assert w.events.empty()
