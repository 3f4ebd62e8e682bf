"""The agent: path loss versus an unreachable target, loss events, config checks, and a real run on
loopback that never hangs on a target that does not answer."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import agent as agentmod
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import probe

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SHIPPED = os.path.join(REPO, "roles", "fabric_monitor", "files", "netscale-fabric-monitor.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _pinglist(nics, targets):
    return {"version": 1, "host": "h1", "rack": "r1", "zone": "z1", "family": "ipv4", "rotate_rounds": 1,
            "offset": 0, "nics": nics, "targets": [{"name": n, "kind": "rack", "candidates": [
                {"host": n, "addresses": addrs}]} for n, addrs in targets]}


def _agent(tmp_path, nics=None, targets=None, **cfg):
    nics = nics or [{"name": "eth0", "index": 0, "address": "198.18.0.2"},
                    {"name": "eth1", "index": 1, "address": "198.18.0.18"}]
    targets = targets or [("h2", ["198.18.0.34", "198.18.0.50"]), ("h3", ["198.18.0.66", "198.18.0.82"])]
    settings = agentmod.check_config(dict({"events_file": str(tmp_path / "events.jsonl")}, **cfg))
    return agentmod.Agent(settings, _pinglist(nics, targets), clock=lambda: 0.0, wall=lambda: 1000.0,
                          log=lambda m: None)


def _resolve(a, results, t=0.0):
    """results: {(nic, target): answered?}; one probe each."""
    for key, ok in results.items():
        seq = a.ledger.sent(key, t)
        if ok:
            a.ledger.reply(seq, t + 0.001)
    a.ledger.expire(t + 10)


def _events(tmp_path):
    p = tmp_path / "events.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def test_path_loss_on_one_nic(tmp_path):
    a = _agent(tmp_path)
    _resolve(a, {("eth0", "h2"): True, ("eth1", "h2"): False, ("eth0", "h3"): True, ("eth1", "h3"): False})
    a.close_round()
    assert a.counters[("eth1", "h2")]["lost"] == 1 and a.counters[("eth1", "h3")]["lost"] == 1
    assert a.counters[("eth0", "h2")]["lost"] == 0
    assert all(c["unreachable"] == 0 for c in a.counters.values())
    a.loss_events()
    ev = _events(tmp_path)
    assert [(e["kind"], e["nic"], e["target"], e["value"]) for e in ev] == [
        ("probe_loss", "eth1", "h2", 1.0), ("probe_loss", "eth1", "h3", 1.0)]
    assert set(ev[0]) == {"time", "source", "kind", "scope", "host", "rack", "zone", "nic", "slot", "target",
                          "target_host", "value", "detail"}


def test_unreachable_target_is_not_path_loss(tmp_path):
    a = _agent(tmp_path)
    rounds = agentmod.HOLD_ROUNDS + 1
    for i in range(rounds):
        _resolve(a, {("eth0", "h2"): True, ("eth1", "h2"): True, ("eth0", "h3"): False, ("eth1", "h3"): False}, i)
        a.close_round()
        if i < agentmod.HOLD_ROUNDS - 1:   # held, neither loss nor unreachable yet
            assert a.counters[("eth0", "h3")]["lost"] == a.counters[("eth0", "h3")]["unreachable"] == 0
    assert a.counters[("eth0", "h3")] == {"sent": rounds, "answered": 0, "lost": 0, "unreachable": rounds,
                                          "rtt_sum": 0.0}
    a.loss_events()
    ev = _events(tmp_path)
    assert [(e["kind"], e["target"]) for e in ev] == [("target_unreachable", "h3")]   # once, not per round
    text = a.metrics_text()
    assert ('fabric_monitor_probes_unreachable_total{host="h1",rack="r1",zone="z1",nic="eth0",target="h3"} %d'
            % rounds) in text
    assert 'fabric_monitor_probes_lost_total{host="h1",rack="r1",zone="z1",nic="eth0",target="h3"} 0' in text


def test_silent_target_in_a_window_without_other_answers_is_held_then_unreachable(tmp_path):
    """The lab's miss: probes spread over the interval leave a window in which a NIC got no answer from any
    other target; the silent target is held, and counted unreachable once the NICs' other answers show."""
    a = _agent(tmp_path)
    _resolve(a, {("eth0", "h2"): True, ("eth1", "h2"): True, ("eth0", "h3"): True, ("eth1", "h3"): True})
    a.close_round()
    _resolve(a, {("eth1", "h3"): False}, 1.0)                  # h3 stops; only it resolved on eth1
    a.close_round()
    assert a.counters[("eth1", "h3")]["lost"] == 0 == a.counters[("eth1", "h3")]["unreachable"]
    for i in range(2, agentmod.HOLD_ROUNDS + 1):
        _resolve(a, {("eth0", "h2"): True, ("eth1", "h2"): True, ("eth0", "h3"): False, ("eth1", "h3"): False}, i)
        a.close_round()
    assert a.counters[("eth1", "h3")]["lost"] == 0 and a.counters[("eth1", "h3")]["unreachable"] == 3
    assert a.counters[("eth0", "h3")]["unreachable"] == agentmod.HOLD_ROUNDS - 1


def test_short_silence_of_a_target_is_path_loss(tmp_path):
    """Silent for fewer than HOLD_ROUNDS windows, then answering again: the held probes were lost on the way."""
    a = _agent(tmp_path)
    _resolve(a, {("eth0", "h2"): True, ("eth1", "h2"): True, ("eth0", "h3"): False, ("eth1", "h3"): False})
    a.close_round()
    _resolve(a, {("eth0", "h2"): True, ("eth1", "h2"): True, ("eth0", "h3"): True, ("eth1", "h3"): False}, 1.0)
    a.close_round()
    assert a.counters[("eth0", "h3")]["lost"] == 1 and a.counters[("eth1", "h3")]["lost"] == 2
    assert all(c["unreachable"] == 0 for c in a.counters.values())


def test_host_that_lost_every_nic_sees_path_loss(tmp_path):
    """Nothing answers on any NIC: that is this host's loss, not its targets' being down."""
    a = _agent(tmp_path)
    for i in range(agentmod.HOLD_ROUNDS):
        _resolve(a, dict(((n, t), False) for n in ("eth0", "eth1") for t in ("h2", "h3")), i)
        a.close_round()
    assert all(c["lost"] == agentmod.HOLD_ROUNDS and c["unreachable"] == 0 for c in a.counters.values())


def test_budget_limits_a_round(tmp_path):
    a = _agent(tmp_path, max_pps=3, interval=1.0)
    a.plan_round(0.0)
    assert len(a.queue) == 3
    assert [q[0] for q in a.queue] == pytest.approx([0.0, 1 / 3.0, 2 / 3.0])   # spread over the interval


@pytest.mark.parametrize("cfg, field", [({"interval": 0}, "fabric_monitor_interval"),
                                        ({"max_pps": "x"}, "fabric_monitor_max_pps"),
                                        ({"timeout": 20, "interval": 1}, "fabric_monitor_timeout"),
                                        ({"bogus": 1}, "unknown settings")])
def test_bad_config(cfg, field):
    with pytest.raises(agentmod.ConfigError, match=field):
        agentmod.check_config(cfg)


def _free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_real_run_on_loopback_with_a_silent_target(tmp_path):
    """Probes on lo: the agent's own responder answers, 127.0.0.2 has none. The loop keeps its rhythm
    and stops within a bounded time."""
    port = _free_udp_port()
    cfg = agentmod.check_config({"interval": 0.1, "timeout": 0.2, "port": port, "event_interval": 0.5,
                                 "events_file": str(tmp_path / "ev.jsonl"), "passive_interval": 0.2,
                                 "sys_class_net": str(tmp_path), "egress_state_file": str(tmp_path / "none"),
                                 "sidecar_dir": str(tmp_path), "bfd_dir": str(tmp_path),
                                 "datapath_state_dir": str(tmp_path)})
    plist = _pinglist([{"name": "lo", "index": 0, "address": "127.0.0.1"}],
                      [("self", ["127.0.0.1"]), ("silent", ["127.0.0.2"])])
    a = agentmod.Agent(cfg, plist, log=lambda m: None)
    t = threading.Thread(target=a.run, daemon=True)
    t.start()
    time.sleep(1.5)
    a.stop.set()
    t.join(2.0)
    assert not t.is_alive()
    assert a.counters[("lo", "self")]["answered"] >= 8
    assert a.counters[("lo", "self")]["lost"] == 0
    silent = a.counters[("lo", "silent")]
    assert silent["answered"] == 0 and silent["unreachable"] >= 8 and silent["lost"] == 0
    assert a.ledger.late == 0


def test_responder_only_program_answers():
    port = _free_udp_port()
    """The shipped, bundled program on a bare python3 (no site-packages: the hosts have no Ansible)."""
    p = subprocess.Popen([PYTHON, "-I", "-S", SHIPPED, "--responder-only", "127.0.0.1", "--port", str(port)],
                         stdout=subprocess.PIPE)
    try:
        p.stdout.readline()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2.0)
        s.sendto(probe.encode(probe.REQUEST, 5, 9), ("127.0.0.1", port))
        assert probe.decode(s.recv(100)) == (probe.REPLY, 5, 9)
    finally:
        p.terminate()
        p.wait(5)
