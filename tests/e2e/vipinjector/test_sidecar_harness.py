# -*- coding: utf-8 -*-
"""Live tests of the VipInjector on the mnv harness: real ExaBGP 5.0.15 (unprivileged, no
capabilities), the real helper, a real FRR ToR. Assertions are on the ToR's kernel FIB, its BGP
state and the helper's status file. Needs root (namespaces, FRR); fails — never skips — without."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from labkit.mnv_harness import Harness, lab_host, sh

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _need_root():
    if os.geteuid() != 0:
        pytest.fail("the vipinjector e2e tests need root (network namespaces, FRR)")


@pytest.fixture
def hx(request):
    h = Harness(tag="%x" % (abs(hash(request.node.name)) & 0xFFFF), md5=getattr(request, "param", None))
    request.addfinalizer(h.close)
    h.build()
    h.start_frr()
    h.settle()
    return h


def _up(h, slot=1, width=4):
    h.write_instance(slot)
    h.start_exabgp(slot)
    v4, v6 = h.task_ip(slot), h.task_ip(slot, "ipv6")
    t = h.wait_width(v4, width, timeout=15)
    h.wait_width(v6, width, timeout=5)
    return v4, v6, t


def _wait(pred, timeout, poll=0.01):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(poll)
    return None


def test_announces_task_ip_with_one_next_hop_per_nic(hx):
    v4, v6, t = _up(hx)
    host = hx.host
    sd = host["slots"][0]
    assert sorted(hx.fib_nexthops(v4)) == sorted(n["address"]["ipv4"] for n in sd["nics"])
    assert sorted(hx.fib_nexthops(v6)) == sorted(n["address"]["ipv6"] for n in sd["nics"])
    assert all(s == "Established" for s in hx.session_states().values())
    # status JSON and metrics reflect it
    assert _wait(lambda: len(hx.status(1)["announced_prefixes"]) == 2, 3)
    st = hx.status(1)
    assert st["health"]["up"] is True and st["guard"]["refused"] is False
    assert [s["state"] for s in st["sessions"]] == ["up"] * 4
    assert st["last_change"] > 0
    prom = open(os.path.join(hx.tmp, "run", "slot1", "vipinjector.prom")).read()
    assert len(re.findall(r'netscale_vipinjector_session_up\{[^}]*\} 1', prom)) == 4
    assert st["acks"]["error"] == 0 and st["acks"]["done"] >= 8


def test_drain_file_withdraws_within_one_interval_and_restores(hx):
    v4, v6, dummy = _up(hx)
    drain = hx.drain_file(1)
    open(drain, "w").close()
    t = _wait(lambda: not hx.fib_nexthops(v4) and not hx.fib_nexthops(v6), 2.0, poll=0.002)
    assert t is not None, "drain: still announced %s" % hx.fib_nexthops(v4)
    assert t < 1.0, "drain took %.3fs, interval is 1s" % t
    assert all(s == "Established" for s in hx.session_states().values()), "drain must keep sessions"
    assert _wait(lambda: hx.status(1)["drained"] is True and not hx.status(1)["announced_prefixes"], 2)
    os.unlink(drain)
    assert hx.wait_width(v4, 4, timeout=2) < 1.0
    hx.wait_width(v6, 4, timeout=2)


def test_health_failure_withdraws_and_recovery_announces(hx):
    v4, v6, dummy = _up(hx)
    open(hx.sick_file(1), "w").close()
    assert _wait(lambda: not hx.fib_nexthops(v4) and not hx.fib_nexthops(v6), 3.0) is not None
    assert hx.status(1)["health"]["up"] is False
    os.unlink(hx.sick_file(1))
    hx.wait_width(v4, 4, timeout=3)
    hx.wait_width(v6, 4, timeout=3)


def test_sigterm_withdraws(hx):
    v4, v6, dummy = _up(hx)
    t0 = time.monotonic()
    rc = hx.stop_exabgp(1, signal.SIGTERM)
    t = _wait(lambda: not hx.fib_nexthops(v4) and not hx.fib_nexthops(v6), 5.0, poll=0.002)
    assert t is not None
    assert rc == 0, "ExaBGP exits 0 on SIGTERM (hence Restart=always)"
    assert time.monotonic() - t0 < 3.0
    st = hx.status(1)
    assert st["announced_prefixes"] == []


def test_path_failure_withdraws_on_that_session_only(hx):
    v4, v6, dummy = _up(hx)
    host = hx.host
    ns = hx.ns[1]
    gw1 = host["nics"][1]["gateway"]["ipv6"]
    gw0 = host["nics"][0]["gateway"]["ipv6"]
    nh1_v4 = host["slots"][0]["nics"][1]["address"]["ipv4"]
    # The session to NIC 1's gateway silently moves onto eth0 (the lab-notes pitfall): the BGP
    # session survives, but NIC 1 is no longer this container's path -> withdraw on it only.
    sh(["ip", "-n", ns, "-6", "route", "add", "%s/128" % gw1, "via", gw0, "dev", "eth0"])
    t = _wait(lambda: len(hx.fib_nexthops(v4)) == 3 and len(hx.fib_nexthops(v6)) == 3, 5.0, poll=0.005)
    assert t is not None, hx.fib_nexthops(v4)
    assert nh1_v4 not in hx.fib_nexthops(v4)
    states = hx.session_states()
    assert all(s == "Established" for s in states.values()), states
    st = hx.status(1)
    s1 = [s for s in st["sessions"] if s["nic"] == 1][0]
    assert s1["path_ok"] is False and s1["announced"] == [] and "eth0" in s1["path_detail"]
    sh(["ip", "-n", ns, "-6", "route", "del", "%s/128" % gw1])
    hx.wait_width(v4, 4, timeout=5)
    hx.wait_width(v6, 4, timeout=5)


def _other_host_task_ip():
    return lab_host("lab-r1-h1")["slots"][0]["task_ip"]["ipv4"]


def test_guard_refuses_hand_edited_config(hx):
    foreign = _other_host_task_ip()

    def edit(conf):
        # the hand edit: announce another host's task IP statically on the NIC-0 session
        return conf.replace("    inherit vipinjector;\n",
                            "    inherit vipinjector;\n    static {\n        route %s/32 next-hop self;\n    }\n"
                            % foreign, 1)

    m = hx.write_instance(1, conf_edit=edit)
    # 1) the pre-start check (systemd ExecStartPre) refuses it
    r = subprocess.run(["/usr/bin/python3", os.path.join(hx.tmp, "inst", "bin", "vipinjector-helper"),
                        "--config", m["paths"]["helper_json"], "--check-config", m["paths"]["exabgp_conf"]],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 1 and foreign in r.stderr, r.stderr
    # 2) started anyway (pre-check bypassed): the helper refuses at runtime and withdraws it
    hx.start_exabgp(1)
    peer0 = hx.host["slots"][0]["nics"][0]["address"]["ipv6"]
    assert _wait(lambda: all(s == "Established" for s in hx.session_states().values())
                 and len(hx.session_states()) == 4, 15)
    assert _wait(lambda: hx.status(1)["guard"]["refused"] is True, 5)
    st = hx.status(1)
    assert any(f["value"] == "%s/32" % foreign for f in st["guard"]["findings"])
    # the helper withdrew the foreign prefix (pre-policy view on the ToR) ...
    assert _wait(lambda: ("%s/32" % foreign) not in hx.received_routes(peer0), 5) is not None
    time.sleep(1.0)
    assert ("%s/32" % foreign) not in hx.received_routes(peer0)
    # ... the ToR would have refused it anyway, and nothing is announced, not even the own IP
    assert hx.fib_nexthops(foreign) == []
    assert hx.fib_nexthops(hx.task_ip(1)) == [] and hx.fib_nexthops(hx.task_ip(1, "ipv6")) == []
    assert st["announced_prefixes"] == []
    assert "withdraw route %s/32" % foreign in hx.log(1)


@pytest.mark.parametrize("hx", ["mnv-test-key-1"], indirect=True)
def test_md5_sessions_and_key_never_logged(hx):
    v4, v6, dummy = _up(hx)
    key = "mnv-test-key-1"
    assert key not in hx.log(1)
    assert key not in open(os.path.join(hx.tmp, "run", "slot1", "status.json")).read()
    # the ToR really enforces the key: a session without it never comes up
    hx.stop_exabgp(1)
    hx.write_instance(1, md5_password=None)
    hx.start_exabgp(1)
    time.sleep(3)
    assert hx.fib_nexthops(v4) == []
    assert all(s != "Established" for s in hx.session_states().values())


@pytest.fixture
def hx_policy(request):
    """The harness ToR running the ToR-policy renderer's FRR config for rack lab-r1."""
    h = Harness(tag="p%x" % (abs(hash(request.node.name)) & 0xFFF), md5="mnv-policy-key")
    request.addfinalizer(h.close)
    h.build()
    h.start_frr(bgpd_conf=h.policy_config())
    h.settle()
    return h


def test_with_tor_policy_config_width_and_foreign_prefix_refused_by_tor(hx_policy):
    hx = hx_policy
    v4, v6, dummy = _up(hx)
    assert len(hx.fib_nexthops(v4)) == 4 and len(hx.fib_nexthops(v6)) == 4
    # Defence in depth: even with the helper's config guard switched off (a tampered helper
    # config), the ToR's per-host prefix-list refuses another host's task IP.
    foreign = _other_host_task_ip()
    hx.stop_exabgp(1)
    hx.wait_width(v4, 0, timeout=5)

    def edit(conf):
        return conf.replace("    inherit vipinjector;\n",
                            "    inherit vipinjector;\n    static {\n        route %s/32 next-hop self;\n    }\n"
                            % foreign, 1)

    m = hx.write_instance(1, conf_edit=edit)
    import json as _json
    hc = _json.load(open(m["paths"]["helper_json"]))
    hc["guard_config"] = False
    with open(m["paths"]["helper_json"], "w") as f:
        _json.dump(hc, f)
    hx.start_exabgp(1)
    hx.wait_width(v4, 4, timeout=15)
    peer0 = hx.host["slots"][0]["nics"][0]["address"]["ipv6"]
    assert _wait(lambda: ("%s/32" % foreign) in hx.received_routes(peer0), 10) is not None
    assert hx.fib_nexthops(foreign) == []
    best = hx.vtysh("show bgp ipv4 unicast %s/32 json" % foreign)
    assert not best.get("paths"), best
