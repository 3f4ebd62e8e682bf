# -*- coding: utf-8 -*-
"""Unit tests of the lab's gray-failure injection (pure parts): nft tables on the ToR port, flap schedule."""
import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab import faults as F


def test_both_ways_silent_loss_uses_both_hooks_of_the_tor_port():
    t = F.wanted_tables("r1h2-1", True)
    assert sorted(t) == ["mnf_r1h2_1_in_all", "mnf_r1h2_1_out_all"]
    assert 'type filter hook ingress device "r1h2-1" priority -500; policy drop;' in t["mnf_r1h2_1_in_all"]
    assert 'type filter hook egress device "r1h2-1" priority -500; policy drop;' in t["mnf_r1h2_1_out_all"]
    assert "table netdev mnf_r1h2_1_out_all {" in t["mnf_r1h2_1_out_all"]


@pytest.mark.parametrize("direction,hook", [("to_host", "egress"), ("to_tor", "ingress")])
def test_one_way_loss(direction, hook):
    t = F.wanted_tables("p1", True, direction)
    assert len(t) == 1
    script = list(t.values())[0]
    assert "hook %s device" % hook in script and "policy drop" in script


def test_arp_nd_drops_replies_only():
    t = F.wanted_tables("p1", True, "both", "arp_nd")
    assert sorted(t) == ["mnf_p1_in_arpnd", "mnf_p1_out_arpnd"]
    for script in t.values():
        assert "policy accept;" in script
        assert "arp operation reply drop" in script and "icmpv6 type nd-neighbor-advert drop" in script
        assert "policy drop" not in script


def test_bfd_drops_bfd_control_packets_only():
    t = F.wanted_tables("p1", True, "both", "bfd")
    assert sorted(t) == ["mnf_p1_in_bfd", "mnf_p1_out_bfd"]
    for script in t.values():
        assert "policy accept;" in script and "udp dport { 3784, 4784 } drop" in script
        assert "policy drop" not in script and "arp" not in script


def test_plan_is_idempotent_and_switches_kind():
    want = F.wanted_tables("p1", True, "to_host")
    add, delete = F.plan("p1", True, "to_host", "all", [])
    assert add == want and delete == []
    assert F.plan("p1", True, "to_host", "all", list(want) + ["other", "mnf_p10_in_all"]) == ({}, [])
    add, delete = F.plan("p1", True, "both", "arp_nd", list(want))
    assert sorted(add) == ["mnf_p1_in_arpnd", "mnf_p1_out_arpnd"] and delete == ["mnf_p1_out_all"]
    assert F.plan("p1", False, "both", "all", ["mnf_p1_in_arpnd", "mnf_p1_out_arpnd"]) == (
        {}, ["mnf_p1_in_arpnd", "mnf_p1_out_arpnd"])
    assert F.plan("p1", False, "both", "all", []) == ({}, [])


def test_bad_values_are_named():
    with pytest.raises(ValueError, match="loss_direction"):
        F.wanted_tables("p1", True, "sideways")
    with pytest.raises(ValueError, match="loss_kind"):
        F.wanted_tables("p1", True, "both", "dns")
    with pytest.raises(ValueError, match="flap_storm"):
        F.flap_schedule(0, 5)


def test_flap_schedule_and_runner():
    s = F.flap_schedule(10, 5)
    assert len(s) == 20 and s[0] == (0.0, False) and s[1] == (0.25, True) and s[-1] == (4.75, True)
    now = [0.0]
    calls = []
    hit = F.run_schedule(s, calls.append, clock=lambda: now[0], sleep=lambda d: now.__setitem__(0, now[0] + d))
    assert calls == [up for dummy, up in s] and hit[-1] == 4.75
