"""Planner benchmark: full plan, artifact writing and incremental rack re-plan at region scale.

Prints figures; asserts nothing about time. Each phase runs in its own process pinned to one core,
so peak memory (ru_maxrss) is that phase's own.

  .venv/bin/python bench/plan_scale.py            # 100K-GPU region and 1M-GPU metro region
  .venv/bin/python bench/plan_scale.py --quick    # small fabric, for CI smoke
"""
import argparse
import json
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.plan.store import write_plan  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import add_rack, load_topology  # noqa: E402

SCENARIOS = {
    # Meta's 100K-GPU region: 5 buildings x 4 halls x 2 AI zones = 8 zones/building, 252 racks/zone,
    # 2-4 hosts per rack, mixed 2- and 4-NIC hosts. IPv6 only (an IPv4 plan of this size needs a /10).
    "region_100k": dict(buildings=5, zones=8, racks=252, hosts=(2, 4), nics=(2, 4), slots=8,
                        capacity=dict(buildings=8, zones=8, racks=256, hosts=4, nics=8, task_slots=8, spines=4)),
    # 1M-GPU metro region: ~125K hosts x 4 NICs x 8 task slots (~4M per-NIC container addresses).
    "metro_1m": dict(buildings=8, zones=8, racks=245, hosts=(8, 8), nics=(4, 4), slots=8,
                     capacity=dict(buildings=8, zones=8, racks=256, hosts=8, nics=8, task_slots=8, spines=4)),
    # A 100K-GPU region of 8-GPU hosts: ~12.5K hosts, most with 8 NICs (one per GPU), 4 per rack.
    "region_100k_8nic": dict(buildings=4, zones=8, racks=98, hosts=(4, 4), nics=(4, 8, 8, 8), slots=8,
                             capacity=dict(buildings=8, zones=8, racks=128, hosts=4, nics=8, task_slots=8, spines=4)),
    "quick": dict(buildings=2, zones=2, racks=8, hosts=(2, 4), nics=(2, 4), slots=8,
                  capacity=dict(buildings=2, zones=2, racks=16, hosts=4, nics=8, task_slots=8, spines=4)),
}


def synthetic(name):
    s = SCENARIOS[name]
    rnd = random.Random(42)
    buildings = []
    for b in range(1, s["buildings"] + 1):
        zones = []
        for z in range(1, s["zones"] + 1):
            racks = []
            for r in range(1, s["racks"] + 1):
                hosts = [{"id": h, "name": "h%d-%d-%d-%d" % (b, z, r, h), "nics": rnd.choice(s["nics"])}
                         for h in range(1, rnd.randint(*s["hosts"]) + 1)]
                racks.append({"id": r, "name": "r%d-%d-%d" % (b, z, r), "hosts": hosts})
            zones.append({"id": z, "name": "z%d-%d" % (b, z), "racks": racks,
                          "spines": [{"id": i, "name": "s%d-%d-%d" % (b, z, i)} for i in range(1, 5)]})
        buildings.append({"id": b, "name": "b%d" % b, "zones": zones})
    return {"name": name.replace("_", "-"), "region": {"name": "metro"}, "capacity": dict(s["capacity"]),
            "pools": {"ipv6": "fd00:1000::/32", "infrastructure": {"ipv6": "fd00:ff::/48"}},
            "asn": {"spine": 4200000001, "tor": 4200010001, "host": 4201000001}, "buildings": buildings}


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _phase(name, phase, queue):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    data = synthetic(name)
    base_mib = _peak_mib()
    out = {"phase": phase, "input_mib": round(base_mib, 1)}
    t0, c0 = time.perf_counter(), time.process_time()
    topo = load_topology(data, name)
    t1 = time.perf_counter()
    plan = FabricPlan(topo).allocate()
    t2, c2 = time.perf_counter(), time.process_time()
    addrs = sum(sum(len(r) for r in a.containers[6]) + len(a.task_ips[6]) + 3 * len(a.nets[6][1])
                for a in plan.allocs.values())
    out.update(hosts=len(topo.hosts), racks=len(topo.racks), nics=sum(h.nics for h in topo.hosts),
               addresses=addrs, validate_s=round(t1 - t0, 3), allocate_s=round(t2 - t1, 3),
               plan_s=round(t2 - t0, 3), plan_cpu_s=round(c2 - c0, 3))
    if phase == "plan":
        out["peak_mib"] = round(_peak_mib(), 1)
    elif phase == "write":
        dest = tempfile.mkdtemp(prefix="mn-bench-plan-")
        try:
            t3, c3 = time.perf_counter(), time.process_time()
            result = write_plan(plan, dest)
            t4, c4 = time.perf_counter(), time.process_time()
            size = sum(os.path.getsize(os.path.join(b, f)) for b, _d, fs in os.walk(dest) for f in fs)
            out.update(write_s=round(t4 - t3, 3), write_cpu_s=round(c4 - c3, 3), files=len(result["written"]), bytes=size,
                       peak_mib=round(_peak_mib(), 1))
            # Incremental: add one rack to a zone with room, re-plan and write only that rack.
            times = []
            zones = [z for z in topo.zones if len(z.children) < topo.capacity["racks"]]
            for i, zone in enumerate(zones[:7]):
                used = {r.id for r in zone.children}
                rid = min(set(range(1, topo.capacity["racks"] + 1)) - used)
                rack = {"id": rid, "name": "new-%s-%d" % (zone.name, rid),
                        "hosts": [{"id": h, "name": "new-%s-%d-h%d" % (zone.name, rid, h), "nics": 4}
                                  for h in range(1, 4)]}
                t5 = time.process_time()
                node = add_rack(topo, zone.name, rack)
                write_plan(plan, dest, partial={"racks": [node]})
                times.append(time.process_time() - t5)
            times.sort()
            out.update(incremental_rack_ms_median=round(1000 * times[len(times) // 2], 2),
                       incremental_rack_ms_max=round(1000 * times[-1], 2), incremental_runs=len(times))
        finally:
            shutil.rmtree(dest)
    queue.put(out)


def run(name, phase):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_phase, args=(name, phase, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small fabric only (CI smoke)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    names = ["quick"] if args.quick else ["region_100k", "metro_1m"]
    results = {}
    for name in names:
        plan = run(name, "plan")
        write = run(name, "write")
        results[name] = {"plan": plan, "write": write}
        head = (name, plan["hosts"], plan["racks"], plan["nics"], plan["addresses"])
        print("== %s: %d hosts, %d racks, %d NICs, %d IPv6 allocations (NIC subnets, ToR gateways, host NIC "
              "addresses, task IPs, per-NIC container addresses)" % head)
        times = (plan["plan_s"], plan["plan_cpu_s"], plan["validate_s"], plan["allocate_s"], plan["peak_mib"],
                 plan["input_mib"])
        print("   full plan (validate + allocate), one core: %.2f s wall, %.2f s CPU (validate %.2f s, allocate %.2f s), "
              "peak %.0f MiB (input dict alone %.0f MiB)" % times)
        print("   write intended/plan: %.2f s wall, %.2f s CPU, %d files, %.1f MiB on disk, peak %.0f MiB"
              % (write["write_s"], write["write_cpu_s"], write["files"], write["bytes"] / 2 ** 20, write["peak_mib"]))
        inc = (write["incremental_rack_ms_median"], write["incremental_rack_ms_max"], write["incremental_runs"])
        print("   incremental re-plan of one added rack (validate, plan, write its file): median %.2f ms CPU, "
              "max %.2f ms over %d runs" % inc)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
