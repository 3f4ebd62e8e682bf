# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hung sidecar (issue 12 item 3) on the mnv harness (root; real FRR ToR, real ExaBGP + helper).

Per run: start the slot's ExaBGP, wait for full ECMP width (4 next hops, IPv4 and IPv6) in the ToR
kernel FIB, SIGSTOP ExaBGP by PID, and measure the time until the task IP has left the ToR's FIB
(both families) and ExaBGP has died (the helper's watchdog SIGKILLs it). Then the harness starts
ExaBGP again, as systemd's Restart=always would (RestartSec not included), and measures the time
back to full width. Prints min/median/max; asserts nothing about time.

``--no-watchdog`` runs the same with the watchdog off (the BGP hold timer decides: ~9 s).

Usage: sudo flock /tmp/netscale-e2e.lock .venv/bin/python bench/vipinjector_hang.py [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from labkit.mnv_harness import Harness  # noqa: E402


def _stats(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    return "min %.3f  median %.3f  max %.3f  (n=%d)" % (min(xs), statistics.median(xs), max(xs), len(xs))


def run(runs, watchdog=True):
    h = Harness(tag="hb%x" % (os.getpid() & 0xFFF))
    res = []
    try:
        h.build()
        h.start_frr()
        h.settle()
        wd = {"enabled": bool(watchdog)}
        h.write_instance(1, watchdog=wd)
        v4, v6 = h.task_ip(1), h.task_ip(1, "ipv6")
        for i in range(runs):
            p = h.start_exabgp(1)
            h.wait_width(v4, 4, timeout=20)
            h.wait_width(v6, 4, timeout=10)
            time.sleep(0.5)  # steady state: the watchdog's probes are running
            t0 = time.monotonic()
            os.kill(p.pid, signal.SIGSTOP)
            gone, dead = None, None
            try:
                while time.monotonic() - t0 < 15:
                    if gone is None and not h.fib_nexthops(v4) and not h.fib_nexthops(v6):
                        gone = time.monotonic() - t0
                    if dead is None and p.poll() is not None:
                        dead = time.monotonic() - t0
                    if gone is not None and dead is not None:
                        break
                    time.sleep(0.005)
            finally:
                if p.poll() is None:  # the watchdog did not act (or is off): clean up by PID
                    os.kill(p.pid, signal.SIGCONT)
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(5)
            rc = p.returncode
            t1 = time.monotonic()
            h.start_exabgp(1)
            back = None
            try:
                h.wait_width(v4, 4, timeout=20)
                h.wait_width(v6, 4, timeout=10)
                back = time.monotonic() - t1
            except AssertionError:
                pass
            r = {"run": i + 1, "withdrawn_s": gone, "exabgp_dead_s": dead, "exit": rc, "back_s": back}
            print(json.dumps(r), flush=True)
            res.append(r)
            h.stop_exabgp(1, signal.SIGTERM)
            h.wait_width(v4, 0, timeout=10)
        fired = h.log(1).count("watchdog: ExaBGP")
    finally:
        h.close()
    print("watchdog %s, %d runs (SIGSTOP on ExaBGP; ToR kernel FIB polled every ~5 ms)"
          % ("on" if watchdog else "off", runs))
    print("  SIGSTOP -> task IP gone from the ToR FIB (v4+v6): %s" % _stats([r["withdrawn_s"] for r in res]))
    print("  SIGSTOP -> ExaBGP dead (SIGKILL by the helper):   %s" % _stats([r["exabgp_dead_s"] for r in res]))
    print("  restart -> full width again (4 next hops):         %s" % _stats([r["back_s"] for r in res]))
    print("  exit statuses %s; watchdog log lines %d" % (sorted(set(r["exit"] for r in res)), fired))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-watchdog", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (namespaces, FRR)")
    run(a.runs, watchdog=not a.no_watchdog)


if __name__ == "__main__":
    main()
