# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The clean-window decision before an undrain (remediate/clean_window.py): clean only on full evidence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget as B
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import clean_window as CW

NOW = 10000.0
CFG = {"step": 5.0, "max_gap": 15.0, "min_probes": 10, "max_loss": 0.01}
WIN = 60.0


def counter(per_step, start=NOW - WIN - 5.0, step=5.0, base=100.0):
    """Counter points from ``per_step`` increments (None: no sample at that step - a gap in the series)."""
    pts, v, t = [(start, base)], base, start
    for inc in per_step:
        t += step
        if inc is None:
            continue
        v += inc
        pts.append((t, v))
    return pts


def series(nic, points, target="r1-h1"):
    return {"nic": nic, "target": target, "points": points}


def clean_pair(nic="eth1", steps=13, rate=6):
    return series(nic, counter([rate] * steps)), series(nic, counter([0] * steps))


def judge(answered, lost, nics=("eth1",), **kw):
    kw.setdefault("settings", CFG)
    kw.setdefault("window", WIN)
    return CW.judge("nic:h1:1", list(nics), answered, lost, NOW, **kw)


def test_clean_window_is_clean_with_the_figures():
    a, lo = clean_pair()
    r = judge([a], [lo], since=NOW - WIN - 30)
    assert r["verdict"] == "clean" and r["clean"] and r["reasons"] == []
    assert r["nics"]["eth1"]["answered"] == 72 and r["nics"]["eth1"]["lost"] == 0   # 12 steps inside the window
    assert "CLEAN" in CW.summary(r)


def test_loss_is_not_clean_and_named():
    a = series("eth1", counter([6] * 13))
    lo = series("eth1", counter([0] * 6 + [1] + [0] * 6))
    r = judge([a], [lo])
    assert r["verdict"] == "not_clean" and not r["clean"]
    assert "NIC eth1 lost probes in 1 interval (worst: 1 of 7" in r["reasons"][0]


def test_loss_within_max_loss_is_clean():
    a = series("eth1", counter([200] * 13))
    lo = series("eth1", counter([0] * 6 + [1] + [0] * 6))
    assert judge([a], [lo])["verdict"] == "clean"   # 1 of 201 < 1 %


def test_prometheus_unreachable_is_no_evidence():
    r = judge([], [], error="http://127.0.0.1:19090: URLError (connection refused)")
    assert r["verdict"] == "no_evidence"
    assert any("could not be read (http://127.0.0.1:19090: URLError" in x for x in r["reasons"])
    assert any("no probe series" in x for x in r["reasons"])
    assert "Fix: make the evidence whole" in CW.refusal(r) and "nic:h1:1" in CW.refusal(r)


def test_error_with_clean_looking_data_is_still_no_evidence():
    a, lo = clean_pair()
    assert judge([a], [lo], error="the lost counters: timeout")["verdict"] == "no_evidence"


def test_missing_nic_series_is_no_evidence():
    a, lo = clean_pair("eth0")
    r = judge([a], [lo], nics=("eth0", "eth1"))
    assert r["verdict"] == "no_evidence" and any("NIC eth1: no probe series" in x for x in r["reasons"])


def test_gap_is_no_evidence():
    a = series("eth1", counter([6] * 5 + [None] * 4 + [30] + [6] * 3))
    lo = series("eth1", counter([0] * 5 + [None] * 4 + [0] + [0] * 3))
    r = judge([a], [lo])
    assert r["verdict"] == "no_evidence" and any(x.startswith("gap on NIC eth1") for x in r["reasons"])


def test_series_ending_early_is_a_gap():
    a = series("eth1", counter([6] * 8))    # the agent stopped 25 s before now
    lo = series("eth1", counter([0] * 8))
    r = judge([a], [lo])
    assert r["verdict"] == "no_evidence" and any("gap on NIC eth1" in x for x in r["reasons"])


def test_no_new_probes_is_a_gap_and_too_few():
    # the counters are there but do not move (Prometheus' lookback repeats a stale value)
    a = series("eth1", counter([0] * 13))
    lo = series("eth1", counter([0] * 13))
    r = judge([a], [lo])
    assert r["verdict"] == "no_evidence"
    assert any("too few probes on NIC eth1: 0" in x for x in r["reasons"])
    assert any("gap on NIC eth1" in x for x in r["reasons"])


def test_too_few_probes():
    a = series("eth1", counter([1] * 13))
    lo = series("eth1", counter([0] * 13))
    r = judge([a], [lo], settings=dict(CFG, min_probes=20))
    assert r["verdict"] == "no_evidence" and any("too few probes on NIC eth1: 12" in x for x in r["reasons"])


def test_window_not_elapsed_since_the_drain():
    a, lo = clean_pair()
    r = judge([a], [lo], since=NOW - 20.0)
    assert r["verdict"] == "no_evidence"
    assert any("window not yet elapsed: drained at 9980, 20 s ago; the window needs 60 s" in x for x in r["reasons"])


def test_counter_reset_counts_the_new_value():
    pts = counter([6] * 6) + [(NOW - WIN + 35.0, 5.0)]
    pts += [(NOW - WIN + 35.0 + 5 * i, 5.0 + 6 * i) for i in range(1, 6)]
    a = series("eth1", pts)
    lo = series("eth1", [(p[0], 0.0) for p in pts])
    r = judge([a], [lo])
    assert r["verdict"] == "clean" and r["nics"]["eth1"]["answered"] == 6 * 5 + 5 + 6 * 5


def test_unrelated_nic_series_are_ignored():
    a, lo = clean_pair()
    bad_a = series("eth2", counter([1] * 13))
    bad_l = series("eth2", counter([5] * 13))
    assert judge([a, bad_a], [lo, bad_l])["verdict"] == "clean"


def test_targets_are_summed_per_nic():
    a1 = series("eth1", counter([3] * 13), target="r1-h1")
    a2 = series("eth1", counter([3] * 13), target="lab-storage")
    lo = series("eth1", counter([0] * 13))
    r = judge([a1, a2], [lo])
    assert r["verdict"] == "clean" and r["nics"]["eth1"]["series"] == 2 and r["nics"]["eth1"]["answered"] == 72


@pytest.mark.parametrize("settings_,field", [
    ({"window": 0}, "window"), ({"step": "5"}, "step"), ({"max_gap": 1.0, "step": 5.0}, "max_gap"),
    ({"min_probes": 2.5}, "min_probes"), ({"max_loss": 1.0}, "max_loss"), ({"maxgap": 3}, "maxgap"),
    ({"window": 10.0, "max_gap": 60.0}, "window"),
])
def test_bad_settings_name_the_field(settings_, field):
    with pytest.raises(CW.CleanWindowError, match=r"drain_clean_window_settings\.%s" % field):
        CW.check_settings(settings_)


def test_no_nics_is_an_error():
    with pytest.raises(CW.CleanWindowError, match="nics"):
        CW.judge("host:h1", [], [], [], NOW)


def test_series_from_matrix_and_errors():
    resp = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"nic": "eth1", "target": "r1-h1", "host": "h1"}, "values": [[1.0, "3"], [2.0, "5"]]}]}}
    assert CW.series_from_matrix(resp) == [{"nic": "eth1", "target": "r1-h1", "host": "h1",
                                            "points": [(1.0, 3.0), (2.0, 5.0)]}]
    with pytest.raises(CW.CleanWindowError, match="not a success"):
        CW.series_from_matrix({"status": "error", "error": "parse error"})
    with pytest.raises(CW.CleanWindowError, match="not a matrix"):
        CW.series_from_matrix({"status": "success", "data": {"resultType": "vector", "result": []}})


def test_queries_select_the_host_and_nics():
    q = CW.queries("h1", ["eth1", "eth0"])
    assert q["answered"] == 'fabric_monitor_probes_answered_total{job="fabric_monitor",host="h1",nic=~"eth0|eth1"}'
    assert q["lost"].startswith("fabric_monitor_probes_lost_total{")


def test_budget_refuses_an_undrain_on_a_window_that_is_not_clean():
    fab = B.FabricView({"h1": {"rack": "r1", "nics": 2}}, {"r1": {"zone": "z1"}})
    r = B.resolve(fab, "nic", host="h1", nic=1)
    r.update(action="undrain", automatic=True)
    verdict = judge([], [], error="connection refused")
    verdict.update(allowed=False, summary=CW.summary(verdict), fix=CW.fix(verdict))
    d = B.decide(fab, r, {"nic:h1:1"}, [], window=verdict)
    assert not d["allowed"] and "the probe window is not clean" in d["reasons"][0] and "Fix:" in d["reasons"][0]
    assert d["numbers"]["clean_window.verdict"] == "no_evidence"
    ok = dict(verdict, allowed=True, verdict="clean")
    assert B.decide(fab, r, {"nic:h1:1"}, [], window=ok)["allowed"]
    # an element not drained: nothing to judge, the undrain is a no-op whatever the verdict
    assert B.decide(fab, r, set(), [], window=verdict)["noop"]


# ------------------------------------------------------------------------------------------------
# Property: any mix of samples, gaps and missing series -> never "clean" without full evidence
# ------------------------------------------------------------------------------------------------
STEP = st.one_of(st.none(), st.tuples(st.integers(min_value=0, max_value=20), st.integers(min_value=0, max_value=3)))


@settings(max_examples=300, deadline=None)
@given(nics=st.lists(st.sampled_from(["eth0", "eth1", "eth2"]), min_size=1, max_size=3, unique=True),
       data=st.dictionaries(st.sampled_from(["eth0", "eth1", "eth2", "eth9"]),
                            st.tuples(st.lists(STEP, min_size=0, max_size=14), st.booleans()), max_size=4),
       error=st.one_of(st.none(), st.just("timeout")),
       since_ago=st.one_of(st.none(), st.floats(min_value=0.0, max_value=200.0)))
def test_property_never_clean_without_full_evidence(nics, data, error, since_ago):
    answered, lost = [], []
    for nic, (steps, with_lost) in data.items():
        if steps:
            answered.append(series(nic, counter([None if x is None else x[0] for x in steps])))
            if with_lost:
                lost.append(series(nic, counter([None if x is None else x[1] for x in steps])))
    since = None if since_ago is None else NOW - since_ago
    r = judge(answered, lost, nics=nics, error=error, since=since)
    assert r["verdict"] in CW.VERDICTS and r["clean"] == (r["verdict"] == "clean")
    if r["verdict"] != "clean":
        assert r["reasons"]
        return
    # clean: every condition of full evidence holds, checked here from the generated data, not the judgement
    assert error is None and (since is None or NOW - WIN >= since)
    for nic in nics:
        assert nic in data and data[nic][0], "clean without a series on %s" % nic
        steps, with_lost = data[nic]
        t, last, total = NOW - WIN - 5.0, NOW - WIN, 0
        pending = [0, 0]   # increments of steps without a sample are counted at the next sample
        for x in steps:
            t += 5.0
            if x is None:
                continue
            a, lo = x[0] + pending[0], (x[1] if with_lost else 0) + pending[1]
            pending = [0, 0]
            if t > NOW - WIN + 1e-6 and a + lo > 0:
                assert t - last <= CFG["max_gap"] + 1e-6, "gap on %s before %s" % (nic, t)
                assert lo / float(a + lo) <= CFG["max_loss"]
                last = t
                total += a + lo
        assert NOW - last <= CFG["max_gap"] + 1e-6 and total >= CFG["min_probes"]


@settings(max_examples=150, deadline=None)
@given(drop=st.sets(st.integers(min_value=0, max_value=12), max_size=13))
def test_property_lossless_window_is_clean_exactly_when_no_gap(drop):
    # steps at NOW - 60 + 5 i; step 0 is the window's start (the baseline side); a dropped step has no probes
    incs = [None if i in drop else 6 for i in range(13)]
    a, lo = series("eth1", counter(incs)), series("eth1", counter([None if x is None else 0 for x in incs]))
    r = judge([a], [lo])
    marks = [NOW - WIN] + [NOW - WIN + 5.0 * i for i in range(1, 13) if incs[i] is not None] + [NOW]
    gap = any(b - a_ > CFG["max_gap"] for a_, b in zip(marks, marks[1:]))
    assert r["verdict"] == ("no_evidence" if gap else "clean"), (incs, r["reasons"])
