# -*- coding: utf-8 -*-
"""labkit/bfd_gaps.py: the classic BPF filter (run by a small interpreter of the opcodes it uses, against
crafted frames), the gap bookkeeping and the summary the bench prints."""
import socket
import struct

import pytest

from labkit import bfd_gaps as B


def run_filter(prog, frame):
    """Interpret the classic BPF opcodes bfd_filter uses; returns the accepted length (0 = dropped)."""
    a = x = 0
    pc = 0
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == 0x28:                      # ldh [k]
            a = struct.unpack("!H", frame[k:k + 2])[0]
        elif code == 0x30:                    # ldb [k]
            a = frame[k]
        elif code == 0x48:                    # ldh [x + k]
            a = struct.unpack("!H", frame[x + k:x + k + 2])[0]
        elif code == 0xb1:                    # ldxb 4 * ([k] & 0xf)
            x = 4 * (frame[k] & 0xF)
        elif code == 0x15:                    # jeq #k, jt, jf
            pc += jt if a == k else jf
        elif code == 0x06:                    # ret #k
            return k
        else:
            raise AssertionError("opcode %#x not interpreted" % code)


ETH = b"\x02" * 6 + b"\x04" * 6


def v6(next_header, dport, src="fd00:10::1", dst="fd00:10::4"):
    hdr = struct.pack("!IHBB", 6 << 28, 32, next_header, 255)
    hdr += socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    return ETH + b"\x86\xdd" + hdr + struct.pack("!HHHH", 49152, dport, 32, 0) + b"\0" * 24


def v4(proto, dport, options=b"", src="198.18.0.1", dst="198.18.0.4"):
    ihl = 5 + len(options) // 4
    hdr = struct.pack("!BBHHHBBH", 0x40 | ihl, 0xC0, 20 + len(options) + 32, 0, 0, 254, proto, 0)
    hdr += socket.inet_pton(socket.AF_INET, src) + socket.inet_pton(socket.AF_INET, dst) + options
    return ETH + b"\x08\x00" + hdr + struct.pack("!HHHH", 49152, dport, 32, 0) + b"\0" * 24


@pytest.mark.parametrize("frame,accepted", [
    (v6(17, 3784), True),                     # single-hop BFD over IPv6 (the lab's sessions)
    (v6(17, 4784), True),                     # multihop BFD (kernel-forwarding hosts)
    (v4(17, 3784), True),
    (v4(17, 4784, options=b"\x01" * 8), True),  # IPv4 header with options: port found through X
    (v6(17, 5201), False),                    # iperf3 data
    (v6(6, 3784), False),                     # TCP to 3784
    (v4(6, 4784), False),
    (v4(17, 179), False),
    (ETH + b"\x08\x06" + b"\0" * 60, False),  # ARP
])
def test_filter_passes_bfd_control_packets_only(frame, accepted):
    assert run_filter(B.bfd_filter(), frame) == (0xFFFF if accepted else 0)


def test_parse_addresses_both_families():
    assert B.parse_addresses(v6(17, 3784, "fd00:10:0:1::1", "fd00:10:0:1::4")) == ("fd00:10:0:1::1", "fd00:10:0:1::4")
    assert B.parse_addresses(v4(17, 4784)) == ("198.18.0.1", "198.18.0.4")


def test_gaps_per_session_with_kept_gaps_and_maximum():
    g = B.Gaps(keep_s=0.1)
    for t in (10.0, 10.05, 10.10, 10.30, 10.35):      # one 200 ms gap after 10.10
        g.add("eth0|a|b", t)
    for t in (10.02, 10.07):
        g.add("eth1|c|d", t)
    r = g.report()
    assert r["eth0|a|b"] == {"packets": 5, "max_gap_ms": 200.0, "gaps": [[0.1, 200.0]]}
    assert r["eth1|c|d"] == {"packets": 2, "max_gap_ms": 50.0, "gaps": []}


def test_summarize_counts_gaps_in_intervals():
    report = {"a": {"packets": 100, "max_gap_ms": 160.0, "gaps": [[1.0, 80.0], [2.0, 120.0], [3.0, 160.0]]},
              "b": {"packets": 50, "max_gap_ms": 45.0, "gaps": []},
              "stray": {"packets": 1, "max_gap_ms": 0.0, "gaps": []}}
    assert B.summarize(report, 50) == {"sessions": 2, "packets": 150, "gaps_ge_1_5x": 3, "gaps_ge_2_25x": 2,
                                       "gaps_ge_3x": 1, "max_gap_x": 3.2}
    assert B.summarize({}, 50)["max_gap_x"] == 0.0


def test_silence_until_the_stop_counts_as_a_gap():
    g = B.Gaps(keep_s=0.1)
    for i in range(10):                      # both sessions send every 50 ms for 0.5 s
        g.add("eth0|a|b", 10.0 + 0.05 * i)
        g.add("eth1|c|d", 10.0 + 0.05 * i)
    for i in range(10, 20):                  # then eth1's session goes quiet, eth0's goes on to 10.95
        g.add("eth0|a|b", 10.0 + 0.05 * i)
    g.finish(11.00)
    r = g.report()
    assert r["eth1|c|d"]["max_gap_ms"] == 550.0 and r["eth1|c|d"]["gaps"] == [[0.45, 550.0]]
    assert r["eth0|a|b"]["gaps"] == []
    assert B.summarize(r, 50)["gaps_ge_3x"] == 1


class _NoLab(object):
    hosts = {"h1": {"nics": [{"name": "eth0", "tor_port": "h1-0"}]}}

    @staticmethod
    def netns(node):
        return "netscale-test-no-such-netns-%s" % node


def test_capture_that_cannot_start_raises_and_leaves_no_sniffer():
    from labkit import gray_stack as GS
    with pytest.raises(RuntimeError, match="did not start"):
        GS.BfdGapCapture(_NoLab(), "tor1", ["h1"], 75)
