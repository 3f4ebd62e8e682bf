# -*- coding: utf-8 -*-
"""A small live harness for the VipInjector (prefix ``mnv``).

One ToR network namespace running FRR (zebra + bgpd, own run dir) and one container namespace
per task slot, joined by one veth pair per NIC (the host in between is left out: the BGP
sessions and the ToR's ECMP group are what the sidecar is about). Addresses come from the lab
plan (``inventories/lab/fabric.yml``, fd00::/8 and 198.18.0.0/15 only). ExaBGP runs with the
rendered configuration as user ``nobody`` with no capabilities (like the systemd unit), and the
helper the role ships (``roles/vipinjector/files/vipinjector-helper``, see ``scripts/build-host-programs.py``).

Everything created carries the ``mnv`` prefix and is removed by ``Harness.close()`` (processes
by recorded PID, namespaces, temp dir), also when a test fails.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

import yaml

from labkit import REPO, ensure_collection_importable

ensure_collection_importable()

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import netns as NS  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run_command  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.routing import start_bare_daemon  # noqa: E402

VENV = os.path.join(REPO, ".venv")
# what the vipinjector role installs (built by scripts/build-host-programs.py)
HELPER_SRC = os.path.join(REPO, "roles", "vipinjector", "files", "vipinjector-helper")


def sh(cmd, check=True, **kw):
    """The lab's command runner (module_utils/lab/proc.run_command); failures raise RuntimeError."""
    return run_command(cmd, check=check, error=RuntimeError, **kw)


def lab_plan():
    topo = load_topology(yaml.safe_load(open(os.path.join(REPO, "inventories", "lab", "fabric.yml"))))
    return topo, FabricPlan(topo).allocate()


def lab_host(name="lab-r1-h2"):
    topo, plan = lab_plan()
    for h in topo.hosts:
        if h.name == name:
            return plan.host_data(h)
    raise KeyError(name)


def split_bfd_block(text):
    """(text without its top-level ``bfd`` block, ``frr defaults`` + that block) of an FRR config."""
    rest, block, inside = [], [], False
    for line in text.splitlines():
        if line == "bfd":
            inside = True
        if inside:
            block.append(line)
            if line == "exit":
                inside = False
            continue
        rest.append(line)
    head = [ln for ln in rest if ln.startswith("frr defaults")]
    return "\n".join(rest) + "\n", "\n".join(head + block) + "\n"


class Harness(object):
    def __init__(self, host="lab-r1-h2", slots=(1,), ttl_mode="gtsm", md5=None, tag=None, prefix="mnv",
                 tor_sysctls=None, bridge=None):
        self.host = lab_host(host)
        # prefix: name prefix of everything created (namespaces, ports, temp dir); tor_sysctls:
        # extra sysctls applied in the ToR namespace before FRR starts (e.g. ignore_routes_with_linkdown)
        self.prefix = prefix
        self.tor_sysctls = dict(tor_sysctls or {})
        self.slots = list(slots)
        self.ttl_mode = ttl_mode  # gtsm | multihop | none
        self.md5 = md5
        self.tag = tag or ("%x" % (os.getpid() & 0xFFFF))
        self.tor = "%s-%s-tor" % (prefix, self.tag)
        self.ns = dict((s, "%s-%s-s%d" % (prefix, self.tag, s)) for s in self.slots)
        self.tmp = tempfile.mkdtemp(prefix="%s-%s-" % (prefix, self.tag))
        os.chmod(self.tmp, 0o755)
        self.frr_dir = os.path.join(self.tmp, "frr")
        self.pids = []  # FRR daemons (pidfiles)
        self.procs = {}  # slot -> Popen (ExaBGP)
        self.models = {}
        self.nobody = pwd.getpwnam("nobody")
        self.n = int(self.host["nic_count"])
        # bridge: ToR port is a bridge per NIC (None: only when several slots share a NIC subnet)
        self.bridge = len(self.slots) > 1 if bridge is None else bool(bridge)
        self.namespaces = NS.Namespaces(error=RuntimeError)

    # ---------------------------------------------------------------- topology
    def build(self):
        for ns in [self.tor] + list(self.ns.values()):
            self.namespaces.add(ns, NS.KEEP_ADDR_ON_DOWN + NS.L4_MULTIPATH_HASH)
        self.namespaces.sysctl(self.tor, NS.FORWARDING + tuple(sorted(self.tor_sysctls.items())))
        # One slot: the ToR port is the veth itself (carrier loss reaches zebra at once, as on a
        # real ToR port). Several slots share a NIC subnet: the ToR port is a bridge over them
        # (a bridge adds ~1 s before a lost port takes its carrier down).
        for nic in self.host["nics"]:
            k = nic["index"]
            t = "t%d" % k
            if not self.bridge:
                continue
            sh(["ip", "-n", self.tor, "link", "add", t, "type", "bridge"])
            sh(["ip", "-n", self.tor, "addr", "add", "%s/%s" % (nic["gateway"]["ipv4"], nic["subnet"]["ipv4"].split("/")[1]), "dev", t])
            sh(["ip", "-n", self.tor, "addr", "add", "%s/64" % nic["gateway"]["ipv6"], "dev", t, "nodad"])
            sh(["ip", "-n", self.tor, "link", "set", t, "up"])
        for s, ns in self.ns.items():
            sd = [x for x in self.host["slots"] if x["slot"] == s][0]
            for nic in self.host["nics"]:
                k = nic["index"]
                a = [x for x in sd["nics"] if x["index"] == k][0]["address"]
                tn, cn = self.tor_port(s, k), "eth%d" % k
                self.namespaces.veth(self.tor, tn, ns, cn, up=False)
                if self.bridge:
                    sh(["ip", "-n", self.tor, "link", "set", tn, "master", "t%d" % k, "up"])
                else:
                    gw4 = "%s/%s" % (nic["gateway"]["ipv4"], nic["subnet"]["ipv4"].split("/")[1])
                    sh(["ip", "-n", self.tor, "addr", "add", gw4, "dev", tn])
                    sh(["ip", "-n", self.tor, "addr", "add", "%s/64" % nic["gateway"]["ipv6"], "dev", tn, "nodad"])
                    sh(["ip", "-n", self.tor, "link", "set", tn, "up"])
                plen4 = nic["subnet"]["ipv4"].split("/")[1]
                sh(["ip", "-n", ns, "addr", "add", "%s/%s" % (a["ipv4"], plen4), "dev", cn])
                sh(["ip", "-n", ns, "addr", "add", "%s/64" % a["ipv6"], "dev", cn, "nodad"])
                sh(["ip", "-n", ns, "link", "set", cn, "up"])
            sh(["ip", "-n", ns, "addr", "add", "%s/32" % sd["task_ip"]["ipv4"], "dev", "lo"])
            sh(["ip", "-n", ns, "addr", "add", "%s/128" % sd["task_ip"]["ipv6"], "dev", "lo", "nodad"])

    def tor_port(self, slot, k):
        return "%s%s%dk%d" % (self.prefix, self.tag[-4:], slot, k)

    # ---------------------------------------------------------------- FRR
    def frr_config(self):
        h = self.host
        lines = ["frr defaults traditional", "hostname %s" % self.tor, "log stdout warnings", "!",
                 "router bgp %d" % h["tor_asn"],
                 " bgp router-id 198.19.0.1",
                 " no bgp ebgp-requires-policy",
                 " no bgp network import-check",
                 " bgp bestpath as-path multipath-relax",
                 " timers bgp 3 9",
                 " neighbor HOST peer-group",
                 " neighbor HOST remote-as %d" % h["asn"]]
        soft = ["  neighbor HOST soft-reconfiguration inbound"]
        if self.ttl_mode == "gtsm":
            lines.append(" neighbor HOST ttl-security hops 2")
        elif self.ttl_mode == "multihop":
            lines.append(" neighbor HOST ebgp-multihop 2")
        if self.md5:
            lines.append(" neighbor HOST password %s" % self.md5)
        for s in self.slots:
            sd = [x for x in h["slots"] if x["slot"] == s][0]
            for a in sd["nics"]:
                lines.append(" neighbor %s peer-group HOST" % a["address"]["ipv6"])
        for fam, plen in (("ipv4", 32), ("ipv6", 128)):
            lines += [" address-family %s unicast" % fam, "  maximum-paths 8",
                      "  neighbor HOST activate",
                      soft[0],
                      "  neighbor HOST prefix-list HOST-IN-%s in" % fam,
                      "  neighbor HOST maximum-prefix %d" % (2 * len(h["slots"])),
                      " exit-address-family"]
        lines.append("!")
        for fam, plen in (("ipv4", 32), ("ipv6", 128)):
            kw = "ip" if fam == "ipv4" else "ipv6"
            for i, p in enumerate(h["task_ip_prefixes"][fam]):
                lines.append("%s prefix-list HOST-IN-%s seq %d permit %s ge %d" % (kw, fam, 10 + i, p, plen))
        lines.append("!")
        return "\n".join(lines) + "\n"

    def policy_config(self, **options):
        """The ToR-policy agent's rendered FRR config for this host's rack (tor_policy.py), with
        the interface section left out (the harness addresses the ports itself); ``options``: more
        policy options (e.g. bfd={"enabled": True})."""
        from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
        topo, plan = lab_plan()
        tor = self.host["tor"]
        keys = {self.host["name"]: self.md5} if self.md5 else {}
        out = tor_policy.build_fabric_configs(plan, dict({"render_interfaces": False}, **options), keys, devices=[tor])
        return out[tor]["text"]

    def _frr_daemon(self, ns, run_dir, daemon, conf, extra=()):
        pidf = os.path.join(run_dir, "%s.pid" % daemon)
        self.pids.append(pidf)            # recorded first: close() stops it even if the start fails half-way
        start_bare_daemon(ns, daemon, run_dir, conf, extra, error=RuntimeError)
        return pidf

    def start_bfd_responder(self, slot, options=None):
        """The host side of BFD in the slot's namespace, as the vipinjector role runs it (zebra +
        bfdd with the rendered configuration of vipinjector.bfd), own run dir. Returns the run dir."""
        from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import bfd
        r = bfd.render_bfd(self.host, slot, dict({"enabled": True}, **(options or {})))
        run_dir = os.path.join(self.tmp, "bfd-slot%d" % slot)
        os.makedirs(run_dir, exist_ok=True)
        frr = pwd.getpwnam("frr")
        os.chown(run_dir, frr.pw_uid, frr.pw_gid)
        for name, text in r["files"].items():
            path = os.path.join(run_dir, name)
            with open(path, "w") as f:
                f.write(text)
            os.chown(path, frr.pw_uid, frr.pw_gid)
        ns = self.ns[slot]
        self._frr_daemon(ns, run_dir, "zebra", os.path.join(run_dir, "zebra.conf"))   # waits for zserv.api
        self._frr_daemon(ns, run_dir, "bfdd", os.path.join(run_dir, "bfdd.conf"),
                         ["--bfdctl", os.path.join(run_dir, "bfdd.sock")])
        self.bfd_dirs = getattr(self, "bfd_dirs", {})
        self.bfd_dirs[slot] = run_dir
        return run_dir

    def bfd_peers(self, slot=None):
        """``show bfd peers json`` of the ToR (slot None) or of a slot's responder: {peer: record}."""
        d = self.frr_dir if slot is None else self.bfd_dirs[slot]
        r = sh(["vtysh", "--vty_socket", d, "-c", "show bfd peers json"])
        return dict((p["peer"], p) for p in json.loads(r.stdout or "[]"))

    def start_frr(self, bgpd_conf=None, zebra_extra="", bfdd=False):
        os.makedirs(self.frr_dir, exist_ok=True)
        frr = pwd.getpwnam("frr")
        os.chown(self.frr_dir, frr.pw_uid, frr.pw_gid)
        z = os.path.join(self.frr_dir, "zebra.conf")
        b = os.path.join(self.frr_dir, "bgpd.conf")
        with open(z, "w") as f:
            f.write("hostname %s\nno zebra nexthop kernel enable\n%s" % (self.tor, zebra_extra))
        with open(b, "w") as f:
            f.write(bgpd_conf or self.frr_config())
        for p in (z, b):
            os.chown(p, frr.pw_uid, frr.pw_gid)
        daemons = [("zebra", z), ("bgpd", b)]
        if bfdd:
            # One file per daemon here (no integrated config, no vtysh -b): bfdd gets the text's "bfd"
            # block (profiles), bgpd the rest (the block's closing "exit" would end bgpd's read).
            bgp_text, bfd_text = split_bfd_block(bgpd_conf or self.frr_config())
            with open(b, "w") as f:
                f.write(bgp_text)
            bf = os.path.join(self.frr_dir, "bfdd.conf")
            with open(bf, "w") as f:
                f.write(bfd_text)
            os.chown(bf, frr.pw_uid, frr.pw_gid)
            daemons.insert(1, ("bfdd", bf))
        for d, conf in daemons:
            self._frr_daemon(self.tor, self.frr_dir, d, conf, (["-p", "179"] if d == "bgpd" else [])
                             + (["--bfdctl", os.path.join(self.frr_dir, "bfdd.sock")] if d == "bfdd" else []))

        # wait until bgpd listens (ExaBGP connects out; a refused first attempt costs a retry)
        for dummy in range(250):
            r = sh(["ip", "netns", "exec", self.tor, "ss", "-Hltn", "sport", "= :179"], check=False)
            if r.stdout.strip():
                break
            time.sleep(0.02)

    def vtysh(self, cmd, js=True):
        r = sh(["vtysh", "--vty_socket", self.frr_dir, "-c", cmd])
        return json.loads(r.stdout) if js else r.stdout

    # ---------------------------------------------------------------- ExaBGP
    def instance_options(self, slot, **over):
        inst = os.path.join(self.tmp, "inst")
        if not os.path.exists(inst):
            os.makedirs(os.path.join(inst, "venv", "bin"))
            os.makedirs(os.path.join(inst, "bin"))
            os.symlink("/usr/bin/python3", os.path.join(inst, "venv", "bin", "python3"))
            shutil.copy(HELPER_SRC, os.path.join(inst, "bin", "vipinjector-helper"))
            os.chmod(os.path.join(inst, "bin", "vipinjector-helper"), 0o755)
        opts = {
            "install_dir": inst,
            "config_dir": os.path.join(self.tmp, "etc"),
            "runtime_dir": os.path.join(self.tmp, "run"),
            "outgoing_ttl": 255 if self.ttl_mode == "gtsm" else None,
            "md5_password": self.md5,
            "health": {"type": "command", "command": ["/bin/sh", "-c", "test ! -e %s"
                                                      % self.sick_file(slot)],
                       "interval": 0.2, "rise": 1, "fall": 1},
            "path_check": {"type": "route", "interval": 0.2, "rise": 1, "fall": 1},
        }
        opts.update(over)
        return opts

    def sick_file(self, slot):
        return os.path.join(self.tmp, "sick-slot%d" % slot)

    def drain_file(self, slot):
        return os.path.join(self.tmp, "run", "slot%d.drain" % slot)

    def status(self, slot):
        with open(os.path.join(self.tmp, "run", "slot%d" % slot, "status.json")) as f:
            return json.load(f)

    def write_instance(self, slot, conf_edit=None, **over):
        r = render.render_instance(self.host, slot, self.instance_options(slot, **over))
        m = r["model"]
        p = m["paths"]
        os.makedirs(p["config_dir"], exist_ok=True)
        os.makedirs(p["runtime_dir"], exist_ok=True)
        os.chown(p["runtime_dir"], self.nobody.pw_uid, self.nobody.pw_gid)
        os.chmod(os.path.dirname(p["runtime_dir"]), 0o755)
        conf = r["files"]["exabgp.conf"]
        if conf_edit:
            conf = conf_edit(conf)
        for name, text in (("exabgp.conf", conf), ("exabgp.env", r["files"]["exabgp.env"]),
                           ("helper.json", r["files"]["helper.json"])):
            with open(os.path.join(p["config_dir"], name), "w") as f:
                f.write(text)
        self.models[slot] = m
        return m

    def env(self, slot):
        m = self.models[slot]
        e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
        with open(m["paths"]["exabgp_env"]) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    e[k] = v
        return e

    def start_exabgp(self, slot, log=None):
        m = self.models[slot]
        logf = open(log or os.path.join(self.tmp, "exabgp-slot%d.log" % slot), "ab")
        cmd = ["nsenter", "--net=/run/netns/%s" % self.ns[slot], "setpriv", "--reuid=nobody",
               "--regid=%d" % self.nobody.pw_gid, "--clear-groups", "--inh-caps=-all",
               "--bounding-set=-all", "--no-new-privs",
               os.path.join(VENV, "bin", "exabgp"), "server", m["paths"]["exabgp_conf"]]
        p = subprocess.Popen(cmd, env=self.env(slot), stdout=logf, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[slot] = p
        return p

    def stop_exabgp(self, slot, sig=signal.SIGTERM, wait=5):
        p = self.procs.get(slot)
        if not p or p.poll() is not None:
            return None
        os.kill(p.pid, sig)
        try:
            return p.wait(wait)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            return p.wait(5)

    def log(self, slot):
        try:
            with open(os.path.join(self.tmp, "exabgp-slot%d.log" % slot), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # ---------------------------------------------------------------- observation
    def task_ip(self, slot, fam="ipv4"):
        return [x for x in self.host["slots"] if x["slot"] == slot][0]["task_ip"][fam]

    def fib_nexthops(self, address):
        fam = "-6" if ":" in address else "-4"
        plen = 128 if ":" in address else 32
        r = sh(["ip", "-n", self.tor, "-j", fam, "route", "show", "%s/%d" % (address, plen), "proto", "bgp"],
               check=False)
        try:
            routes = json.loads(r.stdout or "[]")
        except ValueError:
            return []
        out = []
        for rt in routes:
            if "nexthops" in rt:
                out += [nh.get("gateway") for nh in rt["nexthops"]]
            elif rt.get("gateway"):
                out.append(rt["gateway"])
        return out

    def received_routes(self, peer, fam="ipv4"):
        """Pre-policy routes the ToR received from one session (soft-reconfiguration inbound)."""
        try:
            js = self.vtysh("show bgp %s unicast neighbors %s received-routes json" % (fam, peer))
        except (RuntimeError, ValueError):
            return []
        return sorted((js.get("receivedRoutes") or {}).keys())

    def session_states(self):
        js = self.vtysh("show bgp neighbors json")
        return dict((k, v.get("bgpState")) for k, v in js.items())

    def settle(self, seconds=1.0):
        """Let fresh links finish IPv6 link-local set-up (a ToR is up long before a sidecar)."""
        time.sleep(seconds)

    def wait_width(self, address, width, timeout=15.0, poll=0.005):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if len(self.fib_nexthops(address)) == width:
                return time.monotonic() - t0
            time.sleep(poll)
        raise AssertionError("%s: FIB width %d (want %d) after %.1fs; nexthops %s"
                             % (address, len(self.fib_nexthops(address)), width, timeout,
                                self.fib_nexthops(address)))

    # ---------------------------------------------------------------- cleanup
    def close(self):
        for slot in list(self.procs):
            try:
                self.stop_exabgp(slot, signal.SIGKILL)
            except (OSError, RuntimeError):
                pass
        # the daemons (by the PIDs they wrote): SIGTERM to all, up to 2 s for all of them together, then SIGKILL
        pids = []
        for pidf in self.pids:
            try:
                with open(pidf) as f:
                    pid = int(f.read().strip())
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 2.0
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if _alive(pid)]
            time.sleep(0.02)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.namespaces.remove()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _alive(pid):
    """Running (a zombie child counts as gone: it only waits to be reaped)."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False
