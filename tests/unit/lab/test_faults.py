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


def test_random_loss_drops_the_given_share_both_ways():
    t = F.wanted_tables("host2-1", True, "both", "random", percent=2)
    assert sorted(t) == ["mnf_host2_1_in_rnd", "mnf_host2_1_out_rnd"]
    assert t["mnf_host2_1_in_rnd"] == ('table netdev mnf_host2_1_in_rnd {\n chain ingress {\n'
                                       '  type filter hook ingress device "host2-1" priority -500; policy accept;\n'
                                       '  numgen random mod 100 < 2 drop\n }\n}\n')
    assert 'hook egress device "host2-1"' in t["mnf_host2_1_out_rnd"]
    assert "numgen random mod 100 < 2 drop" in t["mnf_host2_1_out_rnd"]
    assert "policy drop" not in "".join(t.values())


@pytest.mark.parametrize("percent", [None, 0, 100, 2.5, "2", True])
def test_random_loss_needs_an_integer_percent(percent):
    with pytest.raises(ValueError, match="loss_percent") as e:
        F.wanted_tables("p1", True, "both", "random", percent=percent)
    assert repr(percent) in str(e.value) and "1 to 99" in str(e.value)


def test_percent_only_for_random_and_nothing_when_absent():
    with pytest.raises(ValueError, match="only for loss_kind random"):
        F.wanted_tables("p1", True, "both", "all", percent=2)
    assert F.wanted_tables("p1", False, "both", "random", percent=2) == {}
    add, delete = F.plan("p1", False, "both", "random", ["mnf_p1_in_rnd", "mnf_p1_out_rnd", "other"], percent=2)
    assert add == {} and delete == ["mnf_p1_in_rnd", "mnf_p1_out_rnd"]


RACKS = [{"name": "lab-r1", "tor": {"name": "lab-r1-tor", "uplinks": [
    {"spine": "lab-spine1", "interface": "up-s1"}, {"spine": "lab-spine2", "interface": "up-s2"}]}},
    {"name": "lab-r2", "tor": {"name": "lab-r2-tor", "uplinks": []}}]


def test_uplink_port_and_plan_use_the_tor_uplink_with_spine_directions():
    assert F.uplink_port(RACKS, "lab-r1-tor") == ("lab-r1", "up-s1", "lab-spine1")
    assert F.uplink_port(RACKS, "lab-r1-tor", "lab-spine2") == ("lab-r1", "up-s2", "lab-spine2")
    add, delete = F.uplink_plan("up-s2", True, "to_spine", "random", [], percent=10)
    assert list(add) == ["mnf_up_s2_out_rnd"] and delete == []
    assert 'hook egress device "up-s2"' in add["mnf_up_s2_out_rnd"] and "mod 100 < 10 drop" in add["mnf_up_s2_out_rnd"]
    add, delete = F.uplink_plan("up-s2", True, "to_tor", "all", ["mnf_up_s2_out_rnd"])
    assert list(add) == ["mnf_up_s2_in_all"] and delete == ["mnf_up_s2_out_rnd"]
    add, dummy = F.uplink_plan("up-s1", True, "both", "all", [])
    assert sorted(add) == ["mnf_up_s1_in_all", "mnf_up_s1_out_all"]


def test_uplink_bad_values_are_named():
    with pytest.raises(ValueError, match="'to_host' is not one of both, to_tor, to_spine"):
        F.uplink_plan("up-s1", True, "to_host", "all", [])
    with pytest.raises(ValueError, match="'lab-r9-tor' is not a ToR.*lab-r1-tor, lab-r2-tor"):
        F.uplink_port(RACKS, "lab-r9-tor")
    with pytest.raises(ValueError, match="'lab-spine3' is not an uplink of lab-r1-tor; use one of lab-spine1, lab-spine2"):
        F.uplink_port(RACKS, "lab-r1-tor", "lab-spine3")
    with pytest.raises(ValueError, match=r"not an uplink of lab-r2-tor; use one of \(none\)"):
        F.uplink_port(RACKS, "lab-r2-tor")
