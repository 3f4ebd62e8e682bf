# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Spine drain core (remediate/spine_drain.py): the zone view, the aggregate coverage check with any mix of spine
states, the verdict on a ToR after the change, the graceful-shutdown config edit, the apply step and the budget's
spine_coverage rule. The FRR JSON shapes are those recorded on the lab (FRR 8.4.4, tests/e2e/remediate/spine)."""

from __future__ import annotations

import itertools
import json
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.frr.apply import FrrTarget
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget as B
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import journal as J
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import spine_drain as S

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FABRIC = os.path.join(REPO, "tests", "e2e", "remediate", "spine", "fabric.yml")

# One ToR (t1, rack r1) of a zone with three spines; it must carry r2's aggregates.
P4, P6 = "198.18.0.64/26", "fd00:20:0:4::/62"
VIEW = {"tor": "t1", "rack": "r1", "prefixes": {P4: "r2", P6: "r2"},
        "uplinks": {"s1": ["10.0.0.1", "fd00:fe::1"], "s2": ["10.0.0.3", "fd00:fe::3"],
                    "s3": ["10.0.0.5", "fd00:fe::5"]},
        "interfaces": {"s1": "up-s1", "s2": "up-s2", "s3": "up-s3"}}
ZONE = {"spine": "s1", "zone": "z1", "spines": ["s1", "s2", "s3"], "tors": {"t1": VIEW}}


def path(spine, fam=4, valid=True, selected=True, gshut=False):
    return {"peer": VIEW["uplinks"][spine][0 if fam == 4 else 1], "valid": valid, "selected": selected,
            "gshut": gshut}


def obs(paths4, paths6=None, fib4=(), fib6=(), down=()):
    sessions = dict((a, s not in down) for s, addrs in VIEW["uplinks"].items() for a in addrs)
    return {"sessions": sessions,
            "routes": {P4: {"paths": paths4, "fib": list(fib4)},
                       P6: {"paths": paths4 if paths6 is None else paths6, "fib": list(fib6)}}}


# ------------------------------------------------------------------------------------------------
# zone view from the plan
# ------------------------------------------------------------------------------------------------
def test_zone_view_of_the_two_spine_lab_fabric():
    with open(FABRIC) as f:
        topo = load_topology(yaml.safe_load(f))
    v = S.zone_view(FabricPlan(topo), "msd-spine1")
    assert v["zone"] == "msd-az1" and v["spines"] == ["msd-spine1", "msd-spine2"]
    assert sorted(v["tors"]) == ["msd-r1-tor", "msd-r2-tor"]
    r1 = v["tors"]["msd-r1-tor"]
    # addresses recorded on the lab (ToR msd-r1-tor's neighbors and r2's aggregates)
    assert r1["prefixes"] == {"198.18.0.64/26": "msd-r2", "fd00:20:0:4::/62": "msd-r2"}
    assert r1["uplinks"] == {"msd-spine1": ["198.19.1.128", "fd00:fe:0:0:8000::"],
                             "msd-spine2": ["198.19.1.130", "fd00:fe::8000:0:0:2"]}
    assert r1["interfaces"] == {"msd-spine1": "up-s1", "msd-spine2": "up-s2"}
    assert v["tors"]["msd-r2-tor"]["prefixes"] == {"198.18.0.0/26": "msd-r1", "fd00:20::/62": "msd-r1"}
    with pytest.raises(S.SpineDrainError, match=r"drain_spine='nope': not a spine of this fabric. Fix"):
        S.zone_view(FabricPlan(topo), "nope")


# ------------------------------------------------------------------------------------------------
# coverage: every mix of the other spines' states
# ------------------------------------------------------------------------------------------------
STATES = ("up", "session_down", "journal_drained", "graceful_shutdown", "no_path", "invalid")


def _other(spine, state):
    """(paths, down sessions, drained) of one other spine in ``state``."""
    if state == "no_path":
        return [], [], []
    p = [path(spine, valid=state != "invalid", gshut=state == "graceful_shutdown")]
    return p, [spine] if state == "session_down" else [], [spine] if state == "journal_drained" else []


@pytest.mark.parametrize("s2,s3", list(itertools.product(STATES, STATES)))
def test_coverage_holds_only_when_another_spine_is_up_undrained_and_announcing(s2, s3):
    paths, down, drained = [path("s1")], [], []
    for sp, st in (("s2", s2), ("s3", s3)):
        p, d, dr = _other(sp, st)
        paths += p
        down += d
        drained += dr
    cov = S.coverage(ZONE, {"t1": obs(paths, down=down)}, "s1", drained)
    want = sorted(sp for sp, st in (("s2", s2), ("s3", s3)) if st == "up")
    assert cov["ok"] == bool(want), cov
    assert cov["tors"]["t1"]["carriers"] == {P4: want, P6: want}
    if not want:
        assert len(cov["reasons"]) == 2 and "t1: rack r2's aggregate 198.18.0.64/26 has no path from a spine other " \
            "than s1 that is up and not drained" in cov["reasons"][0], cov["reasons"]
        if "journal_drained" in (s2, s3):
            assert "(drained)" in cov["reasons"][0]


def test_coverage_one_family_missing_is_refused_for_that_prefix_only():
    cov = S.coverage(ZONE, {"t1": obs([path("s1"), path("s2")], paths6=[path("s1", 6)])}, "s1")
    assert not cov["ok"] and cov["tors"]["t1"]["missing"] == [P6] and len(cov["reasons"]) == 1


def test_coverage_the_drained_spine_itself_never_counts():
    cov = S.coverage(ZONE, {"t1": obs([path("s1")])}, "s1")
    assert not cov["ok"] and cov["tors"]["t1"]["carriers"] == {P4: [], P6: []}


def test_coverage_a_tor_not_observed_is_refused_missing_evidence():
    cov = S.coverage(ZONE, {}, "s1")
    assert not cov["ok"] and cov["reasons"] == [
        "t1: not observed (no BGP state from the ToR); nothing can show that the other spines carry the rack "
        "aggregates"]
    assert not S.coverage(dict(ZONE, tors={}), {}, "s1")["ok"]


def test_coverage_a_path_from_an_unknown_peer_does_not_count():
    stranger = {"peer": "10.9.9.9", "valid": True, "selected": True, "gshut": False}
    assert not S.coverage(ZONE, {"t1": obs([path("s1"), stranger])}, "s1")["ok"]


# ------------------------------------------------------------------------------------------------
# verdict after the change
# ------------------------------------------------------------------------------------------------
def test_verdict_drained_and_undrained():
    drained = obs([path("s1", selected=False, gshut=True), path("s2")],
                  [path("s1", 6, selected=False, gshut=True), path("s2", 6)],
                  fib4=["10.0.0.3%up-s2"], fib6=["fe80::2%up-s2"])
    v = S.verdict("t1", VIEW, drained, "s1", "drained")
    assert v["ok"] and v["prefixes"][P6] == {"selected": ["s2"], "fib": ["s2"]}, v
    assert not S.verdict("t1", VIEW, drained, "s1", "undrained")["ok"]
    ecmp = obs([path("s1"), path("s2")], [path("s1", 6), path("s2", 6)],
               fib4=["10.0.0.1%up-s1", "10.0.0.3%up-s2"], fib6=["fe80::1%up-s1", "fe80::2%up-s2"])
    u = S.verdict("t1", VIEW, ecmp, "s1", "undrained")
    assert u["ok"] and u["prefixes"][P4] == {"selected": ["s1", "s2"], "fib": ["s1", "s2"]}
    d = S.verdict("t1", VIEW, ecmp, "s1", "drained")
    assert not d["ok"] and "t1: 198.18.0.64/26 (rack r2) still uses s1" in d["reasons"][0]


def test_verdict_drained_fails_when_the_fib_still_has_the_spine_by_its_link_local_hop():
    o = obs([path("s1", selected=False, gshut=True), path("s2")], fib4=["10.0.0.3%up-s2"],
            fib6=["fe80::1%up-s1", "fe80::2%up-s2"])
    v = S.verdict("t1", VIEW, o, "s1", "drained")
    assert not v["ok"] and v["reasons"] == ["t1: fd00:20:0:4::/62 (rack r2) still uses s1 (selected from s2, FIB via "
                                            "s1, s2)"]


def test_verdict_drained_fails_when_nothing_else_carries_the_aggregate():
    # the spine's path still the only one (graceful shutdown keeps it as last resort): not a drained state
    o = obs([path("s1", selected=True, gshut=True)], fib4=["10.0.0.1%up-s1"], fib6=["fe80::1%up-s1"])
    assert not S.verdict("t1", VIEW, o, "s1", "drained")["ok"]
    # gone everywhere, or via a next hop that is no spine of the zone: unreachable, not drained
    for fib in ([], ["fe80::9%eth7"]):
        o = obs([], fib4=fib, fib6=fib)
        v = S.verdict("t1", VIEW, o, "s1", "drained")
        assert not v["ok"] and "is not reachable via another spine" in v["reasons"][0], v


# ------------------------------------------------------------------------------------------------
# FRR JSON (recorded on the lab)
# ------------------------------------------------------------------------------------------------
ONE_PREFIX = {"prefix": P4, "paths": [
    {"valid": True, "bestpath": {"overall": True, "selectionReason": "Local Pref"}, "nexthops": [{"ip": "10.0.0.3"}],
     "peer": {"peerId": "10.0.0.3", "hostname": "s2", "type": "external"}},
    {"valid": True, "locPrf": 0, "community": {"string": "graceful-shutdown", "list": ["gracefulShutdown"]},
     "peer": {"peerId": "10.0.0.1", "hostname": "s1", "type": "external"}}]}
TABLE = {"routes": {P4: [{"valid": True, "multipath": True, "peerId": "10.0.0.3"},
                         {"valid": True, "bestpath": True, "peerId": "10.0.0.1"}]}}
ROUTE = {P4: [{"prefix": P4, "protocol": "bgp", "selected": True, "installed": True, "nexthops": [
    {"fib": True, "ip": "10.0.0.3", "interfaceName": "up-s2", "active": True},
    {"fib": False, "ip": "10.0.0.1", "interfaceName": "up-s1", "active": True}]}]}
NEIGHBORS = {"10.0.0.1": {"bgpState": "Established"}, "10.0.0.3": {"bgpState": "Active"}}


def test_parse_observation_one_prefix_and_table_formats():
    o = S.parse_observation({P4: (ONE_PREFIX, ROUTE)}, NEIGHBORS)
    assert o["sessions"] == {"10.0.0.1": True, "10.0.0.3": False}
    assert o["routes"][P4] == {"paths": [
        {"peer": "10.0.0.3", "valid": True, "selected": True, "gshut": False},
        {"peer": "10.0.0.1", "valid": True, "selected": False, "gshut": True}], "fib": ["10.0.0.3%up-s2"]}
    t = S.parse_observation({P4: (TABLE, {})}, {})
    assert [p["selected"] for p in t["routes"][P4]["paths"]] == [True, True] and t["routes"][P4]["fib"] == []
    # an answer for another prefix (FRR's longest match) is not this prefix's
    assert S.parse_observation({P6: (ONE_PREFIX, ROUTE)}, {})["routes"][P6] == {"paths": [], "fib": []}


def _runner(answers):
    calls = []

    def run(argv):
        calls.append(argv)
        return answers.pop(0) if answers else (1, "", "no more answers")
    return run, calls


def test_observe_one_vtysh_call_and_its_failures():
    docs = [NEIGHBORS] + [ONE_PREFIX, ROUTE, {}, {}]
    run, calls = _runner([(0, "\n".join(json.dumps(d) for d in docs), "")])
    o = S.observe(run, FrrTarget(), VIEW)
    assert len(calls) == 1 and "show bgp ipv4 unicast 198.18.0.64/26 json" in calls[0] and \
        "show ipv6 route fd00:20:0:4::/62 json" in calls[0]
    assert o["routes"][P4]["fib"] == ["10.0.0.3%up-s2"] and o["routes"][P6] == {"paths": [], "fib": []}
    run, dummy = _runner([(1, "", "vtysh: error connecting")])
    with pytest.raises(S.SpineDrainError, match="vtysh failed"):
        S.observe(run, FrrTarget(), VIEW)
    run, dummy = _runner([(0, json.dumps(NEIGHBORS), "")])
    with pytest.raises(S.SpineDrainError, match="1 JSON documents for 5 commands"):
        S.observe(run, FrrTarget(), VIEW)


def test_wait_retries_until_timeout_and_a_vtysh_failure_is_never_a_pass():
    now = [0.0]
    run, calls = _runner([(1, "", "down")] * 50)
    v = S.wait(run, FrrTarget(), "t1", VIEW, "s1", "drained", timeout=2.0, interval=0.5,
               clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert not v["ok"] and v["attempts"] == 5 and v["observation"] is None and "vtysh failed" in v["reasons"][0]
    hop4 = {"fib": True, "active": True, "ip": "10.0.0.3", "interfaceName": "up-s2"}
    hop6 = {"fib": True, "active": True, "ip": "fe80::3", "interfaceName": "up-s2"}
    good = [NEIGHBORS,
            {"prefix": P4, "paths": [{"valid": True, "bestpath": {"overall": True}, "peer": {"peerId": "10.0.0.3"}}]},
            {P4: [{"selected": True, "installed": True, "nexthops": [hop4]}]},
            {"prefix": P6, "paths": [{"valid": True, "multipath": True, "peer": {"peerId": "fd00:fe::3"}}]},
            {P6: [{"selected": True, "installed": True, "nexthops": [hop6]}]}]
    run, calls = _runner([(1, "", "down"), (0, "\n".join(json.dumps(d) for d in good), "")])
    now[0] = 0.0
    v = S.wait(run, FrrTarget(), "t1", VIEW, "s1", "drained", timeout=5.0, interval=0.5,
               clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert v["ok"] and v["attempts"] == 2, v


# ------------------------------------------------------------------------------------------------
# config text
# ------------------------------------------------------------------------------------------------
RUNNING = """frr version 8.4.4
hostname s1
router bgp 4200000001
 bgp router-id 198.19.1.3
 no bgp default ipv4-unicast
 !
 address-family ipv4 unicast
  network 198.19.6.0/24
 exit-address-family
exit
!
router bgp 65001 vrf blue
 bgp router-id 1.1.1.1
exit
!
"""


def test_graceful_shutdown_added_after_the_router_id_removed_and_idempotent():
    on = S.with_graceful_shutdown(RUNNING, True)
    assert on.split("\n")[3:5] == [" bgp router-id 198.19.1.3", " bgp graceful-shutdown"]
    assert on.count("graceful-shutdown") == 1 and S.has_graceful_shutdown(on) and not S.has_graceful_shutdown(RUNNING)
    assert S.with_graceful_shutdown(on, True) == on
    assert S.with_graceful_shutdown(on, False) == RUNNING
    assert S.with_graceful_shutdown(RUNNING, False) == RUNNING
    no_id = "router bgp 1\n neighbor x peer-group\nexit\n"
    assert S.with_graceful_shutdown(no_id, True) == "router bgp 1\n bgp graceful-shutdown\n neighbor x peer-group\nexit\n"


def test_graceful_shutdown_needs_a_default_vrf_router_bgp():
    with pytest.raises(S.SpineDrainError, match=r"^running config: no 'router bgp <asn>' block .*nothing was changed"):
        S.with_graceful_shutdown("router bgp 65001 vrf blue\nexit\n", True, field="running config")


def test_honour_marker(tmp_path):
    assert S.honour_marker(RUNNING, str(tmp_path)) == (RUNNING, False)
    (tmp_path / S.MARKER).write_text("{}")
    text, kept = S.honour_marker(RUNNING, str(tmp_path))
    assert kept and S.has_graceful_shutdown(text)
    assert S.honour_marker("hostname x\n", str(tmp_path)) == ("hostname x\n", False)


# ------------------------------------------------------------------------------------------------
# apply on the spine (frr-reload.py replaced by a recorder)
# ------------------------------------------------------------------------------------------------
def _spine(tmp_path, running):
    state = {"running": running, "applied": []}

    def run(argv):
        assert argv[-2:] == ["-c", "show running-config"], argv
        return 0, "Building configuration...\n\nCurrent configuration:\n" + state["running"] + "end\n", ""

    def apply_config(text, check, path):
        state["applied"].append((text, check, path))
        if not check:
            state["running"] = text
        return {"changed": True, "diff": "+ bgp graceful-shutdown\n"}
    return state, run, apply_config


def test_converge_drain_undrain_check_mode_and_second_run(tmp_path):
    marker = str(tmp_path / S.MARKER)
    state, run, apply_config = _spine(tmp_path, RUNNING)
    r = S.converge(run, FrrTarget(), "drained", marker, check_mode=True, apply_config=apply_config)
    assert r["changed"] and not os.path.exists(marker) and state["running"] == RUNNING and state["applied"][0][1]
    r = S.converge(run, FrrTarget(), "drained", marker, apply_config=apply_config, marker={"job": "j1"})
    assert r["changed"] and r["config_changed"] and r["marker_changed"] and not r["was_drained"]
    assert S.has_graceful_shutdown(state["running"]) and json.load(open(marker)) == {"job": "j1", "drained": True}
    assert oct(os.stat(marker).st_mode & 0o777) == "0o600"
    assert "Building configuration" not in state["applied"][-1][0] and "\nend" not in state["applied"][-1][0]
    n = len(state["applied"])
    r = S.converge(run, FrrTarget(), "drained", marker, apply_config=apply_config)
    assert not r["changed"] and len(state["applied"]) == n and r["was_drained"]
    r = S.converge(run, FrrTarget(), "undrained", marker, apply_config=apply_config)
    assert r["changed"] and not os.path.exists(marker) and not S.has_graceful_shutdown(state["running"])
    assert not S.converge(run, FrrTarget(), "undrained", marker, apply_config=apply_config)["changed"]
    with pytest.raises(S.SpineDrainError, match="state='off'"):
        S.converge(run, FrrTarget(), "off", marker, apply_config=apply_config)


def test_converge_marker_lost_is_restored_without_touching_the_config(tmp_path):
    marker = str(tmp_path / S.MARKER)
    state, run, apply_config = _spine(tmp_path, S.with_graceful_shutdown(RUNNING, True))
    r = S.converge(run, FrrTarget(), "drained", marker, apply_config=apply_config)
    assert r["changed"] and not r["config_changed"] and r["marker_changed"] and not state["applied"]


def test_converge_refuses_a_spine_without_bgp_and_changes_nothing(tmp_path):
    marker = str(tmp_path / S.MARKER)
    state, run, apply_config = _spine(tmp_path, "hostname s1\n")
    with pytest.raises(S.SpineDrainError, match="no 'router bgp"):
        S.converge(run, FrrTarget(), "drained", marker, apply_config=apply_config)
    assert not state["applied"] and not os.path.exists(marker)


# ------------------------------------------------------------------------------------------------
# the budget's rule spine_coverage, journaled
# ------------------------------------------------------------------------------------------------
FAB = B.FabricView({"h1": {"rack": "r1", "nics": 2}, "h2": {"rack": "r2", "nics": 2}},
                   {"r1": {"zone": "z1", "tor": "t1"}, "r2": {"zone": "z1", "tor": "t2"}},
                   {"s1": "z1", "s2": "z1", "s3": "z1"})
HALF = {"max_zone_spine_share": 0.5}


def _req(spine):
    r = B.resolve(FAB, "spine", spine=spine)
    r.update(action="drain", automatic=False)
    return r


def test_budget_refuses_a_spine_drain_the_other_spines_cannot_carry_and_journals_it(tmp_path):
    jr = J.DrainJournal(str(tmp_path), "f1")
    observed = {"t1": obs([path("s1"), path("s2", valid=False)])}
    rec = jr.decide(FAB, _req("s1"), policy=HALF, spine_check=(ZONE, observed), job="j1")
    assert not rec["allowed"] and rec["reasons"][0].startswith(
        "the other spines must carry every rack aggregate first: t1: rack r2's aggregate 198.18.0.64/26")
    assert rec["numbers"]["spine_coverage.carriers"] == {"t1": {P4: [], P6: []}}
    assert jr.state() == {} and J.read(jr.path)[-1]["allowed"] is False
    rec = jr.decide(FAB, _req("s1"), policy=HALF, spine_check=(ZONE, {"t1": obs([path("s1"), path("s2")])}))
    assert rec["allowed"] and list(jr.state()) == ["spine:s1"]
    assert rec["numbers"]["spine_coverage.carriers"] == {"t1": {P4: ["s2"], P6: ["s2"]}}
    # s1 out (journal): draining s3 needs s2 - and s2's path is what the ToR has
    rec = jr.decide(FAB, _req("s3"), policy={"max_zone_spine_share": 1.0},
                    spine_check=(ZONE, {"t1": obs([path("s1"), path("s3")])}))
    assert not rec["allowed"] and "(other spines: s1 (drained), s2)" in rec["reasons"][0], rec["reasons"]
    assert list(jr.state()) == ["spine:s1"]


def test_budget_share_and_coverage_both_reported():
    d = B.decide(FAB, _req("s1"), set(), [], spine_check=(ZONE, {}))
    assert [c["rule"] for c in d["checks"] if not c["ok"]] == ["zone_spine_share", "spine_coverage"]
