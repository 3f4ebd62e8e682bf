# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lab side of the headline benchmark: namespaces, NIC counters, tbf, and the before/after switch.

"after"  = the rollout as deployed: ECMP default route over every NIC in the workload namespace,
           the VipInjector announcing the task IP with one next hop per NIC (ToR ECMP).
"before" = the state before the rollout, on the same machine: the workload's default route over
           NIC 0 only, and the sidecars drained (host-wide drain file) so the ToR has no task route
           and reaches the task IP through NIC 0's connected subnet (the host proxies it on NIC 0).
Switching touches only the workload namespaces' default routes and the drain file, and
``restore()`` puts both back exactly as found.

Two more "after" variants (issue 14 item 5), both on the same deployment:
"least_loaded" = "after" with the host's egress policy least_loaded: the one map entry
           ``host_datapath_egress_policy: least_loaded`` writes (``mn_ecfg``), set with bpftool in the
           host and put back by ``restore()``;
"mptcp"    = "after" with the workload's sockets MPTCP (the bench's clients open IPPROTO_MPTCP
           sockets, as ``mptcpize run`` does): needs the host deployed in MPTCP mode
           (``host_datapath_mptcp: true``; playbooks/bench.yml deploys so) and the storage node
           accepting joins (``ip mptcp limits`` set here and restored).
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops as labops
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab
from ansible_collections.netscale.multinic.plugins.module_utils.lab.engine import netns_name
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run_command
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import load as load_state
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

DRAIN_FILE = "/run/netscale-vipinjector/drain"
BPF_PINS = "/sys/fs/bpf/netscale-multinic"
POLICY_CODES = {"hash": 0, "least_loaded": 1}
AFTER_MODES = ("after", "least_loaded", "mptcp")


class BenchError(Exception):
    pass


def sh(argv, timeout=60):
    """The lab's command runner (module_utils/lab/proc.run_command); failures raise BenchError."""
    return run_command(argv, error=BenchError, tail=400, timeout=timeout).stdout


def parse_net_dev(text):
    """/proc/<pid>/net/dev -> {ifname: {rx, tx}} bytes."""
    out = {}
    for line in text.splitlines()[2:]:
        if ":" not in line:
            continue
        name, rest = line.split(":", 1)
        f = rest.split()
        out[name.strip()] = {"rx": int(f[0]), "tx": int(f[8])}
    return out


def route_argv(family, route):
    """`ip -j route show default` entry -> argv for `ip route replace` that recreates it."""
    argv = ["ip", "-%d" % family, "route", "replace", "default"]
    if route.get("prefsrc"):
        argv += ["src", route["prefsrc"]]
    if route.get("metric") is not None:
        argv += ["metric", str(route["metric"])]
    hops = route.get("nexthops") or [{"gateway": route.get("gateway"), "dev": route.get("dev"),
                                      "flags": route.get("flags", [])}]
    multi = len(hops) > 1
    for h in hops:
        if multi:
            argv.append("nexthop")
        if h.get("gateway"):
            argv += ["via", h["gateway"]]
        argv += ["dev", h["dev"]]
        if multi and h.get("weight"):
            argv += ["weight", str(h["weight"])]
        if "onlink" in (h.get("flags") or []):
            argv.append("onlink")
    return argv


def single_nic_route(route, dev):
    """The same default route restricted to the next hop on ``dev`` (the 'before' state)."""
    hops = route.get("nexthops") or [route]
    keep = [h for h in hops if h.get("dev") == dev]
    if not keep:
        raise BenchError("default route has no next hop on %s: %s" % (dev, json.dumps(route)))
    one = dict(route)
    one.pop("nexthops", None)
    one.update({"gateway": keep[0].get("gateway"), "dev": dev, "flags": keep[0].get("flags", [])})
    return one


class BenchLab(object):
    def __init__(self, topology, log=print):
        self.log = log
        self.lab = open_lab(topology)
        self.spec = self.lab.spec
        data = load_state(self.lab.fabric, self.lab.state_root)
        if data is None or data.get("status") != "ready":
            raise BenchError("lab %s is not ready (state %s); build it: ansible-playbook -i %s playbooks/lab.yml"
                             % (self.lab.fabric, None if data is None else data.get("status"), topology))
        self.nodes = data["nodes"]
        self.saved_routes = {}
        self.saved_qdiscs = {}
        self.drained = {}
        self.saved_ecfg = {}
        self.saved_sto_limits = None

    # ------------------------------------------------------------ names
    def host(self, name):
        for h in self.spec.hosts:
            if h["name"] == name:
                return h
        raise BenchError("host %r is not a GPU host of fabric %s (hosts: %s)"
                         % (name, self.lab.fabric, ", ".join(h["name"] for h in self.spec.hosts)))

    def pid(self, node):
        return int(self.nodes[node]["pid"])

    def nics(self, host):
        return [n["name"] for n in self.host(host)["nics"]]

    def storage_ns(self):
        return "/run/netns/" + netns_name(self.spec.storage_name)

    def storage_target(self, family):
        return self.spec.storage_addr[family]["storage"]

    def workload_ns(self, host, slot):
        path = "/proc/%d/root/run/netns/mn-slot%d" % (self.pid(host), slot)
        if not os.path.exists(path):
            raise BenchError("host %s has no workload namespace mn-slot%d (%s); deploy the host datapath "
                             "first (playbooks/bench.yml does, or playbooks/rollout.yml)" % (host, slot, path))
        return path

    @staticmethod
    def in_ns(path, argv):
        return ["nsenter", "--net=" + path, "--"] + list(argv)

    def tor_ns(self, host):
        return "/run/netns/" + netns_name(self.host(host)["tor"])

    def task_ip(self, host, slot, family):
        for s in self.host(host)["slots"]:
            if s["slot"] == slot:
                return s["task_ip"][family]
        raise BenchError("host %s has no task slot %d" % (host, slot))

    def datapath_mode(self, host):
        """'ebpf' when NIC 0 carries a tc bpf ingress filter (host_datapath eBPF mode), else 'kernel'."""
        nic0 = self.nics(host)[0]
        p = sh(["nsenter", "--net=/proc/%d/ns/net" % self.pid(host), "--", "tc", "filter", "show", "dev", nic0,
                "ingress"])
        return "ebpf" if " bpf " in p or "direct-action" in p else "kernel"

    # ------------------------------------------------------------ counters
    def counters(self, host):
        with open("/proc/%d/net/dev" % self.pid(host)) as f:
            allc = parse_net_dev(f.read())
        return {n: allc[n] for n in self.nics(host)}

    # ------------------------------------------------------------ ToR view
    def tor_paths(self, host, slot, family):
        """Next hops of the task IP's host route in the ToR's kernel FIB (0 = no route)."""
        ip = self.task_ip(host, slot, family)
        fam = 6 if family == "ipv6" else 4
        out = sh(self.in_ns(self.tor_ns(host), ["ip", "-j", "-%d" % fam, "route", "show", "exact", ip]))
        routes = json.loads(out or "[]")
        if not routes:
            return 0
        return len(routes[0].get("nexthops") or [routes[0]])

    def wait_paths(self, host, slots, want, timeout=30.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = {(s, f): self.tor_paths(host, s, f) for s in slots for f in ("ipv6", "ipv4")}
            if all(v == want for v in last.values()):
                return last
            time.sleep(0.1)
        raise BenchError("ToR of %s: task routes have %s next hops, want %d after %ss"
                         % (host, {"slot%d/%s" % k: v for k, v in last.items()}, want, timeout))

    # ------------------------------------------------------------ tbf
    def set_rate(self, host, rate):
        h = self.host(host)
        for n in h["nics"]:
            for ns, dev in ((netns_name(h["tor"]), n["tor_port"]), (netns_name(host), n["name"])):
                key = (ns, dev)
                if key not in self.saved_qdiscs:
                    q = labops._root_qdisc(ns, dev)  # pylint: disable=protected-access
                    self.saved_qdiscs[key] = (host, n["name"], ns == netns_name(host),
                                              q if q and q.get("kind") == "tbf" else None)
            labops.set_speed(self.lab, host, n["name"], rate, direction="both")

    def restore_rates(self):
        for (ns, dev), (host, nic, host_side, q) in list(self.saved_qdiscs.items()):
            direction = "to_tor" if host_side else "to_host"
            rate = None
            if q:
                rate = str(int(q["options"]["rate"]) * 8)
            try:
                labops.set_speed(self.lab, host, nic, rate, direction=direction)
            except Exception as exc:  # pylint: disable=broad-except
                self.log("restore tbf %s/%s: %s" % (ns, dev, exc))
        self.saved_qdiscs.clear()

    # ------------------------------------------------------------ before / after
    def _default_routes(self, path):
        out = {}
        for fam in (6, 4):
            routes = json.loads(sh(self.in_ns(path, ["ip", "-j", "-%d" % fam, "route", "show", "default"])) or "[]")
            if routes:
                out[fam] = routes[0]
        return out

    def set_mode(self, host, slots, mode, timeout=30.0):
        h = self.host(host)
        nic0_veth = "eth%d" % h["nics"][0]["index"]
        drain = "/proc/%d/root%s" % (self.pid(host), DRAIN_FILE)
        for s in slots:
            path = self.workload_ns(host, s)
            if (host, s) not in self.saved_routes:
                self.saved_routes[(host, s)] = self._default_routes(path)
            for fam, route in self.saved_routes[(host, s)].items():
                want = route if mode in AFTER_MODES else single_nic_route(route, nic0_veth)
                sh(self.in_ns(path, route_argv(fam, want)))
        if mode == "least_loaded":
            self.set_policy(host, "least_loaded")
        elif host in self.saved_ecfg:
            self.set_policy(host, "hash")   # every other mode: the rollout's default policy
        if mode == "mptcp":
            for s in slots:
                self.check_mptcp(host, s)
        if mode == "before":
            if host not in self.drained:
                self.drained[host] = os.path.exists(drain)
            atomic_write(drain, "netscale.multinic bench: single-NIC 'before' state\n", makedirs=False)
            return self.wait_paths(host, slots, 0, timeout)
        if os.path.exists(drain) and not self.drained.get(host, False):
            os.unlink(drain)
        return self.wait_paths(host, slots, len(h["nics"]), timeout)

    # ------------------------------------------------------------ egress policy / MPTCP
    def _host_argv(self, host, argv):
        """argv in all of the host's namespaces, as the lab's connection (community.docker.nsenter) runs
        modules: bpftool needs the host's bpffs pins (mount) and its own /proc (pid namespace)."""
        return ["nsenter", "-t", str(self.pid(host)), "-a", "--"] + list(argv)

    def _ecfg_pin(self, host):
        out = sh(self._host_argv(host, ["ls", BPF_PINS])).split()
        versions = sorted(v for v in out if v.startswith("v-"))
        if not versions:
            raise BenchError("host %s has no eBPF datapath pinned under %s: the least_loaded mode needs eBPF mode"
                             % (host, BPF_PINS))
        return "%s/%s/maps/mn_ecfg" % (BPF_PINS, versions[-1])

    def set_policy(self, host, policy):
        """Write the egress policy code into the host's mn_ecfg[0] (idle expiry kept)."""
        pin = self._ecfg_pin(host)
        dump = json.loads(sh(self._host_argv(host, ["bpftool", "-j", "map", "dump", "pinned", pin])) or "[]")
        value = [int(x, 16) for x in dump[0]["value"]]
        if host not in self.saved_ecfg:
            self.saved_ecfg[host] = (pin, list(value))
        value[0:4] = list(POLICY_CODES[policy].to_bytes(4, "little"))
        sh(self._host_argv(host, ["bpftool", "map", "update", "pinned", pin, "key", "hex", "00", "00", "00", "00",
                                  "value", "hex"] + ["%02x" % b for b in value]))

    def check_mptcp(self, host, slot):
        path = self.workload_ns(host, slot)
        eps = sh(self.in_ns(path, ["ip", "mptcp", "endpoint", "show"])).strip()
        if not eps:
            raise BenchError("host %s slot %d has no MPTCP endpoints: deploy it with host_datapath_mptcp: true "
                             "(playbooks/bench.yml does unless bench_mptcp is false)" % (host, slot))
        return eps

    def storage_mptcp(self, subflows=8):
        """The storage node accepts up to ``subflows`` joins per connection (kernel default 2)."""
        argv = self.in_ns(self.storage_ns(), ["ip", "mptcp", "limits", "show"])
        if self.saved_sto_limits is None:
            self.saved_sto_limits = sh(argv).split()
        sh(self.in_ns(self.storage_ns(), ["sysctl", "-q", "-w", "net.mptcp.enabled=1"]))
        sh(self.in_ns(self.storage_ns(), ["ip", "mptcp", "limits", "set", "subflows", str(subflows),
                                          "add_addr_accepted", "0"]))

    def restore(self):
        errors = []
        for host, (pin, value) in list(self.saved_ecfg.items()):
            try:
                sh(self._host_argv(host, ["bpftool", "map", "update", "pinned", pin, "key", "hex", "00", "00", "00",
                                          "00", "value", "hex"] + ["%02x" % b for b in value]))
            except Exception as exc:  # pylint: disable=broad-except
                errors.append("egress policy %s: %s" % (host, exc))
        self.saved_ecfg.clear()
        if self.saved_sto_limits:
            words = self.saved_sto_limits
            try:
                lim = dict(zip(words[0::2], words[1::2]))
                sh(self.in_ns(self.storage_ns(), ["ip", "mptcp", "limits", "set", "subflows", lim["subflows"],
                                                  "add_addr_accepted", lim["add_addr_accepted"]]))
            except Exception as exc:  # pylint: disable=broad-except
                errors.append("storage mptcp limits: %s" % exc)
            self.saved_sto_limits = None
        for (host, s), routes in list(self.saved_routes.items()):
            try:
                path = self.workload_ns(host, s)
                for fam, route in routes.items():
                    sh(self.in_ns(path, route_argv(fam, route)))
            except Exception as exc:  # pylint: disable=broad-except
                errors.append("routes %s/slot%d: %s" % (host, s, exc))
        self.saved_routes.clear()
        for host, existed in list(self.drained.items()):
            drain = "/proc/%d/root%s" % (self.pid(host), DRAIN_FILE)
            if not existed and os.path.exists(drain):
                os.unlink(drain)
        self.drained.clear()
        self.restore_rates()
        return errors
