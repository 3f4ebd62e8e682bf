# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Headline benchmark (issue 8): checkpoint save/load, few flows, and job reads under a surge,
before (NIC 0 only) and after the rollout, in one session on the fabric lab.

Needs a running lab with the rollout applied (playbooks/bench.yml does both, then calls this):

    .venv/bin/python bench/headline --topology inventories/lab/fabric.yml [--out reports/bench-<ts>]

(``python bench/headline`` runs this ``__main__``; with the collection on the path,
``python -m ansible_collections.netscale.multinic.bench.headline`` does the same.)

Writes results.json, summary.md and SVG plots to the output directory; prints the figures. Run as
root. Never asserts on time: the targets are reported as met / not met.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import ansible_collections.netscale.multinic  # noqa: F401  pylint: disable=unused-import
except ImportError:
    # A checkout: the collection is importable through the .build link that scripts/setup.sh makes.
    sys.path.insert(0, os.path.join(REPO, ".build"))

from ansible_collections.netscale.multinic.bench.headline import report  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.netscale.multinic.bench.headline.labctl import BenchError, BenchLab  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.netscale.multinic.bench.headline.scenarios import Runner, Server  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.netscale.multinic.plugins.module_utils.lab.ops import rate_bits  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write  # noqa: E402  pylint: disable=wrong-import-position

MB = 10 ** 6


def machine():
    info = {"kernel": platform.release(), "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default=os.path.join(REPO, "inventories/lab/fabric.yml"))
    ap.add_argument("--hosts", default="", help="comma list; default: the first 4-NIC and the first 2-NIC host")
    ap.add_argument("--scenarios", default="checkpoint,few_flows,surge")
    ap.add_argument("--surge-hosts", default="", help="hosts for the surge scenario; default: 4-NIC hosts")
    ap.add_argument("--few-hosts", default="", help="hosts for few flows; default: 4-NIC hosts")
    ap.add_argument("--rate", default="200mbit", help="tbf rate per NIC and direction")
    ap.add_argument("--family", choices=["ipv6", "ipv4"], default="ipv6")
    ap.add_argument("--size-mb", type=int, default=256, help="checkpoint size")
    ap.add_argument("--flows", type=int, default=32)
    ap.add_argument("--few-flows", default="4,8")
    ap.add_argument("--few-size-mb", type=int, default=128)
    ap.add_argument("--read-mb", type=float, default=1.0, help="size of one job read")
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--read-window", type=float, default=15.0, help="seconds of job reads per mode")
    ap.add_argument("--surge-flows", type=int, default=32)
    ap.add_argument("--surge-warmup", type=float, default=2.0)
    ap.add_argument("--surge-variants", default="paced,greedy",
                    help="paced = offered load of --surge-load x one NIC's rate; greedy = unpaced TCP")
    ap.add_argument("--surge-load", type=float, default=2.0, help="paced surge load, in NIC rates")
    ap.add_argument("--chunk-mb", type=float, default=0.5, help="checkpoint chunk size per request")
    ap.add_argument("--modes", default="before,after,least_loaded,mptcp",
                    help="before, after (rollout as deployed: hash ECMP), least_loaded (after with that egress "
                         "policy), mptcp (after with MPTCP sockets; host deployed with host_datapath_mptcp)")
    ap.add_argument("--checkpoint-all-modes", action="store_true",
                    help="also run the 32-flow checkpoint in least_loaded and mptcp (default: before/after only)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--port", type=int, default=47001)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--out", default="", help="report dir; default reports/bench-<UTC timestamp>")
    a = ap.parse_args(argv)
    a.size = a.size_mb * MB
    a.few_size = a.few_size_mb * MB
    a.read_bytes = int(a.read_mb * MB)
    a.few_flows = [int(x) for x in a.few_flows.split(",") if x.strip()]
    a.modes = [x for x in a.modes.split(",") if x.strip()]
    bad = [m for m in a.modes if m not in ("before", "after", "least_loaded", "mptcp")]
    if bad or "before" not in a.modes:
        ap.error("--modes: %r; want before plus any of after, least_loaded, mptcp" % (a.modes,))
    a.surge_variants = [x for x in a.surge_variants.split(",") if x.strip()]
    a.chunk = int(a.chunk_mb * MB)
    a.rate_bits = rate_bits(a.rate)
    return a


def main(argv=None):
    o = parse(argv)
    started = time.time()
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    out = o.out or os.path.join(REPO, "reports", "bench-" + run_id)
    blab = BenchLab(o.topology)
    hosts_all = [h["name"] for h in blab.spec.hosts]
    by_nics = {}
    for h in blab.spec.hosts:
        by_nics.setdefault(len(h["nics"]), []).append(h["name"])
    default_hosts = [v[0] for k, v in sorted(by_nics.items(), reverse=True) if k in (4, 2)]
    hosts = [x for x in o.hosts.split(",") if x] or default_hosts
    four = [h for h in hosts if len(blab.nics(h)) == 4]
    surge_hosts = [x for x in o.surge_hosts.split(",") if x] or four
    few_hosts = [x for x in o.few_hosts.split(",") if x] or four
    scen = set(x for x in o.scenarios.split(",") if x)
    for h in hosts:
        if h not in hosts_all:
            raise BenchError("--hosts: %s is not a GPU host of this lab (%s)" % (h, ", ".join(hosts_all)))
    results = {"id": run_id, "fabric": blab.lab.fabric, "topology": os.path.abspath(o.topology),
               "machine": dict(machine(), loadavg_start=loadavg()),
               "params": {k: getattr(o, k) for k in ("rate", "family", "size", "flows", "few_flows", "few_size",
                                                     "read_bytes", "readers", "read_window", "surge_flows",
                                                     "surge_warmup", "surge_variants", "surge_load", "chunk",
                                                     "reps", "settle", "modes")},
               "hosts": {h: len(blab.nics(h)) for h in hosts},
               "datapath": {h: blab.datapath_mode(h) for h in hosts},
               "modes": {"before": "workload default route over NIC 0 only; sidecars drained (no task route on the "
                                   "ToR, task IP reached through NIC 0's connected subnet)",
                         "after": "rollout as deployed: ECMP default route over every NIC; task IP announced with one "
                                  "next hop per NIC (ToR ECMP, L4 hash)"},
               "started": started}
    print("headline bench %s: hosts %s, datapath %s, rate %s, load average %s" % (
        run_id, hosts, results["datapath"], o.rate, loadavg()), flush=True)
    work = tempfile.mkdtemp(prefix="mnb-headline-")
    runner = Runner(blab, o, log=lambda m: print(m, flush=True))
    errors = []
    try:
        with Server(blab, o.port, work), Server(blab, o.port + 1, work, mptcp="mptcp" in o.modes):
            if "mptcp" in o.modes:
                blab.storage_mptcp()
            for h in hosts:
                s = set(x for x in scen if x == "checkpoint")
                if "few_flows" in scen and h in few_hosts:
                    s.add("few_flows")
                if "surge" in scen and h in surge_hosts:
                    s.add("surge")
                runner.run_host(h, s)
                blab.restore()
    finally:
        runner.kill_children()
        errors = blab.restore()
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    results.update(transfers=runner.transfers, reads=runner.reads, finished=time.time(), restore_errors=errors)
    results["machine"]["loadavg_end"] = loadavg()
    files, summary = report.build(results)
    for name, text in files.items():
        atomic_write(os.path.join(out, name), text)
    print(files["summary.md"])
    print("report: %s (%.0f s)" % (out, time.time() - started))
    print(json.dumps({"report": out, "targets": summary["targets"]}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print("headline bench: %s" % exc, file=sys.stderr)
        sys.exit(2)
