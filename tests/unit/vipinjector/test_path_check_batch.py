# -*- coding: utf-8 -*-
"""The sidecar's ``route`` path check reads the kernel once per round for all sessions (one ``ip -batch``
process): each session's verdict must be the one its own ``ip`` calls gave before, also when some of the
batch's commands fail (their outputs are missing, the rest must not shift) and when ip itself cannot run."""

from __future__ import annotations

import json
import subprocess

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import sidecar

SESSIONS = [{"peer": "fd00:10:0:%d::1" % k, "local": "fd00:10:0:%d::4" % k, "nic": k} for k in range(3)]


def link(k, flags=("BROADCAST", "MULTICAST", "UP", "LOWER_UP")):
    return {"ifname": "eth%d" % k, "flags": list(flags), "addr_info": [{"local": "fd00:10:0:%d::4" % k}]}


def route(k, dev=None, gateway=None):
    r = {"dst": "fd00:10:0:%d::1" % k, "from": "fd00:10:0:%d::4" % k, "dev": dev or "eth%d" % k}
    if gateway:
        r["gateway"] = gateway
    return [r]


class FakeIp:
    """subprocess.run standing in for ``ip -j -force -batch -``: answers each command from ``answers`` (a JSON
    value, or a string: the error ip prints for a failed command); records every call."""

    def __init__(self, answers, rc=None, stdout=None):
        self.answers, self.rc, self.stdout, self.calls = answers, rc, stdout, []

    def __call__(self, argv, **kw):
        self.calls.append((argv, kw.get("input")))
        commands = kw["input"].splitlines()
        out, err = [], []
        for n, cmd in enumerate(commands, 1):
            a = self.answers[cmd]
            if isinstance(a, str):
                err += [a, "Command failed -:%d" % n]
            else:
                out.append(json.dumps(a))
        rc = self.rc if self.rc is not None else (1 if err else 0)
        stdout = self.stdout if self.stdout is not None else "".join(x + "\n" for x in out)
        return subprocess.CompletedProcess(argv, rc, stdout, "".join(x + "\n" for x in err))


def answers(links=None, neigh=(), routes=None):
    a = {"addr show": links if links is not None else [link(k) for k in range(3)], "neigh show": list(neigh)}
    for k in range(3):
        a["route get fd00:10:0:%d::1 from fd00:10:0:%d::4" % (k, k)] = (routes or {}).get(k, route(k))
    return a


def run(monkeypatch, fake, sessions=SESSIONS, spec=None):
    monkeypatch.setattr(sidecar.subprocess, "run", fake)
    return sidecar.probe_paths(spec or {"type": "route"}, sessions)


def test_one_ip_process_for_every_session_of_the_round(monkeypatch):
    fake = FakeIp(answers())
    res = run(monkeypatch, fake)
    assert res == {"fd00:10:0:%d::1" % k: (True, "route via eth%d" % k) for k in range(3)}
    assert len(fake.calls) == 1
    argv, stdin = fake.calls[0]
    assert argv[1:] == ["-j", "-force", "-batch", "-"]
    assert stdin.splitlines() == ["addr show", "neigh show"] + [
        "route get fd00:10:0:%d::1 from fd00:10:0:%d::4" % (k, k) for k in range(3)]


def test_a_failed_route_lookup_fails_that_session_only_and_shifts_nothing(monkeypatch):
    # NIC 1's lookup fails: ip prints nothing for it, so NIC 2's output is the 4th line, not the 5th
    res = run(monkeypatch, FakeIp(answers(routes={1: "RTNETLINK answers: Network is unreachable",
                                                  2: route(2, dev="eth0")})))
    assert res["fd00:10:0:0::1"] == (True, "route via eth0")
    ok, detail = res["fd00:10:0:1::1"]
    assert not ok and "Network is unreachable" in detail and "route get fd00:10:0:1::1" in detail
    assert res["fd00:10:0:2::1"] == (False, "route to fd00:10:0:2::1 from fd00:10:0:2::4 leaves via eth0, not eth2")


@pytest.mark.parametrize("flags", [("UP", "NO-CARRIER"), ("BROADCAST",), ("UP",)])
def test_an_interface_down_or_without_carrier_fails_its_session(monkeypatch, flags):
    links = [link(0), link(1, flags), link(2)]
    res = run(monkeypatch, FakeIp(answers(links=links)))
    assert res["fd00:10:0:1::1"] == (False, "interface eth1 is down (%s)" % ",".join(flags))
    assert res["fd00:10:0:2::1"][0] is True


def test_a_local_address_not_configured_fails_its_session(monkeypatch):
    res = run(monkeypatch, FakeIp(answers(links=[link(0), link(2)])))
    assert res["fd00:10:0:1::1"] == (False, "local address fd00:10:0:1::4 is not configured")


def test_a_failed_neighbour_of_the_gateway_on_the_session_device_fails_it(monkeypatch):
    neigh = [{"dst": "fd00:10:0:1::1", "dev": "eth1", "state": ["FAILED"]},
             {"dst": "fd00:10:0:2::1", "dev": "eth0", "state": ["FAILED"]},   # another device: not this path
             {"dst": "fd00:10:0:9::9", "dev": "eth0", "state": ["FAILED"]}]   # the gateway of NIC 0's route
    res = run(monkeypatch, FakeIp(answers(neigh=neigh, routes={0: route(0, gateway="fd00:10:0:9::9")})))
    assert res["fd00:10:0:1::1"] == (False, "neighbour fd00:10:0:1::1 on eth1 is FAILED")
    assert res["fd00:10:0:2::1"] == (True, "route via eth2")
    assert res["fd00:10:0:0::1"] == (False, "neighbour fd00:10:0:9::9 on eth0 is FAILED")


def test_an_empty_route_answer_is_no_route(monkeypatch):
    res = run(monkeypatch, FakeIp(answers(routes={2: []})))
    assert res["fd00:10:0:2::1"] == (False, "no route to fd00:10:0:2::1")


@pytest.mark.parametrize("fake,words", [
    (FileNotFoundError(2, "No such file or directory: 'ip'"), "FileNotFoundError"),
    (subprocess.TimeoutExpired("ip", 2.0), "timed out"),
    (FakeIp(answers(), rc=255, stdout=""), "ip -batch"),                      # ip refused the whole batch
    (FakeIp(answers(), stdout='[]\n'), "1 outputs for 5 commands"),            # outputs missing: fail closed
    (FakeIp(answers(links="Cannot send dump request")), "addr show"),          # the round's own reads failed
])
def test_when_the_round_cannot_be_read_every_session_fails_naming_why(monkeypatch, fake, words):
    if isinstance(fake, BaseException):
        exc = fake

        def fake(*a, **kw):
            raise exc
    res = run(monkeypatch, fake)
    assert set(res) == {s["peer"] for s in SESSIONS}
    for ok, detail in res.values():
        assert ok is False and words in detail, detail


def test_other_check_types_stay_per_session(monkeypatch):
    calls = []

    def fake(argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0 if "fd00:10:0:1::1" not in argv else 3)
    res = run(monkeypatch, fake, spec={"type": "command", "command": ["check", "{peer}", "{nic}"]})
    assert calls == [["check", s["peer"], str(s["nic"])] for s in SESSIONS]
    assert res["fd00:10:0:1::1"] == (False, "command exit 3") and res["fd00:10:0:2::1"] == (True, "command exit 0")
    assert sidecar.probe_paths({"type": "none"}, SESSIONS[:1]) == {SESSIONS[0]["peer"]: (True, "no path check")}


def test_the_real_ip_reads_this_namespace_loopback():
    """The real ``ip -batch`` (no packet is sent: route lookups and dumps only)."""
    res = sidecar.probe_paths({"type": "route"}, [{"peer": "127.0.0.1", "local": "127.0.0.1", "nic": 0},
                                                  {"peer": "::1", "local": "::1", "nic": 1}])
    assert res == {"127.0.0.1": (True, "route via lo"), "::1": (True, "route via lo")}
    res = sidecar.probe_paths({"type": "route"}, [{"peer": "::1", "local": "fd00:99::4", "nic": 1}])
    assert res == {"::1": (False, "local address fd00:99::4 is not configured")}
