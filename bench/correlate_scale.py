"""Correlation benchmark: 1M synthetic detections over a 125K-host region, cases out.

Topology: bench/plan_scale.py's ``synthetic("metro_1m")`` (125,440 hosts, 15,680 racks, 64 zones).
Faults (NIC silent loss, NIC flaps, host, ToR, ToR-spine uplink, agent down) start one after the
other in distinct racks; bench/monitor_sim.py turns them into the detections the agents and exporters
would emit (every probe path touching a faulty element, per 10 s interval), with sub-threshold noise
and isolated above-threshold blips. The stream is cut at ``--detections``.

Two phases, each in its own process pinned to one core, so peak memory (ru_maxrss) is its own:
``plain`` generates the stream and only counts it; ``correlate`` generates the same stream and feeds
it through the Correlator. Ratios are correlate / plain. Prints figures; asserts nothing.

  flock /work/heavy.lock .venv/bin/python bench/correlate_scale.py          # metro_1m, 1M detections
  .venv/bin/python bench/correlate_scale.py --quick                          # small fabric, CI smoke
"""
import argparse
import itertools
import json
import multiprocessing
import os
import random
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".build"))

from ansible_collections.netscale.multinic.bench.monitor_sim import Fault, Simulator  # noqa: E402
from ansible_collections.netscale.multinic.bench.plan_scale import synthetic  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.correlate import Correlator  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.fabric import FabricIndex  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology  # noqa: E402

T0 = 1800000000.0
KINDS = (("nic", 40), ("flap", 10), ("host", 10), ("uplink", 15), ("agent", 20), ("tor", 5))


def fault_plan(index, count, spacing, seed=5):
    """``count`` faults, one every ``spacing`` seconds, each in a rack of its own."""
    rnd = random.Random(seed)
    racks = list(range(len(index.racks)))
    rnd.shuffle(racks)
    bag = [k for k, w in KINDS for _copy in range(w)]
    faults = []
    for i in range(count):
        r = racks[i % len(racks)]
        kind = rnd.choice(bag)
        start = T0 + i * spacing
        host = rnd.choice(index.rack_hosts(r))
        tor = index.tor_name(r)
        spines = index.zone_spines(index.zone_of_rack(r))
        dur = 60.0 if kind == "tor" else rnd.choice((60.0, 120.0, 180.0, 300.0))
        if kind == "flap":
            dur = 600.0
        faults.append(Fault(kind, start, start + dur, host=host, nic=rnd.randint(1, index.nic_count(host)), tor=tor,
                            spine=rnd.choice(spines), loss=rnd.choice((1.0, 0.3, 0.05, 0.02)),
                            exporter=rnd.random() < 0.5, flaps=(start + 5, start + 250, start + 500)))
    return faults


def stream(index, faults, detections, noise, above):
    sim = Simulator(index, seed=11)
    end = max(f.end for f in faults) + 600.0
    return itertools.islice(sim.stream(faults, end, noise=noise, above=above, t_start=T0 - 60), detections)


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _phase(args, phase, queue):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    t0 = time.perf_counter()
    if args["scenario"] == "metro_1m":
        data = synthetic("metro_1m")
    else:
        data = synthetic("quick")
    index = FabricIndex.from_topology(load_topology(data, args["scenario"]))
    del data
    faults = fault_plan(index, args["faults"], args["spacing"])
    out = {"phase": phase, "hosts": len(index.hosts), "racks": len(index.racks), "zones": len(index.zones),
           "setup_s": round(time.perf_counter() - t0, 2), "setup_mib": round(_peak_mib(), 1)}
    dets = stream(index, faults, args["detections"], args["noise"], args["above"])
    c0, w0 = time.process_time(), time.perf_counter()
    if phase == "plain":
        kinds = {}
        n = 0
        for det in dets:
            kinds[det.kind] = kinds.get(det.kind, 0) + 1
            n += 1
        out.update(detections=n, kinds=kinds, last_time=None)
    else:
        corr = Correlator(index)
        cases = list(corr.feed_many(dets))
        cases.extend(corr.finish())
        out.update(detections=corr.stats["detections"], stats=corr.stats, cases=len(cases))
        by_scope = {}
        for c in cases:
            by_scope[c.key[0]] = by_scope.get(c.key[0], 0) + 1
        out["cases_by_scope"] = by_scope
        got = {}
        for c in cases:
            got.setdefault(c.key, []).append(c)
        last = max(c.last for c in cases) if cases else T0
        started = [f for f in faults if f.start <= last]
        matched = [f for f in started if f.expect in got]
        out.update(faults_started=len(started), faults_matched=len(matched),
                   faults_by_kind={k: sum(1 for f in started if f.kind == k) for k, _w in KINDS},
                   missed_by_kind={k: sum(1 for f in started if f.kind == k and f.expect not in got) for k, _w in KINDS},
                   missed=[{"kind": f.kind, "expect": list(f.expect), "loss": f.loss, "start_s": f.start - T0,
                            "end_s": f.end - T0, "exporter": f.exporter} for f in started if f.expect not in got],
                   last_case_s=last - T0,
                   extra_cases=sum(len(v) for k, v in got.items() if k not in {f.expect for f in started}),
                   detections_per_case=round(sum(c.count for c in cases) / float(len(cases) or 1), 1),
                   time_to_open_s_median=_median([min(c.opened_at for c in got[f.expect]) - f.start for f in matched]))
    out.update(cpu_s=round(time.process_time() - c0, 2), wall_s=round(time.perf_counter() - w0, 2),
               peak_mib=round(_peak_mib(), 1))
    queue.put(out)


def _median(values):
    values = sorted(values)
    return round(values[len(values) // 2], 1) if values else None


def run(args, phase):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_phase, args=(args, phase, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def measure(args):
    plain = run(args, "plain")
    corr = run(args, "correlate")
    return {"args": args, "plain": plain, "correlate": corr,
            "cpu_ratio": round(corr["cpu_s"] / max(plain["cpu_s"], 1e-3), 2),
            "peak_ratio": round(corr["peak_mib"] / max(plain["peak_mib"], 1e-3), 3),
            "peak_delta_mib": round(corr["peak_mib"] - plain["peak_mib"], 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small fabric, 20K detections (CI smoke)")
    ap.add_argument("--detections", type=int, default=1000000)
    ap.add_argument("--faults", type=int, default=400)
    ap.add_argument("--spacing", type=float, default=60.0, help="seconds between fault starts")
    ap.add_argument("--noise", type=int, default=200, help="sub-threshold path_loss detections per 10 s interval")
    ap.add_argument("--above", type=int, default=10, help="isolated 1-3 %% blips per 10 s interval (region-wide)")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    args = {"scenario": "quick" if a.quick else "metro_1m", "detections": 20000 if a.quick else a.detections,
            "faults": 20 if a.quick else a.faults, "spacing": a.spacing, "noise": 5 if a.quick else a.noise,
            "above": 1 if a.quick else a.above}
    res = measure(args)
    p, c = res["plain"], res["correlate"]
    print("== %s: %d hosts, %d racks, %d zones; setup (topology + index) %.1f s, %.0f MiB"
          % (args["scenario"], c["hosts"], c["racks"], c["zones"], c["setup_s"], c["setup_mib"]))
    print("   detections: %d (%s)" % (p["detections"], ", ".join("%s %d" % kv for kv in sorted(p["kinds"].items()))))
    st = c["stats"]
    print("   correlate: %d cases (%s); in cases %d, below threshold %d, unattributed %d, late %d, absorbed cases %d"
          % (c["cases"], ", ".join("%s %d" % kv for kv in sorted(c["cases_by_scope"].items())), st["in_cases"],
             st["below_threshold"], st["unattributed"], st["late"], st["cases_absorbed"]))
    print("   faults started %d, with a case of the expected scope %d; missed by kind %s; cases not matching a fault %d; "
          "detections per case %.1f; time from fault start to case opened, median %s s"
          % (c["faults_started"], c["faults_matched"], c["missed_by_kind"], c["extra_cases"], c["detections_per_case"],
             c["time_to_open_s_median"]))
    print("   one core: plain pass %.2f s CPU (%.2f s wall), peak %.0f MiB; correlate %.2f s CPU (%.2f s wall), peak %.0f MiB"
          % (p["cpu_s"], p["wall_s"], p["peak_mib"], c["cpu_s"], c["wall_s"], c["peak_mib"]))
    print("   correlation alone: %.2f s CPU for %d detections (%.1f us each); ratios correlate/plain: CPU %.2f, peak memory "
          "%.3f (+%.0f MiB)" % (c["cpu_s"] - p["cpu_s"], p["detections"], 1e6 * (c["cpu_s"] - p["cpu_s"]) / max(p["detections"], 1),
                                res["cpu_ratio"], res["peak_ratio"], res["peak_delta_mib"]))
    if a.json:
        with open(a.json, "w") as handle:
            json.dump(res, handle, indent=2)
    return res


if __name__ == "__main__":
    main()
