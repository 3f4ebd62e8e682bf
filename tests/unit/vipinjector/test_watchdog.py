# -*- coding: utf-8 -*-
"""The helper's hung-ExaBGP watchdog (issue 12 item 3): probe while idle, kill ExaBGP when an ack
is overdue, never before; and its renderer options."""
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render, sidecar

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
NONE = {"type": "none"}


def _helper(host, **wd):
    r = render.render_instance(host, 1, {"health": NONE, "watchdog": wd} if wd else {"health": NONE})
    cfg = json.loads(r["files"]["helper.json"])
    out = io.StringIO()
    h = sidecar.Helper(cfg, out=out, inp=io.StringIO(""), log=open(os.devnull, "w"))
    return h, out


def test_rendered_defaults(host):
    h, dummy = _helper(host)
    assert h.cfg["watchdog"] == {"enabled": True, "interval": 0.25, "timeout": 1.0, "start_timeout": 10.0}
    assert h.wd_enabled and h.wd_interval == 0.25 and h.wd_timeout == 1.0


def test_probe_when_idle_then_wait_for_ack(host, monkeypatch):
    h, out = _helper(host)
    kills = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append((pid, sig)))
    nxt = h.watchdog(100.0)
    assert out.getvalue() == "# vipinjector watchdog\n"
    assert len(h.unacked) == 1 and nxt == pytest.approx(100.0 + 10.0 + 0.001)  # start timeout: no ack yet
    h.handle_line("done")
    assert not h.unacked and h.first_ack
    assert h.watchdog(100.1) == pytest.approx(100.25)  # idle, probe not due yet: sends nothing
    assert out.getvalue().count("\n") == 1
    h.watchdog(100.3)
    assert out.getvalue().count("\n") == 2 and len(h.unacked) == 1
    # an ack inside the timeout: nothing killed, ever
    h.watchdog(101.2)
    h.handle_line("done")
    h.watchdog(101.25)
    assert kills == [] and not h.stop.is_set()


def test_overdue_ack_kills_exabgp(host, monkeypatch):
    h, out = _helper(host)
    kills = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append((pid, sig)))
    h.watchdog(10.0)
    h.handle_line("done")
    h.watchdog(10.3)  # probe sent at 10.3, ExaBGP stops here
    assert h.watchdog(11.29) is not None and kills == []  # 0.99 s: not yet
    assert h.watchdog(11.31) is None
    assert kills == [(os.getppid(), signal.SIGKILL)]
    assert h.stop.is_set() and h.exabgp_gone
    assert h.watchdog_fired["age"] == pytest.approx(1.01)


def test_unacked_announcement_counts_too(host, monkeypatch):
    """Not only the probe: an announcement whose ack never comes fires the watchdog as well."""
    h, out = _helper(host)
    monkeypatch.setattr(os, "kill", lambda pid, sig: None)
    h.first_ack = True
    peer = next(iter(h.alloc.sessions))
    h.send(h.core.reconcile() or ["neighbor %s withdraw route %s" % (peer, h.alloc.prefixes[0])])
    assert h.unacked
    t0 = h.unacked[0]
    assert h.watchdog(t0 + 0.5) is not None
    assert h.watchdog(t0 + 1.1) is None and h.exabgp_gone


def test_start_timeout_before_first_ack(host, monkeypatch):
    h, out = _helper(host, start_timeout=3.0)
    monkeypatch.setattr(os, "kill", lambda pid, sig: None)
    h.watchdog(0.0)
    assert h.watchdog(2.9) is not None  # ExaBGP still starting
    assert h.watchdog(3.1) is None and h.exabgp_gone


def test_disabled_sends_nothing(host):
    h, out = _helper(host, enabled=False)
    assert h.watchdog(5.0) is None and out.getvalue() == ""


def test_kills_only_its_own_parent(host, monkeypatch):
    """Re-parented (ExaBGP already gone): the recorded PID may be reused, nothing is killed."""
    h, out = _helper(host)
    kills = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append((pid, sig)))
    h.exabgp_pid = os.getppid() + 1
    h.fire_watchdog(2.0)
    assert kills == [] and h.exabgp_gone


def test_status_reports_watchdog(host, tmp_path):
    h, out = _helper(host)
    h.cfg["status_file"] = str(tmp_path / "status.json")
    h.cfg["metrics_file"] = None
    h.write_status()
    st = json.load(open(h.cfg["status_file"]))
    assert st["watchdog"] == {"enabled": True, "interval": 0.25, "timeout": 1.0, "unacked": 0, "fired": None}


@pytest.mark.parametrize("wd,field", [
    ({"timeout": 0}, "watchdog.timeout"),
    ({"timeout": "x"}, "watchdog.timeout"),
    ({"interval": 0.01}, "watchdog.interval"),
    ({"start_timeout": True}, "watchdog.start_timeout"),
    ({"enabled": "yes"}, "watchdog.enabled"),
    ({"bogus": 1}, "watchdog"),
])
def test_bad_watchdog_options(host, wd, field):
    with pytest.raises(render.RenderError) as ei:
        render.render_instance(host, 1, {"health": NONE, "watchdog": wd})
    assert field in str(ei.value) and "Fix:" in str(ei.value)


def test_kills_a_stopped_parent_for_real(host, tmp_path):
    """The real thing without ExaBGP: a parent that stops answering (SIGSTOP) is SIGKILLed by the helper
    it runs; the helper then exits."""
    r = render.render_instance(host, 1, {"health": NONE, "path_check": {"type": "none"},
                                         "require_local_task_ip": False,
                                         "watchdog": {"interval": 0.1, "timeout": 0.3, "start_timeout": 2.0}})
    cfg = json.loads(r["files"]["helper.json"])
    cfg.update({"guard_config": False, "status_file": str(tmp_path / "st.json"), "metrics_file": None,
                "drain_files": []})
    cfgp = tmp_path / "helper.json"
    cfgp.write_text(json.dumps(cfg))
    # parent: answers 'done' to each line of the helper twice, then stops itself
    parent = (
        "import subprocess, sys, os, signal\n"
        "p = subprocess.Popen([sys.executable, %r, '--config', %r], stdin=subprocess.PIPE,"
        " stdout=subprocess.PIPE, text=True, bufsize=1)\n"
        "for i in range(2):\n"
        "    p.stdout.readline(); p.stdin.write('done\\n'); p.stdin.flush()\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
    ) % (os.path.join(REPO, "roles", "vipinjector", "files", "vipinjector-helper"), str(cfgp))
    proc = subprocess.Popen([sys.executable, "-c", parent])
    try:
        rc = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert rc == -signal.SIGKILL
    # the helper writes its status after the kill, on its way out: wait for that write (not a timing bound)
    st = _status_after_fire(cfg["status_file"], deadline=time.monotonic() + 10)
    assert st["watchdog"]["fired"]["pid"] == proc.pid and st["announced_prefixes"] == []


def _status_after_fire(path, deadline):
    """The status file once it records the watchdog firing (or the last one read at the deadline)."""
    st = {}
    while True:
        try:
            with open(path) as f:
                st = json.load(f)
        except (OSError, ValueError):
            pass  # not written yet, or caught mid-replace
        if (st.get("watchdog") or {}).get("fired") or time.monotonic() > deadline:
            return st
        time.sleep(0.05)
