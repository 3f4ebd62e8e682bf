# -*- coding: utf-8 -*-
"""The whole host stack on the real lab (prefix mns): lab fabric tests/e2e/stack/fabric.yml (fabric
name mns, node names mns-*), deployed with playbooks/site.yml. Helpers to reach lab nodes (nsenter by
the PIDs of the lab state file), read ToR FIBs, drive iperf3 with per-stream intervals and per-NIC
counters, and dump a host's state for before/after comparisons.

Every process started here is recorded and killed by PID; the lab is torn down by playbooks/lab.yml.

In labkit (moved from tests/e2e/stack/mns_stack.py, which re-exports it) so that bench/gray_stack.py
can drive the same lab without importing tests/.
"""
import json
import os
import subprocess
import time

import yaml

from labkit import dp_harness as DH
from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops as LO  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import run_command  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(REPO, "tests", "e2e", "stack")
TOPOLOGY = os.path.join(HERE, "fabric.yml")
VENV_BIN = os.path.join(REPO, ".venv", "bin")
STATE = "/run/netscale-multinic/lab/mns/state.json"
WORK = "/tmp/mns-stack"
STO6, STO4 = "fd00:5::10", "198.19.5.10"


# Measurement helpers of the datapath harness (max_stall, stalls, shares).
max_stall, stalls, shares, by_end = DH.max_stall, DH.stalls, DH.shares, DH.by_end


def env(**extra):
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + ":" + e.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    e["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    e["ANSIBLE_NOCOLOR"] = "1"
    # the lab inventories' vault (lab keys only; scripts/test.sh and main.sh export it, a bench run by hand may not)
    e.setdefault("ANSIBLE_VAULT_PASSWORD_FILE", os.path.join(REPO, ".cache", "lab-vault-password"))
    e.pop("NETSCALE_LAB_FAIL_AT", None)
    e.update(extra)
    return e


def lab_vars():
    """The variables every lab fabric shares (inventories/lab/group_vars/all/lab.yml): what site.yml
    deploys unless extra vars override it (BFD and probe timers, MD5 modes)."""
    with open(os.path.join(REPO, "inventories", "lab", "group_vars", "all", "lab.yml")) as f:
        return yaml.safe_load(f)


def sh(argv, check=True, timeout=120, **kw):
    """The lab's command runner (module_utils/lab/proc.run_command); failures fail the test."""
    return run_command(argv, check=check, error=AssertionError, timeout=timeout, **kw)


def playbook(name, *args, check=True, timeout=900, inventory=True):
    argv = [os.path.join(VENV_BIN, "ansible-playbook")]
    if inventory:
        argv += ["-i", TOPOLOGY]
    argv += [os.path.join(REPO, "playbooks", name)] + list(args)
    p = subprocess.run(argv, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout, check=False)
    log = os.path.join(WORK, "%s-%d.log" % (name.replace(".yml", ""), int(time.time() * 1000)))
    if os.path.isdir(WORK):
        with open(log, "w") as f:
            f.write(" ".join(argv) + "\n" + p.stdout + "\n" + p.stderr)
    if check and p.returncode != 0:
        raise AssertionError("ansible-playbook %s %s failed rc=%d\n%s\n%s" % (
            name, " ".join(args), p.returncode, p.stdout[-6000:], p.stderr[-2000:]))
    return p


def recap(stdout):
    """{host: {ok, changed, failed, ...}} from the PLAY RECAP."""
    out, on = {}, False
    for line in stdout.splitlines():
        if line.startswith("PLAY RECAP"):
            on = True
            continue
        if on and ":" in line and "ok=" in line:
            host, rest = line.split(":", 1)
            out[host.strip()] = dict((k, int(v)) for k, v in (kv.split("=") for kv in rest.split()))
    return out


def lab_build():
    # with the fabric as inventory: its group_vars (the lab's vault) give the spines their TCP-MD5 key
    return playbook("lab.yml", "-e", "lab_topology=%s" % TOPOLOGY)


def lab_teardown(check=False):
    return playbook("lab.yml", "-e", "lab_topology=%s" % TOPOLOGY, "-e", "lab_state=absent",
                    inventory=False, check=check)


def site(*args, check=True):
    return playbook("site.yml", "-e", "tor_bgp_intended_dir=%s/intended" % WORK,
                    "-e", "host_datapath_build_dir=%s/bpf" % WORK, *args, check=check)


def adhoc(host, module, args):
    """Run one module through the fabric inventory; returns its result dict."""
    p = subprocess.run([os.path.join(VENV_BIN, "ansible"), "-i", TOPOLOGY, host, "-m", module, "-a", json.dumps(args)],
                       cwd=REPO, env=env(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=False)
    try:
        return json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"][host]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible %s -m %s: rc=%d %s %s" % (host, module, p.returncode, p.stdout[-2000:], p.stderr[-1000:]))


class Lab(object):
    """The running mns lab: plan data per host and nsenter access to every node."""

    def __init__(self):
        sys_path = os.path.join(REPO, ".build")
        import sys
        if sys_path not in sys.path:
            sys.path.insert(0, sys_path)
        from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
        from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
        with open(TOPOLOGY) as f:
            topo = load_topology(yaml.safe_load(f), TOPOLOGY)
        plan = FabricPlan(topo).allocate()
        self.hosts = dict((h.name, plan.host_data(h)) for h in topo.hosts)
        self.procs = []

    @staticmethod
    def state():
        with open(STATE) as f:
            return json.load(f)

    def pid(self, node):
        return self.state()["nodes"][node]["pid"]

    @staticmethod
    def netns(node):
        return "mnl-" + node

    def nsx(self, node):
        """argv prefix running a command inside a node (all its namespaces, as the nsenter connection)."""
        return ["nsenter", "-t", str(self.pid(node)), "-m", "-u", "-n", "-p", "-C", "-r", "-w", "--"]

    def x(self, node, argv, check=True, timeout=60):
        return sh(self.nsx(node) + argv, check=check, timeout=timeout)

    def in_slot(self, host, slot, argv):
        return self.nsx(host) + ["nsenter", "--net=/run/netns/mn-slot%d" % slot, "--"] + argv

    def tor_of(self, host):
        return self.hosts[host]["tor"]

    def task_ip(self, host, fam, slot=1):
        return self.hosts[host]["slots"][slot - 1]["task_ip"][fam]

    def nics(self, host):
        return [n["name"] for n in self.hosts[host]["nics"]]

    # ---- ToR FIB -------------------------------------------------------------------------
    def tor_fib(self, tor):
        """{dst: set(next-hop gateway)} of the ToR kernel's BGP routes (both families)."""
        out = {}
        for fam in ("-4", "-6"):
            for r in json.loads(sh(["ip", "-n", self.netns(tor), fam, "-j", "route", "show", "proto", "bgp"]).stdout):
                nhs = r.get("nexthops") or [{"gateway": r.get("gateway"), "dev": r.get("dev")}]
                out[r["dst"]] = set("%s@%s" % (n.get("gateway"), n.get("dev")) for n in nhs
                                    if "linkdown" not in n.get("flags", []) and "dead" not in n.get("flags", []))
        return out

    def width(self, host, slot=1):
        fib = self.tor_fib(self.tor_of(host))
        return dict((fam, len(fib.get(self.task_ip(host, fam, slot).split("/")[0], ()))) for fam in ("ipv4", "ipv6"))

    def wait_width(self, host, want, slot=1, timeout=20.0):
        t0 = time.monotonic()
        while True:
            w = self.width(host, slot)
            if all(v == want for v in w.values()):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise AssertionError("%s slot %d: ToR FIB width %s, expected %d after %.0f s" % (host, slot, w, want, timeout))
            time.sleep(0.05)

    def tbf(self, host, rate, control_band=True):
        """tbf rate R burst 256kb latency 20ms on the host NIC and the ToR port (lab_link speed); None removes.
        control_band (default): BFD control packets (UDP 3784/4784), ARP and ICMPv6 get a strict-priority
        band inside the tbf, as a switch port's control-plane queue (or a host's fq_codel, which serves sparse
        flows first) gives them; the rest shares one fifo of the size tbf's own would have (rate x 20 ms +
        burst). Built by the lab module_utils (ops.shape), as lab_link speed.
        Without it the saturated links tail-drop BFD packets with the bulk, ~1 in 1,000, and at 50 ms x 3 a
        loaded soak flapped (docs/performance.md, "BFD's margin on this lab"). False: one fifo for all."""
        for nic in self.hosts[host]["nics"]:
            for ns, dev in ((self.netns(host), nic["name"]), (self.netns(self.tor_of(host)), nic["tor_port"])):
                if rate:
                    LO.shape(ns, dev, LO.rate_bits(rate), control_band=control_band)
                else:
                    sh(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)

    # ---- traffic ---------------------------------------------------------------------------
    def nic_bytes(self, host, direction):
        out = {}
        for li in json.loads(sh(["ip", "-n", self.netns(host), "-j", "-s", "link", "show"]).stdout):
            if li["ifname"] in self.nics(host):
                out[li["ifname"]] = li["stats64"][direction]["bytes"]
        return out

    def spawn(self, argv, stdout=subprocess.PIPE):
        p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, universal_newlines=True,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def iperf_server(self, port, interval=1.0):
        # -i: the client's interval (the server's intervals are the receiving end's view of egress)
        p = self.spawn(["nsenter", "--net=/run/netns/%s" % self.netns("mns-storage"), "--",
                        "iperf3", "-s", "-1", "--json", "-i", str(interval), "-p", str(port)],
                       stdout=subprocess.DEVNULL)   # its report reaches the client (--get-server-output)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:
            ss = sh(["nsenter", "--net=/run/netns/%s" % self.netns("mns-storage"), "--", "ss", "-Hltn",
                     "sport = :%d" % port], check=False).stdout
            if ss.strip():
                return p
            time.sleep(0.05)
        raise AssertionError("iperf3 server on port %d did not listen" % port)

    def iperf(self, host, fam, port, flows=32, seconds=6, reverse=False, interval=0.2, slot=1):
        """iperf3 between slot <slot> of host and the storage node (reverse: storage sends to the task
        IP). Returns (iperf3 JSON, per-NIC shares, total bytes) measured on the host's NIC counters."""
        srv = self.iperf_server(port, interval)
        direction = "rx" if reverse else "tx"
        b0 = self.nic_bytes(host, direction)
        dst = STO6 if fam == "ipv6" else STO4
        argv = ["iperf3", "-c", dst, "-p", str(port), "-P", str(flows), "-t", str(seconds), "-i", str(interval),
                "--json", "--get-server-output"] + (["-R"] if reverse else [])
        cli = self.spawn(self.in_slot(host, slot, argv))
        out, err = cli.communicate(timeout=seconds + 60)
        b1 = self.nic_bytes(host, direction)
        try:
            srv.wait(10)
        except subprocess.TimeoutExpired:
            srv.kill()
        try:
            res = json.loads(out)
        except ValueError:
            raise AssertionError("iperf3 from %s: %s %s" % (host, out[-500:], err[-500:]))
        assert "error" not in res, res.get("error")
        sh_, total = shares(b0, b1)
        return res, sh_, total

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 9)
                except OSError:
                    pass
                p.wait()
        self.procs = []

    # ---- state dump --------------------------------------------------------------------------
    def dump(self, host):
        """Everything the stack could leave on a host (compared before deploy / after removal)."""
        cmds = {
            "addr": ["ip", "-j", "addr", "show"],
            "route4": ["ip", "-4", "-j", "route", "show", "table", "all"],
            "route6": ["ip", "-6", "-j", "route", "show", "table", "all"],
            "rule4": ["ip", "-4", "-j", "rule", "show"],
            "rule6": ["ip", "-6", "-j", "rule", "show"],
            "proxy": ["ip", "-j", "neigh", "show", "proxy"],
            "qdisc": ["tc", "-j", "qdisc", "show"],
            "netns": ["ip", "netns", "list"],
            "links": ["ip", "-j", "-d", "link", "show"],
        }
        out = {}
        for k, argv in cmds.items():
            p = self.x(host, argv, check=False)
            out[k] = p.stdout
        for k in ("addr", "links"):
            data = json.loads(out[k] or "[]")
            for li in data:
                for drop in ("stats64", "operstate", "linkmode", "flags", "link_index", "txqlen"):
                    li.pop(drop, None)
                for a in li.get("addr_info", []):
                    a.pop("valid_life_time", None)
                    a.pop("preferred_life_time", None)
            out[k] = data
        for k in ("route4", "route6"):   # the kernel's own cache/expiry fields move
            data = json.loads(out[k] or "[]")
            for r in data:
                r.pop("expires", None)
                r.pop("flags", None)
            out[k] = sorted(data, key=json.dumps)
        out["filters"] = dict((n, self.x(host, ["tc", "-j", "filter", "show", "dev", n, "ingress"], check=False).stdout)
                              for n in self.nics(host))
        out["sysctl"] = sorted(l for l in self.x(host, ["sh", "-c", "sysctl -a 2>/dev/null"], check=False).stdout.splitlines()
                               if l.startswith(("net.ipv4.conf.", "net.ipv6.conf.", "net.ipv4.ip_forward",
                                                "net.ipv4.fib_", "net.ipv6.fib_", "net.ipv4.neigh.", "net.ipv6.neigh."))
                               and ".stable_secret" not in l and "base_reachable_time" not in l)
        out["files"] = self.x(host, ["sh", "-c", "ls -d /sys/fs/bpf/* /etc/netscale-vipinjector /opt/netscale-vipinjector "
                                     "/run/netscale-vipinjector /usr/lib/netscale-multinic /var/lib/netscale-multinic "
                                     "/etc/systemd/system/netscale-* /etc/systemd/system/*/netscale-* "
                                     "/etc/sysctl.d/90-netscale* 2>/dev/null; true"], check=False).stdout.split()
        out["units"] = self.x(host, ["systemctl", "list-units", "--all", "--plain", "--no-legend", "netscale*"],
                              check=False).stdout.split("\n")
        # Long-lived processes only: the NIC watcher runs short helpers (bpftool map dumps of the pins under
        # /sys/fs/bpf/netscale-multinic, ip) every 30 s and on events, which a dump may catch mid-run.
        out["procs"] = [l for l in self.x(host, ["ps", "-eo", "comm,args"], check=False).stdout.splitlines()
                        if ("exabgp" in l or "vipinjector" in l or "netscale" in l)
                        and l.split(None, 1)[0] not in TRANSIENT_HELPERS]
        return out


TRANSIENT_HELPERS = ("bpftool", "ip", "sysctl", "ps", "sh")


def diff_dumps(a, b):
    return dict((k, (a.get(k), b.get(k))) for k in set(a) | set(b) if a.get(k) != b.get(k))
