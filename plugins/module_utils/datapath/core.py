# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply / remove the host datapath described by a spec (see spec.py) on the current host.

Runs in the host's network (and mount) namespace. Every step compares live state first and only
acts on differences, so a second run changes nothing. `plan()` lists the differences without
touching anything (check mode); `apply()` executes them; `remove()` undoes what the state file
says was done and restores the recorded previous values.
"""

from __future__ import annotations

import json
import os
import re

from . import bpf as bpfmod
from . import localmap as LM
from . import run as R
from . import spec as S

STATE_FILE = "datapath.json"
RUNTIME_FILE = "runtime.json"


class Options(object):
    def __init__(self, state_dir="/var/lib/netscale-multinic", sysctl_file="/etc/sysctl.d/90-netscale-multinic.conf",
                 bpffs_root="/sys/fs/bpf", bpf_object=None, nic_pattern=None, manage_nic_addresses=True):
        self.state_dir = state_dir
        self.sysctl_file = sysctl_file
        self.bpffs_root = bpffs_root
        self.bpf_object = bpf_object
        self.nic_pattern = nic_pattern
        self.manage_nic_addresses = manage_nic_addresses


class Change(object):
    __slots__ = ("desc", "fn")

    def __init__(self, desc, fn):
        self.desc = desc
        self.fn = fn


def _fam(addr):
    return 6 if ":" in addr else 4


def _plen(addr):
    return 128 if ":" in addr else 32


class Datapath(object):
    def __init__(self, spec, opts=None, runner=None):
        self.spec = spec
        self.o = opts or Options()
        self.r = runner or R.Runner()
        self.bpf = bpfmod.Bpf(self.r, self.o.bpffs_root)
        self.state_path = os.path.join(self.o.state_dir, STATE_FILE)
        self.runtime_path = os.path.join(self.o.state_dir, RUNTIME_FILE)
        self.state = self._load_state()
        self._cache = {}

    # ---- state file ------------------------------------------------------------------------
    def _load_state(self):
        try:
            with open(self.state_path) as f:
                return json.load(f)
        except (IOError, OSError, ValueError):
            return None

    def _new_state(self):
        return {"version": 1, "sysctl_prev": {}, "added_nic_addresses": [], "clsact_created": [],
                "bpffs_mounted": False, "sysctl_file_prev": None, "spec": None, "bpf_version": None}

    def _save_state(self):
        if not os.path.isdir(self.o.state_dir):
            os.makedirs(self.o.state_dir, 0o755)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1, sort_keys=True)
        os.rename(tmp, self.state_path)

    def _remember_sysctl(self, key):
        """Record key's value before our first change (kept across runs)."""
        if self.state is None:
            self.state = self._new_state()
        if key not in self.state["sysctl_prev"]:
            self.state["sysctl_prev"][key] = R.sysctl_get(key)
            self._save_state()

    # ---- readers (cached per plan) ---------------------------------------------------------
    def _links(self, netns=None):
        k = ("links", netns)
        if k not in self._cache:
            if netns and not R.netns_exists(netns):
                self._cache[k] = {}
            else:
                self._cache[k] = dict((l["ifname"], l) for l in self.r.ip_json(["link", "show"], netns))
        return self._cache[k]

    def _addrs(self, netns=None):
        k = ("addrs", netns)
        if k not in self._cache:
            out = set()
            if not (netns and not R.netns_exists(netns)):
                for l in self.r.ip_json(["addr", "show"], netns):
                    for a in l.get("addr_info", []):
                        out.add((l["ifname"], "%s/%s" % (a["local"], a["prefixlen"])))
            self._cache[k] = out
        return self._cache[k]

    def _routes(self, family, table, netns=None):
        k = ("routes", family, table, netns)
        if k not in self._cache:
            out = []
            if not (netns and not R.netns_exists(netns)):
                for r in self.r.ip_json(["-%d" % family, "route", "show", "table", str(table)], netns):
                    out.append(R.norm_route(r, family))
            self._cache[k] = out
        return self._cache[k]

    def _rules(self, family):
        k = ("rules", family)
        if k not in self._cache:
            out = set()
            for r in self.r.ip_json(["-%d" % family, "rule", "show"]):
                out.add((r.get("priority"), r.get("iif"), str(r.get("table")), r.get("suppress_prefixlen")))
            self._cache[k] = out
        return self._cache[k]

    def _proxies(self):
        k = ("proxy",)
        if k not in self._cache:
            out = set()
            for fam in (4, 6):
                for n in self.r.ip_json(["-%d" % fam, "neigh", "show", "proxy"]):
                    out.add((n.get("dev"), n.get("dst")))
            self._cache[k] = out
        return self._cache[k]

    # ---- desired objects -------------------------------------------------------------------
    def host_routes(self):
        """[(family, table, dst, nexthops[(gw, dev, onlink)], src, metric)] on the host."""
        sp = self.spec
        out = []
        fams = sp["families"]
        for slot in sp["slots"]:
            for sn in slot["nics"]:
                for fam in fams:
                    if sn.get(fam):
                        f = 4 if fam == "ipv4" else 6
                        out.append((f, "main", "%s/%d" % (sn[fam], _plen(sn[fam])), [(None, sn["veth"], False)],
                                    None, None))
            for fam in fams:
                tip = slot.get("task_" + fam)
                if tip:
                    f = 4 if fam == "ipv4" else 6
                    nhs = [(sn[fam], sn["veth"], True) for sn in slot["nics"] if sn.get(fam)]
                    out.append((f, "main", "%s/%d" % (tip, _plen(tip)), nhs, None, None))
        if "ipv4" in fams and sp["slots"]:
            out.append((4, "main", "%s/32" % sp["gw4"], [(None, "lo", False)], None, None))
        for nic in sp["nics"]:
            table = sp["table_base"] + nic["index"]
            for fam in fams:
                f = 4 if fam == "ipv4" else 6
                if fam in nic:
                    out.append((f, table, "default", [(nic[fam]["gateway"], nic["name"], False)], None,
                                S.METRIC_OWN))
                nhs = [(n[fam]["gateway"], n["name"], False) for n in sp["nics"] if fam in n]
                if len(nhs) > 1:
                    out.append((f, table, "default", nhs, None, S.METRIC_FALLBACK))
        return out

    def ns_routes(self, slot):
        sp = self.spec
        out = []
        for fam in sp["families"]:
            f = 4 if fam == "ipv4" else 6
            gw = sp["gw4"] if f == 4 else sp["gw6"]
            onlink = f == 4
            nhs = [(gw, sn["ifname"], onlink) for sn in slot["nics"] if sn.get(fam)]
            if nhs:
                out.append((f, "main", "default", nhs, slot.get("task_" + fam), None))
            for sn, nic in zip(slot["nics"], sp["nics"]):
                if sn.get(fam) and fam in nic:
                    g = nic[fam]["gateway"]
                    out.append((f, "main", "%s/%d" % (g, _plen(g)), [(gw, sn["ifname"], onlink)], sn[fam], None))
        return out

    def rules(self):
        out = []
        for slot in self.spec["slots"]:
            for sn in slot["nics"]:
                for f in (4, 6):
                    out.append((f, self.spec["rule_pref"], sn["veth"], "main", 0))
                    out.append((f, self.spec["rule_pref"] + 1, sn["veth"],
                                str(self.spec["table_base"] + sn["index"]), None))
        return out

    def proxies(self):
        out = []
        nic0 = self.spec["nics"][0]["name"]
        names = dict((n["index"], n["name"]) for n in self.spec["nics"])
        for slot in self.spec["slots"]:
            for sn in slot["nics"]:
                for fam in ("ipv4", "ipv6"):
                    if sn.get(fam):
                        out.append((names[sn["index"]], sn[fam]))
            for fam in ("ipv4", "ipv6"):
                if slot.get("task_" + fam):
                    out.append((nic0, slot["task_" + fam]))
        return out

    # ---- route helpers ---------------------------------------------------------------------
    def _route_present(self, route, netns=None):
        f, table, dst, nhs, src, metric = route
        want_metric = metric if metric is not None else (0 if f == 4 else 1024)
        want_nhs = sorted(nhs, key=lambda x: (x[1] or "", x[0] or ""))
        for r in self._routes(f, table, netns):
            if r["dst"] == dst and r["metric"] == want_metric and r["type"] == "unicast":
                return r["nexthops"] == want_nhs and (src is None or r["src"] == src)
        return False

    def _route_cmd(self, route, op="replace"):
        f, table, dst, nhs, src, metric = route
        argv = ["-%d" % f, "route", op, dst, "table", str(table)]
        if metric is not None:
            argv += ["metric", str(metric)]
        if src:
            argv += ["src", src]
        if op == "del":
            return argv
        if len(nhs) == 1:
            gw, dev, onlink = nhs[0]
            argv += (["via", gw] if gw else []) + ["dev", dev] + (["onlink"] if onlink else [])
        else:
            for gw, dev, onlink in nhs:
                argv += ["nexthop"] + (["via", gw] if gw else []) + ["dev", dev] + (["onlink"] if onlink else [])
        return argv

    @staticmethod
    def _route_desc(route, where):
        f, table, dst, nhs, src, metric = route
        via = ", ".join("%s%s" % (("via %s " % gw) if gw else "", "dev " + dev) for gw, dev, dummy in nhs)
        where_text = "" if where == "host" else " in " + where
        src_text = (" src %s" % src) if src else ""
        metric_text = (" metric %d" % metric) if metric is not None else ""
        return "route%s %s table %s %s%s%s" % (where_text, dst, table, via, src_text, metric_text)

    # ---- validation --------------------------------------------------------------------------
    def validate(self):
        links = [n for n in self._links() if n != "lo" and not re.match(r"^ms\d+-", n)]
        S.check_nics(self.spec, links, self.o.nic_pattern)

    # ---- plan: base (everything but eBPF) ----------------------------------------------------
    def plan_base(self):
        sp = self.spec
        ch = []
        # 1. global sysctls, persisted
        content = "# Managed by netscale.multinic (host_datapath). Removed on state=absent.\n" + \
            "".join("%s = %s\n" % kv for kv in S.HOST_SYSCTLS if R.sysctl_get(kv[0]) is not None)
        try:
            with open(self.o.sysctl_file) as f:
                cur = f.read()
        except (IOError, OSError):
            cur = None
        if cur != content:
            ch.append(Change("write %s" % self.o.sysctl_file, lambda c=content, prev=cur: self._write_sysctl_file(c, prev)))
        for key, val in S.HOST_SYSCTLS:
            if R.sysctl_get(key) not in (None, val):  # None: not in this namespace (neigh.default)
                ch.append(Change("sysctl %s=%s (was %s)" % (key, val, R.sysctl_get(key)),
                                 lambda k=key, v=val, p=R.sysctl_get(key): self._set_sysctl(k, v, p)))
        for nic in sp["nics"]:
            for tmpl, val in S.NIC_SYSCTLS:
                key = tmpl.format(nic=nic["name"])
                if R.sysctl_get(key) not in (None, val):
                    ch.append(Change("sysctl %s=%s (was %s)" % (key, val, R.sysctl_get(key)),
                                     lambda k=key, v=val, p=R.sysctl_get(key): self._set_sysctl(k, v, p)))
        # 2. NIC addresses
        for nic in sp["nics"]:
            for fam in ("ipv4", "ipv6"):
                if fam not in nic:
                    continue
                cidr = "%s/%d" % (nic[fam]["address"], nic[fam]["prefixlen"])
                if (nic["name"], cidr) not in self._addrs():
                    if not self.o.manage_nic_addresses:
                        continue
                    ch.append(Change("address %s on %s" % (cidr, nic["name"]),
                                     lambda d=nic["name"], c=cidr: self._add_nic_addr(d, c)))
        # 3. workloads
        for slot in sp["slots"]:
            ns = slot["netns"]
            fresh = not R.netns_exists(ns)
            if fresh:
                ch.append(Change("netns %s" % ns, lambda n=ns: self._add_netns(n)))
            if fresh or "UP" not in self._links(ns).get("lo", {}).get("flags", []):
                ch.append(Change("link lo up in %s" % ns, lambda n=ns: self.r.ip(["link", "set", "lo", "up"], n)))
            cur = {} if fresh else R.netns_sysctl_get(self.r, ns, [k for k, dummy in S.NETNS_SYSCTLS])
            pairs = [(k, v) for k, v in S.NETNS_SYSCTLS if cur.get(k) != v]
            if pairs:
                ch.append(Change("sysctls in %s: %s" % (ns, " ".join("%s=%s" % p for p in pairs)),
                                 lambda n=ns, p=pairs: R.netns_sysctl_set(self.r, n, p)))
            for sn in slot["nics"]:
                v = sn["veth"]
                hl = self._links().get(v)
                cl = self._links(ns).get(sn["ifname"])
                if not hl or not cl:
                    if hl:
                        ch.append(Change("delete stale veth %s" % v, lambda d=v: self.r.ip(["link", "del", d])))
                    ch.append(Change("veth %s <-> %s:%s" % (v, ns, sn["ifname"]),
                                     lambda d=v, n=ns, i=sn["ifname"]: self.r.ip(
                                         ["link", "add", d, "type", "veth", "peer", "name", i, "netns", n])))
                cur = dict((t.format(veth=v), R.sysctl_get(t.format(veth=v))) for t, dummy in S.VETH_SYSCTLS)
                for t, val in S.VETH_SYSCTLS:
                    if not hl or cur[t.format(veth=v)] != val:
                        ch.append(Change("sysctl %s=%s" % (t.format(veth=v), val),
                                         lambda k=t.format(veth=v), x=val: R.sysctl_set(k, x)))
                if not hl or "UP" not in hl.get("flags", []):
                    ch.append(Change("link %s up" % v, lambda d=v: self.r.ip(["link", "set", d, "up"])))
                if not cl or "UP" not in cl.get("flags", []):
                    ch.append(Change("link %s up in %s" % (sn["ifname"], ns),
                                     lambda d=sn["ifname"], n=ns: self.r.ip(["link", "set", d, "up"], n)))
                if "ipv6" in sp["families"] and (v, sp["gw6"] + "/64") not in self._addrs():
                    ch.append(Change("address %s/64 on %s" % (sp["gw6"], v),
                                     lambda d=v: self.r.ip(["-6", "addr", "replace", sp["gw6"] + "/64", "dev", d, "nodad"])))
                for fam in ("ipv4", "ipv6"):
                    if sn.get(fam):
                        cidr = "%s/%d" % (sn[fam], _plen(sn[fam]))
                        if (sn["ifname"], cidr) not in self._addrs(ns):
                            ch.append(Change("address %s on %s in %s" % (cidr, sn["ifname"], ns),
                                             lambda d=sn["ifname"], c=cidr, n=ns: self.r.ip(
                                                 ["addr", "replace", c, "dev", d] + (["nodad"] if ":" in c else []), n)))
            for fam in ("ipv4", "ipv6"):
                tip = slot.get("task_" + fam)
                if tip:
                    cidr = "%s/%d" % (tip, _plen(tip))
                    if ("lo", cidr) not in self._addrs(ns):
                        ch.append(Change("task IP %s on lo in %s" % (cidr, ns),
                                         lambda c=cidr, n=ns: self.r.ip(
                                             ["addr", "replace", c, "dev", "lo"] + (["nodad"] if ":" in c else []), n)))
            for route in self.ns_routes(slot):
                if fresh or not self._route_present(route, ns):
                    ch.append(Change(self._route_desc(route, ns), lambda rt=route, n=ns: self.r.ip(self._route_cmd(rt), n)))
        # 4. host routes, proxy entries, policy rules
        for route in self.host_routes():
            if not self._route_present(route):
                ch.append(Change(self._route_desc(route, "host"), lambda rt=route: self.r.ip(self._route_cmd(rt))))
        have = self._proxies()
        for dev, addr in self.proxies():
            if (dev, addr) not in have:
                ch.append(Change("proxy %s %s on %s" % ("ND" if ":" in addr else "ARP", addr, dev),
                                 lambda d=dev, a=addr: self.r.ip(["neigh", "replace", "proxy", a, "dev", d])))
        for f, pref, iif, table, sup in self.rules():
            if (pref, iif, table, sup) not in self._rules(f):
                argv = ["-%d" % f, "rule", "add", "pref", str(pref), "iif", iif, "lookup", table]
                if sup is not None:
                    argv += ["suppress_prefixlength", str(sup)]
                ch.append(Change("rule %s" % " ".join(argv[3:]), lambda a=argv: self.r.ip(a)))
        # 5. runtime file for the watcher
        rt = self.runtime()
        try:
            with open(self.runtime_path) as f:
                cur_rt = json.load(f)
        except (IOError, OSError, ValueError):
            cur_rt = None
        if cur_rt != rt:
            ch.append(Change("write %s" % self.runtime_path, lambda x=rt: self._write_json(self.runtime_path, x)))
        return ch

    # ---- plan: eBPF --------------------------------------------------------------------------
    def plan_bpf(self, check_mode=False):
        """Changes to reach the desired program state (attached in ebpf mode, absent otherwise)."""
        ch = []
        devs = [n["name"] for n in self.spec["nics"]] + \
            [sn["veth"] for s in self.spec["slots"] for sn in s["nics"]]
        if not self.spec["ebpf"]:
            return self._plan_bpf_off(devs)
        obj = self.o.bpf_object
        if check_mode and obj and not os.path.exists(obj):
            # check mode on a fresh host: the role's copy of the object was only simulated
            return [Change("load %s (copied by the role; not on the host yet)" % obj, None)] + \
                [Change("attach %s on %s ingress (pref %d)" % (
                    bpfmod.PROG_NIC if dev in [n["name"] for n in self.spec["nics"]] else bpfmod.PROG_VETH,
                    dev, bpfmod.TC_PREF), None) for dev in devs]
        if not obj or not os.path.exists(obj):
            raise bpfmod.BpfError("bpf_object %r not found on the host. Fix: let the role copy the compiled "
                                  "object (host_datapath_bpf_object) or set host_datapath_ebpf: false." % obj)
        version = bpfmod.sha256_file(obj)[:12]
        if not self.bpf.bpffs_mounted():
            ch.append(Change("mount bpffs at %s" % self.o.bpffs_root, self._mount_bpffs))
        loaded = self.bpf.bpffs_mounted() and self.bpf.loaded(version)
        if not loaded:
            ch.append(Change("load %s as version %s" % (obj, version), lambda: self.bpf.load(obj, version)))
        ch.append(Change("bpf maps", lambda: self._sync_maps(version)) if not loaded else None)
        if loaded:
            try:
                desired = bpfmod.desired_maps(self.spec, self._links(),
                                              dict((s["netns"], self._links(s["netns"])) for s in self.spec["slots"]),
                                              self._local(version))
                ops = self.bpf.map_diff(version, desired)
            except KeyError:
                ops = ["unknown"]
            if ops:
                ch.append(Change("bpf map entries (%d)" % len(ops), lambda: self._sync_maps(version)))
            tags = {}
            for prog in (bpfmod.PROG_NIC, bpfmod.PROG_VETH):
                info = self.bpf.prog_info(self.bpf.prog_pin(version, prog)) or {}
                tags[prog] = (info.get("id"), info.get("tag"))
        ch = [c for c in ch if c]
        for dev in devs:
            prog = bpfmod.PROG_NIC if dev in [n["name"] for n in self.spec["nics"]] else bpfmod.PROG_VETH
            exists = dev in self._links()
            if not exists or not self.bpf.has_clsact(dev):
                ch.append(Change("clsact on %s" % dev, lambda d=dev: self._add_clsact(d)))
            if not loaded or not exists or self.bpf.attached(dev) != tags[prog]:
                ch.append(Change("attach %s on %s ingress (pref %d)" % (prog, dev, bpfmod.TC_PREF),
                                 lambda d=dev, p=prog: self.bpf.attach(d, self.bpf.prog_pin(version, p))))
        for old in self.bpf.versions() if self.bpf.bpffs_mounted() else []:
            if old != version:
                ch.append(Change("unpin old version %s" % old, lambda v=old: self.bpf.remove_version(v)))
        if not self.state or self.state.get("bpf_version") != version:
            ch.append(Change("record bpf version %s" % version, lambda v=version: self._record("bpf_version", v)))
        return ch

    def _plan_bpf_off(self, devs):
        ch = []
        for dev in devs:
            if dev in self._links() and self.bpf.attached(dev):
                ch.append(Change("detach program from %s" % dev, lambda d=dev: self.bpf.detach(d)))
        for dev in (self.state or {}).get("clsact_created", []):
            if dev in self._links() and self.bpf.has_clsact(dev):
                ch.append(Change("delete clsact on %s (created by this role)" % dev,
                                 lambda d=dev: self._del_clsact(d)))
        if os.path.isdir(self.bpf.base):
            ch.append(Change("unpin %s" % self.bpf.base, self.bpf.remove_base))
        if (self.state or {}).get("bpf_version"):
            ch.append(Change("record bpf version none", lambda: self._record("bpf_version", None)))
        return ch

    # ---- actions -----------------------------------------------------------------------------
    def collateral(self):
        """Per-interface sysctls that writing a conf.all / conf.default key propagates to."""
        out = {}
        devs = ["lo"] + [n["name"] for n in self.spec["nics"]]
        for key, dummy in S.HOST_SYSCTLS:
            for scope in (".conf.all.", ".conf.default."):
                if scope in key:
                    for d in devs:
                        k = key.replace(scope, ".conf.%s." % d)
                        out[k] = R.sysctl_get(k)
        return out

    def _ensure_state(self, collateral=None):
        if self.state is None:
            self.state = self._new_state()
        if collateral is not None and "sysctl_collateral" not in self.state:
            self.state["sysctl_collateral"] = collateral
        self.state["spec"] = self.spec
        self._save_state()

    def _record(self, key, value):
        self.state[key] = value
        self._save_state()

    def _write_json(self, path, data):
        d = os.path.dirname(path)
        if not os.path.isdir(d):
            os.makedirs(d)
        with open(path + ".tmp", "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.rename(path + ".tmp", path)

    def _write_sysctl_file(self, content, prev):
        if self.state.get("sysctl_file_prev") is None and prev is not None and "netscale.multinic" not in prev:
            self.state["sysctl_file_prev"] = prev
            self._save_state()
        d = os.path.dirname(self.o.sysctl_file)
        if not os.path.isdir(d):
            os.makedirs(d)
        with open(self.o.sysctl_file, "w") as f:
            f.write(content)

    def _set_sysctl(self, key, value, prev=None):
        if key not in self.state["sysctl_prev"]:
            self.state["sysctl_prev"][key] = prev if prev is not None else R.sysctl_get(key)
            self._save_state()
        R.sysctl_set(key, value)
        self.r.log.append("sysctl %s=%s" % (key, value))

    def _add_nic_addr(self, dev, cidr):
        self.state["added_nic_addresses"].append([dev, cidr])
        self._save_state()
        self.r.ip(["addr", "add", cidr, "dev", dev] + (["nodad"] if ":" in cidr else []))

    def _add_netns(self, name):
        self.r.run(["ip", "netns", "add", name])

    def _mount_bpffs(self):
        self.bpf.mount_bpffs()
        self._record("bpffs_mounted", True)

    def _add_clsact(self, dev):
        if dev in [n["name"] for n in self.spec["nics"]]:
            if dev not in self.state["clsact_created"]:
                self.state["clsact_created"].append(dev)
                self._save_state()
        self.bpf.add_clsact(dev)

    def _del_clsact(self, dev):
        if self.bpf.others_on(dev) == 0:
            self.bpf.del_clsact(dev)
        self.state["clsact_created"].remove(dev)
        self._save_state()

    def _sync_maps(self, version):
        self._cache = {}
        desired = bpfmod.desired_maps(self.spec, self._links(),
                                      dict((s["netns"], self._links(s["netns"])) for s in self.spec["slots"]),
                                      self._local(version))
        self.bpf.apply_map_ops(version, bpfmod.order_ops(self.bpf.map_diff(version, desired), desired))

    def _nic_names(self):
        return [n["name"] for n in self.spec["nics"]]

    def _veth_names(self):
        return [sn["veth"] for s in self.spec["slots"] for sn in s["nics"]]

    def _local(self, version):
        """Host-local map contents from the live routes/rules (None: object without the maps)."""
        if not self.bpf.has_map(version, LM.MAPS[0]):
            return None
        return LM.compute(self.r.ip_json, self._nic_names(), self._veth_names())

    # ---- runtime file (read by the watcher) -----------------------------------------------
    def runtime(self):
        """Idempotent `ip` commands per device, re-run by the watcher when a device comes back up."""
        per_dev = {}
        names = dict((n["index"], n["name"]) for n in self.spec["nics"])
        for dev, addr in self.proxies():
            per_dev.setdefault(dev, []).append(["neigh", "replace", "proxy", addr, "dev", dev])
        for route in self.host_routes():
            if route[1] != "main":
                dev = names[route[1] - self.spec["table_base"]]
                per_dev.setdefault(dev, []).append(self._route_cmd(route))
        for nic in self.spec["nics"]:
            for tmpl, val in S.NIC_SYSCTLS:
                per_dev.setdefault(nic["name"], []).append(["sysctl", tmpl.format(nic=nic["name"]), val])
        for slot in self.spec["slots"]:
            for sn in slot["nics"]:
                if "ipv6" in self.spec["families"]:
                    per_dev.setdefault(sn["veth"], []).append(["-6", "addr", "replace", self.spec["gw6"] + "/64",
                                                               "dev", sn["veth"], "nodad"])
                for route in self.host_routes():
                    if route[1] == "main" and any(nh[1] == sn["veth"] for nh in route[3]):
                        per_dev.setdefault(sn["veth"], []).append(self._route_cmd(route))
        return {"host": self.spec["host"], "devices": per_dev,
                "bpf": {"base": self.bpf.base, "nics": self._nic_names(), "veths": self._veth_names()}}

    # ---- entry points ------------------------------------------------------------------------
    def plan(self):
        self._cache = {}
        self.validate()
        return self.plan_base() + self.plan_bpf()

    def apply(self, check_mode=False):
        """Returns (changes: [desc]). In check mode nothing is touched."""
        self._cache = {}
        self.validate()
        if self.spec["ebpf"] and self.o.bpf_object is None:
            raise bpfmod.BpfError("ebpf mode needs bpf_object")
        collateral = self.collateral()
        base = self.plan_base()
        done = [c.desc for c in base]
        if check_mode:
            return done + [c.desc for c in self.plan_bpf(check_mode=True)]
        if base or self.state is None or self.state.get("spec") != self.spec:
            self._ensure_state(collateral)
        for c in base:
            c.fn()
        self._cache = {}
        b = self.plan_bpf()
        for c in b:
            c.fn()
        return done + [c.desc for c in b]

    def remove(self, check_mode=False):
        """Undo everything recorded in the state file (or implied by the spec). Returns [desc]."""
        self._cache = {}
        st = self.state or self._new_state()
        spec = st.get("spec") or self.spec
        self.spec = spec
        ch = []
        devs = [n["name"] for n in spec["nics"]]
        for dev in devs:
            if dev in self._links() and self.bpf.attached(dev):
                ch.append(Change("detach program from %s" % dev, lambda d=dev: self.bpf.detach(d)))
        for dev in st.get("clsact_created", []):
            if dev in self._links() and self.bpf.has_clsact(dev):
                ch.append(Change("delete clsact on %s (created by this role)" % dev,
                                 lambda d=dev: (self.bpf.others_on(d) == 0 and self.bpf.del_clsact(d))))
        for f, pref, iif, table, sup in self.rules():
            if (pref, iif, table, sup) in self._rules(f):
                argv = ["-%d" % f, "rule", "del", "pref", str(pref), "iif", iif, "lookup", table]
                ch.append(Change("delete rule %s" % " ".join(argv[3:]), lambda a=argv: self.r.ip(a, check=False)))
        have = self._proxies()
        for dev, addr in self.proxies():
            if (dev, addr) in have:
                ch.append(Change("delete proxy %s on %s" % (addr, dev),
                                 lambda d=dev, a=addr: self.r.ip(["neigh", "del", "proxy", a, "dev", d], check=False)))
        for route in self.host_routes():
            f, table, dst, dummy, dummy, metric = route
            want_metric = metric if metric is not None else (0 if f == 4 else 1024)
            if any(r["dst"] == dst and r["metric"] == want_metric for r in self._routes(f, table)):
                ch.append(Change("delete " + self._route_desc(route, "host"),
                                 lambda rt=route: self.r.ip(self._route_cmd(rt, "del"), check=False)))
        for slot in spec["slots"]:
            if R.netns_exists(slot["netns"]):
                ch.append(Change("delete netns %s" % slot["netns"],
                                 lambda n=slot["netns"]: self.r.run(["ip", "netns", "del", n])))
            for sn in slot["nics"]:
                if sn["veth"] in self._links():
                    ch.append(Change("delete veth %s" % sn["veth"],
                                     lambda d=sn["veth"]: self.r.ip(["link", "del", d], check=False)))
        for dev, cidr in st.get("added_nic_addresses", []):
            if (dev, cidr) in self._addrs():
                ch.append(Change("delete address %s on %s" % (cidr, dev),
                                 lambda d=dev, c=cidr: self.r.ip(["addr", "del", c, "dev", d], check=False)))
        if os.path.isdir(self.bpf.base):
            ch.append(Change("unpin %s" % self.bpf.base, self.bpf.remove_base))
        if st.get("bpffs_mounted") and self.bpf.bpffs_mounted():
            ch.append(Change("unmount bpffs %s (mounted by this role)" % self.o.bpffs_root,
                             lambda: self.r.run(["umount", self.o.bpffs_root], check=False)))
        for key, prev in sorted(st.get("sysctl_prev", {}).items()):
            if prev is not None and R.sysctl_get(key) not in (None, prev):
                ch.append(Change("sysctl %s=%s (restore)" % (key, prev), lambda k=key, v=prev: R.sysctl_set(k, v)))
        for key, prev in sorted(st.get("sysctl_collateral", {}).items()):
            ch.append(Change(None, lambda k=key, v=prev: self._restore_collateral(k, v)))
        if os.path.exists(self.o.sysctl_file):
            prev = st.get("sysctl_file_prev")
            ch.append(Change("%s %s" % ("restore" if prev else "delete", self.o.sysctl_file),
                             lambda p=prev: self._restore_sysctl_file(p)))
        for path in (self.runtime_path, self.state_path):
            if os.path.exists(path):
                ch.append(Change("delete %s" % path, lambda p=path: os.unlink(p)))
        if not check_mode:
            for c in ch:
                c.fn()
        return [c.desc for c in ch if c.desc]

    def _restore_collateral(self, key, value):
        if value is not None and R.sysctl_get(key) not in (None, value):
            R.sysctl_set(key, value)
            self.r.log.append("sysctl %s=%s (restore)" % (key, value))

    def _restore_sysctl_file(self, prev):
        if prev:
            with open(self.o.sysctl_file, "w") as f:
                f.write(prev)
        else:
            os.unlink(self.o.sysctl_file)
