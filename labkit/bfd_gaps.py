# -*- coding: utf-8 -*-
"""BFD control packets as the receiving end sees them: the inter-arrival gaps per session.

A BFD session goes down when no control packet arrives for multiplier x interval. Counting session-down
events says whether that happened; the gaps say how close it came, and on which side of the link the
packets went missing. ``python -m labkit.bfd_gaps IFACE...`` runs inside a lab node's network namespace
(``ip netns exec``): one AF_PACKET socket per interface with a classic BPF filter that passes only UDP to
port 3784 (single hop) or 4784 (multihop) over IPv4 or IPv6, kernel receive timestamps (SO_TIMESTAMPNS),
incoming packets only. It taps the interface before tc ingress, so it sees what crossed the link in both
datapath modes, before any eBPF redirect. On SIGTERM it prints one JSON object: per session
(``iface|src|dst``) the packet count, the largest gap and every gap of at least ``--keep-ms``, with the
time since start; the silence from a session's last packet to the last packet of any session counts as a
gap too, so a session that went quiet does not look clean (and the sniffer's own stop latency does not
count). The filter, ``Gaps`` and ``summarize`` are unit-tested;
bench/gray_stack.py ``--bfd-gaps`` runs it on the ToR's host ports and on the hosts' NICs during the soak.
"""
import argparse
import ctypes
import json
import select
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SO_ATTACH_FILTER = 26
SO_TIMESTAMPNS = 35
BFD_PORTS = (3784, 4784)


def bfd_filter():
    """Classic BPF (code, jt, jf, k): accept IPv6 (no extension header) or IPv4 UDP to port 3784 or 4784,
    drop the rest. Offsets from the Ethernet header; jumps are relative to the next instruction."""
    ld_h, ld_b, jeq, ret, ldx_msh, ld_h_ind = 0x28, 0x30, 0x15, 0x06, 0xb1, 0x48
    return [
        (ld_h, 0, 0, 12),            # 0  A = ethertype
        (jeq, 0, 5, 0x86dd),         # 1  IPv6 ? 2 : 7
        (ld_b, 0, 0, 20),            # 2  A = next header
        (jeq, 0, 11, 17),            # 3  UDP ? 4 : drop
        (ld_h, 0, 0, 56),            # 4  A = UDP destination port (14 + 40 + 2)
        (jeq, 8, 0, BFD_PORTS[0]),   # 5  3784 ? accept : 6
        (jeq, 7, 8, BFD_PORTS[1]),   # 6  4784 ? accept : drop
        (jeq, 0, 7, 0x0800),         # 7  IPv4 ? 8 : drop
        (ld_b, 0, 0, 23),            # 8  A = protocol
        (jeq, 0, 5, 17),             # 9  UDP ? 10 : drop
        (ldx_msh, 0, 0, 14),         # 10 X = IPv4 header length
        (ld_h_ind, 0, 0, 16),        # 11 A = UDP destination port (14 + X + 2)
        (jeq, 1, 0, BFD_PORTS[0]),   # 12 3784 ? accept : 13
        (jeq, 0, 1, BFD_PORTS[1]),   # 13 4784 ? accept : drop
        (ret, 0, 0, 0xFFFF),         # 14 accept
        (ret, 0, 0, 0),              # 15 drop
    ]


class Gaps(object):
    """Inter-arrival gaps per session from (session, time) events in time order."""

    def __init__(self, keep_s):
        self.keep_s = keep_s
        self.t0 = None
        self.last = {}
        self.count = {}
        self.max_gap = {}
        self.kept = {}

    def add(self, session, t):
        if self.t0 is None:
            self.t0 = t
        prev = self.last.get(session)
        self.last[session] = t
        self.count[session] = self.count.get(session, 0) + 1
        if prev is not None:
            self._gap(session, prev, t)

    def finish(self, t_end):
        """The silence from each session's last packet to ``t_end`` (the newest packet of any session) counts
        as a gap."""
        for session, last in self.last.items():
            if t_end > last:
                self._gap(session, last, t_end)

    def _gap(self, session, prev, t):
        gap = t - prev
        if gap > self.max_gap.get(session, 0.0):
            self.max_gap[session] = gap
        if gap >= self.keep_s:
            self.kept.setdefault(session, []).append([round(prev - self.t0, 3), round(gap * 1000.0, 1)])

    def report(self):
        return dict((s, {"packets": self.count[s], "max_gap_ms": round(self.max_gap.get(s, 0.0) * 1000.0, 1),
                         "gaps": self.kept.get(s, [])}) for s in sorted(self.count))


def summarize(report, interval_ms):
    """Gaps over all sessions of one sniffer report (``Gaps.report``), in intervals. A sender jitters each
    interval down by 0-25 % (RFC 5880 6.8.7), so normal gaps are 0.75-1 interval: a gap of >= 1.5 means
    at least one packet missing, >= 2.25 at least two in a row, and >= 3 is the detection time (a
    session-down at multiplier 3). Sessions with under 10 packets (strays) are left out."""
    out = {"sessions": 0, "packets": 0, "gaps_ge_1_5x": 0, "gaps_ge_2_25x": 0, "gaps_ge_3x": 0, "max_gap_x": 0.0}
    for s in report.values():
        if s["packets"] < 10:
            continue
        out["sessions"] += 1
        out["packets"] += s["packets"]
        out["max_gap_x"] = max(out["max_gap_x"], round(s["max_gap_ms"] / float(interval_ms), 2))
        for _start, gap_ms in s["gaps"]:
            out["gaps_ge_1_5x"] += gap_ms >= 1.5 * interval_ms
            out["gaps_ge_2_25x"] += gap_ms >= 2.25 * interval_ms
            out["gaps_ge_3x"] += gap_ms >= 3 * interval_ms
    return out


def parse_addresses(frame):
    """(source, destination) of an IPv6 or IPv4 frame (Ethernet header included)."""
    etype = struct.unpack("!H", frame[12:14])[0]
    if etype == 0x86dd:
        return (socket.inet_ntop(socket.AF_INET6, frame[22:38]), socket.inet_ntop(socket.AF_INET6, frame[38:54]))
    return (socket.inet_ntop(socket.AF_INET, frame[26:30]), socket.inet_ntop(socket.AF_INET, frame[30:34]))


def open_socket(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    prog = bfd_filter()
    insns = (ctypes.c_ubyte * (8 * len(prog)))()
    ctypes.memmove(insns, b"".join(struct.pack("HBBI", *i) for i in prog), 8 * len(prog))
    fprog = struct.pack("HL", len(prog), ctypes.addressof(insns))
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((iface, ETH_P_ALL))
    return s, insns


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("iface", nargs="+")
    ap.add_argument("--keep-ms", type=float, default=100.0)
    a = ap.parse_args(argv)
    socks = dict((iface, open_socket(iface)) for iface in a.iface)
    by_fd = dict((s.fileno(), (iface, s)) for iface, (s, _insns) in socks.items())
    gaps = Gaps(a.keep_ms / 1000.0)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_args: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_args: stop.append(1))
    print("ready", flush=True)
    while not stop:
        try:
            ready = select.select(list(by_fd), [], [], 0.5)[0]
        except InterruptedError:
            continue
        for fd in ready:
            iface, s = by_fd[fd]
            frame, anc, _flags, addr = s.recvmsg(2048, socket.CMSG_SPACE(16))
            if addr[2] == PACKET_OUTGOING:
                continue
            t = time.time()
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", data[:16])
                    t = sec + nsec / 1e9
            try:
                src, dst = parse_addresses(frame)
            except (struct.error, ValueError):
                continue
            gaps.add("%s|%s|%s" % (iface, src, dst), t)
    if gaps.last:
        gaps.finish(max(gaps.last.values()))
    print(json.dumps(gaps.report()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
