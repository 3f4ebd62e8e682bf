# -*- coding: utf-8 -*-
"""The storage node's sender trace of bench/gray_stack.py --trace-senders (labkit/gray_stack.py): ``ss -tin``
parsing and the freezes with their retransmission timeouts, on canned samples."""
from labkit import gray_stack as GS

SS = (
    "0      0               [fd00:5::10]:5605      [fd00:10:0:8::8]:60864\n"
    "\t cubic wscale:10,10 rto:204 rtt:0.015/0.007 cwnd:10 bytes_received:4324021\n"
    "0      679112  [::ffff:198.19.5.10]:5606 [::ffff:198.18.0.136]:48534\n"
    "\t cubic wscale:10,10 rto:292 backoff:2 cwnd:1 bytes_acked:674768 unacked:22 retrans:1/310 lost:22\n"
    "0      1613072 [::ffff:198.19.5.10]:5606 [::ffff:198.18.0.136]:48420\n"
    "\t cubic wscale:10,10 rto:240 cwnd:40 bytes_acked:9000000\n")


def test_parse_ss_keeps_the_senders_of_one_address_with_their_state():
    out = GS.parse_ss(SS, "198.19.5.10")
    assert sorted(out) == ["[::ffff:198.18.0.136]:48420", "[::ffff:198.18.0.136]:48534"]
    a = out["[::ffff:198.18.0.136]:48534"]
    assert (a["backoff"], a["rto"], a["cwnd"], a["bytes_acked"], a["retrans"], a["lost"]) == (
        "2", "292", "1", "674768", "1/310", "22")
    assert out["[::ffff:198.18.0.136]:48420"]["backoff"] == "0"   # absent: no timeout pending
    assert GS.parse_ss("", "198.19.5.10") == {}


def _sample(acked, backoff="0", cwnd="40"):
    return {"bytes_acked": str(int(acked)), "backoff": backoff, "cwnd": cwnd, "rto": "232", "retrans": None,
            "lost": None, "unacked": None}


def test_freezes_finds_the_longest_stop_after_the_fault_with_its_timeouts():
    t0 = 100.0
    stalled = [(-0.5, 2e6), (-0.1, 3e6), (0.0, 4e6), (0.3, 4e6, "1", "1"), (0.8, 4e6, "2", "1"), (0.85, 5e6)]
    moving = [(t, 2e6 + t * 1e6) for t in (-0.5, -0.1, 0.0, 0.3, 0.8, 0.85)]
    samples = []
    for i in range(len(stalled)):
        s = stalled[i]
        samples.append((t0 + s[0], {"a": _sample(s[1], *s[2:]), "b": _sample(moving[i][1])}))
    out = GS.freezes(samples, t0, top=2)
    assert [f["peer"] for f in out] == ["a"]          # "b" never stops
    f = out[0]
    assert (f["freeze_s"], f["from_s"]) == (0.8, 0.0)      # last sample with no progress: 0.8 s
    assert [(x["t"], x["backoff"]) for x in f["steps"]] == [(0.0, "0"), (0.3, "1"), (0.8, "2"), (0.85, "0")]


def test_freezes_ignores_stops_before_the_fault_and_small_flows():
    t0 = 10.0
    samples = [(t0 - 1.0, {"a": _sample(2e6), "c": _sample(10)}), (t0 - 0.5, {"a": _sample(2e6), "c": _sample(10)}),
               (t0 - 0.3, {"a": _sample(3e6), "c": _sample(10)}), (t0 + 0.1, {"a": _sample(4e6), "c": _sample(10)})]
    assert GS.freezes(samples, t0, top=3) == []
