# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build, check and tear down the fabric lab from the planner's output.

Nodes:
- FRR "boxes" (spine, ToRs) and the storage node: a long-lived holder PID in its own
  net+mount+uts namespace, with private /etc/frr and /var/run/frr (bind mounts of per-node
  dirs), a private /run and a fresh sysfs; FRR daemons started inside with default paths, so
  `vtysh` and `frr-reload.py` work there unchanged.
- GPU hosts: systemd as PID 1 in its own pid/mount/uts/net/ipc/cgroup namespaces, overlayfs
  over the cached base image, pivot_root.
Every created object is journaled in the state file right away (see state.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab import frr as frrmod
from ansible_collections.netscale.multinic.plugins.module_utils.lab import image as imagemod
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import (
    LabError, alive, children, cmdline, kill, reap, run, start_time, wait_gone,
)
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import STATE_ROOT, State, load

PREFIX = "mnl"
FAIL_ENV = "NETSCALE_LAB_FAIL_AT"
STEPS = ("image", "nodes", "hosts", "links", "frr", "bgp", "ready")

BOX_SCRIPT = r"""
set -eu
name="$1"; d="$2"
mount --bind "$d" /mnt
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
mkdir -p /run/frr /run/lock
mount --bind /mnt/run-frr /run/frr
mount --bind /mnt/etc-frr /etc/frr
umount /mnt
# Drop copies of other namespaces' bind mounts (they would keep those namespaces alive).
for m in $(findmnt -rn -t nsfs -o TARGET | sort -r); do umount -l "$m" 2>/dev/null || true; done
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
hostname "$name"
ip link set lo up
echo ready > /run/frr/.box-ready
exec sleep infinity
"""

HOST_SCRIPT = r"""
set -eu
name="$1"; lower="$2"; d="$3"
m="$d/merged"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$d/upper,workdir=$d/work" "$m"
mount -t tmpfs -o mode=755,nosuid,size=65536k tmpfs "$m/dev"
for n in null zero full random urandom tty; do : > "$m/dev/$n"; mount --bind "/dev/$n" "$m/dev/$n"; done
mkdir -p "$m/dev/pts" "$m/dev/shm" "$m/dev/mqueue"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$m/dev/pts"
ln -s pts/ptmx "$m/dev/ptmx"
ln -s /proc/self/fd "$m/dev/fd"
ln -s /proc/self/fd/0 "$m/dev/stdin"; ln -s /proc/self/fd/1 "$m/dev/stdout"; ln -s /proc/self/fd/2 "$m/dev/stderr"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$m/dev/shm"
mount -t mqueue -o nosuid,nodev,noexec mqueue "$m/dev/mqueue"
mount -t proc -o nosuid,nodev,noexec proc "$m/proc"
mount --bind "$m/proc/sys" "$m/proc/sys"
mount --bind "$m/proc/sys/net" "$m/proc/sys/net"
mount -o remount,bind,ro "$m/proc/sys"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$m/sys"
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$m/sys/fs/cgroup"
mount -t bpf -o mode=700 bpf "$m/sys/fs/bpf"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$m/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$m/tmp"
hostname "$name"
cd "$m"
mkdir -p .mnl-oldroot
pivot_root . .mnl-oldroot
cd /
umount -l /.mnl-oldroot
rmdir /.mnl-oldroot
exec env -i container=netscale-lab PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /lib/systemd/systemd --log-target=console
"""


def cgroup2_root():
    """Mount point of the cgroup v2 hierarchy (/sys/fs/cgroup or, on hybrid hosts, .../unified)."""
    best = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            if right.split()[0] == "cgroup2":
                mp = left.split()[4]
                if best is None or len(mp) < len(best):
                    best = mp
    if best is None:
        raise LabError("no cgroup2 hierarchy mounted; mount one: mount -t cgroup2 none /sys/fs/cgroup")
    return best


def netns_name(node):
    return "%s-%s" % (PREFIX, node)


class LabSpec(object):
    """Everything the lab builds, derived from the topology + plan (no addresses hard-coded)."""

    def __init__(self, topo, plan, topology_file=None, tor_config_dir=None):
        self.topo = topo
        self.plan = plan
        self.fabric = topo.name
        self.topology_file = topology_file
        lab = topo.lab or {}
        if not lab.get("storage"):
            raise LabError("topology %s: section 'lab.storage' is missing (value: %r); add "
                           "lab: {storage: {name: lab-storage, ipv6: fd00:5::/64, ipv4: 198.19.5.0/24}}"
                           % (topology_file or topo.name, lab.get("storage")))
        self.storage = dict(lab["storage"])
        self.storage_name = self.storage.get("name", "lab-storage")
        self.storage_addr = frrmod.storage_addresses(self.storage)
        self.racks = [plan.rack_data(r) for r in topo.racks]
        self.spines = [plan.spine_data(s) for s in topo.spines]
        if not self.spines:
            raise LabError("topology %s: no spine; the lab needs at least one spine" % self.fabric)
        self.hosts = [h for r in self.racks for h in r["hosts"]]
        self.tor_config_dir = tor_config_dir

    def tor_config(self, rack):
        if self.tor_config_dir:
            p = os.path.join(self.tor_config_dir, "%s.cfg" % rack["tor"]["name"])
            if os.path.exists(p):
                with open(p) as f:
                    return f.read()
        return frrmod.render_tor_placeholder(rack)

    def spine_config(self, i, spine):
        return frrmod.render_spine(spine, self.storage_addr if i == 0 else None)

    def node_list(self):
        out = [(s["name"], "spine") for s in self.spines]
        out += [(r["tor"]["name"], "tor") for r in self.racks]
        out.append((self.storage_name, "storage"))
        out += [(h["name"], "gpu_host") for h in self.hosts]
        return out

    def plan_hash(self):
        blob = json.dumps({
            "racks": self.racks, "spines": self.spines, "storage": self.storage, "storage_addr": self.storage_addr,
            "tors": [self.tor_config(r) for r in self.racks],
            "spine_cfg": [self.spine_config(i, s) for i, s in enumerate(self.spines)],
            "image": imagemod.image_key(), "box": BOX_SCRIPT, "host": HOST_SCRIPT,
        }, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


class Lab(object):
    def __init__(self, spec, state_root=STATE_ROOT, log=None, fail_at=None, host_default_route=True,
                 bgp_timeout=60.0):
        self.spec = spec
        self.fabric = spec.fabric
        self.state_root = state_root
        self.log_lines = []
        self._log = log
        self.fail_at = fail_at or os.environ.get(FAIL_ENV) or None
        self.host_default_route = host_default_route
        self.bgp_timeout = bgp_timeout
        self.state = None
        self.timings = {}

    # ------------------------------------------------------------------ helpers
    def log(self, msg):
        self.log_lines.append(msg)
        if self._log:
            self._log(msg)

    def _step(self, name):
        if self.fail_at == name:
            raise LabError("injected failure at build step '%s' (%s=%s)" % (name, FAIL_ENV, name))

    @property
    def sdir(self):
        return os.path.join(self.state_root, self.fabric)

    def node_dir(self, node):
        return os.path.join(self.sdir, "nodes", node)

    def cg_dir(self, node=None):
        base = os.path.join(cgroup2_root(), PREFIX, self.fabric)
        return os.path.join(base, node) if node else base

    def _popen_in_cgroup(self, argv, cg, logpath):
        def pre():
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write("0")
        logf = open(logpath, "ab")
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                    preexec_fn=pre, start_new_session=True, close_fds=True)
        finally:
            logf.close()

    def _mkcg(self, path):
        self.state.add(type="cgroup", path=path)
        os.makedirs(path, exist_ok=True)

    def _mkdir(self, path, record=True):
        if record:
            self.state.add(type="dir", path=path)
        os.makedirs(path, exist_ok=True)

    @property
    def state_file(self):
        return os.path.join(self.sdir, "state.json")

    def leftovers(self):
        """Objects with this fabric's names that exist although no state file lists them."""
        out = [netns_name(n) for n, _k in self.spec.node_list() if _netns_exists(netns_name(n))]
        if os.path.isdir(self.cg_dir()):
            out.append(self.cg_dir())
        if os.path.isdir(self.sdir):
            out.append(self.sdir)
        return out

    # ------------------------------------------------------------------ status
    def status(self):
        """(healthy: bool, reasons: list, state dict or None)."""
        data = load(self.fabric, self.state_root)
        if data is None:
            return False, ["no state file"], None
        reasons = []
        if data.get("status") != "ready":
            reasons.append("state is %r" % data.get("status"))
        if data.get("plan_hash") != self.spec.plan_hash():
            reasons.append("topology, plan or templates changed since the build")
        for r in data.get("resources", []):
            if r["type"] == "process" and r.get("keep", True) and not alive(r["pid"], r.get("started")):
                reasons.append("process %s (pid %s) is gone" % (r.get("name"), r["pid"]))
        for name, _kind in self.spec.node_list():
            if name not in data.get("nodes", {}):
                reasons.append("node %s missing" % name)
        return not reasons, reasons, data

    # ------------------------------------------------------------------ build
    def build(self):
        """Build the lab. Returns dict(changed, ...). Idempotent: a healthy lab is left as is."""
        healthy, reasons, data = self.status()
        if healthy:
            return {"changed": False, "state_file": os.path.join(self.sdir, "state.json"), "nodes": data["nodes"]}
        if data is not None:
            self.log("lab: rebuilding (%s)" % "; ".join(reasons))
            self.teardown()
        t0 = time.monotonic()
        self.state = State(self.fabric, self.state_root)
        self.state.set(topology_file=self.spec.topology_file, started_at=time.time())
        try:
            self._build()
        except BaseException as e:
            self.log("lab: build failed (%s); tearing down what was made" % e)
            try:
                self.state.set(status="failed", error=str(e))
                self.teardown()
            except Exception as e2:  # report both
                raise LabError("build failed: %s; teardown after the failure also failed: %s" % (e, e2))
            if isinstance(e, LabError):
                raise LabError("build failed and was rolled back: %s" % e)
            raise
        self.timings["build"] = round(time.monotonic() - t0, 2)
        self.state.set(status="ready", plan_hash=self.spec.plan_hash(), timings=self.timings)
        return {"changed": True, "state_file": self.state.path, "nodes": self.state.data["nodes"],
                "timings": self.timings}

    def _timed(self, name, fn):
        t = time.monotonic()
        fn()
        self.timings[name] = round(time.monotonic() - t, 2)

    def _build(self):
        self._step("image")
        holder = {}

        def img():
            holder["rootfs"], holder["info"], built = imagemod.ensure_image(log=self.log)
        self._timed("image", img)
        self.state.set(image=holder["info"]["key"], image_rootfs=holder["rootfs"])
        self._mkdir(self.sdir, record=True)
        self._mkdir(os.path.join(self.sdir, "nodes"))
        self._mkcg(os.path.join(cgroup2_root(), PREFIX))  # removed only when empty
        self._mkcg(self.cg_dir())
        self._step("nodes")
        self._timed("boxes", self._start_boxes)
        self._step("hosts")
        self._timed("hosts", lambda: self._start_hosts(holder["rootfs"]))
        self._step("links")
        self._timed("links", self._wire)
        self._step("frr")
        self._timed("frr", self._start_frr)
        self._step("bgp")
        self._timed("bgp", self._wait_bgp)
        self._step("ready")

    # --- boxes (spine, ToRs, storage)
    def _start_boxes(self):
        boxes = [(n, k) for n, k in self.spec.node_list() if k != "gpu_host"]
        started = []
        for name, kind in boxes:
            d = self.node_dir(name)
            self._mkdir(d)
            for sub in ("etc-frr", "run-frr"):
                os.makedirs(os.path.join(d, sub), exist_ok=True)
                shutil.chown(os.path.join(d, sub), "frr", "frr")
            cg = self.cg_dir(name)
            self._mkcg(cg)
            p = self._popen_in_cgroup(
                ["unshare", "--net", "--mount", "--uts", "--propagation", "private", "--",
                 "/bin/sh", "-c", BOX_SCRIPT, "mnl-box", name, d],
                cg, os.path.join(d, "box.log"))
            st = start_time(p.pid)
            self.state.add(type="process", name="%s/holder" % name, pid=p.pid, started=st, node=name)
            self.state.set_node(name, pid=p.pid, kind=kind, netns=netns_name(name), cgroup=cg, dir=d,
                                started=st)
            started.append((name, p, d))
        for name, p, d in started:
            self._wait_file(os.path.join(d, "run-frr", ".box-ready"), p, name, os.path.join(d, "box.log"))
            self._attach_netns(name, p.pid)

    def _wait_file(self, path, proc, name, logpath, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if proc.poll() is not None:
                raise LabError("node %s: its namespace holder exited (rc=%s) before it was ready; log %s: %s"
                               % (name, proc.returncode, logpath, _tail(logpath)))
            if time.monotonic() > deadline:
                raise LabError("node %s: not ready after %ss; log %s: %s" % (name, timeout, logpath, _tail(logpath)))
            time.sleep(0.01)

    def _attach_netns(self, name, pid):
        ns = netns_name(name)
        if os.path.exists("/run/netns/%s" % ns):
            raise LabError("network namespace %s already exists and is not in this lab's state; remove it "
                           "(ip netns del %s) or tear down the lab that made it" % (ns, ns))
        self.state.add(type="netns", name=ns)
        run(["ip", "netns", "attach", ns, str(pid)])

    # --- GPU hosts
    def _start_hosts(self, rootfs):
        procs = []
        for h in self.spec.hosts:
            name = h["name"]
            d = self.node_dir(name)
            self._mkdir(d)
            for sub in ("upper", "work", "merged"):
                os.makedirs(os.path.join(d, sub), exist_ok=True)
            etc = os.path.join(d, "upper", "etc")
            os.makedirs(etc, exist_ok=True)
            with open(os.path.join(etc, "hostname"), "w") as f:
                f.write(name + "\n")
            with open(os.path.join(etc, "hosts"), "w") as f:
                f.write("127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost ip6-localhost ip6-loopback\n" % name)
            cg = self.cg_dir(name)
            self._mkcg(cg)
            p = self._popen_in_cgroup(
                ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--net", "--ipc", "--cgroup",
                 "--propagation", "private", "--", "/bin/sh", "-c", HOST_SCRIPT, "mnl-host", name, rootfs, d],
                cg, os.path.join(d, "console.log"))
            st = start_time(p.pid)
            self.state.add(type="process", name="%s/unshare" % name, pid=p.pid, started=st, node=name)
            procs.append((h, p, d, cg))
        for h, p, d, cg in procs:
            name = h["name"]
            init = self._wait_systemd(name, p, os.path.join(d, "console.log"))
            st = start_time(init)
            self.state.add(type="process", name="%s/init" % name, pid=init, started=st, node=name)
            self.state.set_node(name, pid=init, kind="gpu_host", netns=netns_name(name), cgroup=cg, dir=d,
                                started=st, unshare_pid=p.pid, rack=h["rack"])
            self._attach_netns(name, init)

    def _wait_systemd(self, name, p, logpath, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            if p.poll() is not None:
                raise LabError("host %s: boot failed (unshare exited rc=%s); console %s: %s"
                               % (name, p.returncode, logpath, _tail(logpath)))
            kids = children(p.pid)
            if kids:
                init = kids[0]
                cl = cmdline(init)
                if cl and cl[0].endswith("systemd") and os.path.exists("/proc/%d/root/run/systemd/private" % init):
                    return init
            if time.monotonic() > deadline:
                raise LabError("host %s: systemd not running after %ss; console %s: %s"
                               % (name, timeout, logpath, _tail(logpath)))
            time.sleep(0.02)

    # --- wiring
    def _nsexec(self, node, argv, **kw):
        return run(["nsenter", "--net=/run/netns/%s" % netns_name(node), "--"] + argv, **kw)

    def _batch(self, node, lines):
        if lines:
            run(["ip", "-n", netns_name(node), "-batch", "-"], input_text="\n".join(lines) + "\n")

    def _sysctl(self, node, kv):
        self._nsexec(node, ["sysctl", "-q", "-w"] + ["%s=%s" % (k, v) for k, v in kv])

    def _veth(self, a_node, a_dev, b_node, b_dev):
        """veth pair created directly inside both namespaces (never visible in the machine's)."""
        self.state.add(type="link", netns=netns_name(a_node), dev=a_dev, peer_netns=netns_name(b_node), peer=b_dev)
        run(["ip", "link", "add", a_dev, "netns", netns_name(a_node), "type", "veth",
             "peer", "name", b_dev, "netns", netns_name(b_node)])

    def _wire(self):
        router_sysctls = [
            ("net.ipv6.conf.all.keep_addr_on_down", 1), ("net.ipv6.conf.default.keep_addr_on_down", 1),
            ("net.ipv4.ip_forward", 1), ("net.ipv6.conf.all.forwarding", 1),
            ("net.ipv4.fib_multipath_hash_policy", 1), ("net.ipv6.fib_multipath_hash_policy", 1),
            # As tor_bgp sets on a Linux ToR: dead-carrier next hops leave ECMP groups at once.
            ("net.ipv4.conf.all.ignore_routes_with_linkdown", 1), ("net.ipv6.conf.all.ignore_routes_with_linkdown", 1),
            ("net.ipv4.conf.default.ignore_routes_with_linkdown", 1),
            ("net.ipv6.conf.default.ignore_routes_with_linkdown", 1),
        ]
        end_sysctls = [("net.ipv6.conf.all.keep_addr_on_down", 1), ("net.ipv6.conf.default.keep_addr_on_down", 1)]
        for s in self.spec.spines:
            self._sysctl(s["name"], router_sysctls)
        for r in self.spec.racks:
            self._sysctl(r["tor"]["name"], router_sysctls)
        self._sysctl(self.spec.storage_name, end_sysctls)
        for h in self.spec.hosts:
            self._sysctl(h["name"], end_sysctls)
        cmds = {}

        def add(node, line):
            cmds.setdefault(node, []).append(line)

        def addr(node, dev, fam, a, length):
            add(node, "address add %s/%s dev %s%s" % (a, length, dev, " nodad" if fam == "ipv6" else ""))

        # spine <-> ToR
        for s in self.spec.spines:
            for d in s["downlinks"]:
                rack = next(r for r in self.spec.racks if r["name"] == d["rack"])
                up = next(u for u in rack["tor"]["uplinks"] if u["spine"] == s["name"])
                self._veth(s["name"], d["interface"], d["tor"], up["interface"])
                for fam in ("ipv6", "ipv4"):
                    if fam in d:
                        addr(s["name"], d["interface"], fam, d[fam]["spine"], d[fam]["length"])
                        addr(d["tor"], up["interface"], fam, d[fam]["tor"], d[fam]["length"])
                add(s["name"], "link set %s up" % d["interface"])
                add(d["tor"], "link set %s up" % up["interface"])
        # spine <-> storage
        s0 = self.spec.spines[0]["name"]
        st = self.spec.storage_name
        self._veth(s0, "storage", st, "eth0")
        for fam, a in self.spec.storage_addr.items():
            addr(s0, "storage", fam, a["spine"], a["length"])
            addr(st, "eth0", fam, a["storage"], a["length"])
        add(s0, "link set storage up")
        add(st, "link set eth0 up")
        for fam, a in self.spec.storage_addr.items():
            add(st, "route add %s via %s dev eth0" % ("::/0" if fam == "ipv6" else "0.0.0.0/0", a["spine"]))
        # ToR <-> GPU hosts
        for r in self.spec.racks:
            tor = r["tor"]["name"]
            for h in r["hosts"]:
                for nic in h["nics"]:
                    self._veth(tor, nic["tor_port"], h["name"], nic["name"])
                    for fam in ("ipv6", "ipv4"):
                        if fam in nic["subnet"]:
                            length = nic["subnet"][fam].split("/")[1]
                            addr(tor, nic["tor_port"], fam, nic["gateway"][fam], length)
                            addr(h["name"], nic["name"], fam, nic["address"][fam], length)
                    add(tor, "link set %s up" % nic["tor_port"])
                    add(h["name"], "link set %s up" % nic["name"])
        for node, lines in cmds.items():
            self._batch(node, lines)
        if self.host_default_route:
            for h in self.spec.hosts:
                lines = []
                for fam in ("ipv6", "ipv4"):
                    hops = " ".join("nexthop via %s dev %s" % (n["gateway"][fam], n["name"])
                                    for n in h["nics"] if fam in n["gateway"])
                    if hops:
                        lines.append("route add %s proto static %s" % ("::/0" if fam == "ipv6" else "0.0.0.0/0", hops))
                self._batch(h["name"], lines)

    # --- FRR
    def _frr_nodes(self):
        out = []
        for i, s in enumerate(self.spec.spines):
            out.append((s["name"], self.spec.spine_config(i, s)))
        for r in self.spec.racks:
            out.append((r["tor"]["name"], self.spec.tor_config(r)))
        return out

    def _start_frr(self):
        nodes = self._frr_nodes()
        for name, conf in nodes:
            etc = os.path.join(self.node_dir(name), "etc-frr")
            for fn, text, mode in (("frr.conf", conf, 0o640), ("daemons", frrmod.DAEMONS_FILE, 0o640),
                                   ("vtysh.conf", frrmod.VTYSH_CONF, 0o640)):
                p = os.path.join(etc, fn)
                with open(p, "w") as f:
                    f.write(text)
                os.chmod(p, mode)
                shutil.chown(p, "frr", "frrvty" if fn == "vtysh.conf" else "frr")
        errors = []

        def one(name):
            try:
                for daemon in frrmod.DAEMONS:
                    self.start_daemon(name, daemon)
                self.vtysh(name, ["-b"])
            except Exception as e:  # collected, raised in the main thread
                errors.append(e)
        threads = [threading.Thread(target=one, args=(n,)) for n, _conf in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def box_pid(self, node):
        data = self.state.data if self.state else load(self.fabric, self.state_root)
        return data["nodes"][node]["pid"]

    def nsenter_box(self, node):
        return ["nsenter", "-t", str(self.box_pid(node)), "-n", "-m", "-u", "--"]

    def start_daemon(self, node, daemon):
        """Start one FRR daemon inside a box (default paths), record its PID."""
        cg = self.cg_dir(node)
        d = self.node_dir(node)

        def pre():
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write("0")
        p = subprocess.run(self.nsenter_box(node) + frrmod.daemon_argv(daemon), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, preexec_fn=pre, timeout=30, check=False)
        pidfile = os.path.join(d, "run-frr", "%s.pid" % daemon)
        if p.returncode != 0:
            why = (p.stderr or p.stdout).strip()
            raise LabError("node %s: %s failed to start (rc=%d): %s" % (node, daemon, p.returncode, why))
        pid = _read_pid(pidfile)
        if pid is None:
            raise LabError("node %s: %s started but wrote no pid file %s" % (node, daemon, pidfile))
        if self.state is None:
            self.state = State(self.fabric, self.state_root, load(self.fabric, self.state_root))
        self.state.add(type="process", name="%s/%s" % (node, daemon), pid=pid, started=start_time(pid), node=node)
        with self.state.lock:
            daemons = dict(self.state.data["nodes"][node].get("daemons", {}))
            daemons[daemon] = pid
            self.state.set_node(node, daemons=daemons)
        return pid

    def vtysh(self, node, args, check=True, timeout=60):
        return run(self.nsenter_box(node) + ["vtysh"] + args, check=check, timeout=timeout)[1]

    def bgp_summary(self, node):
        out = self.vtysh(node, ["-c", "show bgp summary json"])
        return json.loads(out)

    def _wait_bgp(self):
        deadline = time.monotonic() + self.bgp_timeout
        want = {}
        for s in self.spec.spines:
            want[s["name"]] = sum(1 for d in s["downlinks"] for fam in ("ipv4", "ipv6") if fam in d)
        storage = self.spec.storage_addr
        while True:
            missing = []
            for node, n in want.items():
                summ = self.bgp_summary(node)
                up = sum(1 for af in summ.values() if isinstance(af, dict)
                         for p in af.get("peers", {}).values() if p.get("state") == "Established")
                if up < n:
                    missing.append("%s: %d/%d sessions Established" % (node, up, n))
            if not missing:
                for r in self.spec.racks:
                    for fam, a in storage.items():
                        out = run(["ip", "-n", netns_name(r["tor"]["name"]), "-6" if fam == "ipv6" else "-4",
                                   "route", "show", a["prefix"]])[1]
                        if not out.strip():
                            missing.append("%s: no route to storage %s yet" % (r["tor"]["name"], a["prefix"]))
            if not missing:
                return
            if time.monotonic() > deadline:
                raise LabError("BGP not converged after %ss: %s" % (self.bgp_timeout, "; ".join(missing)))
            time.sleep(0.2)

    # ------------------------------------------------------------------ teardown
    def teardown(self):
        """Remove everything the state file lists (reverse order), then sweep our prefix."""
        data = load(self.fabric, self.state_root)
        t0 = time.monotonic()
        removed = []
        problems = []
        res = list(reversed(data.get("resources", []))) if data else []
        # 1. processes: FRR daemons and holders first by PID (checked start time), then whole cgroups.
        procs = [r for r in res if r["type"] == "process"]
        for r in procs:
            if kill(r["pid"], r.get("started"), signal.SIGKILL):
                removed.append("process %s (pid %s)" % (r["name"], r["pid"]))
        left = wait_gone([(r["pid"], r.get("started")) for r in procs], timeout=5.0)
        if left:
            problems.append("processes still alive: %s" % left)
        cgroups = [r["path"] for r in res if r["type"] == "cgroup"]
        prefix_cg = os.path.join(cgroup2_root(), PREFIX)
        for cg in cgroups:
            if cg != prefix_cg:  # the shared prefix cgroup holds every other fabric's lab: never kill it
                _cgroup_kill(cg)
        # 2. links (ToR-side ends explicitly; the peer goes with them), then netns names.
        for r in res:
            if r["type"] == "link":
                if _netns_exists(r["netns"]):
                    rc = run(["ip", "-n", r["netns"], "link", "del", r["dev"]], check=False)[0]
                    if rc == 0:
                        removed.append("link %s/%s" % (r["netns"], r["dev"]))
        for r in res:
            if r["type"] == "netns" and _netns_exists(r["name"]):
                rc, _out, err = run(["ip", "netns", "del", r["name"]], check=False)
                if rc == 0:
                    removed.append("netns %s" % r["name"])
                else:
                    problems.append("netns %s: %s" % (r["name"], err.strip()))
        # 3. cgroups, deepest first (systemd made sub-cgroups inside the hosts').
        for cg in sorted(set(cgroups), key=len, reverse=True):
            if cg == prefix_cg:
                continue  # shared by every fabric's lab: removed below only when empty
            if os.path.isdir(cg):
                err = _rmdir_cgroup(cg)
                if err:
                    problems.append(err)
                else:
                    removed.append("cgroup %s" % cg)
        # 4. mounts and dirs (only under our state dir).
        for r in res:
            if r["type"] == "mount":
                run(["umount", "-l", r["path"]], check=False)
            elif r["type"] == "dir":
                p = r["path"]
                if not (p + "/").startswith(self.sdir + "/"):
                    problems.append("refusing to remove %s (outside %s)" % (p, self.sdir))
                    continue
                if p == self.sdir:
                    continue
                if os.path.exists(p):
                    _rmtree(p)
                    removed.append("dir %s" % p)
        # 5. sweep: our named namespaces and cgroups of this fabric, even if unrecorded.
        for name, _kind in self.spec.node_list():
            ns = netns_name(name)
            if _netns_exists(ns):
                run(["ip", "netns", "del", ns], check=False)
                removed.append("netns %s (sweep)" % ns)
        if os.path.isdir(self.cg_dir()):
            _cgroup_kill(self.cg_dir())
            err = _rmdir_cgroup(self.cg_dir())
            if err:
                problems.append(err)
        try:
            os.rmdir(prefix_cg)
        except OSError:
            pass
        reap()
        if problems:
            if data is not None:
                st = State(self.fabric, self.state_root, data)
                st.set(status="teardown-failed", error="; ".join(problems))
            raise LabError("teardown incomplete: %s" % "; ".join(problems))
        if os.path.isdir(self.sdir):
            _rmtree(self.sdir)
            if data is not None:
                removed.append("dir %s" % self.sdir)
        for d in (self.state_root, os.path.dirname(self.state_root)):
            try:  # shared parents: only when nothing else lives there
                os.rmdir(d)
            except OSError:
                break
        self.timings["teardown"] = round(time.monotonic() - t0, 2)
        return {"changed": bool(data is not None or removed), "removed": removed, "timings": self.timings}


def _tail(path, n=800):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return "(no log)"


def _read_pid(path, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            time.sleep(0.02)
    return None


def _netns_exists(name):
    return os.path.exists("/run/netns/%s" % name)


def _cgroup_kill(cg):
    k = os.path.join(cg, "cgroup.kill")
    if os.path.exists(k):
        try:
            with open(k, "w") as f:
                f.write("1")
        except OSError:
            pass
    else:  # kernels < 5.14: kill what is listed
        for root, _dirs, _files in os.walk(cg):
            try:
                with open(os.path.join(root, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            except OSError:
                pass


def _cgroup_populated(cg):
    try:
        with open(os.path.join(cg, "cgroup.events")) as f:
            for line in f:
                k, v = line.split()
                if k == "populated":
                    return v == "1"
    except OSError:
        return False
    return False


def _rmdir_cgroup(cg, timeout=5.0):
    """rmdir a cgroup tree bottom-up once it has no processes. Returns an error text or None."""
    deadline = time.monotonic() + timeout
    while _cgroup_populated(cg):
        if time.monotonic() > deadline:
            return "cgroup %s still has processes" % cg
        reap()
        time.sleep(0.02)
    for root, dirs, _files in sorted(os.walk(cg), key=lambda x: len(x[0]), reverse=True):
        try:
            os.rmdir(root)
        except FileNotFoundError:
            pass
        except OSError as e:
            return "cgroup %s: %s" % (root, e)
    return None


def _rmtree(path):
    # Overlay work dirs may hold a 'work' subdir with mode 000: shutil copes as root.
    shutil.rmtree(path, ignore_errors=True)
    if os.path.exists(path):
        run(["rm", "-rf", "--one-file-system", path], check=False)
