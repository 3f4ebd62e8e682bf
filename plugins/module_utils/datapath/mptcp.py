# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MPTCP mode of the host datapath (spec field ``mptcp``): one MPTCP subflow per NIC.

Per slot namespace, when on:

* ``net.mptcp.enabled=1`` and the in-kernel path manager (``net.mptcp.pm_type=0``);
* one MPTCP endpoint per container address (per NIC and family), flag ``subflow``, on the NIC's
  veth end in the namespace;
* limits ``subflows`` = NIC count, ``add_addr_accepted`` 0;
* per container address a source rule (``from ADDR lookup 1100+k``) and that table's default route
  over veth k, so the subflow from NIC k's address leaves on veth k (without it the namespace's
  ECMP default route would hash it onto any veth).

On the host nothing more is needed in either mode: the eBPF veth program sends what arrives on veth
k out of NIC k (``mn_veth.nic``), and kernel forwarding looks up NIC k's table for everything
arriving on veth k (``iif`` rules). The way back is the container address's own subnet, which the
ToR routes to NIC k. The first subflow is the application's own connection (task IP, ECMP-hashed
onto some NIC, as plain TCP); the endpoints add one subflow per NIC next to it.

Why ``subflow`` and not ``fullmesh``: ``subflow`` creates exactly one subflow per local endpoint, to
the peer's address of the connection, so the count (= NIC count) and the NIC of each subflow depend
on this host alone. ``fullmesh`` creates one per local endpoint and per address the peer
announces (N x M, cut off by the limit in arrival order), so which NICs carry subflows would
depend on the peer. For the same reason ``add_addr_accepted`` is 0: the peer's announcements
(``signal``) do not take subflow slots away from the per-NIC ones (a peer with several NICs spreads
its own side). The kernel holds at most 8 endpoints and 8 subflows per namespace: a slot needs NIC
count x address families endpoints (a 4-NIC dual-stack host: 8).

Spec field ``mptcp_families`` (None: every planned family) limits all of the above to the listed
families: a 4-NIC dual-stack host with ``["ipv4"]`` gets 4 subflow endpoints and, in the room left,
the ``backup`` endpoint of the task IPv4 (5 of 8). Connections of the other family get no extra
subflow (one path, ECMP-hashed, like plain TCP). Switching families on a live slot converges exactly:
endpoints of the slot's own addresses that are no longer wanted, their rules and the routes of the
per-NIC tables of a family no longer used are deleted first, then what is missing is added (the
other order would pass through more than 8 endpoints, which the kernel refuses with ERANGE).

Turned off (spec ``mptcp`` false) on a present datapath: endpoints of the slot's addresses, the
source rules and their tables are deleted and the limits and sysctls recorded before the first
change (state record ``mptcp``) are restored. ``state=absent`` deletes the namespaces and with them
everything here.
"""

from __future__ import annotations

import json
import re

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import desired
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import run as datapath_run
from ansible_collections.netscale.multinic.plugins.module_utils.datapath.spec import DatapathInputError

# Inside the slot namespace (the datapath's own): rule priority and the per-NIC tables.
RULE_PREF = 1000
TABLE_BASE = 1100
# Kernel limits (net/mptcp/pm_kernel.c, MPTCP_PM_ADDR_MAX): endpoints per namespace, subflows limit.
MAX_ENDPOINTS = 8
MAX_SUBFLOWS = 8
ENDPOINT_FLAGS = ("subflow",)
BACKUP_FLAGS = ("backup",)
ADD_ADDR_ACCEPTED = 0
# (key, value, required): a key the kernel lacks is an error when required (no MPTCP), else skipped
# (pm_type appeared in 5.19; older kernels have the in-kernel path manager only).
NETNS_SYSCTLS = (
    ("net.mptcp.enabled", "1", True),
    ("net.mptcp.pm_type", "0", False),
)
STATE_KEY = "mptcp"


def check_spec(host_name, nic_count, family_count):
    """Refuse (before any change) a host whose slots need more endpoints or subflows than the kernel holds.

    family_count: the families MPTCP serves (``families(spec)``), not necessarily all planned ones."""
    fix = ("Fix: deploy this host with host_datapath_mptcp: false, or plan it with fewer NICs, or limit "
           "MPTCP to one address family (host_datapath_mptcp_families: [ipv4]).")
    if nic_count > MAX_SUBFLOWS:
        raise DatapathInputError("multinic_host.nics: host %s has %d NICs; MPTCP mode allows at most %d subflows "
                                 "per connection (kernel limit). %s" % (host_name, nic_count, MAX_SUBFLOWS, fix))
    if nic_count * family_count > MAX_ENDPOINTS:
        raise DatapathInputError("multinic_host.nics: host %s needs %d NICs x %d address families = %d MPTCP "
                                 "endpoints per slot; the kernel holds at most %d per namespace. %s"
                                 % (host_name, nic_count, family_count, nic_count * family_count,
                                    MAX_ENDPOINTS, fix))


# ---- desired objects (pure) -------------------------------------------------------------------
def _fam(name):
    return 4 if name == "ipv4" else 6


def families(spec):
    """The families MPTCP serves: the spec's ``mptcp_families``, or every planned family when unset."""
    return spec.get("mptcp_families") or spec["families"]


def endpoints(spec, slot, fams=None):
    """[(address, ifname)]: one endpoint per container address (of the MPTCP families, or of ``fams``)."""
    fams = families(spec) if fams is None else fams
    return [(sn[fam], sn["ifname"]) for sn in slot["nics"] for fam in fams if sn.get(fam)]


def own_addresses(spec, slot):
    """Every address of the slot an endpoint of ours may have: container addresses and task IPs of
    every planned family (what a family switch or turning MPTCP off deletes when not wanted)."""
    return set(a for a, dummy in endpoints(spec, slot, spec["families"])) | \
        set(slot["task_" + fam] for fam in spec["families"] if slot.get("task_" + fam))


def backup_endpoints(spec, slot):
    """[task IP]: a ``backup`` endpoint (no ``subflow`` flag) per task IP, when the namespace has room
    for them beside the per-NIC ones (at most MAX_ENDPOINTS in all), else [].

    The first subflow of a connection is the application's own, from the task IP, and lands on the NIC
    the workload's (egress) or the ToR's (ingress) hash picks, beside that NIC's pinned subflow. Marked
    backup (MP_PRIO to the peer), neither end's scheduler sends data on it while a per-NIC subflow
    works: each NIC then carries exactly one data subflow. Measured (bench/mptcp_bench.py, 3 s runs): one
    connection ingress median 3.65x -> 3.80x one NIC, worst run 3.46x -> 3.57x (docs/performance.md)."""
    tips = [slot["task_" + fam] for fam in families(spec) if slot.get("task_" + fam)]
    if len(endpoints(spec, slot)) + len(tips) > MAX_ENDPOINTS:
        return []
    return tips


def table_of(slot_nic):
    return TABLE_BASE + slot_nic["index"]


def rules(spec, slot):
    """[(family, pref, "addr/len", table)]: the container address of NIC k looks up table k."""
    return [(_fam(fam), RULE_PREF, "%s/%d" % (sn[fam], desired.host_prefix_length(sn[fam])), str(table_of(sn)))
            for sn in slot["nics"] for fam in families(spec) if sn.get(fam)]


def routes(spec, slot):
    """Per NIC and family the default route of its table: the link-local gateway over veth k."""
    out = []
    for sn in slot["nics"]:
        for fam in families(spec):
            if sn.get(fam):
                f = _fam(fam)
                gw = spec["gw4"] if f == 4 else spec["gw6"]
                out.append((f, table_of(sn), "default", [(gw, sn["ifname"], f == 4)], sn[fam], None))
    return out


def limits(spec):
    return {"subflows": len(spec["nics"]), "add_addr_accepted": ADD_ADDR_ACCEPTED}


# ---- live state of a slot namespace ------------------------------------------------------------
def parse_limits(text):
    """``ip mptcp limits show`` (text: iproute2 has no JSON for it) -> {name: int}."""
    return dict((k, int(v)) for k, v in re.findall(r"(add_addr_accepted|subflows)\s+(\d+)", text or ""))


def live_limits(runner, netns):
    return parse_limits(runner.read(["ip", "-n", netns, "mptcp", "limits", "show"], check=False).stdout)


def live_endpoints(runner, netns):
    """{address: {"id", "dev", "flags"}} of the namespace's MPTCP endpoints."""
    p = runner.read(["ip", "-j", "-n", netns, "mptcp", "endpoint", "show"], check=False)
    try:
        items = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else []
    except ValueError:
        items = []
    out = {}
    for e in items:
        flags = tuple(sorted(k for k in ("signal", "subflow", "backup", "fullmesh") if e.get(k)))
        out[e.get("address")] = {"id": e.get("id"), "dev": e.get("dev"), "flags": flags}
    return out


def live_rules(runner, netns):
    """{(family, pref, "src/len", table)} of the namespace's rules at RULE_PREF."""
    out = set()
    for f in (4, 6):
        for r in runner.ip_json(["-%d" % f, "rule", "show"], netns):
            if r.get("priority") == RULE_PREF and r.get("src"):
                out.add((f, RULE_PREF, "%s/%s" % (r["src"], r.get("srclen", 32 if f == 4 else 128)),
                         str(r.get("table"))))
    return out


def live_sysctls(runner, netns):
    """{key: value or None} of NETNS_SYSCTLS inside ``netns`` (None: the kernel has no such key)."""
    keys = [k for k, dummy, dummy in NETNS_SYSCTLS]
    p = runner.read(["nsenter", "--net=%s/%s" % (datapath_run.NETNS_DIR, netns), "sysctl", "-e"] + keys,
                    check=False)
    found = dict(re.findall(r"^(\S+)\s*=\s*(\S*)\s*$", p.stdout or "", re.M))
    return dict((k, found.get(k)) for k in keys)


# ---- plan --------------------------------------------------------------------------------------
class SlotMptcp(object):
    """The MPTCP part of one slot: ``plan(fresh)`` returns the core's Change objects."""

    def __init__(self, dp, slot, change_cls):
        self.dp = dp
        self.spec = dp.spec
        self.slot = slot
        self.netns = slot["netns"]
        self.runner = dp.runner
        self.change = change_cls

    def plan(self, fresh):
        if self.spec.get("mptcp"):
            return self._plan_on(fresh)
        if fresh:
            return []
        return self._plan_off()

    # -- on ---------------------------------------------------------------------------------------
    def _plan_on(self, fresh):
        check_spec(self.spec["host"], len(self.spec["nics"]), len(families(self.spec)))
        if datapath_run.sysctl_get("net.mptcp.enabled") is None:
            raise DatapathInputError(
                "mptcp: the kernel of host %s has no MPTCP (no net.mptcp.enabled). Fix: use a kernel >= 5.6 "
                "built with CONFIG_MPTCP=y, or set host_datapath_mptcp: false." % self.spec["host"])
        ns = self.netns
        out = []
        cur = {} if fresh else live_sysctls(self.runner, ns)
        pairs = [(k, v) for k, v, required in NETNS_SYSCTLS
                 if (fresh or cur.get(k) is not None or required) and cur.get(k) != v]
        if pairs:
            out.append(self.change("mptcp sysctls in %s: %s" % (ns, " ".join("%s=%s" % p for p in pairs)),
                                   lambda p=pairs: self._set_sysctls(p)))
        want = limits(self.spec)
        have = {} if fresh else live_limits(self.runner, ns)
        if have != want:
            out.append(self.change("mptcp limits in %s: subflows %d add_addr_accepted %d%s" % (
                ns, want["subflows"], want["add_addr_accepted"],
                (" (was subflows %s add_addr_accepted %s)" % (have.get("subflows"), have.get("add_addr_accepted")))
                if have else ""), lambda w=want: self._set_limits(w)))
        # deletions first (a family switch), so the namespace never holds more than the kernel's 8 endpoints
        eps = {} if fresh else live_endpoints(self.runner, ns)
        wanted_eps = [(addr, dev, ENDPOINT_FLAGS) for addr, dev in endpoints(self.spec, self.slot)] + \
            [(addr, None, BACKUP_FLAGS) for addr in backup_endpoints(self.spec, self.slot)]
        wanted_addrs = set(addr for addr, dummy, dummy in wanted_eps)
        ours = own_addresses(self.spec, self.slot)
        for addr, e in sorted((a, e) for a, e in eps.items() if a in ours and a not in wanted_addrs):
            out.append(self.change("delete mptcp endpoint %s (id %s) in %s: not wanted" % (addr, e["id"], ns),
                                   lambda i=e["id"]: self._delete_endpoint(i)))
        live = set() if fresh else live_rules(self.runner, ns)
        wanted = rules(self.spec, self.slot)
        for rule in sorted(live - set(wanted)):
            out.append(self.change("delete stale rule in %s: from %s lookup %s pref %d" % (ns, rule[2], rule[3], rule[1]),
                                   lambda r=rule: self.runner.ip(_rule_argv(r, "del"), ns, check=False)))
        wanted_routes = routes(self.spec, self.slot)
        used = set((r[0], r[1]) for r in wanted_routes)
        for f in ([] if fresh else (4, 6)):
            for table in sorted(set(table_of(sn) for sn in self.slot["nics"])):
                if (f, table) not in used and self.dp.live.routes(f, table, ns):
                    out.append(self.change("flush table %d (IPv%d) in %s: family not used" % (table, f, ns),
                                           lambda t=table, x=f: self.runner.ip(
                                               ["-%d" % x, "route", "flush", "table", str(t)], ns, check=False)))
        # then what is missing or differs
        for addr, dev, flags in wanted_eps:
            cur_ep = eps.get(addr)
            if cur_ep and cur_ep["dev"] == dev and cur_ep["flags"] == flags:
                continue
            desc = "mptcp endpoint %s%s %s in %s" % (addr, " dev %s" % dev if dev else "", " ".join(flags), ns)
            if cur_ep:
                desc += " (replaces id %s dev %s %s)" % (cur_ep["id"], cur_ep["dev"], " ".join(cur_ep["flags"]))
            out.append(self.change(desc, lambda a=addr, d=dev, f=flags, old=cur_ep: self._set_endpoint(a, d, old, f)))
        for rule in wanted:
            if rule not in live:
                out.append(self.change("rule in %s: from %s lookup %s pref %d" % (ns, rule[2], rule[3], rule[1]),
                                       lambda r=rule: self.runner.ip(_rule_argv(r, "add"), ns)))
        for route in wanted_routes:
            if fresh or not self.dp.live.route_present(route, ns):
                out.append(self.change(desired.route_description(route, ns),
                                       lambda rt=route: self.runner.ip(desired.route_command(rt), ns)))
        return out

    # -- off --------------------------------------------------------------------------------------
    def _plan_off(self):
        ns = self.netns
        out = []
        eps = live_endpoints(self.runner, ns)
        ours = own_addresses(self.spec, self.slot)
        found_eps = sorted((addr, e) for addr, e in eps.items() if addr in ours)
        found_rules = sorted(live_rules(self.runner, ns))
        record = self._record().get(ns)
        if not found_eps and not found_rules and not record:
            return out
        for addr, e in found_eps:
            out.append(self.change("delete mptcp endpoint %s (id %s) in %s" % (addr, e["id"], ns),
                                   lambda i=e["id"]: self._delete_endpoint(i)))
        for rule in found_rules:
            out.append(self.change("delete rule in %s: from %s lookup %s pref %d" % (ns, rule[2], rule[3], rule[1]),
                                   lambda r=rule: self.runner.ip(_rule_argv(r, "del"), ns, check=False)))
        tables = sorted(set(table_of(sn) for sn in self.slot["nics"]) | set(int(r[3]) for r in found_rules))
        for f in (4, 6):
            for table in tables:
                if self.dp.live.routes(f, table, ns):
                    out.append(self.change("flush table %d (IPv%d) in %s" % (table, f, ns),
                                           lambda t=table, x=f: self.runner.ip(
                                               ["-%d" % x, "route", "flush", "table", str(t)], ns, check=False)))
        if record:
            # the limits and sysctls recorded before the first change, then the record itself
            prev_limits = record.get("limits") or {}
            if not prev_limits or live_limits(self.runner, ns) == prev_limits:
                prev_limits = None
            cur = live_sysctls(self.runner, ns)
            pairs = [(k, v) for k, v in sorted((record.get("sysctl") or {}).items())
                     if v is not None and cur.get(k) not in (None, v)]
            restore = (["limits subflows %(subflows)s add_addr_accepted %(add_addr_accepted)s" % prev_limits]
                       if prev_limits else []) + ["%s=%s" % p for p in pairs]
            out.append(self.change("mptcp settings in %s restored%s" % (ns, (": " + ", ".join(restore)) if restore else ""),
                                   lambda w=prev_limits, p=pairs: self._restore(w, p)))
        return out

    # -- actions (record first, then change) ------------------------------------------------------
    def _record(self):
        return (self.dp.state or {}).get(STATE_KEY) or {}

    def _remember(self, what, value):
        rec = self.dp.state.setdefault(STATE_KEY, {}).setdefault(self.netns, {})
        if what not in rec:
            rec[what] = value
            self.dp._save_state()

    def _restore(self, prev_limits, pairs):
        if prev_limits:
            self._limits_cmd(prev_limits)
        if pairs:
            datapath_run.netns_sysctl_set(self.runner, self.netns, pairs)
        rec = self.dp.state.get(STATE_KEY) or {}
        rec.pop(self.netns, None)
        if not rec:
            self.dp.state.pop(STATE_KEY, None)
        self.dp._save_state()

    def _set_sysctls(self, pairs):
        self._remember("sysctl", live_sysctls(self.runner, self.netns))
        datapath_run.netns_sysctl_set(self.runner, self.netns, pairs)

    def _set_limits(self, want):
        self._remember("limits", live_limits(self.runner, self.netns))
        self._limits_cmd(want)

    def _limits_cmd(self, want):
        self.runner.ip(["mptcp", "limits", "set", "subflows", str(want["subflows"]),
                        "add_addr_accepted", str(want["add_addr_accepted"])], self.netns)

    def _delete_endpoint(self, endpoint_id):
        self.runner.ip(["mptcp", "endpoint", "delete", "id", str(endpoint_id)], self.netns, check=False)

    def _set_endpoint(self, addr, dev, old, flags=ENDPOINT_FLAGS):
        if old:
            self.runner.ip(["mptcp", "endpoint", "delete", "id", str(old["id"])], self.netns, check=False)
        self.runner.ip(["mptcp", "endpoint", "add", addr] + (["dev", dev] if dev else []) + list(flags), self.netns)


def _rule_argv(rule, op):
    f, pref, src, table = rule
    return ["-%d" % f, "rule", op, "pref", str(pref), "from", src, "lookup", table]


def plan_slot(dp, slot, fresh, change_cls):
    """The core's hook: MPTCP changes of one slot (after its veths, addresses and routes)."""
    return SlotMptcp(dp, slot, change_cls).plan(fresh)
