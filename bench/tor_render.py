"""Render time of every ToR config of a 100K-GPU region, and per-ToR FIB size (computed).

Region: 5 buildings x 8 AI zones x 252 racks, hosts per rack 2..4 (8 GPUs/NICs... here 4 NICs x 8
task slots per host), synthetic topology generated in memory. One core, single process.

    PYTHONPATH=.build .venv/bin/python bench/tor_render.py [--racks-per-zone 252] [--write DIR]

Also one full rack (16 hosts x 8 NICs x 8 task slots, dual stack) per platform: sessions, per-slot
peer-groups and prefix-lists, lines, render CPU time. Prints wall and CPU time (on a shared machine
the CPU time is the one-core figure); asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan, plan_topology  # noqa: E402


def region(buildings=5, zones=8, racks=252, nics=4, slots=8):
    topo = {
        "name": "bench-100k", "region": {"name": "bench", "id": 1},
        "capacity": {"buildings": 8, "zones": 8, "racks": 256, "hosts": 4, "nics": 8, "task_slots": slots,
                     "spines": 4},
        "pools": {"ipv6": "fd00:1000::/32", "ipv4": "198.18.0.0/15",
                  "infrastructure": {"ipv6": "fd00:ff::/48", "ipv4": "198.19.0.0/16"}},
        "asn": {"spine": 4200000001, "tor": 4200100001, "host": 4201000001},
        "buildings": [],
    }
    # IPv4: 2^(32-15)=131072 addresses cannot hold 10080 racks x /25 hosts... use IPv6 only when needed.
    for b in range(1, buildings + 1):
        zl = []
        for z in range(1, zones + 1):
            rl = []
            for r in range(1, racks + 1):
                nh = 2 + (r % 3)          # 2, 3 or 4 hosts: ~3 per rack on average
                rl.append({"id": r, "name": "b%dz%dr%d" % (b, z, r),
                           "hosts": [{"id": h, "name": "b%dz%dr%dh%d" % (b, z, r, h), "nics": nics}
                                     for h in range(1, nh + 1)]})
            zl.append({"id": z, "name": "b%dz%d" % (b, z), "racks": rl,
                       "spines": [{"id": s, "name": "b%dz%ds%d" % (b, z, s)} for s in range(1, 5)]})
        topo["buildings"].append({"id": b, "name": "b%d" % b, "zones": zl})
    return topo


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--racks-per-zone", type=int, default=252)
    ap.add_argument("--write", help="also write every config under this directory")
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = region(racks=args.racks_per_zone)
    try:
        plan = plan_topology(data)
    except Exception as exc:  # pools too small for IPv4: retry IPv6-only (IPv4 is optional per fabric)
        print("dual-stack plan failed (%s); planning IPv6 only" % str(exc).splitlines()[0])
        data["pools"].pop("ipv4")
        data["pools"]["infrastructure"].pop("ipv4")
        plan = plan_topology(data)
    topo = plan.topo
    t1 = time.perf_counter()
    hosts = len(topo.hosts)
    print("region: %d racks, %d hosts, %d GPUs/NICs (%d per host), %d task slots; plan %.1f s"
          % (len(topo.racks), hosts, sum(h.nics for h in topo.hosts), topo.hosts[0].nics,
             sum(h.task_slots for h in topo.hosts), t1 - t0))
    n = lines = sessions = groups = 0
    t2 = time.perf_counter()
    c2 = time.process_time()
    for rack in topo.racks:
        sc = tor_policy.tor_structured_config(plan.rack_data(rack), {}, {})
        text = tor_policy.render(sc)
        n += 1
        lines += text.count("\n")
        sessions += sc["counts"]["neighbors"]
        groups += sc["counts"]["peer_groups"]
        if args.write:
            os.makedirs(args.write, exist_ok=True)
            with open(os.path.join(args.write, sc["name"] + ".cfg"), "w") as fh:
                fh.write(text)
    t3 = time.perf_counter()
    c3 = time.process_time()
    print("render: %d ToR configs in %.2f s wall, %.2f s CPU (%.2f ms each, one core); %d lines, %d host "
          "sessions in %d per-slot peer-groups"
          % (n, t3 - t2, c3 - c2, 1000.0 * (c3 - c2) / n, lines, sessions, groups))
    _rack_scale()

    lplan = load_plan(os.path.join(HERE, "..", "inventories", "lab", "fabric.yml"))
    lab = lplan.topo
    print("per-ToR FIB (computed, full occupancy):")
    for rack in lab.racks:
        _fib_line("lab " + rack.name, lplan, rack, lab)
    zone = topo.zones[0]
    zracks = [r for r in topo.racks if r.parent is zone]
    worst = max(zracks, key=lambda r: len(r.children))
    _fib_line("252-rack zone, fullest rack %s" % worst.name, plan, worst, topo, zone_racks=len(zracks))
    return 0


def _rack_scale(hosts=16, nics=8, slots=8):
    """One full rack (16 hosts x 8 NICs x 8 slots = 1024 sessions): size and render time per platform."""
    topo = {
        "name": "bench-rack", "region": {"name": "bench", "id": 1},
        "capacity": {"buildings": 1, "zones": 1, "racks": 1, "hosts": hosts, "nics": nics, "task_slots": slots,
                     "spines": 1},
        "pools": {"ipv6": "fd00:1000::/32", "ipv4": "198.18.0.0/16",
                  "infrastructure": {"ipv6": "fd00:ff::/48", "ipv4": "198.19.0.0/16"}},
        "asn": {"spine": 4200000001, "tor": 4200100001, "host": 4201000001},
        "buildings": [{"id": 1, "name": "b1", "zones": [{
            "id": 1, "name": "z1", "spines": [{"id": 1, "name": "z1s1"}],
            "racks": [{"id": 1, "name": "r1", "hosts": [{"id": h, "name": "r1h%d" % h, "nics": nics}
                                                        for h in range(1, hosts + 1)]}]}]}],
    }
    plan = plan_topology(topo)
    rack = plan.rack_data(plan.topo.racks[0])
    for platform in ("frr", "eos"):
        tor_policy.render(tor_policy.tor_structured_config(rack, {}, {}, platform=platform))  # compile templates
        c0 = time.process_time()
        sc = tor_policy.tor_structured_config(rack, {}, {}, platform=platform)
        text = tor_policy.render(sc)
        c1 = time.process_time()
        c = sc["counts"]
        print("rack scale (%s): %d hosts x %d NICs x %d slots: %d sessions, %d peer-groups, %d prefix-lists, "
              "%d lines, %d KiB, %.1f ms CPU"
              % (platform, hosts, nics, slots, c["neighbors"], c["peer_groups"], c["slots"] * len(sc["families"]),
                 text.count("\n"), len(text) // 1024, 1000.0 * (c1 - c0)))


def _fib_line(label, plan, rack, topo, zone_racks=None):
    sc = tor_policy.tor_structured_config(plan.rack_data(rack), {}, {})
    fib = tor_policy.fib_size(sc)
    racks_in_zone = zone_racks or len([r for r in topo.racks if r.parent is rack.parent])
    for fam, f in sorted(fib.items()):
        remote = racks_in_zone - 1  # other racks' aggregates via the spines
        total = f["host_routes"] + f["connected"] + f["aggregate"] + remote
        print("  %-40s %s: %d host routes (%d next hops) + %d connected + 1 aggregate + %d remote "
              "aggregates = %d routes" % (label, fam, f["host_routes"], f["host_route_next_hops"],
                                          f["connected"], remote, total))


if __name__ == "__main__":
    sys.exit(main())
