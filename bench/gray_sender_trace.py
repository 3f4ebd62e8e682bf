# -*- coding: utf-8 -*-
"""What a receiver stall is made of: the storage node's TCP senders traced through gray-failure runs.

Runs the fault runs of bench/gray_stack.py (same lab, traffic and figures: ``one_run``) and, during each,
samples the storage node's sockets every ~25 ms (``ss -tin`` in its namespace: bytes_acked, backoff, rto,
retrans, lost, cwnd of every ingress sender). Per run it prints the bench's line and the longest
sender-side freezes (bytes_acked not moving) from 0.2 s before the fault on, each with its timeline of
state changes, in seconds from the fault: when the retransmission timeouts fired (backoff 1, 2, 3 ...)
and when the flow resumed. That tells a path that stays broken from retransmissions lost one after the
other, and a flow on the faulted NIC from one on a surviving NIC losing packets to congestion.

The sampler costs CPU on a 2-vCPU machine, so the figures of these runs are not the bench's: use them to
explain, not to count. Only a compact summary is written (--json): the bench's row per run and the
timelines of the --top longest freezes, not the raw samples.

usage (root, under the lab lock):
  flock /tmp/netscale-e2e.lock .venv/bin/python bench/gray_sender_trace.py --mode kernel --fault silent \
      --runs 20 --sender-cc cubic [--top 3] [--json PATH]
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import gray_stack as B  # noqa: E402
from labkit import gray_stack as GS  # noqa: E402
from labkit import stack_lab as M  # noqa: E402

PERIOD = 0.025
FIELDS = ("backoff", "rto", "retrans", "lost", "unacked", "cwnd", "bytes_acked")


def parse_ss(text, local_part):
    """{peer: {field: value}} of the established sockets whose local address contains ``local_part``."""
    out = {}
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line[:1] in "\t ":
            continue
        cols = line.split()
        if len(cols) < 4 or local_part not in cols[2]:
            continue
        kv = dict(re.findall(r"(\w+):(\S+)", lines[i + 1]))
        out[cols[3]] = dict((k, kv.get(k, "0" if k == "backoff" else None)) for k in FIELDS)
    return out


class SenderSampler(threading.Thread):
    def __init__(self, netns, local_part):
        threading.Thread.__init__(self, daemon=True)
        self.netns, self.local_part = netns, local_part
        self.samples, self.stop = [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            p = subprocess.run(["ip", "netns", "exec", self.netns, "ss", "-Htin", "state", "established"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, check=False)
            self.samples.append((t, parse_ss(p.stdout, self.local_part)))
            time.sleep(max(0.0, PERIOD - (time.monotonic() - t)))

    def finish(self):
        self.stop.set()
        self.join(10)
        return self.samples


def freezes(samples, t_fault, top, min_acked=1e6):
    """The ``top`` longest bytes_acked freezes that began from 0.2 s before the fault on, with the state
    changes (backoff, retrans, bytes_acked) of that flow over the freeze, times from the fault."""
    per = {}
    for t, socks in samples:
        for peer, st in socks.items():
            per.setdefault(peer, []).append((t - t_fault, st))
    found = []
    for peer, seq in per.items():
        if int(seq[-1][1].get("bytes_acked") or 0) < min_acked:
            continue   # iperf3's control connection, or a flow that never got going
        best, start, last, prev_t = (0.0, None), None, None, None
        for t, st in seq:
            acked = int(st.get("bytes_acked") or 0)
            if t >= -0.2 and last is not None and acked == last:
                start = prev_t if start is None else start
                if t - start > best[0]:
                    best = (t - start, start)
            else:
                start = None
            last, prev_t = acked, t
        if best[1] is not None:
            found.append((best[0], best[1], peer))
    found.sort(reverse=True)
    out = []
    for length, start, peer in found[:top]:
        steps, key = [], None
        for t, st in per[peer]:
            if start - 0.05 <= t <= start + length + 0.1:
                k = (st.get("backoff"), st.get("retrans"), st.get("bytes_acked"))
                if k != key:
                    steps.append(dict([("t", round(t, 3))] + [(f, st.get(f)) for f in FIELDS]))
                key = k
        out.append({"peer": peer, "freeze_s": round(length, 2), "from_s": round(start, 2), "steps": steps})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--mode", default="kernel", choices=["ebpf", "kernel"])
    ap.add_argument("--fault", default="silent", choices=[k for k in GS.FAULTS if k != "flap_storm"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--hold", type=float, default=2.0)
    ap.add_argument("--nic", type=int, default=1)
    ap.add_argument("--sender-cc", default=None, help="as bench/gray_stack.py --sender-cc")
    ap.add_argument("--top", type=int, default=3, help="freezes reported per run")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    B.SENDER_CC[0] = a.sender_cc
    fault_at = []
    set_fault = GS.set_fault

    def dated_set_fault(*args, **kw):
        if kw.get("on", True):
            fault_at.append(time.monotonic())
        return set_fault(*args, **kw)
    GS.set_fault = dated_set_fault
    data = {"argv": sys.argv, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": []}
    lab = B.build(a.mode)
    try:
        view = GS.HostView(lab, B.HOST, a.mode)
        ports = B.Ports()
        storage4 = M.STO4
        for i in range(a.runs):
            del fault_at[:]
            smp = SenderSampler(lab.netns("mns-storage"), storage4)
            smp.start()
            try:
                row = B.one_run(lab, view, a.mode, a.fault, a.nic, a.hold, ports)
            finally:
                samples = smp.finish()
                for s in B.SAMPLERS:
                    s.finish()
                GS.clear_faults(lab, B.HOST)
                lab.close()
            row["run"] = i + 1
            row["sender_freezes"] = freezes(samples, fault_at[0], a.top) if fault_at else None
            data["runs"].append(row)
            print(B.line(row, i + 1), flush=True)
            for f in row["sender_freezes"] or []:
                print("  %s frozen %.2f s from %+.2f s:" % (f["peer"], f["freeze_s"], f["from_s"]))
                for st in f["steps"]:
                    print("    %+.3f backoff %s rto %s retrans %s lost %s cwnd %s acked %s" % (
                        st["t"], st["backoff"], st["rto"], st["retrans"], st["lost"], st["cwnd"], st["bytes_acked"]))
            B.save(a.json, data)
    finally:
        lab.close()
        B.save(a.json, data)
        M.lab_teardown(check=False)


if __name__ == "__main__":
    main()
