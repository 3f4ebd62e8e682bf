# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU an idle VipInjector sidecar costs, on the mnv harness (root; real FRR ToR, real ExaBGP 5.0.15 + helper).

One slot of a 4-NIC host, the role's defaults (path check ``route`` every 1 s, no health check, egress state
polled every 0.05 s, drain files every 0.1 s), announced on all four sessions. Once the ToR's FIB holds the task
IP on four next hops, the sidecar is left alone for ``--seconds`` and the CPU time of its processes is read from
/proc: ExaBGP's own, the helper's own, and the helper's children (the ``ip`` processes of its path checks, reaped
by the helper). Then what a slower loop could cost in reaction: a drain file's withdraw from the ToR's FIB and
the announcement back, with the start's time to four next hops. Variants run one after the other in one process, on the same harness, ``--rounds`` times each,
alternating, so the figures compare under the same load. Prints % of one core; asserts nothing.

Why it matters: a sidecar runs per workload container, all the time. An 8-NIC host with 8 containers runs 8
ExaBGP and 8 helpers with 64 sessions between them; the CI lab fabrics run 4-8 slots each (docs/performance.md).

Usage: flock /work/lab.lock .venv/bin/python bench/sidecar_idle_cpu.py [--seconds 30] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from labkit.mnv_harness import Harness  # noqa: E402  (makes the collection importable)
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")

# the sidecar's defaults (render.DEFAULTS, what the role deploys), not the harness's fast test timers; health
# type none is the lab's consent (inventories/lab/group_vars/all/lab.yml)
HEALTH = dict(render.DEFAULTS["health"], type="none")
PATH_CHECK = render.DEFAULTS["path_check"]
EGRESS = render.DEFAULTS["egress_state"]

VARIANTS = {
    # name: (instance option overrides, extra ExaBGP environment)
    "as deployed": ({}, {}),
    # ExaBGP's own loop time (exabgp.reactor.speed 1.0: 10 ms sleeps), what the sidecar ran before
    "ExaBGP's 10 ms loop": ({}, {"exabgp_reactor_speed": "1.0"}),
    "no path check": ({"path_check": dict(PATH_CHECK, type="none")}, {}),
    # the egress state (the NIC watcher's file, in a directory inotify watches) polled every 1 s instead
    "egress poll 1 s": ({"egress_state": dict(EGRESS, poll=1.0)}, {}),
    "no egress state": ({"egress_state": dict(EGRESS, file=None)}, {}),
}


def cpu(pid):
    """(own, children reaped) CPU seconds of a process, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


def children(pid):
    out = []
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def helper_pid(exabgp_pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in children(exabgp_pid):
            try:
                with open("/proc/%d/cmdline" % c, "rb") as f:
                    if b"vipinjector-helper" in f.read():
                        return c
            except OSError:
                pass
        time.sleep(0.1)
    raise RuntimeError("no helper process under ExaBGP %d after %.0f s" % (exabgp_pid, timeout))


def measure(h, name, seconds):
    over, extra_env = VARIANTS[name]
    opts = dict({"health": HEALTH, "path_check": PATH_CHECK, "egress_state": EGRESS}, **over)
    if opts["egress_state"]["file"]:   # the harness's own directory (inotify watches it), not the host's /run
        opts["egress_state"] = dict(opts["egress_state"], file=os.path.join(h.tmp, "egress-state.json"))
    h.write_instance(1, **opts)
    env = h.env
    h.env = lambda slot: dict(env(slot), **extra_env)
    try:
        p = h.start_exabgp(1)
    finally:
        h.env = env
    try:
        v4, v6 = h.task_ip(1), h.task_ip(1, "ipv6")
        started = h.wait_width(v4, 4, timeout=30)
        h.wait_width(v6, 4, timeout=10)
        helper = helper_pid(p.pid)
        time.sleep(3)  # past the first path-check rounds and the announcements
        e0, h0 = cpu(p.pid), cpu(helper)
        time.sleep(seconds)
        e1, h1 = cpu(p.pid), cpu(helper)
        if len(h.fib_nexthops(v4)) != 4:
            raise RuntimeError("%s: the task IP lost next hops while idle: %s" % (name, h.fib_nexthops(v4)))
        # what the loop time could cost in reaction: a drain file's withdraw and the announcement after it
        drain = h.drain_file(1)
        open(drain, "w").close()
        withdrawn = h.wait_width(v4, 0, timeout=10, poll=0.002)
        os.unlink(drain)
        back = h.wait_width(v4, 4, timeout=10, poll=0.002)
    finally:
        h.stop_exabgp(1)
    return {"exabgp": (e1[0] - e0[0]) / seconds, "helper": (h1[0] - h0[0]) / seconds,
            "helper children": (h1[1] - h0[1]) / seconds}, {"start": started, "drain": withdrawn, "undrain": back}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces, FRR)")
    h = Harness(tag="ic%x" % (os.getpid() & 0xFFF))
    results = {n: [] for n in args.variants}
    times = {n: [] for n in args.variants}
    try:
        h.build()
        h.start_frr()
        h.settle()
        # a first start on a fresh harness waits for the links' IPv6 set-up (seen: 1.4 s against 0.2-0.3 s after)
        measure(h, args.variants[0], 1.0)
        for r in range(args.rounds):
            for name in args.variants:
                res, t = measure(h, name, args.seconds)
                results[name].append(res)
                times[name].append(t)
                print("round %d  %-20s  exabgp %5.2f%%  helper %5.2f%%  helper children %5.2f%%  total %5.2f%%"
                      "   start -> 4 next hops %.3f s, drain file -> withdrawn %.3f s, removed -> back %.3f s"
                      % (r + 1, name, 100 * res["exabgp"], 100 * res["helper"], 100 * res["helper children"],
                         100 * sum(res.values()), t["start"], t["drain"], t["undrain"]), flush=True)
    finally:
        h.close()
    print("\nmean over %d rounds of %.0f s (%% of one core, one 4-NIC slot idle):" % (args.rounds, args.seconds))
    for name, rs in results.items():
        mean = {k: sum(x[k] for x in rs) / len(rs) for k in rs[0]}
        print("  %-20s  exabgp %5.2f%%  helper %5.2f%%  helper children %5.2f%%  total %5.2f%%"
              % (name, 100 * mean["exabgp"], 100 * mean["helper"], 100 * mean["helper children"],
                 100 * sum(mean.values())))
    print("\nreaction, min-max over the rounds (s):")
    for name, ts in times.items():
        print("  %-20s  start -> 4 next hops %s   drain file -> withdrawn %s   removed -> back %s" % (
            name, *("%.3f-%.3f" % (min(x[k] for x in ts), max(x[k] for x in ts)) for k in ("start", "drain", "undrain"))))


if __name__ == "__main__":
    main()
