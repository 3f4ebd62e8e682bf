# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The headline scenarios, each run before and after in one session (see labctl for the modes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ansible_collections.netscale.multinic.bench.headline import stats
from ansible_collections.netscale.multinic.bench.headline.labctl import BenchError

FLOWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flows.py")


class Server(object):
    """flows.py serve in the storage node's network namespace, killed by its recorded PID."""

    def __init__(self, blab, port, workdir, mptcp=False):
        self.blab = blab
        self.port = port
        self.mptcp = mptcp
        self.log_path = os.path.join(workdir, "server-%d.log" % port)
        self.proc = None

    def __enter__(self):
        logf = open(self.log_path, "wb")  # pylint: disable=consider-using-with
        serve = [sys.executable, FLOWS, "serve", "--port", str(self.port)] + (["--mptcp"] if self.mptcp else [])
        self.proc = subprocess.Popen(self.blab.in_ns(self.blab.storage_ns(), serve),
                                     stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        logf.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(self.log_path) as f:
                if "listening" in f.read():
                    return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        with open(self.log_path) as f:
            raise BenchError("storage server on port %d did not start: %s" % (self.port, f.read()[-400:]))

    def close(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def __exit__(self, *exc):
        self.close()


class Runner(object):
    def __init__(self, blab, opts, log=print):
        self.blab = blab
        self.o = opts
        self.log = log
        self.transfers = []
        self.reads = []
        self.children = []

    # -------------------------------------------------------------- helpers
    def port(self, mode):
        """The storage server's port for a mode: MPTCP clients use the MPTCP server (port + 1)."""
        return self.o.port + (1 if mode == "mptcp" else 0)

    def client(self, host, slot, args, timeout):
        argv = self.blab.in_ns(self.blab.workload_ns(host, slot), [sys.executable, FLOWS] + args)
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if p.returncode != 0:
            raise BenchError("%s: rc=%d %s" % (" ".join(args[:1]), p.returncode, p.stderr.strip()[-400:]))
        return json.loads(p.stdout)

    def target(self):
        return self.blab.storage_target(self.o.family)

    def transfer(self, host, mode, rep, scenario, op, flows, nbytes):
        c0 = self.blab.counters(host)
        res = self.client(host, 1, ["xfer", "--target", self.target(), "--port", str(self.port(mode)), "--op", op,
                                    "--bytes", str(nbytes), "--streams", str(flows), "--chunk", str(self.o.chunk)]
                          + (["--mptcp"] if mode == "mptcp" else []), timeout=self.o.timeout)
        c1 = self.blab.counters(host)
        if not res["ok"]:
            bad = [x for x in res["per_stream"] if not x.get("ok")]
            raise BenchError("%s %s %s flows=%d: %d connections failed, %d of %d bytes moved: %s"
                             % (host, mode, op, flows, len(bad), res["moved"], nbytes, bad[:2]))
        counter = "tx" if op == "put" else "rx"
        delta = stats.counter_delta(c0, c1)
        nic_bytes = {n: d[counter] for n, d in delta.items()}
        run = {"host": host, "nics": len(nic_bytes), "scenario": scenario,
               "direction": "egress" if op == "put" else "ingress", "flows": flows, "mode": mode, "rep": rep,
               "bytes": nbytes, "seconds": res["seconds"], "gbit_per_s": round(stats.gbit(nbytes, res["seconds"]), 4),
               "nic_bytes": nic_bytes, "nic_shares": stats.shares(nic_bytes),
               "chunk": res["chunk"], "stream_bytes": sorted(x["bytes"] for x in res["per_stream"])}
        self.transfers.append(run)
        self.log("  %-6s %-10s %-7s %2d flows: %6.2f s %6.3f Gbit/s shares %s" % (
            mode, scenario, run["direction"], flows, run["seconds"], run["gbit_per_s"],
            " ".join("%.0f%%" % (100 * v) for v in run["nic_shares"].values())))
        return run

    def surge_reads(self, host, mode, rep, variant):
        """Job reads from slot 1 while slot 2 receives a surge: ``paced`` = an offered load of
        surge_load x one NIC's rate (overloads NIC 0, fits in all NICs), ``greedy`` = unpaced TCP."""
        o = self.o
        total = o.surge_warmup + o.read_window + 1.0
        pace = 0
        if variant == "paced":
            pace = int(o.surge_load * o.rate_bits / 8 / o.surge_flows)
        # MPTCP sockets take no SO_MAX_PACING_RATE (EOPNOTSUPP): in mode mptcp the paced surge stays plain
        # TCP (the reads are MPTCP); the greedy surge is MPTCP too
        surge_mptcp = mode == "mptcp" and not pace
        argv = self.blab.in_ns(self.blab.workload_ns(host, 2),
                               [sys.executable, FLOWS, "surge", "--target", self.target(),
                                "--port", str(o.port + (1 if surge_mptcp else 0)),
                                "--streams", str(o.surge_flows), "--duration", str(total), "--pace", str(pace)]
                               + (["--mptcp"] if surge_mptcp else []))
        c0 = self.blab.counters(host)
        surge = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
        self.children.append(surge)
        try:
            time.sleep(o.surge_warmup)
            res = self.client(host, 1, ["reads", "--target", self.target(), "--port", str(self.port(mode)),
                                        "--bytes", str(o.read_bytes), "--readers", str(o.readers),
                                        "--duration", str(o.read_window)] + (["--mptcp"] if mode == "mptcp" else []),
                              timeout=o.read_window + 120)
            out, err = surge.communicate(timeout=total + 60)
        finally:
            if surge.poll() is None:
                os.killpg(surge.pid, signal.SIGKILL)
                surge.wait(timeout=10)
            self.children.remove(surge)
        c1 = self.blab.counters(host)
        try:
            sres = json.loads(out)
        except ValueError:
            raise BenchError("surge client output unreadable: %s %s" % (out[-200:], err[-300:]))
        delta = stats.counter_delta(c0, c1)
        nic_bytes = {n: d["rx"] for n, d in delta.items()}
        secs = [s["seconds"] for s in res["samples"]]
        entry = {"host": host, "nics": len(nic_bytes), "mode": mode, "rep": rep, "surge": variant,
                 "surge_mptcp": surge_mptcp,
                 "surge_offered_gbit_per_s": round(pace * 8 * o.surge_flows / 1e9, 4) if pace else None,
                 "read_bytes": o.read_bytes,
                 "readers": o.readers, "surge_flows": o.surge_flows, "window": o.read_window,
                 "samples": secs, "errors": res["errors"],
                 "surge_gbit_per_s": round(stats.gbit(sres["bytes"], sres["seconds"]), 4),
                 "nic_bytes_rx": nic_bytes, "nic_shares_rx": stats.shares(nic_bytes)}
        self.reads.append(entry)
        if secs:
            self.log("  %-6s job reads  %4d x %.1f MB under a %d-flow %s surge (%.3f Gbit/s): p50 %.3f s p99 %.3f s"
                     % (mode, len(secs), o.read_bytes / 1e6, o.surge_flows, variant, entry["surge_gbit_per_s"],
                        stats.percentile(secs, 50), stats.percentile(secs, 99)))
        return entry

    # -------------------------------------------------------------- the session
    def run_host(self, host, scenarios):
        o = self.o
        nics = len(self.blab.nics(host))
        slots = [1, 2]
        self.blab.set_rate(host, o.rate)
        modes = list(o.modes) if nics > 1 else [m for m in o.modes if m in ("before", "after")]
        for rep in range(o.reps):
            order = modes if rep % 2 == 0 else list(reversed(modes))
            for mode in order:
                paths = self.blab.set_mode(host, slots, mode)
                hops = sorted(set(paths.values()))
                self.log("%s (%d NICs) rep %d: %s (ToR next hops %s)" % (host, nics, rep + 1, mode, hops))
                time.sleep(o.settle)
                if "checkpoint" in scenarios and (mode in ("before", "after") or o.checkpoint_all_modes):
                    self.transfer(host, mode, rep, "checkpoint", "put", o.flows, o.size)
                    self.transfer(host, mode, rep, "checkpoint", "get", o.flows, o.size)
                if "few_flows" in scenarios:
                    for f in o.few_flows:
                        self.transfer(host, mode, rep, "few_flows", "put", f, o.few_size)
                        self.transfer(host, mode, rep, "few_flows", "get", f, o.few_size)
                if "surge" in scenarios:
                    for variant in o.surge_variants:
                        self.surge_reads(host, mode, rep, variant)

    def kill_children(self):
        for p in list(self.children):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
