"""Probe wire format, accounting (answered / lost / late), the rate budget and what probing costs."""
import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import probe


def test_wire_roundtrip_and_responder_rules():
    req = probe.encode(probe.REQUEST, 7, 42)
    assert len(req) == probe.PROBE_BYTES
    assert probe.decode(req) == (probe.REQUEST, 7, 42)
    rep = probe.reply_for(req)
    assert probe.decode(rep) == (probe.REPLY, 7, 42)
    assert probe.reply_for(rep) is None                 # a reply is never answered (no ping-pong)
    assert probe.reply_for(req + b"x") is None          # wrong size: no answer (no amplification)
    assert probe.reply_for(b"XXXX" + req[4:]) is None   # wrong magic


def test_ledger_accounting():
    led = probe.Ledger(timeout=1.0)
    a, b = ("eth0", "h2"), ("eth1", "h2")
    s1 = led.sent(a, 0.0)
    s2 = led.sent(a, 0.1)
    s3 = led.sent(b, 0.2)
    assert led.reply(s1, 0.05) == (a, pytest.approx(0.05))
    assert led.reply(s1, 0.06) is None                   # duplicate
    assert led.expire(1.0) == 0
    assert led.expire(1.15) == 1                         # s2 lost
    assert led.reply(s2, 1.2) is None                    # late reply: still lost
    assert led.reply(s3, 1.3) is None                    # past its timeout: lost on arrival
    w = led.take_window()
    assert (w[a].sent, w[a].answered, w[a].lost) == (2, 1, 1)
    assert (w[b].answered, w[b].lost) == (0, 1)
    assert w[a].loss_ratio() == 0.5 and w[b].loss_ratio() == 1.0
    assert led.take_window() == {}
    assert led.totals[a].rtt_sum == pytest.approx(0.05)
    assert not led.outstanding


def test_ledger_bounds_outstanding_probes():
    led = probe.Ledger(timeout=10.0, max_outstanding=3)
    for i in range(5):
        led.sent(("eth0", "t"), float(i))
    assert len(led.outstanding) == 3
    assert led.totals[("eth0", "t")].lost == 2


def test_ledger_rejects_bad_timeout():
    with pytest.raises(ValueError, match="timeout"):
        probe.Ledger(timeout=0)


def test_schedule_keeps_the_budget_and_covers_every_pair():
    pairs = list(range(25))
    assert probe.schedule(pairs, 1.0, 100, 0) == pairs
    seen = set()
    for r in range(5):
        chunk = probe.schedule(pairs, 1.0, 10, r)
        assert len(chunk) == 10
        seen.update(chunk)
    assert seen == set(pairs)


def test_cost_per_host_and_region():
    c = probe.cost(pairs=12, interval=1.0, max_pps=100, family="ipv6", hosts=125000)
    assert c["probes_per_second"] == 12
    assert c["wire_bytes_per_probe"] == 32 + 8 + 40 + 18
    assert c["host_packets_per_second"] == 24
    assert c["region_packets_per_second"] == 24 * 125000
    capped = probe.cost(pairs=8 * 260, interval=1.0, max_pps=100, family="ipv6", hosts=125000)
    assert capped["probes_per_second"] == 100
    assert capped["pair_period_seconds"] == pytest.approx(20.8)
    assert capped["host_bytes_per_second"] == 200 * 98
