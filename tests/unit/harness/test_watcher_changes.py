# -*- coding: utf-8 -*-
"""labkit.gray_stack's reading of the NIC watcher's journal (bench/gray_stack.py soak): egress-set changes,
and a journal without the watcher's start line is an error, never 'no change'."""
import pytest

from labkit import gray_stack as GS

JOURNAL = """1795675500.100000 mns-r1-h2 python3[412]: 07:01:40 gray-failure detection: ebpf mode, probe every 50 ms x 3, hold-down 1.0 s
1795675600.250000 mns-r1-h2 python3[412]: 07:03:20 egress set: eth0 OUT (gateway neighbour FAILED)
1795675600.260000 mns-r1-h2 python3[412]: 07:03:20 egress set: out=eth0
1795675601.300000 mns-r1-h2 python3[412]: 07:03:21 egress set: eth0 back IN (held down 1.0 s, gateway reachable)
1795675700.000000 mns-r1-h2 python3[412]: 07:05:00 probe eth1: [Errno 105] No buffer space available
"""


class FakeLab(object):
    def __init__(self, text):
        self.text = text
        self.argv = None

    def x(self, node, argv, check=True, timeout=60):
        self.argv = argv

        class Out(object):
            stdout = self.text
        return Out()


def test_parse_keeps_out_and_back_in_with_their_reason():
    assert GS.parse_watcher_changes(JOURNAL) == [
        (1795675600.25, "eth0", "out", "gateway neighbour FAILED"),
        (1795675601.3, "eth0", "in", "held down 1.0 s, gateway reachable")]


def test_changes_since_the_soak_started_only():
    lab = FakeLab(JOURNAL)
    assert GS.watcher_changes(lab, "mns-r1-h2", 1795675601.0) == [
        (1795675601.3, "eth0", "in", "held down 1.0 s, gateway reachable")]
    assert GS.WATCHER_UNIT in lab.argv and "short-unix" in lab.argv


def test_a_journal_without_the_watcher_is_an_error_not_zero_changes():
    with pytest.raises(RuntimeError, match="no start line of the watcher"):
        GS.watcher_changes(FakeLab("-- No entries --\n"), "mns-r1-h2", 0)
