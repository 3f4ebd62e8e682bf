# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Blast-radius budget (remediate/budget.py) and the drain journal (remediate/journal.py)."""

from __future__ import annotations

import json
import os
import threading

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget as B
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import journal as J

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# zone z1: rack r1 (2-NIC h1, 4-NIC h2: 6 NICs), rack r2 (two 4-NIC hosts), 4 racks in all, 4 spines;
# zone z2: rack r5 (one 8-NIC host), 1 spine
HOSTS = {"h1": {"rack": "r1", "nics": 2}, "h2": {"rack": "r1", "nics": 4},
         "h3": {"rack": "r2", "nics": 4}, "h4": {"rack": "r2", "nics": 4},
         "h5": {"rack": "r3", "nics": 2}, "h6": {"rack": "r4", "nics": 2}, "h7": {"rack": "r5", "nics": 8}}
RACKS = {"r1": {"zone": "z1"}, "r2": {"zone": "z1"}, "r3": {"zone": "z1"}, "r4": {"zone": "z1"}, "r5": {"zone": "z2"}}
SPINES = {"s1": "z1", "s2": "z1", "s3": "z1", "s4": "z1", "s5": "z2"}
FAB = B.FabricView(HOSTS, RACKS, SPINES)
LOOSE = {"max_rack_nic_share": 1.0}


def req(action="drain", automatic=False, **kw):
    r = B.resolve(FAB, kw.pop("scope", "nic"), **kw)
    r.update(action=action, automatic=automatic)
    return r


def test_last_nic_of_a_host_is_refused_with_the_numbers():
    d = B.decide(FAB, req(host="h1", nic=1), {"nic:h1:0"}, [], policy=LOOSE)
    assert not d["allowed"] and not d["noop"]
    assert d["reasons"] == ["never a host's last NIC: h1 has 2 NICs, 1 already drained (0); draining NIC 1 would "
                            "leave none in service"]
    assert d["numbers"]["last_nic.host_in_service_after"] == 0
    ok = B.decide(FAB, req(host="h1", nic=1), set(), [], policy=LOOSE)
    assert ok["allowed"] and ok["numbers"]["last_nic.host_in_service_after"] == 1


def test_rack_share_counts_nics_hosts_and_every_reason_is_given():
    # r1 has 6 NICs; 0.25 -> at most 1 out
    one = B.decide(FAB, req(host="h2", nic=0), set(), [])
    assert one["allowed"], one["reasons"]
    two = B.decide(FAB, req(host="h1", nic=1), {"nic:h1:0"}, [])
    assert [c["rule"] for c in two["checks"] if not c["ok"]] == ["last_nic", "rack_nic_share"]
    assert "rack r1 has 6 NICs, 1 out now, 2 after this drain (0.33)" in two["reasons"][1]
    # a drained host counts all its NICs
    d = B.decide(FAB, req(host="h3", nic=0), {"host:h4"}, [], policy={"max_rack_nic_share": 0.5})
    assert not d["allowed"] and d["numbers"]["rack_nic_share.out_after"] == 5
    # host scope: its NICs
    d = B.decide(FAB, req(scope="host", host="h7"), set(), [])
    assert not d["allowed"] and d["numbers"]["rack_nic_share.share_after"] == 1.0


def test_spine_share_never_the_last_spine():
    assert B.decide(FAB, req(scope="spine", spine="s1"), set(), [])["allowed"]
    d = B.decide(FAB, req(scope="spine", spine="s2"), {"spine:s1"}, [])
    assert not d["allowed"] and "zone z1 has 4 spines, 1 drained now, 2 after" in d["reasons"][0]
    last = B.decide(FAB, req(scope="spine", spine="s5"), set(), [], policy={"max_zone_spine_share": 1.0})
    assert not last["allowed"] and "never the last" in last["reasons"][0]


def test_tor_share():
    assert B.decide(FAB, req(scope="tor", rack="r1"), set(), [])["allowed"]
    assert B.resolve(FAB, "tor", tor="r2-tor")["element"] == "tor:r2"
    d = B.decide(FAB, req(scope="tor", rack="r2"), {"tor:r1"}, [])
    assert not d["allowed"] and d["numbers"]["zone_tor_share.out_after"] == 2


def test_lease_held_by_another_job_refuses_drain_and_undrain_but_not_its_own():
    lease = {"job": "rollout-20261127", "kind": "rollout", "since": "2026-11-27T11:00:00Z"}
    d = B.decide(FAB, req(host="h2", nic=0), set(), [], lease=lease, job="drain-1")
    assert not d["allowed"]
    assert d["reasons"] == ["the fabric lease is held by rollout rollout-20261127 since 2026-11-27T11:00:00Z: no drain "
                            "or undrain while another mutating job (rollout, rollback, decommission, site, drain) runs"]
    u = B.decide(FAB, req("undrain", host="h2", nic=0), {"nic:h2:0"}, [], lease=lease, job="drain-1")
    assert not u["allowed"]
    own = B.decide(FAB, req(host="h2", nic=0), set(), [], lease={"job": "drain-1", "kind": "drain"}, job="drain-1")
    assert own["allowed"]
    # the fabric lease module's view (fabric_lease state=inspected, its holder)
    view = {"held": True, "stale": False, "rollout_id": "20261127T110000Z", "group": "ctl:42",
            "description": "rollout 20261127T110000Z, playbook rollout.yml, controller ctl, pid 42"}
    d = B.decide(FAB, req(host="h2", nic=0), set(), [], lease=view, job="drain-1")
    assert not d["allowed"] and "held by 20261127T110000Z (rollout 20261127T110000Z, playbook rollout.yml" in d["reasons"][0]
    assert B.decide(FAB, req(host="h2", nic=0), set(), [], lease={"held": False, "description": "free"})["allowed"]


def test_a_lease_that_refused_this_job_refuses_the_decision_whatever_the_holders_id():
    """drain.yml hands the budget the holder the lease module refused it with (``refused: true``) so that the refusal
    is journaled: it refuses even when the holder's id is this job's (a killed run of the same drain_job_id, stale
    until broken with consent), and is never read as free."""
    view = {"held": True, "stale": True, "rollout_id": "drain-1", "group": "ctl:42", "refused": True,
            "description": "rollout drain-1, playbook drain.yml, controller ctl, pid 42"}
    d = B.decide(FAB, req(host="h2", nic=0), set(), [], lease=view, job="drain-1")
    assert not d["allowed"] and d["reasons"] == [
        "the fabric lease is held by drain-1 (rollout drain-1, playbook drain.yml, controller ctl, pid 42), stale: "
        "break it with consent first: no drain or undrain while another mutating job (rollout, rollback, "
        "decommission, site, drain) runs"]
    assert B.decide(FAB, req(host="h2", nic=0), set(), [], lease=dict(view, refused=False), job="drain-1")["allowed"]
    assert not B.decide(FAB, req(host="h2", nic=0), set(), [], lease=dict(view, held=False), job="drain-1")["allowed"]
    assert B.decide(FAB, req(host="h2", nic=0), set(), [], lease=dict(view, held=False, refused=False),
                    job="drain-1")["allowed"]


def test_rate_applies_to_automatic_drains_only_and_names_the_next_slot():
    hist = [{"action": "drain", "automatic": True, "allowed": True, "noop": False, "zone": "z1", "time": t}
            for t in (100.0, 200.0, 300.0)]
    pol = dict(LOOSE, max_auto_drains_per_zone=3)
    d = B.decide(FAB, req(automatic=True, host="h3", nic=0), set(), hist, policy=pol, now=400.0)
    assert not d["allowed"] and "the next is allowed after 3700" in d["reasons"][0]
    assert B.decide(FAB, req(host="h3", nic=0), set(), hist, policy=pol, now=400.0)["allowed"]   # manual
    assert B.decide(FAB, req(automatic=True, host="h3", nic=0), set(), hist, policy=pol, now=3700.5)["allowed"]
    # other zone, refused and no-op decisions do not count
    other = hist[:2] + [dict(hist[0], zone="z2"), dict(hist[0], allowed=False), dict(hist[0], noop=True),
                        dict(hist[0], automatic=False)]
    assert B.decide(FAB, req(automatic=True, host="h3", nic=0), set(), other, policy=pol, now=400.0)["allowed"]


def test_already_drained_is_an_allowed_noop_and_undrain_of_nothing_too():
    d = B.decide(FAB, req(automatic=True, host="h1", nic=0), {"nic:h1:0"}, [], policy={"max_auto_drains_per_zone": 0})
    assert d["allowed"] and d["noop"] and d["note"] == "already drained"
    u = B.decide(FAB, req("undrain", host="h1", nic=0), set(), [])
    assert u["allowed"] and u["noop"]


@pytest.mark.parametrize("kw,field", [
    ({"scope": "nic", "host": "nope", "nic": 0}, "drain_host='nope'"),
    ({"scope": "nic", "host": "h1", "nic": 2}, "drain_nic=2: h1 has NICs 0 to 1"),
    ({"scope": "nic", "host": "h1", "nic": True}, "drain_nic=True"),
    ({"scope": "tor", "rack": "r9"}, "drain_rack='r9'"),
    ({"scope": "tor", "tor": "r9-tor"}, "drain_tor='r9-tor'"),
    ({"scope": "spine", "spine": "x"}, "drain_spine='x'"),
    ({"scope": "uplink"}, "drain_scope='uplink'"),
])
def test_bad_requests_name_the_field_and_the_fix(kw, field):
    with pytest.raises(B.BudgetError) as e:
        B.resolve(FAB, kw.pop("scope"), **kw)
    assert field in str(e.value) and "Fix:" in str(e.value)


@pytest.mark.parametrize("policy,field", [
    ({"max_rack_nic_share": 1.5}, "max_rack_nic_share"), ({"max_auto_drains_per_zone": 1.5}, "max_auto_drains"),
    ({"bogus": 1}, "bogus"), ({"rate_window": 0}, "rate_window"), ({"max_zone_tor_share": "x"}, "max_zone_tor_share")])
def test_bad_policy(policy, field):
    with pytest.raises(B.BudgetError) as e:
        B.check_policy(policy)
    assert field in str(e.value) and "Fix:" in str(e.value)


def test_fabric_view_from_the_lab_topology():
    with open(os.path.join(REPO, "tests", "e2e", "stack", "fabric.yml")) as f:
        topo = load_topology(yaml.safe_load(f))
    fab = B.FabricView.from_topology(topo)
    assert fab.rack_nics("mns-r1") == 6 and fab.rack_nics("mns-r2") == 8
    assert fab.zone_spines("mns-az1") == ["mns-spine1"] and fab.racks["mns-r1"]["tor"] == "mns-r1-tor"


# ---- properties -------------------------------------------------------------------------------
ELEMENTS = ([B.element("nic", h, i) for h, v in HOSTS.items() for i in range(v["nics"])]
            + [B.element("host", h) for h in HOSTS] + [B.element("tor", rack=r) for r in RACKS]
            + [B.element("spine", spine=s) for s in SPINES])


def _request(key, action, automatic):
    scope, f = B.parse_element(key)
    r = B.resolve(FAB, scope, **f)
    r.update(action=action, automatic=automatic)
    return r


policies = st.fixed_dictionaries({
    "max_rack_nic_share": st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    "max_zone_spine_share": st.sampled_from([0.25, 0.5, 1.0]),
    "max_zone_tor_share": st.sampled_from([0.25, 1.0]),
    "max_auto_drains_per_zone": st.integers(0, 4),
    "rate_window": st.sampled_from([60.0, 3600.0])})


@settings(max_examples=300, deadline=None)
@given(drained=st.sets(st.sampled_from(ELEMENTS)), policy=policies,
       steps=st.lists(st.tuples(st.sampled_from(ELEMENTS), st.sampled_from(["drain", "undrain"]), st.booleans(),
                                st.floats(0, 900)), max_size=40))
def test_property_never_a_last_nic_and_the_rate_holds(drained, policy, steps):
    """Any start state, any budget, any sequence of requests (applied when allowed): no host ever has all
    its NICs drained by NIC drains the budget allowed, and no zone ever sees more than N automatic drains
    within the window."""
    out = set(drained)
    hist = []
    now = 0.0
    start_nic_out = dict((h, B.host_drained_nics(out, h)) for h in HOSTS)
    for key, action, automatic, dt in steps:
        now += dt
        d = B.decide(FAB, _request(key, action, automatic), out, hist, policy=policy, now=now)
        rec = dict(d, time=now)
        hist.append(rec)
        if d["allowed"] and not d["noop"]:
            if action == "drain":
                out.add(key)
            else:
                out.discard(key)
        for h, v in HOSTS.items():
            nics = B.host_drained_nics(out, h)
            if len(nics) >= v["nics"]:
                # only a start state can have had all: the budget never added the last one
                assert nics <= start_nic_out[h], (h, nics, d)
        if d["allowed"] and action == "drain" and not d["noop"] and B.parse_element(key)[0] == "nic":
            assert len(B.host_drained_nics(out, d["host"])) < HOSTS[d["host"]]["nics"]
    for zone in ("z1", "z2"):
        times = sorted(r["time"] for r in hist if r["allowed"] and not r["noop"] and r["automatic"]
                       and r["action"] == "drain" and r["zone"] == zone)
        for i, t in enumerate(times):
            in_window = [x for x in times[:i + 1] if t - policy["rate_window"] < x <= t]
            assert len(in_window) <= policy["max_auto_drains_per_zone"], (zone, times)


@settings(max_examples=200, deadline=None)
@given(drained=st.sets(st.sampled_from(ELEMENTS)), key=st.sampled_from(ELEMENTS), policy=policies)
def test_property_refusal_always_says_why_and_allowed_respects_shares(drained, key, policy):
    d = B.decide(FAB, _request(key, "drain", False), drained, [], policy=policy)
    assert d["allowed"] == (not d["reasons"])
    assert len(d["reasons"]) == len([c for c in d["checks"] if not c["ok"]])
    if d["allowed"] and not d["noop"] and d["scope"] in ("nic", "host"):
        after = B.rack_out_nics(FAB, set(drained) | {key}, d["rack"])
        assert len(after) <= policy["max_rack_nic_share"] * FAB.rack_nics(d["rack"]) + 1e-9


# ---- journal ----------------------------------------------------------------------------------
def test_journal_records_every_decision_and_is_the_state(tmp_path):
    j = J.DrainJournal(str(tmp_path), "mns")
    r1 = j.decide(FAB, req(host="h1", nic=0), job="a", reason="loss on eth0", now=10.0)
    assert r1["allowed"] and r1["seq"] == 1
    r2 = j.decide(FAB, req(host="h1", nic=1), job="a", now=11.0, policy=LOOSE)
    assert not r2["allowed"] and r2["seq"] == 2 and "last NIC" in r2["summary"]
    assert set(j.state()) == {"nic:h1:0"}
    j.outcome("drain", "nic:h1:0", True, job="a", now=12.0)
    u = j.decide(FAB, req("undrain", host="h1", nic=0), job="b", now=20.0)
    assert u["allowed"] and set(j.state()) == {"nic:h1:0"}   # out until the undrain is applied
    j.outcome("undrain", "nic:h1:0", True, job="b", now=21.0)
    assert j.state() == {}
    lines = (tmp_path / "mns" / "drain-journal.jsonl").read_text().splitlines()
    assert [json.loads(x)["type"] for x in lines] == ["decision", "decision", "outcome", "decision", "outcome"]
    assert json.loads(lines[1])["reasons"] and json.loads(lines[1])["numbers"]["last_nic.host_nics"] == 2
    assert oct(os.stat(str(tmp_path / "mns" / "drain-journal.jsonl")).st_mode & 0o777) == "0o600"


def test_journal_check_mode_writes_nothing(tmp_path):
    j = J.DrainJournal(str(tmp_path), "mns")
    r = j.decide(FAB, req(host="h1", nic=0), write=False)
    assert r["allowed"] and not os.path.exists(str(tmp_path / "mns"))


def test_journal_torn_last_line_ignored_other_garbage_refused(tmp_path):
    j = J.DrainJournal(str(tmp_path), "mns")
    j.decide(FAB, req(host="h1", nic=0), now=1.0)
    with open(j.path, "a") as f:
        f.write('{"v": 1, "ty')
    assert set(j.state()) == {"nic:h1:0"}
    with open(j.path, "a") as f:
        f.write('\n{"v": 1, "type": "decision"}\n')
    with pytest.raises(J.DrainJournalError) as e:
        j.records()
    assert "line 2" in str(e.value)


def test_journal_concurrent_automatic_drains_respect_the_rate(tmp_path):
    """An alert storm: 12 automatic NIC drains at once in one zone, N = 3: exactly 3 allowed."""
    j = J.DrainJournal(str(tmp_path), "mns")
    keys = [("h3", 0), ("h3", 1), ("h4", 0), ("h4", 1), ("h5", 0), ("h6", 0), ("h3", 2), ("h4", 2), ("h2", 0),
            ("h2", 1), ("h1", 0), ("h2", 2)]
    results = []

    def one(h, n):
        results.append(j.decide(FAB, req(automatic=True, host=h, nic=n), policy=LOOSE, now=100.0))
    threads = [threading.Thread(target=one, args=k) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(1 for r in results if r["allowed"]) == 3
    assert len(j.records()) == 12 and sorted(r["seq"] for r in j.records()) == list(range(1, 13))


@pytest.mark.parametrize("args,field", [(("relative", "mns"), "drain_journal_dir"), (("/x", "a/b"), "fabric")])
def test_journal_bad_input(args, field):
    with pytest.raises(J.DrainJournalError) as e:
        J.DrainJournal(*args)
    assert field in str(e.value)
