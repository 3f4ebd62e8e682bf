# -*- coding: utf-8 -*-
"""SLI good/bad minutes per scope: the definition of docs/operations.md, shared with the recording rules."""
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import sli
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.sli import SLIError, Sample

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import monitor_fabric as fabrics  # noqa: E402  pylint: disable=wrong-import-position

IDX = fabrics.index()
M0 = 30000000 * 60  # an epoch minute boundary


def samples_for(host, nic, minute, answered, lost, per_minute=6):
    """``per_minute`` 10 s samples in ``minute``, the counts spread over them."""
    out = []
    for i in range(per_minute):
        a = answered // per_minute + (1 if i < answered % per_minute else 0)
        b = lost // per_minute + (1 if i < lost % per_minute else 0)
        out.append(Sample(M0 + minute * 60 + 10 * i + 5, host, nic, a, b))
    return out


def test_a_minute_is_bad_strictly_above_the_threshold_and_counts_from_min_probes():
    assert sli.classify(99, 1) == "good"          # exactly 1 %: not above
    assert sli.classify(98, 2) == "bad"
    assert sli.classify(5, 4) is None             # 9 resolved < 10: does not count
    assert sli.classify(0, 10) == "bad"
    assert sli.classify(990, 10, threshold=0.005) == "bad"


def test_minutes_per_scope_roll_up_nic_host_rack():
    s = (samples_for("z1r1h1", 1, 0, 100, 5)      # NIC 1 bad in minute 0
         + samples_for("z1r1h1", 2, 0, 100, 0)    # NIC 2 good
         + samples_for("z1r1h2", 1, 0, 200, 0)    # another host of the rack, good
         + samples_for("z1r2h1", 1, 1, 50, 0))    # rack 2, minute 1
    nic = sli.minutes(s, "nic", index=IDX)
    assert nic["z1r1h1/nic1"] == {M0 // 60: "bad"} and nic["z1r1h1/nic2"] == {M0 // 60: "good"}
    assert sli.minutes(s, "host", index=IDX)["z1r1h1"] == {M0 // 60: "bad"}     # 5 / 205 = 2.4 %
    assert sli.minutes(s, "rack", index=IDX) == {"z1r1": {M0 // 60: "bad"},    # 5 / 405 = 1.2 %
                                                 "z1r2": {M0 // 60 + 1: "good"}}


def test_zone_minute_zero_is_bad_and_minute_one_good():
    s = samples_for("z1r1h1", 1, 0, 100, 5) + samples_for("z1r1h2", 1, 0, 300, 0) + samples_for("z1r2h1", 1, 1, 50, 0)
    zone = sli.minutes(s, "zone", index=IDX)["z1"]
    assert zone == {M0 // 60: "bad", M0 // 60 + 1: "good"}  # 5/405 = 1.23 % then 0 %
    s.extend(samples_for("z1r3h1", 1, 0, 200, 0))
    assert sli.minutes(s, "zone", index=IDX)["z1"][M0 // 60] == "good"  # 5/605 = 0.83 %


def test_good_bad_counts_sli_and_the_period():
    s = []
    for m in range(10):
        s += samples_for("z1r1h1", 1, m, 100, 3 if m in (2, 5) else 0)
    s += samples_for("z1r1h1", 1, 10, 3, 0)  # 3 probes: agent mostly down, does not count
    out = sli.good_bad(s, "host", index=IDX)["z1r1h1"]
    assert (out["good"], out["bad"], out["sli"]) == (8, 2, 0.8)
    assert out["bad_minutes"] == [M0 + 120, M0 + 300]
    part = sli.good_bad(s, "host", index=IDX, start=M0 + 180, end=M0 + 360)["z1r1h1"]
    assert (part["good"], part["bad"]) == (2, 1)
    assert sli.sli(0, 0) is None


def test_labels_on_the_sample_win_over_the_index_and_unknown_hosts_are_skipped():
    s = [Sample(M0 + 5, "elsewhere", 1, 100, 0), Sample(M0 + 5, "z1r1h1", 1, 100, 0, rack="custom", zone="zz")]
    assert sorted(sli.minutes(s, "rack", index=IDX)) == ["custom"]
    assert sorted(sli.minutes(s, "rack")) == ["custom"]


def test_bad_input_names_field_value_and_fix():
    with pytest.raises(SLIError) as err:
        Sample.from_dict({"time": -1, "host": "", "nic": 0, "answered": 1.5, "lost": -1, "extra": 1})
    assert sorted(p.path.split(".")[-1] for p in err.value.problems) == ["answered", "extra", "host", "lost", "nic", "time"]
    with pytest.raises(SLIError) as err:
        sli.minutes([], "pod", threshold=1.5, min_probes=0)
    assert sorted(p.path for p in err.value.problems) == ["min_probes", "scope", "threshold"]
    assert Sample.from_dict({"time": 5.0, "host": "h", "nic": 1, "answered": 3, "lost": 0}).answered == 3


def test_rule_names_match_the_fabric_monitor_rules():
    assert sli.recording_rule_names("rack") == {"loss_ratio": "fabric_monitor:loss_ratio:rack_1m",
                                                "counts": "fabric_monitor:minute:rack",
                                                "bad": "fabric_monitor:bad_minute:rack"}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(sorted(IDX.hosts)[:12]), st.integers(1, 4),
                          st.integers(0, 50), st.integers(0, 5)), max_size=60))
def test_a_bad_host_minute_has_a_lossy_nic_and_the_verdict_is_the_pooled_ratio(rows):
    s = [Sample(M0 + m * 60 + 7, h, n, a, b) for m, h, n, a, b in rows]
    host = sli.minutes(s, "host", index=IDX)
    totals = sli.minute_totals(s, "host", index=IDX)
    nic_totals = sli.minute_totals(s, "nic", index=IDX)
    for sid, row in host.items():
        for m, verdict in row.items():
            answered, lost = totals[sid][m]
            assert answered + lost >= sli.MIN_PROBES
            assert verdict == ("bad" if lost / float(answered + lost) > sli.THRESHOLD else "good")
            if verdict == "bad":  # a pooled ratio above the threshold needs one NIC above it
                cells = [nic_totals.get("%s/nic%d" % (sid, n), {}).get(m) for n in range(1, 5)]
                assert any(c and c[0] + c[1] and c[1] / float(c[0] + c[1]) > sli.THRESHOLD for c in cells)
    for sid, per in totals.items():  # minutes under min_probes never count
        for m, (answered, lost) in per.items():
            assert (m in host.get(sid, {})) == (answered + lost >= sli.MIN_PROBES)
