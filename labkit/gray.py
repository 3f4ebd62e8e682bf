# -*- coding: utf-8 -*-
"""Gray-failure helpers for the datapath harness (labkit.dp_harness): faults on a ToR port, the host's
egress set as observed (eBPF: NIC_OUT bits of mn_nics; kernel: the per-NIC table routes) and a
recorder of its changes over time. Used by tests/e2e/datapath/test_datapath_gray.py and
bench/gray_faults.py.

Faults go on the ToR port (nftables netdev ingress/egress hooks, the rules of
plugins/module_utils/lab/faults.py), never on the host NIC: the eBPF tc ingress program runs
before the netfilter ingress hook there.
"""
import glob
import json
import os
import struct
import threading
import time

from labkit import dp_harness as H
from labkit import ensure_collection_importable

ensure_collection_importable()

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as dspec  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import faults  # noqa: E402

FAULTS = ("silent", "to_host", "to_tor", "arp_nd", "flap_storm")
TOR_BFD_S = 0.3   # the ToR's BFD (100 ms x 3) drops a silent next hop in 0.29-0.36 s (lab-notes)


def set_fault(fab, host, k, kind, on=True):
    """Install (on) or remove every fault table of NIC k's ToR port. kind: silent / to_host / to_tor / arp_nd."""
    port = host.tor_port(k)
    tables = H.sh(["ip", "netns", "exec", fab.tor, "nft", "list", "tables", "netdev"]).stdout.splitlines()
    existing = [line.split()[2] for line in tables if line.startswith("table netdev")]
    direction = {"silent": "both", "to_host": "to_host", "to_tor": "to_tor", "arp_nd": "both"}[kind]
    add, delete = faults.plan(port, on, direction, "arp_nd" if kind == "arp_nd" else "all", existing)
    for t in delete:
        H.sh(["ip", "netns", "exec", fab.tor, "nft", "delete", "table", "netdev", t])
    if add:
        H.sh(["ip", "netns", "exec", fab.tor, "nft", "-f", "-"], input="".join(add.values()))


def flap_storm(fab, host, k, count=10, seconds=5.0):
    dev = host.tor_port(k)
    return faults.run_schedule(faults.flap_schedule(count, seconds),
                               lambda up: H.sh(["ip", "-n", fab.tor, "link", "set", dev, "up" if up else "down"]))


def egress_set(host, mode):
    """{NIC name: in the egress set?} as the datapath holds it now."""
    out = {}
    if mode == "ebpf":
        pins = sorted(glob.glob(os.path.join(host.bpffs, "netscale-multinic", "v-*", "maps", "mn_nics")))
        dump = json.loads(H.sh(["bpftool", "-j", "map", "dump", "pinned", pins[-1]]).stdout)
        flags = {}
        for e in dump:
            idx = struct.unpack("<I", bytes(int(x, 16) for x in e["key"]))[0]
            flags[idx] = struct.unpack(health.NIC_VAL, bytes(int(x, 16) for x in e["value"]))[1]
        for n in host.data["nics"]:
            out[n["name"]] = not flags.get(n["index"], 0) & health.NIC_OUT
        return out
    base = dspec.TABLE_BASE
    for n in host.data["nics"]:
        routes = json.loads(H.sh(["ip", "-n", host.ns, "-4", "-j", "route", "show", "table",
                                  str(base + n["index"])]).stdout)
        own = any(r.get("dst") == "default" and r.get("metric") == dspec.METRIC_OWN for r in routes)
        out[n["name"]] = own
    # the NIC must also be a nexthop of the other tables' fallback route
    for n in host.data["nics"]:
        other = [m for m in host.data["nics"] if m["index"] != n["index"]][0]
        routes = json.loads(H.sh(["ip", "-n", host.ns, "-4", "-j", "route", "show", "table",
                                  str(base + other["index"])]).stdout)
        fb = [r for r in routes if r.get("metric") == dspec.METRIC_FALLBACK]
        devs = set(nh.get("dev") for r in fb for nh in r.get("nexthops", [r]))
        out[n["name"]] = out[n["name"]] and n["name"] in devs
    return out


class Sampler(threading.Thread):
    """Calls ``probe()`` every ``period`` s: [(monotonic time when the sample completed, state)]. A sample
    is dated at its end, so a change is never dated before it happened (late by up to one sample).
    A sample that raises is recorded in ``errors``, not fatal. Also used by labkit/gray_stack.py."""

    def __init__(self, probe, period=0.02):
        threading.Thread.__init__(self, daemon=True)
        self.probe, self.period = probe, period
        self.samples, self.errors = [], []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            try:
                state = self.probe()
                self.samples.append((time.monotonic(), state))
            except Exception as e:  # pylint: disable=broad-except  # a lost sample is reported, not fatal
                self.errors.append("%s: %s" % (type(e).__name__, e))
            self.halt.wait(self.period)

    def finish(self):
        self.halt.set()
        self.join(10)
        return self.samples


class Recorder(Sampler):
    """Samples the egress set every ``period`` s: [(time, {nic: in})]. A kernel-mode sample (8 ``ip``
    calls) takes ~50 ms: times are late by up to that much."""

    def __init__(self, host, mode, period=0.05):
        Sampler.__init__(self, lambda: egress_set(host, mode), period)
        self.host, self.mode = host, mode


def transitions(samples, nic):
    """[(time, in?)] of the changes of ``nic``'s membership."""
    out, last = [], None
    for t, s in samples:
        if s.get(nic) != last:
            out.append((t, s.get(nic)))
            last = s.get(nic)
    return out


def wait_in(host, mode, timeout=8.0):
    """Seconds until every NIC is in the egress set (raises AssertionError after timeout)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        s = egress_set(host, mode)
        if all(s.values()):
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError("NICs still out after %.1f s: %s" % (timeout, egress_set(host, mode)))


def wait_log(host, text, timeout=5.0):
    path = os.path.join(host.dir, "watcher.log")
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            with open(path) as f:
                if text in f.read():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("watcher did not log %r within %.0f s" % (text, timeout))
