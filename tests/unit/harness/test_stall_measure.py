# -*- coding: utf-8 -*-
"""Unit tests of the lab tests' stall measurement (labkit/dp_harness.py): stalls are
taken per stream at the receiving end of an iperf3 run, and a run without the receiver's report
fails instead of passing with nothing measured."""
import pytest

from labkit import dp_harness as H


def report(per_stream):
    """iperf3-like JSON: per_stream = {socket: [bytes per 0.2 s interval]}."""
    n = len(next(iter(per_stream.values())))
    return {"intervals": [{"streams": [{"socket": s, "bytes": b[i], "seconds": 0.2, "start": 0.2 * i}
                                       for s, b in sorted(per_stream.items())]} for i in range(n)]}


def test_receiver_view_is_the_server_for_egress_and_the_client_for_reverse():
    sender = report({5: [100] * 10})
    receiver = report({7: [100, 0, 0, 0, 0, 0, 0, 100, 100, 100]})   # 1.2 s without bytes at the receiver
    egress = dict(sender, server_output_json=receiver)
    assert H.receiver_view(egress, reverse=False) is receiver
    assert H.max_stall(H.receiver_view(egress, reverse=False)) == pytest.approx(1.2)
    ingress = dict(receiver, server_output_json=sender)
    assert H.max_stall(H.receiver_view(ingress, reverse=True)) == pytest.approx(1.2)


def test_missing_receiver_report_fails():
    with pytest.raises(AssertionError, match="no server intervals"):
        H.receiver_view(report({5: [100] * 5}), reverse=False)


def test_stalls_are_per_stream_and_reset_by_bytes():
    r = report({1: [0, 0, 10, 0, 0, 0, 10], 2: [10, 0, 0, 0, 0, 0, 0]})
    assert H.max_stall(r) == pytest.approx(1.2)          # stream 2: six empty intervals at the end
    assert H.stalls(r) == [(0.0, 0.4), (0.2, 1.2), (0.6, 0.6)]


def test_interval_jitter_does_not_lengthen_a_stall():
    """Five empty intervals of 0.2000038 s (iperf3's timer jitter) are a 1.0 s stall, within a 1 s
    bound; six are 1.2 s and stay over it."""
    five = report({3: [10, 0, 0, 0, 0, 0, 10]})
    six = report({3: [10, 0, 0, 0, 0, 0, 0, 10]})
    for r in (five, six):
        for iv in r["intervals"]:
            iv["streams"][0]["seconds"] = 0.2000038
    assert H.max_stall(five) == 1.0
    assert H.max_stall(six) == 1.2 and H.max_stall(six) > 1.0


def test_by_end_requires_both_directions():
    sender = report({5: [100] * 3})
    receiver = report({7: [100, 0, 100]})
    received, sent = H.by_end({"egress": dict(sender, server_output_json=receiver),
                               "ingress": dict(receiver, server_output_json=sender)})
    assert received == {"egress": receiver, "ingress": dict(receiver, server_output_json=sender)}
    assert sent["egress"]["intervals"] == sender["intervals"] and sent["ingress"] == sender
    with pytest.raises(AssertionError, match="missing"):
        H.by_end({"egress": dict(sender, server_output_json=receiver)})


def test_time_after_the_run_is_not_stall_time():
    """The receiver's last interval ran 43 ms past the 2 s run (it learned of the end late): five empty
    intervals up to the end are a 1.0 s stall, not 1.043 s; six are still 1.2 s."""
    def late_end(per_stream, duration):
        r = report(per_stream)
        r["start"] = {"test_start": {"duration": duration}}
        last = r["intervals"][-1]["streams"][0]
        last["seconds"] += 0.043
        last["end"] = last["start"] + last["seconds"]
        return r
    five = late_end({3: [10, 10, 10, 10, 10, 0, 0, 0, 0, 0]}, 2)
    six = late_end({3: [10, 10, 10, 10, 0, 0, 0, 0, 0, 0]}, 2)
    assert H.max_stall(five) == 1.0 and H.stalls(five) == [(1.0, 1.0)]
    assert H.max_stall(six) == 1.2
    unknown_length = report({3: [10, 10, 10, 10, 10, 0, 0, 0, 0, 0]})
    unknown_length["intervals"][-1]["streams"][0]["seconds"] += 0.043
    assert H.max_stall(unknown_length) == 1.043          # no run length in the report: nothing clipped


def test_a_coarser_receiver_report_fails():
    """A server started without -i reports every 1 s while the client reports every 0.2 s: a stream's
    whole second without bytes would read as exactly a 1 s bound and shorter stalls not at all."""
    client = report({5: [100] * 10})
    server = {"intervals": [{"streams": [{"socket": 7, "bytes": b, "seconds": 1.0, "start": float(i)}]}
                            for i, b in enumerate([100, 0])]}
    with pytest.raises(AssertionError, match="-i 0.2"):
        H.receiver_view(dict(client, server_output_json=server), reverse=False)


def test_a_short_first_or_last_interval_is_not_a_coarser_report():
    """The resolution compared is each report's median interval: a client whose first interval was cut short
    (0.1 s) and a server whose last one ran long still report at the same 0.2 s."""
    client = report({5: [100] * 6})
    client["intervals"][0]["streams"][0]["seconds"] = 0.1
    server = report({7: [100] * 6})
    server["intervals"][-1]["streams"][0]["seconds"] = 0.35
    assert H.receiver_view(dict(client, server_output_json=server), reverse=False) is server
