# -*- coding: utf-8 -*-
"""Correlation: one fault -> one case of the right scope (the lab acceptance rules of issue 29 item 6),
escalation, repeats, agent down, options and streaming. Detections come from bench/monitor_sim.py's
probe model over a small two-zone fabric; every assertion is on the cases the engine produced."""
import json
import os
import sys

import pytest

from ansible_collections.netscale.multinic.bench.monitor_sim import Fault, Simulator
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.correlate import (
    CorrelationError, Correlator, case_dict, check_options, correlate)
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import Detection
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.fabric import FabricIndex
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import tor_port_name

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import monitor_fabric as fabrics  # noqa: E402  pylint: disable=wrong-import-position

T0 = 1000 * 60.0
IDX = fabrics.index()


def run(faults, until=T0 + 900, noise=2, seed=1, **options):
    sim = Simulator(IDX, seed=seed)
    dets = list(sim.stream(faults, until, noise=noise, t_start=T0 - 300))
    cases, stats = correlate(dets, IDX, **options)
    return dets, cases, stats


def only_case(cases, kind, scope_id):
    assert [(c["scope"]["kind"], c["scope"]["id"]) for c in cases] == [(kind, scope_id)], cases
    return cases[0]


def test_index_from_plan_data_matches_index_from_topology_and_planner_port_names():
    plan = fabrics.plan()
    topo = plan.topo
    data = FabricIndex.from_plan_data([plan.rack_data(r) for r in topo.racks], [plan.spine_data(s) for s in topo.spines])
    assert data.hosts == IDX.hosts and data.racks == IDX.racks and data.spines == IDX.spines
    host = topo.host_by_name("z1r2h3")
    rack = plan.rack_data(host.parent)
    nic2 = [h for h in rack["hosts"] if h["name"] == "z1r2h3"][0]["nics"][1]
    assert IDX.tor_port("z1r2h3", 2) == nic2["tor_port"] == tor_port_name(host, 1)


@pytest.mark.parametrize("loss", [1.0, 0.02])
def test_silent_loss_on_one_nic_is_one_case_scoped_to_that_nic_and_port(loss):
    fault = Fault("nic", T0, T0 + 300, host="z1r2h3", nic=2, loss=loss)
    dets, cases, stats = run([fault])
    case = only_case(cases, "nic", "z1r2h3/nic2")
    assert case["scope"]["port"] == "host3-1" and case["scope"]["tor"] == "z1r2-tor"
    assert case["detections"] == stats["in_cases"] == sum(1 for d in dets if d.kind == "path_loss" and d.value >= 0.01)
    # both directions: probes from the NIC and probes toward it
    assert case["evidence"]["far_ends_total"] >= 10
    assert case["opened_at"] - T0 <= 120  # decided within two minutes (issue 29: 2 % loss -> a case within 2 min)
    assert "NIC 2 of z1r2h3" in case["root_cause"] and "z1r2-tor:host3-1" in case["root_cause"]


def test_one_host_losing_every_nic_is_one_host_case():
    _d, cases, _s = run([Fault("host", T0, T0 + 300, host="z1r2h3")])
    case = only_case(cases, "host", "z1r2h3")
    assert case["evidence"]["nics"][:4] == ["z1r2h3/nic%d" % n for n in (1, 2, 3, 4)]


def test_tor_failure_is_one_tor_case_absorbing_every_host_and_nic_detection_of_its_rack():
    dets, cases, stats = run([Fault("tor", T0, T0 + 300, tor="z1r3-tor")])
    case = only_case(cases, "tor", "z1r3-tor")
    rack_hosts = set(IDX.rack_hosts(IDX.rack_of_tor("z1r3-tor")))
    assert rack_hosts <= set(case["evidence"]["hosts"]) | set(case["evidence"]["far_ends"])
    for kind in ("nic_out", "bfd_down", "bgp_down", "tor_down", "uplink_loss", "path_loss"):
        assert case["evidence"]["kinds"][kind] == sum(1 for d in dets if d.kind == kind and (d.value is None or d.value >= 0.01))
    assert stats["unattributed"] == 0


def test_tor_failure_without_an_exporter_is_still_the_tor():
    sim = Simulator(IDX)
    dets = [d for d in sim.stream([Fault("tor", T0, T0 + 300, tor="z1r3-tor")], T0 + 900, t_start=T0 - 300)
            if d.kind not in ("tor_down", "uplink_loss") and d.time >= T0 - 300]
    cases, _s = correlate(dets, IDX)
    only_case(cases, "tor", "z1r3-tor")


@pytest.mark.parametrize("exporter,expected", [(True, "z1r3-tor/z1-s2"), (False, "z1r3-tor/any-spine")])
def test_loss_on_one_uplink_is_one_uplink_case(exporter, expected):
    _d, cases, _s = run([Fault("uplink", T0, T0 + 300, tor="z1r3-tor", spine="z1-s2", loss=0.5, exporter=exporter)])
    case = only_case(cases, "uplink", expected)
    assert case["scope"]["spine"] == ("z1-s2" if exporter else None)


def test_uplink_loss_from_most_tors_of_a_zone_is_the_spine():
    dets = [Detection(T0 + 5 + i, "uplink_loss", tor=IDX.tor_name(r), spine="z1-s1", source="frr_exporter")
            for i, r in enumerate(IDX.zone_racks(IDX.zone_index["z1"]))]
    cases, _s = correlate(dets, IDX)
    case = only_case(cases, "spine", "z1-s1")
    assert case["detections"] == 4 and case["scope"]["zone"] == "z1"


def test_many_tors_of_a_zone_at_once_is_the_zone():
    faults = [Fault("tor", T0, T0 + 120, tor="z1r%d-tor" % r) for r in (1, 2, 3)]
    _d, cases, stats = run(faults)
    case = only_case(cases, "zone", "z1")
    assert case["detections"] == stats["in_cases"]


def test_agent_down_is_an_agent_case_and_no_network_case():
    dets, cases, stats = run([Fault("agent", T0, T0 + 300, host="z1r1h1")])
    case = only_case(cases, "agent", "z1r1h1")
    assert case["evidence"]["kinds"]["path_loss"] > 100  # probes toward the dead responder
    assert "not network loss" in case["root_cause"]
    assert stats["unattributed"] == 0


def test_agent_down_reported_after_the_probe_loss_still_wins():
    """Prometheus notices a dead agent later than the probes toward it lose: within agent_grace."""
    sim = Simulator(IDX)
    dets = list(sim.stream([Fault("agent", T0, T0 + 300, host="z1r1h1")], T0 + 900, noise=0, t_start=T0 - 300))
    shifted = [Detection(d.time + 90, d.kind, host=d.host, source=d.source) if d.kind == "agent_down" else d
               for d in dets]
    cases, _s = correlate(shifted, IDX)
    only_case(cases, "agent", "z1r1h1")


def test_a_nic_flapping_three_times_in_ten_minutes_is_one_case_with_three_repeats():
    fault = Fault("flap", T0, T0 + 600, host="z1r1h2", nic=3, flaps=(T0 + 10, T0 + 250, T0 + 500))
    _d, cases, _s = run([fault])
    case = only_case(cases, "nic", "z1r1h2/nic3")
    assert case["repeats"] == 3
    assert case["evidence"]["kinds"]["carrier_change"] == 3


def test_two_faults_in_different_racks_are_two_cases():
    faults = [Fault("nic", T0, T0 + 300, host="z1r1h1", nic=1), Fault("host", T0, T0 + 300, host="z1r4h2")]
    _d, cases, _s = run(faults)
    assert sorted((c["scope"]["kind"], c["scope"]["id"]) for c in cases) == [("host", "z1r4h2"), ("nic", "z1r1h1/nic1")]


def test_a_wider_case_absorbs_the_narrower_cases_it_encloses():
    # One NIC of a host fails first; three minutes later the whole ToR of its rack.
    faults = [Fault("nic", T0, T0 + 600, host="z1r3h1", nic=1), Fault("tor", T0 + 180, T0 + 480, tor="z1r3-tor")]
    _d, cases, stats = run(faults)
    case = only_case(cases, "tor", "z1r3-tor")
    assert case["absorbed"] and case["absorbed"][0].startswith("z1r3h1/nic1@")
    assert case["start"] < T0 + 60 and stats["cases_absorbed"] == 1


def test_a_case_ends_after_the_quiet_period_and_a_later_fault_opens_a_new_one():
    faults = [Fault("nic", T0, T0 + 120, host="z1r1h1", nic=1), Fault("nic", T0 + 1200, T0 + 1320, host="z1r1h1", nic=1)]
    _d, cases, _s = run(faults, until=T0 + 2000, quiet=300)
    assert [c["scope"]["id"] for c in cases] == ["z1r1h1/nic1"] * 2
    first, second = cases
    assert first["status"] == "closed" and first["end"] < T0 + 120 and first["closed_at"] == first["end"] + 300
    assert second["start"] >= T0 + 1200


def test_probe_loss_toward_a_target_outside_the_plan_is_a_target_case():
    dets = [Detection(T0 + 10 * i, "path_loss", host=h, nic=1, target="storage-1", value=0.5, source="probe")
            for i, h in enumerate(IDX.rack_hosts(0) + IDX.rack_hosts(1))]
    cases, _s = correlate(dets, IDX)
    only_case(cases, "target", "storage-1")


def test_sub_threshold_noise_opens_no_case():
    dets, cases, stats = run([], until=T0 + 1800, noise=20)
    assert len(dets) > 1000 and cases == []
    assert stats["below_threshold"] == stats["detections"] == len(dets)


def test_an_isolated_lossy_path_is_unattributed_not_a_case():
    det = Detection(T0, "path_loss", host="z1r1h1", nic=1, target="z1r2h1", target_nic=1, value=0.2, source="probe")
    cases, stats = correlate([det], IDX)
    assert cases == [] and stats["unattributed"] == 1


def test_streaming_equals_batch_and_late_detections_are_counted():
    sim = Simulator(IDX)
    dets = list(sim.stream([Fault("nic", T0, T0 + 300, host="z1r2h3", nic=2)], T0 + 900, noise=0, t_start=T0 - 300))
    batch, _s = correlate(dets, IDX)
    corr = Correlator(IDX)
    streamed = [case_dict(c, IDX) for c in list(corr.feed_many(dets)) + corr.finish()]
    assert streamed == batch
    before = corr.stats["unattributed"]
    corr.feed(Detection(T0 + 30, "nic_out", host="z1r1h1", nic=1, source="watcher"))
    assert corr.stats["late"] == 1 and corr.stats["unattributed"] == before + 1


def test_a_late_detection_joins_the_open_case_covering_it():
    corr = Correlator(IDX)
    sim = Simulator(IDX)
    for det in sim.stream([Fault("nic", T0, T0 + 1200, host="z1r2h3", nic=2)], T0 + 600, noise=0, t_start=T0 - 300):
        corr.feed(det)
    (case,) = corr.open_cases()
    before = case.count
    corr.feed(Detection(T0 + 60, "nic_errors", host="z1r2h3", nic=2, value=7, source="counters"))
    assert corr.stats["late"] == 1 and case.count == before + 1


def test_finish_with_now_keeps_open_cases_open():
    corr = Correlator(IDX)
    sim = Simulator(IDX)
    for det in sim.stream([Fault("host", T0, T0 + 1200, host="z1r2h3")], T0 + 600, noise=0, t_start=T0 - 300):
        corr.feed(det)
    (case,) = corr.finish(now=T0 + 600)
    out = case_dict(case, IDX)
    assert out["status"] == "open" and out["end"] is None and out["scope"]["id"] == "z1r2h3"


def test_bad_options_name_the_option_the_value_and_the_fix():
    with pytest.raises(CorrelationError) as err:
        check_options({"window": 0, "loss_threshold": 2, "min_peers": 1.5, "quiet_period": 60, "record": "yes"})
    paths = sorted(p.path for p in err.value.problems)
    assert paths == ["loss_threshold", "min_peers", "quiet_period", "record", "window"]
    assert all(p.fix for p in err.value.problems)
    with pytest.raises(CorrelationError, match="quiet"):
        check_options({"window": 120, "quiet": 60})
    assert check_options({})["window"] == 60.0


def test_tick_decides_a_window_without_a_later_detection():
    corr = Correlator(IDX)
    det = Detection(T0 + 10, "nic_out", host="z1r1h1", nic=1, source="watcher")
    assert corr.feed(det) == [] and corr.open_cases() == []
    corr.tick(T0 + 60 + 29)                        # window [T0, T0+60) not yet past the 30 s slack
    assert corr.open_cases() == []
    corr.tick(T0 + 90)
    (case,) = corr.open_cases()
    assert case.key == ("nic", "z1r1h1", 1) and case.opened_at == T0 + 90
    closed = corr.tick(T0 + 90 + 600)              # quiet for 600 s after its last detection
    assert [c.key for c in closed] == [("nic", "z1r1h1", 1)] and closed[0].closed_at == T0 + 10 + 600


def test_probes_toward_a_host_alone_wait_for_an_agent_down():
    """Only inbound loss, nothing from the host itself: held up to agent_grace, then a network case."""
    dets = [Detection(T0 + 5 + 10 * i, "path_loss", host=src, nic=1, target="z1r2h1", value=1.0, source="probe")
            for i in range(6) for src in ("z1r1h1", "z1r3h1", "z1r4h1", "z1r2h2")]
    cases, _s = correlate(dets, IDX)
    assert [c["scope"]["id"] for c in cases] == ["z1r2h1"]
    assert cases[0]["opened_at"] >= T0 + 5 + 120   # waited agent_grace for Prometheus
    late_agent = dets + [Detection(T0 + 100, "agent_down", host="z1r2h1", source="agent")]
    cases, _s = correlate(late_agent, IDX)
    assert [c["scope"]["kind"] for c in cases] == ["agent"]


def test_case_events_meet_the_eda_case_contract_and_drain_the_right_nic():
    from ansible_collections.netscale.multinic.plugins.module_utils.monitor.correlate import case_event
    from ansible_collections.netscale.multinic.plugins.module_utils.remediate.actions import check_case, plan_action

    faults = [Fault("nic", T0, T0 + 300, host="z1r2h3", nic=2), Fault("agent", T0, T0 + 300, host="z1r1h1"),
              Fault("uplink", T0, T0 + 300, tor="z1r4-tor", spine="z1-s2", loss=0.5)]
    _d, cases, _s = run(faults)
    plans = {}
    for case in cases:
        for state in ("open", "updated", "closed"):
            event = json.loads(json.dumps(case_event(case, state)))
            plans[(case["scope"]["kind"], state)] = plan_action(check_case(event))
    nic = plans[("nic", "open")]
    assert nic["extra_vars"]["drain_nic"] == 1 and nic["extra_vars"]["drain_host"] == "z1r2h3"  # NIC 2 = plan index 1
    assert plans[("agent", "open")]["action"] == "report"
    assert plans[("uplink", "open")]["extra_vars"]["drain_spine"] == "z1-s2"
    assert plans[("nic", "closed")]["action"] == "none"
    target = {"id": "storage-1@1", "scope": {"kind": "target", "id": "storage-1"}, "root_cause": "x", "detections": 1,
              "start": 1.0, "end": None, "repeats": 1, "opened_at": 2.0, "evidence": {}, "absorbed": []}
    assert case_event(target, "open") is None
    with pytest.raises(CorrelationError):
        case_event(cases[0], "reopened")


def test_a_case_id_does_not_change_when_an_earlier_detection_joins_late():
    corr = Correlator(IDX)
    sim = Simulator(IDX)
    for det in sim.stream([Fault("nic", T0, T0 + 1200, host="z1r2h3", nic=2)], T0 + 600, noise=0, t_start=T0 - 300):
        corr.feed(det)
    (case,) = corr.open_cases()
    before = case.id
    corr.feed(Detection(T0 - 200, "nic_errors", host="z1r2h3", nic=2, value=3, source="counters"))  # late, earlier
    assert case.start == T0 - 200 and case.id == before


def test_a_host_that_is_a_path_end_with_and_without_a_nic_does_not_break_the_vote():
    """Regression (the live lab, loss on one ToR port): a host probed without a target NIC and probing from one of
    its NICs is two ends, (host, None) and (host, nic); with equal scores the vote compared None with the NIC
    number (TypeError) and the live correlator died."""
    import os
    import yaml
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(root, "inventories", "lab", "fabric.yml")) as handle:
        lab = FabricIndex.from_topology(load_topology(yaml.safe_load(handle), "lab"))
    t0 = 3000 * 60.0
    dets = []
    for k in range(12):
        t = t0 + 10 * k + 5
        for target in ("lab-r1-h1", "lab-r2-h1", "lab-storage"):
            dets.append(Detection(t, "path_loss", host="lab-r1-h2", nic=3, target=target, value=1.0, source="probe"))
        dets.append(Detection(t, "path_loss", host="lab-r2-h1", nic=3, target="lab-r1-h2", value=0.5, source="probe"))
    cases, _stats = correlate(dets, lab)
    assert [(c["scope"]["kind"], c["scope"]["id"]) for c in cases] == [("nic", "lab-r1-h2/nic3")]
