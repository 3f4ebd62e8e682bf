# -*- coding: utf-8 -*-
"""Correlation of the lab's faults from detections shaped as the lab's agents make them (issue 29): the
agent's own pinglist (monitor/pinglist.py: rack-mates by name, one host of the other rack by the rack's
name, rotating every ``rotate_rounds`` rounds) and its event timing (monitor/agent.py: a probe's host is
noted when it is sent, its loss counted when it times out, two rounds later; one ``probe_loss`` event per
(NIC, target) per ``event_interval``), read by the live correlator's conversion (``from_agent_event`` with
the lab's index). On the lab a loss on one NIC of lab-r1-h2 gave a NIC case that a false ToR case absorbed:
the probes toward the faulty NIC also blamed its rack-mate."""
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import pinglist
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.correlate import Correlator, _order, correlate
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import Detection, from_agent_event
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.fabric import FabricIndex
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
with open(os.path.join(ROOT, "inventories", "lab", "fabric.yml")) as handle:
    PLAN = FabricPlan(load_topology(yaml.safe_load(handle), "lab")).allocate()
LAB = FabricIndex.from_plan(PLAN)
PINGLISTS = pinglist.from_plan(PLAN, sorted(LAB.hosts))   # rotate_rounds 10: the role's default
T0 = 3000 * 60.0
EVENT_ROUNDS = 10      # fabric_monitor_event_interval 10 s / fabric_monitor_interval 1 s (role defaults)
LAG = 2                # a probe sent in round r is counted (lost at its 1 s timeout) in round r + 2


def agent_events(bad, start, end, until, t_start=T0 - 300, phases=None):
    """The ``probe_loss`` events of every lab agent from ``t_start`` to ``until`` while the (host, NIC index
    1-based) in ``bad`` drop every packet from ``start`` to ``end`` (the lab's ops.set_loss: both ways)."""
    out = []
    for host, pl in sorted(PINGLISTS.items()):
        origin = t_start + (phases or {}).get(host, 0.0)
        rounds = int((until - origin) // 1)
        sent = []             # per round: [(nic name, target label, target host, lost)]
        for r in range(rounds):
            now = origin + r
            row = []
            for nic, label, target, addr in pinglist.probe_pairs(pl, r):
                cand = [c for t in pl["targets"] if t["name"] == label for c in t["candidates"] if c["host"] == target][0]
                t_nic = cand["addresses"].index(addr) + 1
                lost = start <= now < end and ((host, nic["index"] + 1) in bad or (target, t_nic) in bad)
                row.append((nic["name"], label, target, lost))
            sent.append(row)
        for k in range(1, rounds // EVENT_ROUNDS):
            counted = {}
            for r in range(EVENT_ROUNDS * (k - 1) - LAG, EVENT_ROUNDS * k - LAG):
                for nic, label, target, lost in (sent[r] if r >= 0 else ()):
                    c = counted.setdefault((nic, label), [0, 0])
                    c[0] += 1
                    c[1] += lost
            for (nic, label), (done, lost) in sorted(counted.items()):
                if not lost:
                    continue
                hosts = sorted(set(t for r in range(EVENT_ROUNDS * (k - 1), EVENT_ROUNDS * k)
                                   for n, lab, t, dummy in sent[r] if (n, lab) == (nic, label)))
                out.append({"time": origin + EVENT_ROUNDS * k, "host": host, "kind": "probe_loss", "scope": "path",
                            "nic": nic, "slot": None, "target": label, "target_host": ",".join(hosts),
                            "value": round(float(lost) / done, 4), "source": "fabric_monitor",
                            "rack": pl["rack"], "zone": pl["zone"],
                            "detail": "%d of %d probes from %s to %s lost in 10 s" % (lost, done, nic, label)})
    return sorted(out, key=lambda e: (e["time"], e["host"], e["nic"], e["target"]))


def lab_cases(bad, phases=None, **options):
    events = agent_events(bad, T0, T0 + 300, T0 + 1200, phases=phases)
    dets = [d for e in events for d in from_agent_event(e, LAB)]
    cases, stats = correlate(dets, LAB, **options)
    return events, dets, cases, stats


PHASES = [None, {"lab-r1-h1": 0.3, "lab-r1-h2": 0.7, "lab-r2-h1": 0.1, "lab-r2-h2": 0.5}]


def test_the_events_are_shaped_like_the_lab_s_rotating_rack_target_names_the_rack_mate_of_the_faulty_nic():
    """The premise: probes toward the faulty NIC are counted in events that name its rack-mate."""
    events = agent_events({("lab-r1-h2", 3)}, T0, T0 + 300, T0 + 1200)
    toward_rack = [e for e in events if e["target"] == "lab-r1"]
    assert {e["host"] for e in toward_rack} == {"lab-r2-h1", "lab-r2-h2"}
    assert {e["nic"] for e in toward_rack} == {"eth2"}
    assert any(e["target_host"] == "lab-r1-h1" for e in toward_rack), toward_rack
    # lab-r1-h1 (two NICs) never probes NIC 3 of its rack-mate: nothing from it
    assert not [e for e in events if e["host"] == "lab-r1-h1"]


@pytest.mark.parametrize("phases", PHASES)
def test_loss_on_one_nic_of_a_two_host_rack_is_one_nic_case_and_no_tor_case(phases):
    _e, dets, cases, stats = lab_cases({("lab-r1-h2", 3)}, phases)
    assert [(c["scope"]["kind"], c["scope"]["id"]) for c in cases] == [("nic", "lab-r1-h2/nic3")], \
        [(c["scope"]["id"], c["root_cause"]) for c in cases]
    case = cases[0]
    assert (case["scope"]["nic"], case["scope"]["port"], case["scope"]["tor"]) == (2, "host2-2", "lab-r1-tor")
    assert case["absorbed"] == [] and case["opened_at"] - T0 <= 120
    assert case["evidence"]["hosts"] == ["lab-r1-h2"] and case["evidence"]["nics"] == ["lab-r1-h2/nic3"]
    # every detection of the fault is in that case (the ones naming the rack-mate too)
    assert case["detections"] == stats["in_cases"] == len(dets) and stats["unattributed"] == 0


@pytest.mark.parametrize("bad,expected", [
    ({("lab-r2-h1", 3)}, ("nic", "lab-r2-h1/nic3")),
    ({("lab-r1-h1", 2)}, ("nic", "lab-r1-h1/nic2")),
    ({("lab-r1-h2", n) for n in (1, 2, 3, 4)}, ("host", "lab-r1-h2")),
    ({("lab-r1-h1", 1), ("lab-r1-h1", 2), ("lab-r1-h2", 1), ("lab-r1-h2", 2), ("lab-r1-h2", 3), ("lab-r1-h2", 4)},
     ("tor", "lab-r1-tor")),
    ({(h, n) for h in ("lab-r2-h1", "lab-r2-h2") for n in (1, 2, 3, 4)}, ("tor", "lab-r2-tor")),
])
def test_the_other_lab_faults_keep_their_scope_from_the_agents_events(bad, expected):
    _e, dets, cases, stats = lab_cases(bad)
    assert [(c["scope"]["kind"], c["scope"]["id"]) for c in cases] == [expected], \
        [(c["scope"]["id"], c["root_cause"]) for c in cases]
    assert cases[0]["detections"] == len(dets) and stats["unattributed"] == 0


def test_an_event_toward_a_rack_target_is_one_observation_of_any_host_of_that_rack():
    ev = {"time": T0, "host": "lab-r2-h1", "kind": "probe_loss", "scope": "path", "nic": "eth2", "target": "lab-r1",
          "target_host": "lab-r1-h1", "value": 0.2, "source": "fabric_monitor", "detail": ""}
    [det] = from_agent_event(ev, LAB)
    # NIC 3 probes NIC 3 mod n of the target: NIC 1 of the 2-NIC lab-r1-h1, NIC 3 of lab-r1-h2
    assert (det.target, det.target_nic) == ("lab-r1-h1", 1)
    assert det.alternatives == (("lab-r1-h1", 1), ("lab-r1-h2", 3))
    assert "alternatives" not in det.to_dict()
    # a rack-mate target (named by host) and a detection without the index are what they say
    [mate] = from_agent_event(dict(ev, host="lab-r2-h2", target="lab-r2-h1", target_host="lab-r2-h1"), LAB)
    assert (mate.target, mate.target_nic, mate.alternatives) == ("lab-r2-h1", 3, None)
    [bare] = from_agent_event(ev)
    assert (bare.target, bare.target_nic, bare.alternatives) == ("lab-r1-h1", None, None)


def test_a_late_event_toward_the_rack_of_an_open_nic_case_joins_it_on_that_nic():
    events = agent_events({("lab-r1-h2", 3)}, T0, T0 + 120, T0 + 240)
    corr = Correlator(LAB)
    for det in sorted((d for e in events for d in from_agent_event(e, LAB)), key=_order):
        corr.feed(det)
    corr.tick(T0 + 240)
    [case] = corr.open_cases()
    assert case.key == ("nic", "lab-r1-h2", 3)
    before = case.count
    # later than the slack: naming the rack-mate (the rotation), from the other rack's NIC 3
    late = {"time": T0 + 30, "host": "lab-r2-h1", "kind": "probe_loss", "scope": "path", "nic": "eth2",
            "target": "lab-r1", "target_host": "lab-r1-h1", "value": 0.2, "source": "fabric_monitor", "detail": ""}
    [det] = from_agent_event(late, LAB)
    corr.feed(det)
    assert corr.stats["late"] == 1 and corr.stats["unattributed"] == 0
    assert case.count == before + 1 and case.hosts == {"lab-r1-h2"} and case.nics == {("lab-r1-h2", 3)}


def test_a_stopped_agent_seen_through_the_rack_target_is_its_agent_case_and_no_network_case():
    """The other rack's events toward lab-r1 name lab-r1-h2 (the rotation) while the lost probes went to
    lab-r1-h1, whose agent (the responder) is stopped: all of them belong to lab-r1-h1's agent case."""
    events = [e for e in agent_events({("lab-r1-h1", 1), ("lab-r1-h1", 2)}, T0, T0 + 300, T0 + 1200)
              if e["host"] != "lab-r1-h1"]        # a stopped agent writes nothing
    assert any(e["target"] == "lab-r1" and e["target_host"] == "lab-r1-h2" for e in events)
    dets = [d for e in events for d in from_agent_event(e, LAB)]
    dets += [Detection(T0 + 30 + 60 * k, "agent_down", host="lab-r1-h1", source="prometheus") for k in range(5)]
    cases, stats = correlate(dets, LAB)
    assert [(c["scope"]["kind"], c["scope"]["id"]) for c in cases] == [("agent", "lab-r1-h1")], \
        [(c["scope"]["id"], c["root_cause"]) for c in cases]
    assert cases[0]["detections"] == len(dets) and stats["unattributed"] == 0
    assert cases[0]["evidence"]["hosts"] == ["lab-r1-h1"]
