# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply / remove the host datapath described by a spec (see spec.py) on the current host.

Runs in the host's network (and mount) namespace. Every step compares live state first and only
acts on differences, so a second run changes nothing. `plan()` lists the differences without
touching anything (check mode); `apply()` executes them; `remove()` undoes what the state file
says was done and restores the recorded previous values. A spec smaller than the recorded one
(slots or NICs left the plan) first removes exactly what the recorded spec had and the new one has
not (`plan_shrink`), so the host ends as a fresh deployment at the smaller shape would.

The plan is built in steps, in this order (the order of the changes and their descriptions is what
check mode reports): host sysctls, NIC addresses, per slot its namespace, veths, addresses and
routes, then host routes / proxy entries / policy rules, the watcher's runtime file, and eBPF.
What is wanted comes from :mod:`.desired`, what is there from :mod:`.live`, the state record from
:mod:`.record`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from typing import Callable, Optional

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import antispoof
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bpf as datapath_bpf
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import desired
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import localmap
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import mptcp
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import record
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import run as datapath_run
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as datapath_spec
from ansible_collections.netscale.multinic.plugins.module_utils.datapath.live import LiveView
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

STATE_FILE = record.STATE_FILE
RUNTIME_FILE = record.RUNTIME_FILE


@dataclasses.dataclass
class Options:
    state_dir: str = "/var/lib/netscale-multinic"
    sysctl_file: str = "/etc/sysctl.d/90-netscale-multinic.conf"
    bpffs_root: str = "/sys/fs/bpf"
    bpf_object: Optional[str] = None
    nic_pattern: Optional[str] = None
    manage_nic_addresses: bool = True
    egress_policy: Optional[str] = None  # 'hash' (None = the default) or 'least_loaded' (eBPF mode)
    detection: Optional[dict] = None  # gray-failure detection parameters (health.DEFAULTS keys)


@dataclasses.dataclass
class Change:
    """One difference: what check mode reports (``desc``; None for silent steps) and the action."""

    desc: Optional[str]
    fn: Optional[Callable[[], object]]


# conf.all keys whose write the kernel copies to every device (net/ipv6/addrconf.c fixup_forwarding,
# fixup_linkdown, fixup_disable_ipv6; net/ipv4/devinet.c devinet_sysctl_forward); the others are
# only OR-ed or max-ed with the device's own value.
_PROPAGATING = ("net.ipv6.conf.all.forwarding", "net.ipv6.conf.all.ignore_routes_with_linkdown",
                "net.ipv6.conf.all.disable_ipv6", "net.ipv4.conf.all.forwarding")


def _propagated(key, dev):
    """Whether the host-wide write of HOST_SYSCTLS sets ``key`` on every interface anyway. Such a key
    of a NIC that left the plan keeps the host-wide value, as on any interface outside the plan; the
    full removal restores it with the collateral record."""
    host_key = key.replace(".conf.%s." % dev, ".conf.all.")
    return host_key in _PROPAGATING and any(k == host_key for k, dummy in datapath_spec.HOST_SYSCTLS)


def _nodad(cidr):
    return ["nodad"] if ":" in cidr else []


class Datapath(object):
    def __init__(self, spec, opts=None, runner=None):
        self.spec = spec
        self.options = opts or Options()
        self.runner = runner or datapath_run.Runner()
        self.live = LiveView(self.runner)
        self.bpf = datapath_bpf.Bpf(self.runner, self.options.bpffs_root)
        self.state_path = os.path.join(self.options.state_dir, STATE_FILE)
        self.runtime_path = os.path.join(self.options.state_dir, RUNTIME_FILE)
        self.state = record.load_json(self.state_path)

    # ---- state record ------------------------------------------------------------------------
    def _save_state(self):
        record.save_json(self.state_path, self.state)

    def _ensure_state(self, collateral=None):
        if self.state is None:
            self.state = record.new_record()
        if collateral is not None and "sysctl_collateral" not in self.state:
            self.state["sysctl_collateral"] = collateral
        self.state["spec"] = self.spec
        self._save_state()

    def _record(self, key, value):
        self.state[key] = value
        self._save_state()

    # ---- desired objects (see datapath.desired) ---------------------------------------------------
    def host_routes(self):
        return desired.host_routes(self.spec)

    def ns_routes(self, slot):
        return desired.namespace_routes(self.spec, slot)

    def rules(self):
        return desired.policy_rules(self.spec)

    def proxies(self):
        return desired.proxy_entries(self.spec)

    def runtime(self):
        """Idempotent `ip` commands per device, re-run by the watcher when a device comes back up."""
        detection = health.check_params(self.options.detection)
        return desired.runtime_commands(self.spec, self.bpf.base, detection if detection["enabled"] else None)

    # ---- validation --------------------------------------------------------------------------
    def validate(self):
        links = [n for n in self.live.links() if n != "lo" and not re.match(r"^ms\d+-", n)]
        datapath_spec.check_nics(self.spec, links, self.options.nic_pattern)
        datapath_spec.check_egress_policy(self.options.egress_policy, self.spec["ebpf"])
        try:
            health.check_params(self.options.detection)
        except ValueError as e:
            raise datapath_spec.DatapathInputError(str(e))

    # ---- plan: base (everything but eBPF), step by step ---------------------------------------
    def plan_base(self):
        changes = self._plan_host_sysctls() + self._plan_nic_addresses()
        for slot in self.spec["slots"]:
            changes += self._plan_slot(slot)
        return changes + self._plan_host_routing() + self._plan_antispoof() + self._plan_runtime_file()

    def _sysctl_change(self, key, value):
        current = datapath_run.sysctl_get(key)
        return Change("sysctl %s=%s (was %s)" % (key, value, current),
                      lambda k=key, v=value, p=current: self._set_sysctl(k, v, p))

    def _plan_host_sysctls(self):
        """Global and per-NIC sysctls; the global ones also persisted in the sysctl file."""
        changes = []
        content = "# Managed by netscale.multinic (host_datapath). Removed on state=absent.\n" + \
            "".join("%s = %s\n" % kv for kv in datapath_spec.HOST_SYSCTLS if datapath_run.sysctl_get(kv[0]) is not None)
        try:
            with open(self.options.sysctl_file) as handle:
                current = handle.read()
        except (IOError, OSError):
            current = None
        if current != content:
            changes.append(Change("write %s" % self.options.sysctl_file,
                                  lambda c=content, prev=current: self._write_sysctl_file(c, prev)))
        for key, val in datapath_spec.HOST_SYSCTLS:
            if datapath_run.sysctl_get(key) not in (None, val):  # None: not in this namespace (neigh.default)
                changes.append(self._sysctl_change(key, val))
        for nic in self.spec["nics"]:
            for tmpl, val in datapath_spec.NIC_SYSCTLS:
                key = tmpl.format(nic=nic["name"])
                if datapath_run.sysctl_get(key) not in (None, val):
                    changes.append(self._sysctl_change(key, val))
        return changes

    def _plan_nic_addresses(self):
        changes = []
        if not self.options.manage_nic_addresses:
            return changes
        for nic in self.spec["nics"]:
            for fam in ("ipv4", "ipv6"):
                if fam not in nic:
                    continue
                cidr = "%s/%d" % (nic[fam]["address"], nic[fam]["prefixlen"])
                if (nic["name"], cidr) not in self.live.addresses():
                    changes.append(Change("address %s on %s" % (cidr, nic["name"]),
                                          lambda d=nic["name"], c=cidr: self._add_nic_addr(d, c)))
        return changes

    def _plan_slot(self, slot):
        """A workload slot: its namespace, one veth pair per NIC, its addresses and routes."""
        netns = slot["netns"]
        fresh = not datapath_run.netns_exists(netns)
        changes = self._plan_slot_namespace(netns, fresh)
        for slot_nic in slot["nics"]:
            changes += self._plan_slot_veth(netns, slot_nic)
        for fam in ("ipv4", "ipv6"):
            task_ip = slot.get("task_" + fam)
            if task_ip:
                cidr = "%s/%d" % (task_ip, desired.host_prefix_length(task_ip))
                if ("lo", cidr) not in self.live.addresses(netns):
                    changes.append(Change("task IP %s on lo in %s" % (cidr, netns),
                                          lambda c=cidr, n=netns: self.runner.ip(
                                              ["addr", "replace", c, "dev", "lo"] + _nodad(c), n)))
        for route in self.ns_routes(slot):
            if fresh or not self.live.route_present(route, netns):
                changes.append(Change(desired.route_description(route, netns),
                                      lambda rt=route, n=netns: self.runner.ip(desired.route_command(rt), n)))
        return changes + mptcp.plan_slot(self, slot, fresh, Change)

    def _plan_slot_namespace(self, netns, fresh):
        changes = []
        if fresh:
            changes.append(Change("netns %s" % netns, lambda n=netns: self._add_netns(n)))
        if fresh or "UP" not in self.live.links(netns).get("lo", {}).get("flags", []):
            changes.append(Change("link lo up in %s" % netns,
                                  lambda n=netns: self.runner.ip(["link", "set", "lo", "up"], n)))
        current = {} if fresh else datapath_run.netns_sysctl_get(
            self.runner, netns, [k for k, dummy in datapath_spec.NETNS_SYSCTLS])
        pairs = [(k, v) for k, v in datapath_spec.NETNS_SYSCTLS if current.get(k) != v]
        if pairs:
            changes.append(Change("sysctls in %s: %s" % (netns, " ".join("%s=%s" % p for p in pairs)),
                                  lambda n=netns, p=pairs: datapath_run.netns_sysctl_set(self.runner, n, p)))
        return changes

    def _plan_slot_veth(self, netns, slot_nic):
        """The veth pair of one slot NIC: link, sysctls, up, gateway and container addresses."""
        changes = []
        spec = self.spec
        veth = slot_nic["veth"]
        ifname = slot_nic["ifname"]
        host_link = self.live.links().get(veth)
        container_link = self.live.links(netns).get(ifname)
        if not host_link or not container_link:
            if host_link:
                changes.append(Change("delete stale veth %s" % veth, lambda d=veth: self.runner.ip(["link", "del", d])))
            changes.append(Change("veth %s <-> %s:%s" % (veth, netns, ifname),
                                  lambda d=veth, n=netns, i=ifname: self.runner.ip(
                                      ["link", "add", d, "type", "veth", "peer", "name", i, "netns", n])))
        current = dict((t.format(veth=veth), datapath_run.sysctl_get(t.format(veth=veth)))
                       for t, dummy in datapath_spec.VETH_SYSCTLS)
        for tmpl, val in datapath_spec.VETH_SYSCTLS:
            key = tmpl.format(veth=veth)
            if not host_link or current[key] != val:
                changes.append(Change("sysctl %s=%s" % (key, val), lambda k=key, x=val: datapath_run.sysctl_set(k, x)))
        if not host_link or "UP" not in host_link.get("flags", []):
            changes.append(Change("link %s up" % veth, lambda d=veth: self.runner.ip(["link", "set", d, "up"])))
        if not container_link or "UP" not in container_link.get("flags", []):
            changes.append(Change("link %s up in %s" % (ifname, netns),
                                  lambda d=ifname, n=netns: self.runner.ip(["link", "set", d, "up"], n)))
        if "ipv6" in spec["families"] and (veth, spec["gw6"] + "/64") not in self.live.addresses():
            changes.append(Change("address %s/64 on %s" % (spec["gw6"], veth),
                                  lambda d=veth: self.runner.ip(
                                      ["-6", "addr", "replace", spec["gw6"] + "/64", "dev", d, "nodad"])))
        for fam in ("ipv4", "ipv6"):
            if slot_nic.get(fam):
                cidr = "%s/%d" % (slot_nic[fam], desired.host_prefix_length(slot_nic[fam]))
                if (ifname, cidr) not in self.live.addresses(netns):
                    changes.append(Change("address %s on %s in %s" % (cidr, ifname, netns),
                                          lambda d=ifname, c=cidr, n=netns: self.runner.ip(
                                              ["addr", "replace", c, "dev", d] + _nodad(c), n)))
        return changes

    def _plan_host_routing(self):
        """Host routes, proxy ND/ARP entries and policy rules."""
        changes = []
        for route in self.host_routes():
            if not self.live.route_present(route):
                changes.append(Change(desired.route_description(route, "host"),
                                      lambda rt=route: self.runner.ip(desired.route_command(rt))))
        have = self.live.proxies()
        for dev, addr in self.proxies():
            if (dev, addr) not in have:
                changes.append(Change("proxy %s %s on %s" % ("ND" if ":" in addr else "ARP", addr, dev),
                                      lambda d=dev, a=addr: self.runner.ip(["neigh", "replace", "proxy", a, "dev", d])))
        for f, pref, iif, table, sup in self.rules():
            if (pref, iif, table, sup) not in self.live.rules(f):
                argv = ["-%d" % f, "rule", "add", "pref", str(pref), "iif", iif, "lookup", table]
                if sup is not None:
                    argv += ["suppress_prefixlength", str(sup)]
                changes.append(Change("rule %s" % " ".join(argv[3:]), lambda a=argv: self.runner.ip(a)))
        return changes

    # ---- plan: shrink / re-shape (what the recorded previous spec had and this one has not) ----------
    def plan_shrink(self):
        """Removal of what the recorded previous spec created and the new spec no longer wants: slots
        (namespace, veths), NICs (program and clsact, the addresses this role added, per-NIC sysctls
        back to their recorded values), host routes, proxy entries, policy rules, and in the slots
        that stay, container addresses, task IPs and routes that changed. Computed from the state
        record, not from the live host, so objects of others are never touched. BPF map entries of
        the removed veths and NICs go with the map sync of plan_bpf; the kernel-mode nftables table
        is rebuilt by _plan_antispoof."""
        old = (self.state or {}).get("spec")
        if not old or old == self.spec:
            return []
        return (self._plan_shrink_programs(old) + self._plan_shrink_routing(old) + self._plan_shrink_slots(old)
                + self._plan_shrink_nics(old))

    def _removed_nics(self, old):
        keep = set(desired.nic_names(self.spec))
        return [n for n in desired.nic_names(old) if n not in keep]

    def _plan_shrink_programs(self, old):
        changes = []
        for dev in self._removed_nics(old):
            if dev not in self.live.links():
                continue
            if self.bpf.attached(dev):
                changes.append(Change("detach program from %s (NIC no longer in the plan)" % dev,
                                      lambda d=dev: self.bpf.detach(d)))
            if dev in (self.state or {}).get("clsact_created", []):
                changes.append(Change("delete clsact on %s (created by this role, NIC no longer in the plan)" % dev,
                                      lambda d=dev: self._del_clsact(d)))
        return changes

    def _plan_shrink_routing(self, old):
        """Policy rules, proxy entries and host routes of the previous spec that the new one has not
        (a route whose destination stays is replaced by plan_base, not deleted)."""
        changes = []
        keep_rules = set(desired.policy_rules(self.spec))
        for rule in desired.policy_rules(old):
            f, pref, iif, table, sup = rule
            if rule not in keep_rules and (pref, iif, table, sup) in self.live.rules(f):
                argv = ["-%d" % f, "rule", "del", "pref", str(pref), "iif", iif, "lookup", table]
                changes.append(Change("delete rule %s" % " ".join(argv[3:]),
                                      lambda a=argv: self.runner.ip(a, check=False)))
        keep_proxies = set(desired.proxy_entries(self.spec))
        have = self.live.proxies()
        for dev, addr in desired.proxy_entries(old):
            if (dev, addr) not in keep_proxies and (dev, addr) in have:
                changes.append(Change("delete proxy %s %s on %s" % ("ND" if ":" in addr else "ARP", addr, dev),
                                      lambda d=dev, a=addr: self.runner.ip(["neigh", "del", "proxy", a, "dev", d],
                                                                           check=False)))
        changes += self._delete_stale_routes(desired.host_routes(old), desired.host_routes(self.spec), None)
        return changes

    def _delete_stale_routes(self, old_routes, new_routes, netns):
        def key(rt):
            return (rt[0], str(rt[1]), rt[2], rt[5])
        keep = set(key(rt) for rt in new_routes)
        changes = []
        for route in old_routes:
            if key(route) not in keep and self.live.route_listed(route, netns):
                changes.append(Change("delete " + desired.route_description(route, netns or "host"),
                                      lambda rt=route, n=netns: self.runner.ip(desired.route_command(rt, "del"), n,
                                                                               check=False)))
        return changes

    def _plan_shrink_slots(self, old):
        """Namespaces of removed slots; in the slots that stay, the veths of removed NICs and the
        addresses and routes the new spec no longer has."""
        changes = []
        new_slots = dict((s["netns"], s) for s in self.spec["slots"])
        for slot in old["slots"]:
            netns = slot["netns"]
            kept = new_slots.get(netns)
            if kept is None:
                if datapath_run.netns_exists(netns):
                    changes.append(Change("delete netns %s (slot %s no longer in the plan)" % (netns, slot["slot"]),
                                          lambda n=netns: self.runner.run(["ip", "netns", "del", n])))
                gone = [sn["veth"] for sn in slot["nics"]]
            else:
                keep_veths = set(sn["veth"] for sn in kept["nics"])
                gone = [sn["veth"] for sn in slot["nics"] if sn["veth"] not in keep_veths]
                changes += self._delete_stale_routes(desired.namespace_routes(old, slot),
                                                     desired.namespace_routes(self.spec, kept), netns)
                changes += self._plan_shrink_slot_addresses(slot, kept)
            for veth in gone:
                if veth in self.live.links():
                    changes.append(Change("delete veth %s (no longer in the plan)" % veth,
                                          lambda d=veth: self.runner.ip(["link", "del", d], check=False)))
        return changes

    def _plan_shrink_slot_addresses(self, old_slot, new_slot):
        """Container addresses and task IPs of a slot that stays, when the plan changed or dropped them."""
        def wanted(slot):
            out = set()
            for fam in ("ipv4", "ipv6"):
                if slot.get("task_" + fam):
                    tip = slot["task_" + fam]
                    out.add(("lo", "%s/%d" % (tip, desired.host_prefix_length(tip))))
                for sn in slot["nics"]:
                    if sn.get(fam):
                        out.add((sn["ifname"], "%s/%d" % (sn[fam], desired.host_prefix_length(sn[fam]))))
            return out
        netns = new_slot["netns"]
        keep_ifnames = set(sn["ifname"] for sn in new_slot["nics"]) | set(["lo"])
        have = self.live.addresses(netns)
        changes = []
        for dev, cidr in sorted(wanted(old_slot) - wanted(new_slot)):
            # the address of a removed NIC's veth goes with the veth
            if dev in keep_ifnames and (dev, cidr) in have:
                changes.append(Change("delete address %s on %s in %s" % (cidr, dev, netns),
                                      lambda d=dev, c=cidr, n=netns: self.runner.ip(["addr", "del", c, "dev", d], n,
                                                                                    check=False)))
        return changes

    def _plan_shrink_nics(self, old):
        """NIC addresses this role added that the new spec does not want, and the per-NIC sysctls of
        removed NICs back to their recorded values (dropped from the record)."""
        changes = []
        state = self.state or {}
        wanted = set()
        if self.options.manage_nic_addresses:
            for nic in self.spec["nics"]:
                for fam in ("ipv4", "ipv6"):
                    if fam in nic:
                        wanted.add((nic["name"], "%s/%d" % (nic[fam]["address"], nic[fam]["prefixlen"])))
        for dev, cidr in state.get("added_nic_addresses", []):
            if (dev, cidr) not in wanted:
                present = (dev, cidr) in self.live.addresses()
                changes.append(Change("delete address %s on %s (no longer in the plan)" % (cidr, dev) if present else None,
                                      lambda d=dev, c=cidr, p=present: self._forget_nic_addr(d, c, p)))
        for dev in self._removed_nics(old):
            for tmpl, dummy in datapath_spec.NIC_SYSCTLS:
                key = tmpl.format(nic=dev)
                if key not in state.get("sysctl_prev", {}):
                    continue
                prev = state["sysctl_prev"][key]
                restore = prev is not None and datapath_run.sysctl_get(key) not in (None, prev) and \
                    not _propagated(key, dev)
                changes.append(Change("sysctl %s=%s (restore, NIC no longer in the plan)" % (key, prev) if restore else None,
                                      lambda k=key, v=prev, r=restore: self._forget_sysctl(k, v, r)))
        return changes

    def _forget_nic_addr(self, dev, cidr, present):
        if present:
            self.runner.ip(["addr", "del", cidr, "dev", dev], check=False)
        self.state["added_nic_addresses"] = [e for e in self.state["added_nic_addresses"] if e != [dev, cidr]]
        self._save_state()

    def _forget_sysctl(self, key, prev, restore):
        if restore:
            datapath_run.sysctl_set(key, prev)
            self.runner.log.append("sysctl %s=%s (restore)" % (key, prev))
        self.state["sysctl_prev"].pop(key, None)
        self._save_state()

    # ---- anti-spoofing (eBPF mode: mn_src/mn_spoof in plan_bpf; kernel mode: nftables) -------------
    def _nft_live(self):
        """The live anti-spoofing table (antispoof.parse_live) or None (absent, or no nft)."""
        if not shutil.which("nft"):
            return None
        where = [antispoof.NFT_FAMILY, antispoof.NFT_TABLE]
        text = self.runner.read(["nft", "list", "table"] + where, check=False)
        if text.returncode != 0:
            return None
        js = self.runner.read(["nft", "-j", "list", "table"] + where, check=False)
        return antispoof.parse_live(text.stdout, js.stdout)

    def _nft_delete(self):
        self.runner.run(["nft", "delete", "table", antispoof.NFT_FAMILY, antispoof.NFT_TABLE], check=False)

    def _plan_antispoof(self):
        """Kernel mode: the nftables table that drops and counts spoofed sources on the slots' veths
        (rebuilt atomically when it differs, counters carried over). eBPF mode: the program checks
        sources itself (a netdev ingress hook would be bypassed by its redirects): table removed."""
        if self.spec["ebpf"]:
            return []   # a table a kernel-mode deployment left goes after the programs are attached
        live = self._nft_live()
        table = "nftables table %s %s" % (antispoof.NFT_FAMILY, antispoof.NFT_TABLE)
        if not shutil.which("nft"):
            raise datapath_run.CommandError(
                "anti-spoofing: host %s has no nft command (kernel-mode datapath, host_datapath_ebpf: false, drops "
                "spoofed sources with nftables). Fix: install the nftables package on the host, or deploy it with "
                "host_datapath_ebpf: true." % self.spec["host"])
        if antispoof.live_matches(self.spec, live):
            return []
        veths = sum(len(s["nics"]) for s in self.spec["slots"])
        script = antispoof.nft_script(self.spec, (live or {}).get("counters"))
        return [Change("%s: anti-spoofing on %d veths of %d slots" % (table, veths, len(self.spec["slots"])),
                       lambda x=script: self.runner.run(["nft", "-f", "-"], stdin=x))]

    def _plan_antispoof_off(self):
        """eBPF mode: the program checks sources itself (a netdev ingress hook would be bypassed by its
        redirects); a table left by a kernel-mode deployment is deleted once the programs are attached."""
        if self._nft_live() is None:
            return []
        return [Change("delete nftables table %s %s (eBPF mode checks sources in its program)"
                       % (antispoof.NFT_FAMILY, antispoof.NFT_TABLE), self._nft_delete)]

    def _plan_runtime_file(self):
        runtime = self.runtime()
        if record.load_json(self.runtime_path) == runtime:
            return []
        return [Change("write %s" % self.runtime_path, lambda x=runtime: record.save_json(self.runtime_path, x))]

    # ---- plan: eBPF --------------------------------------------------------------------------
    def _program_for(self, dev):
        return datapath_bpf.PROG_NIC if dev in desired.nic_names(self.spec) else datapath_bpf.PROG_VETH

    def plan_bpf(self, check_mode=False):
        """Changes to reach the desired program state (attached in ebpf mode, absent otherwise)."""
        devs = desired.nic_names(self.spec) + desired.veth_names(self.spec)
        if not self.spec["ebpf"]:
            return self._plan_bpf_off(devs)
        obj = self.options.bpf_object
        if check_mode and obj and not os.path.exists(obj):
            # check mode on a fresh host: the role's copy of the object was only simulated
            return [Change("load %s (copied by the role; not on the host yet)" % obj, None)] + \
                [Change("attach %s on %s ingress (pref %d)" % (self._program_for(dev), dev, datapath_bpf.TC_PREF), None)
                 for dev in devs] + self._plan_antispoof_off()
        if not obj or not os.path.exists(obj):
            raise datapath_bpf.BpfError("bpf_object %r not found on the host. Fix: let the role copy the compiled "
                                        "object (host_datapath_bpf_object) or set host_datapath_ebpf: false." % obj)
        version = datapath_bpf.sha256_file(obj)[:12]
        changes, loaded, tags = self._plan_bpf_load(obj, version)
        changes += self._plan_bpf_attach(devs, version, loaded, tags)
        for old in self.bpf.versions() if self.bpf.bpffs_mounted() else []:
            if old != version:
                changes.append(Change("unpin old version %s" % old, lambda v=old: self.bpf.remove_version(v)))
        if not self.state or self.state.get("bpf_version") != version:
            changes.append(Change("record bpf version %s" % version, lambda v=version: self._record("bpf_version", v)))
        return changes + self._plan_antispoof_off()

    def _plan_bpf_load(self, obj, version):
        """bpffs, the object's programs and maps. Returns (changes, loaded, {program: (id, tag)})."""
        changes = []
        if not self.bpf.bpffs_mounted():
            changes.append(Change("mount bpffs at %s" % self.options.bpffs_root, self._mount_bpffs))
        loaded = self.bpf.bpffs_mounted() and self.bpf.loaded(version)
        tags = {}
        if not loaded:
            changes.append(Change("load %s as version %s" % (obj, version), lambda: self.bpf.load(obj, version)))
            changes.append(Change("bpf maps", lambda: self._sync_maps(version)))
            return changes, loaded, tags
        try:
            ops = self.bpf.map_diff(version, self._desired_maps(version))
        except KeyError:
            ops = ["unknown"]
        if ops:
            changes.append(Change("bpf map entries (%d)" % len(ops), lambda: self._sync_maps(version)))
        for prog in (datapath_bpf.PROG_NIC, datapath_bpf.PROG_VETH):
            info = self.bpf.prog_info(self.bpf.prog_pin(version, prog)) or {}
            tags[prog] = (info.get("id"), info.get("tag"))
        return changes, loaded, tags

    def _plan_bpf_attach(self, devs, version, loaded, tags):
        """clsact and the program on every NIC and veth (again when the pinned program changed)."""
        changes = []
        for dev in devs:
            prog = self._program_for(dev)
            exists = dev in self.live.links()
            if not exists or not self.bpf.has_clsact(dev):
                changes.append(Change("clsact on %s" % dev, lambda d=dev: self._add_clsact(d)))
            if not loaded or not exists or self.bpf.attached(dev) != tags[prog]:
                changes.append(Change("attach %s on %s ingress (pref %d)" % (prog, dev, datapath_bpf.TC_PREF),
                                      lambda d=dev, p=prog: self.bpf.attach(d, self.bpf.prog_pin(version, p))))
        return changes

    def _plan_bpf_off(self, devs):
        changes = []
        for dev in devs:
            if dev in self.live.links() and self.bpf.attached(dev):
                changes.append(Change("detach program from %s" % dev, lambda d=dev: self.bpf.detach(d)))
        for dev in (self.state or {}).get("clsact_created", []):
            if dev in self.live.links() and self.bpf.has_clsact(dev):
                changes.append(Change("delete clsact on %s (created by this role)" % dev,
                                      lambda d=dev: self._del_clsact(d)))
        if os.path.isdir(self.bpf.base):
            changes.append(Change("unpin %s" % self.bpf.base, self.bpf.remove_base))
        if (self.state or {}).get("bpf_version"):
            changes.append(Change("record bpf version none", lambda: self._record("bpf_version", None)))
        return changes

    def _desired_maps(self, version):
        return datapath_bpf.desired_maps(self.spec, self.live.links(),
                                         dict((s["netns"], self.live.links(s["netns"])) for s in self.spec["slots"]),
                                         self._local(version), self._egress(version),
                                         self.bpf.has_map(version, "mn_numa"))

    def _sync_maps(self, version):
        self.live.forget()
        wanted = self._desired_maps(version)
        self.bpf.apply_map_ops(version, datapath_bpf.order_ops(self.bpf.map_diff(version, wanted), wanted))

    def _egress(self, version):
        """The egress policy for mn_ecfg (None: an object without egress placement)."""
        if not self.bpf.has_map(version, "mn_ecfg"):
            return None
        return datapath_spec.check_egress_policy(self.options.egress_policy, self.spec["ebpf"])

    def _local(self, version):
        """Host-local map contents from the live routes/rules (None: object without the maps)."""
        if not self.bpf.has_map(version, localmap.MAPS[0]):
            return None
        return localmap.compute(self.runner.ip_json, desired.nic_names(self.spec), desired.veth_names(self.spec))

    # ---- actions (each records what it changes before changing it) -----------------------------
    def collateral(self):
        """Per-interface sysctls that writing a conf.all / conf.default key propagates to."""
        out = {}
        devs = ["lo"] + desired.nic_names(self.spec)
        for key, dummy in datapath_spec.HOST_SYSCTLS:
            for scope in (".conf.all.", ".conf.default."):
                if scope in key:
                    for d in devs:
                        k = key.replace(scope, ".conf.%s." % d)
                        out[k] = datapath_run.sysctl_get(k)
        return out

    def _write_sysctl_file(self, content, prev):
        if self.state.get("sysctl_file_prev") is None and prev is not None and "netscale.multinic" not in prev:
            self.state["sysctl_file_prev"] = prev
            self._save_state()
        atomic_write(self.options.sysctl_file, content, mode=0o644)

    def _set_sysctl(self, key, value, prev=None):
        if key not in self.state["sysctl_prev"]:
            self.state["sysctl_prev"][key] = prev if prev is not None else datapath_run.sysctl_get(key)
            self._save_state()
        datapath_run.sysctl_set(key, value)
        self.runner.log.append("sysctl %s=%s" % (key, value))

    def _add_nic_addr(self, dev, cidr):
        self.state["added_nic_addresses"].append([dev, cidr])
        self._save_state()
        self.runner.ip(["addr", "add", cidr, "dev", dev] + _nodad(cidr))

    def _add_netns(self, name):
        self.runner.run(["ip", "netns", "add", name])

    def _mount_bpffs(self):
        self.bpf.mount_bpffs()
        self._record("bpffs_mounted", True)

    def _add_clsact(self, dev):
        if dev in desired.nic_names(self.spec):
            if dev not in self.state["clsact_created"]:
                self.state["clsact_created"].append(dev)
                self._save_state()
        self.bpf.add_clsact(dev)

    def _del_clsact(self, dev):
        if self.bpf.others_on(dev) == 0:
            self.bpf.del_clsact(dev)
        self.state["clsact_created"].remove(dev)
        self._save_state()

    # ---- entry points ------------------------------------------------------------------------
    def plan(self):
        self.live.forget()
        self.validate()
        return self.plan_shrink() + self.plan_base() + self.plan_bpf()

    def apply(self, check_mode=False):
        """Returns (changes: [desc]). In check mode nothing is touched."""
        self.live.forget()
        self.validate()
        if self.spec["ebpf"] and self.options.bpf_object is None:
            raise datapath_bpf.BpfError("ebpf mode needs bpf_object")
        collateral = self.collateral()
        shrink = self.plan_shrink()
        if check_mode:
            base = self.plan_base()
            return [c.desc for c in shrink + base + self.plan_bpf(check_mode=True) if c.desc]
        # What the previous spec had and this one has not goes first, while the record still holds the
        # previous spec: a run that stops half-way computes the same removal again on the next run.
        for c in shrink:
            c.fn()
        self.live.forget()
        base = self.plan_base()
        done = [c.desc for c in shrink + base if c.desc]
        if base or self.state is None or self.state.get("spec") != self.spec:
            self._ensure_state(collateral)
        for c in base:
            c.fn()
        self.live.forget()
        bpf_changes = self.plan_bpf()
        for c in bpf_changes:
            c.fn()
        return done + [c.desc for c in bpf_changes]

    def remove(self, check_mode=False):
        """Undo everything recorded in the state file (or implied by the spec). Returns [desc]."""
        self.live.forget()
        state = self.state or record.new_record()
        self.spec = state.get("spec") or self.spec
        changes = (self._plan_removal_programs(state) + self._plan_removal_antispoof() + self._plan_removal_routing()
                   + self._plan_removal_links(state) + self._plan_removal_bpffs(state)
                   + self._plan_removal_sysctls(state) + self._plan_removal_files())
        if not check_mode:
            for c in changes:
                c.fn()
        return [c.desc for c in changes if c.desc]

    # ---- removal, step by step ------------------------------------------------------------------
    def _plan_removal_programs(self, state):
        changes = []
        for dev in desired.nic_names(self.spec):
            if dev in self.live.links() and self.bpf.attached(dev):
                changes.append(Change("detach program from %s" % dev, lambda d=dev: self.bpf.detach(d)))
        for dev in state.get("clsact_created", []):
            if dev in self.live.links() and self.bpf.has_clsact(dev):
                changes.append(Change("delete clsact on %s (created by this role)" % dev,
                                      lambda d=dev: (self.bpf.others_on(d) == 0 and self.bpf.del_clsact(d))))
        return changes

    def _plan_removal_antispoof(self):
        if self._nft_live() is None:
            return []
        return [Change("delete nftables table %s %s" % (antispoof.NFT_FAMILY, antispoof.NFT_TABLE), self._nft_delete)]

    def _plan_removal_routing(self):
        """Policy rules, proxy entries and host routes."""
        changes = []
        for f, pref, iif, table, sup in self.rules():
            if (pref, iif, table, sup) in self.live.rules(f):
                argv = ["-%d" % f, "rule", "del", "pref", str(pref), "iif", iif, "lookup", table]
                changes.append(Change("delete rule %s" % " ".join(argv[3:]),
                                      lambda a=argv: self.runner.ip(a, check=False)))
        have = self.live.proxies()
        for dev, addr in self.proxies():
            if (dev, addr) in have:
                changes.append(Change("delete proxy %s on %s" % (addr, dev),
                                      lambda d=dev, a=addr: self.runner.ip(["neigh", "del", "proxy", a, "dev", d],
                                                                           check=False)))
        for route in self.host_routes():
            if self.live.route_listed(route):
                changes.append(Change("delete " + desired.route_description(route, "host"),
                                      lambda rt=route: self.runner.ip(desired.route_command(rt, "del"), check=False)))
        return changes

    def _plan_removal_links(self, state):
        """Slot namespaces, veths and the NIC addresses this role added."""
        changes = []
        for slot in self.spec["slots"]:
            if datapath_run.netns_exists(slot["netns"]):
                changes.append(Change("delete netns %s" % slot["netns"],
                                      lambda n=slot["netns"]: self.runner.run(["ip", "netns", "del", n])))
            for slot_nic in slot["nics"]:
                if slot_nic["veth"] in self.live.links():
                    changes.append(Change("delete veth %s" % slot_nic["veth"],
                                          lambda d=slot_nic["veth"]: self.runner.ip(["link", "del", d], check=False)))
        for dev, cidr in state.get("added_nic_addresses", []):
            if (dev, cidr) in self.live.addresses():
                changes.append(Change("delete address %s on %s" % (cidr, dev),
                                      lambda d=dev, c=cidr: self.runner.ip(["addr", "del", c, "dev", d], check=False)))
        return changes

    def _plan_removal_bpffs(self, state):
        changes = []
        if os.path.isdir(self.bpf.base):
            changes.append(Change("unpin %s" % self.bpf.base, self.bpf.remove_base))
        if state.get("bpffs_mounted") and self.bpf.bpffs_mounted():
            changes.append(Change("unmount bpffs %s (mounted by this role)" % self.options.bpffs_root,
                                  lambda: self.runner.run(["umount", self.options.bpffs_root], check=False)))
        return changes

    def _plan_removal_sysctls(self, state):
        """Recorded previous values back, also those a conf.all write propagated (silently)."""
        changes = []
        for key, prev in sorted(state.get("sysctl_prev", {}).items()):
            if prev is not None and datapath_run.sysctl_get(key) not in (None, prev):
                changes.append(Change("sysctl %s=%s (restore)" % (key, prev),
                                      lambda k=key, v=prev: datapath_run.sysctl_set(k, v)))
        for key, prev in sorted(state.get("sysctl_collateral", {}).items()):
            changes.append(Change(None, lambda k=key, v=prev: self._restore_collateral(k, v)))
        if os.path.exists(self.options.sysctl_file):
            prev = state.get("sysctl_file_prev")
            changes.append(Change("%s %s" % ("restore" if prev else "delete", self.options.sysctl_file),
                                  lambda p=prev: self._restore_sysctl_file(p)))
        return changes

    def _plan_removal_files(self):
        return [Change("delete %s" % path, lambda p=path: os.unlink(p))
                for path in (self.runtime_path, self.state_path) if os.path.exists(path)]

    def _restore_collateral(self, key, value):
        if value is not None and datapath_run.sysctl_get(key) not in (None, value):
            datapath_run.sysctl_set(key, value)
            self.runner.log.append("sysctl %s=%s (restore)" % (key, value))

    def _restore_sysctl_file(self, prev):
        if prev:
            atomic_write(self.options.sysctl_file, prev, mode=0o644)
        else:
            os.unlink(self.options.sysctl_file)
