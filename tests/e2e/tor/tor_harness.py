# -*- coding: utf-8 -*-
"""Minimal live harness for the ToR policy (namespace prefix ``mnt-``).

Builds, from the lab fabric plan: a spine namespace and one ToR namespace per rack, each running FRR
(zebra, staticd, bgpd) with the configs rendered by ``tor_policy`` and applied with frr-reload.py;
for the hosts of ``rack`` (default lab-r1) one namespace per host (kernel forwarding, proxy ND: the
hop limit is decremented, as on the non-eBPF datapath) and one namespace per task slot holding the
container's per-NIC addresses, running ExaBGP with one session per NIC.

Everything it creates carries the run's own prefix ``mnt-<id>`` and is removed by ``teardown()``
(processes killed by the PIDs recorded here, never by name).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import time
import uuid

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.frr import apply as frr_apply
from ansible_collections.netscale.multinic.plugins.module_utils.lab import netns as NS
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run_command
from ansible_collections.netscale.multinic.plugins.module_utils.lab.routing import start_bare_daemon
from ansible_collections.netscale.multinic.plugins.module_utils.lab.section import lab_section, storage_spine_networks
from ansible_collections.netscale.multinic.plugins.module_utils.lab.wiring import fabric_links
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LAB_FABRIC = os.path.join(REPO, "inventories", "lab", "fabric.yml")
EXABGP = os.path.join(REPO, ".venv", "bin", "exabgp")

CTL_HELPER = r'''
import os, sys, time
fifo = sys.argv[1]
while True:
    with open(fifo) as fh:
        for line in fh:
            line = line.strip()
            if line:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
'''


def sh(argv, check=True, timeout=60, env=None):
    """The lab's command runner (module_utils/lab/proc.run_command); failures raise RuntimeError."""
    return run_command(argv, check=check, error=RuntimeError, timeout=timeout, env=env)


def run_tuple(argv):
    p = sh(argv, check=False, timeout=120)
    return p.returncode, p.stdout, p.stderr


class TorLab(object):
    def __init__(self, rack="lab-r1", md5_keys=None, options=None, run_id=None):
        self.id = run_id or uuid.uuid4().hex[:4]
        self.prefix = "mnt-%s" % self.id
        self.dir = "/tmp/%s" % self.prefix
        self.rack_name = rack
        self.md5_keys = md5_keys if md5_keys is not None else {}
        self.options = options or {}
        self.namespaces = NS.Namespaces(error=RuntimeError)   # all named mnt-<id>-*
        self.pids = []          # (pid, what)
        self.exabgp = {}        # slot key -> Popen
        self.routers = {}       # device name -> {"ns":, "dir":}
        self.plan = load_plan(LAB_FABRIC)
        self.topo = self.plan.topo
        self.rack = next(r for r in self.topo.racks if r.name == rack)
        self.rack_data = self.plan.rack_data(self.rack)
        # As the tor_bgp role renders a lab fabric: the storage prefixes are what the spine originates.
        render_options = dict(self.options)
        render_options.setdefault("spine_networks", storage_spine_networks(lab_section(self.topo).get("storage", {})))
        self.configs = tor_policy.build_fabric_configs(self.plan, render_options, self.md5_keys)

    # -- helpers --------------------------------------------------------------------------------
    def ns(self, short):
        return "%s-%s" % (self.prefix, short)

    def nsexec(self, short, *argv, **kw):
        return sh(["ip", "netns", "exec", self.ns(short)] + list(argv), **kw)

    def _add_ns(self, short):
        return self.namespaces.add(self.ns(short), NS.NO_DAD + NS.KEEP_ADDR_ON_DOWN)

    def _veth(self, ns_a, name_a, ns_b, name_b):
        self.namespaces.veth(self.ns(ns_a), name_a, self.ns(ns_b), name_b)

    def _addr(self, short, dev, cidr):
        self.namespaces.address(self.ns(short), dev, cidr)

    # -- build ----------------------------------------------------------------------------------
    def setup(self):
        os.makedirs(self.dir, mode=0o755)
        spine = self.topo.spines[0].name
        self._add_ns("spine")
        self.routers[spine] = {"ns": "spine"}
        # Storage network behind the spine (what the spine originates for the lab).
        self._veth("spine", "stor0", "spine", "stor1")
        storage = lab_section(self.topo).get("storage", {})
        for fam in ("ipv6", "ipv4"):
            if storage.get(fam):
                net = storage[fam]
                base = net.split("/")[0]
                addr = base + "1" if base.endswith("::") else base.rsplit(".", 1)[0] + ".1"
                self._addr("spine", "stor0", "%s/%s" % (addr, net.split("/")[1]))
        spines = [self.plan.spine_data(s) for s in self.topo.spines]
        racks = [self.plan.rack_data(r) for r in self.topo.racks]
        short = {spine: "spine"}   # node -> this lab's namespace (mnt-<id>-<short>)
        for rack, rd in zip(self.topo.racks, racks):
            short[rd["tor"]["name"]] = "t%d" % rack.id
            self._add_ns(short[rd["tor"]["name"]])
            self.routers[rd["tor"]["name"]] = {"ns": short[rd["tor"]["name"]]}
            lo = rd["tor"]["loopback"]
            self._addr(short[rd["tor"]["name"]], "lo", lo["ipv6"] + "/128")
            self._addr(short[rd["tor"]["name"]], "lo", lo["ipv4"] + "/32")
        for ns in ["spine"] + ["t%d" % rack.id for rack in self.topo.racks]:
            for sysctl in ("net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"):
                self.nsexec(ns, "sysctl", "-qw", sysctl)
        # Hosts of the rack under test: NICs to the ToR, slots behind them.
        for h in self.rack_data["hosts"]:
            short[h["name"]] = "h%d" % h["id"]
            self._add_ns(short[h["name"]])
            for sysctl in ("net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
                           "net.ipv6.conf.all.proxy_ndp=1"):
                self.nsexec(short[h["name"]], "sysctl", "-qw", sysctl)
        # The links as the lab engine wires a fabric (module_utils/lab/wiring.fabric_links): uplinks, host NICs.
        for link in fabric_links(spines, racks, hosts=set(h["name"] for h in self.rack_data["hosts"])):
            a, b = short[link["a"]], short[link["b"]]
            self._veth(a, link["a_dev"], b, link["b_dev"])
            for _fam, a_addr, b_addr, length in link["addresses"]:
                self._addr(a, link["a_dev"], "%s/%s" % (a_addr, length))
                self._addr(b, link["b_dev"], "%s/%s" % (b_addr, length))
        for h in self.rack_data["hosts"]:
            hs = short[h["name"]]
            for nic in h["nics"]:
                self.nsexec(hs, "sysctl", "-qw", "net.ipv6.conf.%s.proxy_ndp=1" % nic["name"])
                self.nsexec(hs, "sysctl", "-qw", "net.ipv6.neigh.%s.proxy_delay=0" % nic["name"])
            for slot in h["slots"]:
                ss = "h%ds%d" % (h["id"], slot["slot"])
                self._add_ns(ss)
                for sn in slot["nics"]:
                    k = sn["index"]
                    nic = h["nics"][k]
                    host_if, slot_if = "s%dn%d" % (slot["slot"], k), "n%d" % k
                    self._veth(hs, host_if, ss, slot_if)
                    self._addr(hs, host_if, "fe80::1/64")
                    self._addr(ss, slot_if, sn["address"]["ipv6"] + "/128")
                    self._addr(ss, slot_if, sn["address"]["ipv4"] + "/32")
                    self.nsexec(ss, "ip", "-6", "route", "add", nic["gateway"]["ipv6"] + "/128",
                                "via", "fe80::1", "dev", slot_if)
                    self.nsexec(hs, "ip", "-6", "route", "add", sn["address"]["ipv6"] + "/128", "dev", host_if)
                    self.nsexec(hs, "ip", "-6", "neigh", "add", "proxy", sn["address"]["ipv6"], "dev", nic["name"])
                self._addr(ss, "lo", slot["task_ip"]["ipv6"] + "/128")
                self._addr(ss, "lo", slot["task_ip"]["ipv4"] + "/32")
        for name, r in self.routers.items():
            self._start_frr(name, r)
        for name in self.routers:
            self.apply_config(name, self.configs[name]["text"])
        return self

    def _start_frr(self, name, r):
        d = os.path.join(self.dir, r["ns"])
        os.makedirs(d)
        frr = pwd.getpwnam("frr")
        os.chown(d, frr.pw_uid, frr.pw_gid)
        os.chmod(d, 0o750)
        with open(os.path.join(d, "vtysh.conf"), "w") as fh:
            fh.write("service integrated-vtysh-config\n")
        with open(os.path.join(d, "frr.conf"), "w") as fh:
            fh.write("hostname %s\n" % name)
        for f in ("vtysh.conf", "frr.conf"):
            os.chown(os.path.join(d, f), frr.pw_uid, frr.pw_gid)
            os.chmod(os.path.join(d, f), 0o600)
        r["dir"] = d
        r["target"] = frr_apply.FrrTarget(confdir=d, vty_socket=d, rundir=d)
        for daemon in ("zebra", "staticd", "bgpd"):
            _pidfile, pid = start_bare_daemon(self.ns(r["ns"]), daemon, d, extra=["--log", "file:%s/%s.log" % (d, daemon)],
                                              error=RuntimeError)
            self.pids.append((pid, "%s %s" % (name, daemon)))
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.vtysh(name, "show version").returncode == 0:
                break
            time.sleep(0.1)

    def vtysh(self, device, *cmds):
        r = self.routers[device]
        argv = ["ip", "netns", "exec", self.ns(r["ns"])] + r["target"].vtysh()
        for c in cmds:
            argv += ["-c", c]
        return sh(argv, check=False)

    def vjson(self, device, cmd):
        p = self.vtysh(device, cmd)
        return json.loads(p.stdout or "{}")

    def run_in(self, device):
        prefix = ["ip", "netns", "exec", self.ns(self.routers[device]["ns"])]
        return lambda argv: run_tuple(prefix + list(argv))

    def candidate_path(self, device):
        return os.path.join(self.routers[device]["dir"], "candidate.conf")

    def write_candidate(self, device, text):
        path = self.candidate_path(device)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        return path

    def apply_config(self, device, text):
        target = self.routers[device]["target"]
        run = self.run_in(device)
        path = self.write_candidate(device, frr_apply.with_hostname(text, frr_apply.running_hostname(run, target)))
        errors = frr_apply.validate(run, target, path)
        if errors:
            raise RuntimeError("candidate for %s invalid: %s" % (device, errors))
        left, warnings = frr_apply.apply(run, target, path)
        if left[0] or left[1]:
            raise RuntimeError("%s did not converge: %s" % (device, frr_apply.format_delta(*left)))
        return warnings

    # -- ExaBGP ----------------------------------------------------------------------------------
    def host(self, name):
        return next(h for h in self.rack_data["hosts"] if h["name"] == name)

    def start_slot(self, host_name, slot_no, md5_key=None, announce=True, families=("ipv4", "ipv6")):
        """ExaBGP in the slot's namespace: one session per NIC, task IP announced on each."""
        h = self.host(host_name)
        slot = h["slots"][slot_no - 1]
        key = "%s/%d" % (host_name, slot_no)
        d = os.path.join(self.dir, "x-%s-s%d" % (host_name, slot_no))
        os.makedirs(d, exist_ok=True)
        nobody = pwd.getpwnam("nobody")
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
        fifo = os.path.join(d, "ctl.fifo")
        if not os.path.exists(fifo):
            os.mkfifo(fifo, 0o600)
            os.chown(fifo, nobody.pw_uid, nobody.pw_gid)
        helper = os.path.join(d, "ctl.py")
        with open(helper, "w") as fh:
            fh.write(CTL_HELPER)
        os.chmod(helper, 0o644)
        blocks = []
        for sn in slot["nics"]:
            k = sn["index"]
            nic = h["nics"][k]
            routes = []
            if announce:
                if "ipv4" in families:
                    routes.append("route %s/32 next-hop %s;" % (slot["task_ip"]["ipv4"], sn["address"]["ipv4"]))
                if "ipv6" in families:
                    routes.append("route %s/128 next-hop %s;" % (slot["task_ip"]["ipv6"], sn["address"]["ipv6"]))
            md5 = ('    md5-password "%s";\n' % md5_key) if md5_key else ""
            blocks.append(
                "neighbor %s {\n"
                "    router-id %s;\n"
                "    local-address %s;\n"
                "    local-as %d;\n"
                "    peer-as %d;\n"
                "    hold-time 9;\n"
                "    outgoing-ttl 255;\n"
                "%s"
                "    family {\n        ipv4 unicast;\n        ipv6 unicast;\n    }\n"
                "    api {\n        processes [ ctl ];\n    }\n"
                "    static {\n        %s\n    }\n"
                "}\n" % (nic["gateway"]["ipv6"], sn["address"]["ipv4"], sn["address"]["ipv6"], h["asn"],
                         h["tor_asn"], md5, "\n        ".join(routes)))
        conf = ("process ctl {\n    run /usr/bin/python3 %s %s;\n    encoder text;\n}\n\n" % (helper, fifo)
                + "\n".join(blocks))
        cpath = os.path.join(d, "exabgp.conf")
        fd = os.open(cpath, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(conf)
        os.chown(cpath, nobody.pw_uid, nobody.pw_gid)
        env = dict(os.environ)
        env.update({"exabgp_api_ack": "false", "exabgp_api_cli": "false", "exabgp_daemon_user": "nobody",
                    "exabgp_log_level": "INFO"})
        log = open(os.path.join(d, "exabgp.log"), "ab")
        ss = "h%ds%d" % (h["id"], slot_no)
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns(ss), EXABGP, "server", cpath],
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        self.exabgp[key] = proc
        self.pids.append((proc.pid, "exabgp %s" % key))
        return proc

    def stop_slot(self, host_name, slot_no):
        key = "%s/%d" % (host_name, slot_no)
        proc = self.exabgp.pop(key, None)
        if proc is None:
            return
        _kill_group(proc.pid)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        self.pids = [(p, w) for p, w in self.pids if p != proc.pid]

    def slot_command(self, host_name, slot_no, *lines):
        d = os.path.join(self.dir, "x-%s-s%d" % (host_name, slot_no))
        fifo = os.path.join(d, "ctl.fifo")
        fd = os.open(fifo, os.O_WRONLY)  # blocks until the helper reads
        with os.fdopen(fd, "w") as fh:
            fh.write("\n".join(lines) + "\n")

    # -- teardown --------------------------------------------------------------------------------
    def teardown(self):
        for key in list(self.exabgp):
            host, slot = key.split("/")
            self.stop_slot(host, int(slot))
        for pid, _what in reversed(self.pids):
            _kill_pid(pid)
        deadline = time.time() + 5
        for pid, _what in self.pids:
            while _alive(pid) and time.time() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                _kill_pid(pid, signal.SIGKILL)
        self.pids = []
        self.namespaces.remove()
        if self.dir.startswith("/tmp/mnt-") and os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombie children count as gone.
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _kill_pid(pid, sig=signal.SIGTERM):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _kill_group(pgid, sig=signal.SIGTERM):
    """Signal the process group this harness started (ExaBGP and its API helper)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def wait_for(predicate, timeout=20.0, interval=0.2):
    """Poll ``predicate`` until truthy; returns its last value (falsy on timeout)."""
    deadline = time.time() + timeout
    value = predicate()
    while not value and time.time() < deadline:
        time.sleep(interval)
        value = predicate()
    return value
