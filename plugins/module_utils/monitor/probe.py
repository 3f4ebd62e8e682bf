# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Active probing of the monitoring agent: wire format, accounting, rate budget, cost, sockets.

A probe is one UDP datagram of ``PROBE_BYTES`` bytes from a local NIC (socket bound to the NIC's
address and, with ``SO_BINDTODEVICE``, to the NIC itself, so it can leave by no other NIC) to a
target's responder on ``PORT``; the responder (one socket per local NIC, bound the same way) sends
it back unchanged but for the reply flag, from the address it was sent to. A probe is *answered*
when its reply arrives within ``timeout`` seconds, else *lost*; a late reply counts as nothing (the
probe was already lost). The responder answers only well-formed requests of exactly PROBE_BYTES, one
reply per request (no amplification).

Accounting (:class:`Ledger`, pure): per (NIC, target) the probes sent, answered, lost and the RTT sum of
the answered ones; loss over an interval = lost / (answered + lost), counted when each probe is
resolved (answered, or its timeout passed), so the ratio is exact whatever the interval boundaries.

Rate budget (:func:`schedule`): at most ``max_pps`` probes a second per host; a round (one
``interval``) probes every (NIC, target) pair when they fit in ``max_pps x interval``, else a rotating
window of that many pairs, so every pair is still probed, less often. :func:`cost` gives what that
costs per host and per region in packets and bytes a second.
"""

from __future__ import annotations

import math
import socket
import struct

MAGIC = b"NSMP"
WIRE_VERSION = 1
REQUEST = 0
REPLY = 1
HEADER = "!4sBBHIQ"          # magic, version, kind, reserved, token, sequence
PROBE_BYTES = 32             # UDP payload, padded: every probe has the same size
PORT = 31874                 # default responder port (UDP)
SO_BINDTODEVICE = getattr(socket, "SO_BINDTODEVICE", 25)
# on-wire overhead per probe datagram (Ethernet header 14 + FCS 4, UDP 8, IP 20 or 40); preamble and
# inter-frame gap (20) are not bandwidth a host's software can see and are left out
L2_OVERHEAD = 18
IP_HEADER = {"ipv4": 20, "ipv6": 40}
UDP_HEADER = 8


def encode(kind, token, seq):
    head = struct.pack(HEADER, MAGIC, WIRE_VERSION, kind, 0, token & 0xFFFFFFFF, seq & 0xFFFFFFFFFFFFFFFF)
    return head + b"\0" * (PROBE_BYTES - len(head))


def decode(data):
    """(kind, token, seq) of a well-formed probe datagram, else None."""
    if len(data) != PROBE_BYTES:
        return None
    magic, version, kind, dummy, token, seq = struct.unpack(HEADER, data[:struct.calcsize(HEADER)])
    if magic != MAGIC or version != WIRE_VERSION or kind not in (REQUEST, REPLY):
        return None
    return kind, token, seq


def reply_for(data):
    """The reply to a request datagram, or None (not a request: never answered)."""
    d = decode(data)
    if d is None or d[0] != REQUEST:
        return None
    return encode(REPLY, d[1], d[2])


class Stats(object):
    __slots__ = ("sent", "answered", "lost", "rtt_sum", "rtt_max")

    def __init__(self):
        self.sent = 0
        self.answered = 0
        self.lost = 0
        self.rtt_sum = 0.0
        self.rtt_max = 0.0

    def as_dict(self):
        return {"sent": self.sent, "answered": self.answered, "lost": self.lost,
                "rtt_sum": self.rtt_sum, "rtt_max": self.rtt_max}

    def loss_ratio(self):
        done = self.answered + self.lost
        return (float(self.lost) / done) if done else None


class Ledger(object):
    """Probe accounting per key (``(nic, target)``): totals since start and per interval.

    ``sent(key, t)`` returns the sequence number to put in the probe; ``reply(seq, t)`` resolves it;
    ``expire(t)`` turns probes older than ``timeout`` into losses. Outstanding probes are bounded by
    ``max_outstanding`` (the oldest are counted lost when it is exceeded)."""

    def __init__(self, timeout=1.0, max_outstanding=65536):
        if timeout <= 0:
            raise ValueError("timeout: %r; fix: use a positive number of seconds" % (timeout,))
        self.timeout = float(timeout)
        self.max_outstanding = int(max_outstanding)
        self.seq = 0
        self.outstanding = {}      # seq -> (key, t_sent); dicts keep insertion (= send) order
        self.totals = {}
        self.window = {}
        self.late = 0

    def _stats(self, table, key):
        s = table.get(key)
        if s is None:
            s = table[key] = Stats()
        return s

    def sent(self, key, now):
        self.seq += 1
        self.outstanding[self.seq] = (key, now)
        self._stats(self.totals, key).sent += 1
        self._stats(self.window, key).sent += 1
        while len(self.outstanding) > self.max_outstanding:
            oldest = next(iter(self.outstanding))
            self._lose(oldest)
        return self.seq

    def _lose(self, seq):
        key, dummy = self.outstanding.pop(seq)
        self._stats(self.totals, key).lost += 1
        self._stats(self.window, key).lost += 1

    def reply(self, seq, now):
        """(key, rtt) of an answered probe, None for an unknown, duplicate or late reply."""
        item = self.outstanding.get(seq)
        if item is None:
            self.late += 1
            return None
        key, t_sent = item
        rtt = now - t_sent
        if rtt > self.timeout:
            self._lose(seq)
            self.late += 1
            return None
        del self.outstanding[seq]
        rtt = max(rtt, 0.0)
        for table in (self.totals, self.window):
            s = self._stats(table, key)
            s.answered += 1
            s.rtt_sum += rtt
            s.rtt_max = max(s.rtt_max, rtt)
        return key, rtt

    def expire(self, now):
        """Count every probe older than the timeout as lost; returns how many."""
        old = [seq for seq, (dummy, t) in self.outstanding.items() if now - t > self.timeout]
        for seq in old:
            self._lose(seq)
        return len(old)

    def take_window(self):
        """The per-key stats since the last call (resolved probes), and start a new window."""
        out, self.window = self.window, {}
        return out


def schedule(pairs, interval, max_pps, round_no):
    """The pairs to probe in round ``round_no``: all of them when they fit the budget of
    ``max_pps x interval`` probes per round, else a window of that many, rotating over the list."""
    budget = max(1, int(math.floor(max_pps * interval)))
    if len(pairs) <= budget:
        return list(pairs)
    start = (round_no * budget) % len(pairs)
    return [pairs[(start + i) % len(pairs)] for i in range(budget)]


def probe_wire_bytes(family):
    """Bytes one probe datagram (request or reply) takes on the wire, Ethernet header and FCS included."""
    return PROBE_BYTES + UDP_HEADER + IP_HEADER[family] + L2_OVERHEAD


def cost(pairs, interval, max_pps, family="ipv6", hosts=1):
    """What the probing costs. Every host sends its probes and answers as many probes of others on
    average (the pinglists are symmetric), so per host packets sent = received = 2 x probe rate.
    Returns a dict of per-host and per-``hosts`` figures (packets/s and bytes/s, each direction)."""
    rate = min(float(pairs) / interval, float(max_pps))
    wire = probe_wire_bytes(family)
    per_host_pps = 2 * rate
    return {"probes_per_second": rate, "wire_bytes_per_probe": wire,
            "host_packets_per_second": per_host_pps, "host_bytes_per_second": per_host_pps * wire,
            "hosts": hosts, "region_packets_per_second": per_host_pps * hosts,
            "region_bytes_per_second": per_host_pps * wire * hosts,
            "pair_period_seconds": max(interval, pairs / float(max_pps)) if pairs else None}


# ---- sockets --------------------------------------------------------------------------------------
def family_of(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def nic_socket(device, address, port=0):
    """A non-blocking UDP socket bound to ``address`` and pinned to ``device`` (SO_BINDTODEVICE)."""
    s = socket.socket(family_of(address), socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if device:
            s.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, device.encode() + b"\0")
        s.bind((address, port))
        s.setblocking(False)
    except OSError:
        s.close()
        raise
    return s


def answer(sock, max_batch=256):
    """Reply to every request waiting on a responder socket (at most ``max_batch``); returns how many."""
    n = 0
    while n < max_batch:
        try:
            data, peer = sock.recvfrom(2048)
        except (BlockingIOError, InterruptedError):
            break
        out = reply_for(data)
        if out is None:
            continue
        try:
            sock.sendto(out, peer)
            n += 1
        except OSError:
            pass
    return n
