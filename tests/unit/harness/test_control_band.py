# -*- coding: utf-8 -*-
"""labkit.stack_lab's control band: the tc commands that give BFD control packets a strict-priority band
under a link's tbf (what bench/gray_stack.py --control-band installs)."""
import pytest

from labkit import stack_lab as M


def test_rate_bits_decimal_units():
    assert M.rate_bits("200mbit") == 200 * 10 ** 6
    assert M.rate_bits("1gbit") == 10 ** 9
    with pytest.raises(ValueError):
        M.rate_bits("200")


def test_band_classifies_both_bfd_ports_in_both_families_into_the_priority_class():
    cmds = M.control_band_commands("eth1", "200mbit")
    filters = [c for c in cmds if c[0] == "filter"]
    assert sorted((c[c.index("protocol") + 1], c[c.index("dport") + 1], c[c.index("flowid") + 1]) for c in filters) == [
        ("ip", "3784", "10:10"), ("ip", "4784", "10:10"), ("ipv6", "3784", "10:10"), ("ipv6", "4784", "10:10")]
    prio = dict((c[c.index("classid") + 1], c[c.index("prio") + 1]) for c in cmds if c[0] == "class" and "prio" in c)
    assert prio == {"10:10": "0", "10:20": "1"}
    assert all(c[c.index("dev") + 1] == "eth1" for c in cmds)


def test_bulk_fifo_holds_what_the_tbf_would():
    bulk = [c for c in M.control_band_commands("eth0", "200mbit") if c[:2] == ["qdisc", "add"] and "120:" in c][0]
    # tbf rate 200mbit latency 20ms burst 256kb: 500,000 B of queue + 262,144 B of burst
    assert bulk[-1] == str(500000 + 262144)
