# -*- coding: utf-8 -*-
"""The lab's shaped links (lab_link speed, labkit.stack_lab.Lab.tbf): the tc commands that give BFD
control packets, ARP and ICMPv6 a strict-priority band under a link's tbf, and how the current shaping is read back."""
import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError

# tc -j qdisc show of a veth shaped by ops.shape: tbf 200mbit burst 256kb latency 20ms + the band
SHAPED = [{"kind": "tbf", "handle": "1:", "root": True, "options": {"rate": 25000000, "burst": 262125, "lat": 20000}},
          {"kind": "htb", "handle": "10:", "parent": "1:1", "options": {}},
          {"kind": "bfifo", "handle": "110:", "parent": "10:10", "options": {"limit": 65536}},
          {"kind": "bfifo", "handle": "120:", "parent": "10:20", "options": {"limit": 762125}}]


def test_rate_bits_decimal_units_and_a_clear_error():
    assert ops.rate_bits("200mbit") == 200 * 10 ** 6
    assert ops.rate_bits("1gbit") == 10 ** 9
    with pytest.raises(LabError, match="speed: '200 furlongs' is not a rate"):
        ops.rate_bits("200 furlongs")


def test_band_classifies_bfd_arp_and_icmpv6_into_the_priority_class():
    cmds = ops.control_band_commands("eth1", 762125)
    filters = [c for c in cmds if c[0] == "filter"]
    bfd = [c for c in filters if "dport" in c]
    assert sorted((c[c.index("protocol") + 1], c[c.index("dport") + 1], c[c.index("flowid") + 1]) for c in bfd) == [
        ("ip", "3784", "10:10"), ("ip", "4784", "10:10"), ("ipv6", "3784", "10:10"), ("ipv6", "4784", "10:10")]
    # BFD matches UDP only: a TCP flow to port 3784 stays in the bulk class
    assert all(c[c.index("protocol", c.index("match")) + 1:c.index("protocol", c.index("match")) + 3] == ["17", "0xff"]
               for c in bfd)
    rest = [c for c in filters if "dport" not in c]
    assert sorted((c[c.index("protocol") + 1], " ".join(c[c.index("match"):c.index("flowid")]), c[-1]) for c in rest) == [
        ("arp", "match u32 0 0", "10:10"), ("ipv6", "match ip6 protocol 58 0xff", "10:10")]
    assert len(set(c[c.index("prio") + 1] for c in filters)) == len(filters)   # one preference each
    prio = dict((c[c.index("classid") + 1], c[c.index("prio") + 1]) for c in cmds if c[0] == "class" and "prio" in c)
    assert prio == {"10:10": "0", "10:20": "1"}
    assert all(c[c.index("dev") + 1] == "eth1" for c in cmds)
    # the band hangs under the tbf's class 1:1 and sends unclassified packets to the bulk class
    assert cmds[0][:8] == ["qdisc", "add", "dev", "eth1", "parent", "1:1", "handle", "10:"]
    assert cmds[0][-2:] == ["default", "20"]


def test_bulk_fifo_holds_what_the_tbf_would():
    # tbf rate 200mbit latency 20ms burst 256kb (tc reports 262125 B): 500,000 B of queue + the burst
    fifo = ops.tbf_fifo_bytes(SHAPED[0]["options"])
    assert fifo == 500000 + 262125
    bulk = [c for c in ops.control_band_commands("eth0", fifo) if c[:2] == ["qdisc", "add"] and "120:" in c][0]
    assert bulk[-1] == str(fifo)


@pytest.mark.parametrize("qdiscs,want", [
    (SHAPED, (200000000, True)),
    (SHAPED[:1], (200000000, False)),                        # a plain tbf (before the band, or control_band: false)
    ([{"kind": "noqueue", "handle": "0:", "root": True}], (None, False)),
    ([], (None, False)),
    # an htb somewhere else is not the band
    ([SHAPED[0], {"kind": "htb", "handle": "10:", "parent": "1:2"}], (200000000, False)),
])
def test_shaping_reads_rate_and_band(qdiscs, want):
    assert ops.shaping(qdiscs) == want
