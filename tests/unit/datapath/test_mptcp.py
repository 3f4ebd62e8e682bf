# -*- coding: utf-8 -*-
"""Unit tests of the MPTCP mode (datapath/mptcp.py): desired objects, limits, and the plan against a
fake namespace (on, second run, replace, off with exact restore, bad input)."""
import copy
import json
import types

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import core, mptcp as M, run as R
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as S
from ansible_collections.netscale.multinic.plugins.module_utils.datapath.live import LiveView


class FakeNetns(object):
    """The MPTCP-relevant state of one slot namespace, driven through the runner interface."""

    def __init__(self):
        self.limits = {"subflows": 2, "add_addr_accepted": 0}
        self.sysctl = {"net.mptcp.enabled": "0", "net.mptcp.pm_type": "0"}
        self.endpoints = {}   # address -> {"id", "dev", "flags"}
        self.rules = set()    # (family, pref, src/len, table)
        self.routes = {}      # (family, table) -> [ip -j route entries]
        self.log = []

    # runner interface
    def read(self, argv, check=True):
        out = ""
        if argv[-3:] == ["mptcp", "limits", "show"]:
            out = "add_addr_accepted %(add_addr_accepted)d subflows %(subflows)d \n" % self.limits
        elif argv[-3:] == ["mptcp", "endpoint", "show"]:
            out = json.dumps([dict([("address", a), ("id", e["id"]), ("dev", e["dev"])] +
                                   [(f, True) for f in e["flags"]]) for a, e in self.endpoints.items()])
        elif argv[0] == "nsenter":
            out = "".join("%s = %s\n" % (k, self.sysctl[k]) for k in argv[4:] if k in self.sysctl)
        return types.SimpleNamespace(stdout=out, stderr="", returncode=0)

    def ip_json(self, args, netns=None):
        f = int(args[0][1:])
        if args[1] == "rule":
            return [{"priority": p, "src": src.split("/")[0], "srclen": int(src.split("/")[1]), "table": t}
                    for (fam, p, src, t) in sorted(self.rules) if fam == f]
        if args[1] == "route":
            return self.routes.get((f, int(args[-1])), [])
        return []

    def ip(self, args, netns=None, check=True):
        self.log.append(" ".join(args))
        if args[:3] == ["mptcp", "limits", "set"]:
            self.limits = {"subflows": int(args[4]), "add_addr_accepted": int(args[6])}
        elif args[:3] == ["mptcp", "endpoint", "add"]:
            ids = [e["id"] for e in self.endpoints.values()]
            dev = args[args.index("dev") + 1] if "dev" in args else None
            flags = [a for a in args[4:] if a in ("subflow", "backup", "signal", "fullmesh")]
            self.endpoints[args[3]] = {"id": max(ids + [0]) + 1, "dev": dev, "flags": tuple(sorted(flags))}
        elif args[:3] == ["mptcp", "endpoint", "delete"]:
            self.endpoints = dict((a, e) for a, e in self.endpoints.items() if str(e["id"]) != args[4])
        elif args[1] == "rule":
            rule = (int(args[0][1:]), int(args[4]), args[6], args[8])
            (self.rules.add if args[2] == "add" else self.rules.discard)(rule)
        elif args[1:3] == ["route", "replace"]:
            f, table = int(args[0][1:]), int(args[5])
            self.routes[(f, table)] = [{"dst": "default", "gateway": args[args.index("via") + 1],
                                        "dev": args[args.index("dev") + 1], "prefsrc": args[args.index("src") + 1],
                                        "flags": ["onlink"] if "onlink" in args else []}]
        elif args[1:3] == ["route", "flush"]:
            self.routes.pop((int(args[0][1:]), int(args[4])), None)
        return types.SimpleNamespace(stdout="", stderr="", returncode=0)


@pytest.fixture
def kernel(monkeypatch):
    """A kernel with MPTCP; netns sysctl writes go to the fake namespace."""
    ns = FakeNetns()
    monkeypatch.setattr(R, "sysctl_get", lambda key: "1" if key == "net.mptcp.enabled" else None)
    monkeypatch.setattr(R, "netns_exists", lambda name: True)

    def netns_set(runner, netns, pairs):
        runner.log.append("sysctl " + " ".join("%s=%s" % p for p in pairs))
        runner.sysctl.update(dict(pairs))
    monkeypatch.setattr(R, "netns_sysctl_set", netns_set)
    return ns


def fake_dp(spec, ns):
    dp = types.SimpleNamespace(spec=spec, runner=ns, live=LiveView(ns), state={"version": 1})
    dp._save_state = lambda: None
    return dp


def run_plan(dp, slot, fresh=False):
    dp.live.forget()
    changes = M.plan_slot(dp, slot, fresh, core.Change)
    for c in changes:
        c.fn()
    return [c.desc for c in changes]


def test_desired_objects_four_nics(plan):
    sp = S.build_spec(plan["lab-r1-h2"], mptcp=True)
    assert sp["mptcp"] is True and S.build_spec(plan["lab-r1-h2"])["mptcp"] is False
    slot = sp["slots"][0]
    eps = M.endpoints(sp, slot)
    assert len(eps) == 8 and [d for a, d in eps] == ["eth0", "eth0", "eth1", "eth1", "eth2", "eth2", "eth3", "eth3"]
    assert set(a for a, d in eps) == set(sn[f] for sn in slot["nics"] for f in ("ipv4", "ipv6"))
    rules = M.rules(sp, slot)
    assert (4, 1000, slot["nics"][2]["ipv4"] + "/32", "1102") in rules
    assert (6, 1000, slot["nics"][3]["ipv6"] + "/128", "1103") in rules
    routes = M.routes(sp, slot)
    assert (4, 1101, "default", [("169.254.1.1", "eth1", True)], slot["nics"][1]["ipv4"], None) in routes
    assert (6, 1100, "default", [("fe80::1", "eth0", False)], slot["nics"][0]["ipv6"], None) in routes
    assert M.limits(sp) == {"subflows": 4, "add_addr_accepted": 0}
    assert M.parse_limits("add_addr_accepted 3 subflows 5 \n") == {"add_addr_accepted": 3, "subflows": 5}


def _grown(host, nics):
    h = copy.deepcopy(host)
    for i in range(len(h["nics"]), nics):
        n = copy.deepcopy(h["nics"][-1])
        n["index"], n["name"] = i, "eth%d" % i
        h["nics"].append(n)
        for s in h["slots"]:
            sn = copy.deepcopy(s["nics"][-1])
            sn["index"] = i
            s["nics"].append(sn)
    return h


def test_too_many_endpoints_or_subflows(plan, kernel):
    sp = S.build_spec(_grown(plan["lab-r1-h2"], 5), ebpf=False, mptcp=True)
    with pytest.raises(S.DatapathInputError, match=r"5 NICs x 2 address families = 10 MPTCP endpoints.*host_datapath_mptcp: false"):
        M.plan_slot(fake_dp(sp, kernel), sp["slots"][0], False, core.Change)
    sp = S.build_spec(_grown(plan["lab-r1-h2"], 9), ebpf=False, mptcp=True)
    with pytest.raises(S.DatapathInputError, match="has 9 NICs; MPTCP mode allows at most 8 subflows"):
        M.plan_slot(fake_dp(sp, kernel), sp["slots"][0], False, core.Change)
    assert kernel.log == [], "nothing changed"


def test_kernel_without_mptcp(plan, kernel, monkeypatch):
    monkeypatch.setattr(R, "sysctl_get", lambda key: None)
    sp = S.build_spec(plan["lab-r1-h1"], mptcp=True)
    with pytest.raises(S.DatapathInputError, match="no MPTCP.*CONFIG_MPTCP"):
        M.plan_slot(fake_dp(sp, kernel), sp["slots"][0], False, core.Change)


def test_on_second_run_off_exact(plan, kernel):
    host = plan["lab-r1-h1"]
    on = S.build_spec(host, mptcp=True)
    slot = on["slots"][0]
    dp = fake_dp(on, kernel)
    before = (dict(kernel.limits), dict(kernel.sysctl))
    desc = run_plan(dp, slot)
    assert desc[0] == "mptcp sysctls in mn-slot1: net.mptcp.enabled=1"
    assert not any(d.startswith("mptcp limits") for d in desc), "2 NICs: the default limits already fit"
    # 2 NICs x 2 families subflow endpoints + a backup endpoint per task IP (6 of the kernel's 8)
    assert sum(d.startswith("mptcp endpoint ") for d in desc) == 6
    assert "mptcp endpoint %s backup in mn-slot1" % slot["task_ipv4"] in desc
    assert sum(d.startswith("rule in mn-slot1: from ") for d in desc) == 4
    assert sum(d.startswith("route in mn-slot1 default table 110") for d in desc) == 4
    assert kernel.sysctl["net.mptcp.enabled"] == "1"
    tips = (slot["task_ipv4"], slot["task_ipv6"])
    assert all(e["flags"] == ("subflow",) for a, e in kernel.endpoints.items() if a not in tips)
    assert [kernel.endpoints[a]["flags"] for a in tips] == [("backup",), ("backup",)]
    assert [kernel.endpoints[a]["dev"] for a in tips] == [None, None]
    assert dp.state["mptcp"] == {"mn-slot1": {"sysctl": {"net.mptcp.enabled": "0", "net.mptcp.pm_type": "0"}}}
    assert run_plan(dp, slot) == [], "second run changes nothing"
    # an endpoint changed by hand is replaced
    addr = slot["nics"][1]["ipv4"]
    kernel.endpoints[addr]["flags"] = ("fullmesh", "subflow")
    desc = run_plan(dp, slot)
    assert desc == ["mptcp endpoint %s dev eth1 subflow in mn-slot1 (replaces id %d dev eth1 fullmesh subflow)"
                    % (addr, 3)]
    assert kernel.endpoints[addr]["flags"] == ("subflow",)
    # turned off: everything removed, previous values back, record gone; then nothing more to do
    dp.spec = S.build_spec(host)
    desc = run_plan(dp, slot)
    assert sum(d.startswith("delete mptcp endpoint") for d in desc) == 6
    assert sum(d.startswith("delete rule in mn-slot1") for d in desc) == 4
    assert sum(d.startswith("flush table") for d in desc) == 4
    assert desc[-1].startswith("mptcp settings in mn-slot1 restored")
    assert (kernel.endpoints, kernel.rules, kernel.routes) == ({}, set(), {})
    assert (kernel.limits, kernel.sysctl) == before
    assert "mptcp" not in dp.state
    assert run_plan(dp, slot) == []


def test_limits_recorded_before_change(plan, kernel):
    kernel.limits = {"subflows": 3, "add_addr_accepted": 1}
    sp = S.build_spec(plan["lab-r1-h2"], mptcp=True)
    dp = fake_dp(sp, kernel)
    desc = run_plan(dp, sp["slots"][0])
    assert "mptcp limits in mn-slot1: subflows 4 add_addr_accepted 0 (was subflows 3 add_addr_accepted 1)" in desc
    assert dp.state["mptcp"]["mn-slot1"]["limits"] == {"subflows": 3, "add_addr_accepted": 1}
    dp.spec = S.build_spec(plan["lab-r1-h2"])
    desc = run_plan(dp, sp["slots"][0])
    assert desc[-1] == ("mptcp settings in mn-slot1 restored: limits subflows 3 add_addr_accepted 1, "
                        "net.mptcp.enabled=0")
    assert kernel.limits == {"subflows": 3, "add_addr_accepted": 1}


def test_fresh_namespace_check_mode_lists_everything(plan, kernel):
    sp = S.build_spec(plan["lab-r1-h2"], mptcp=True)
    changes = M.plan_slot(fake_dp(sp, kernel), sp["slots"][1], True, core.Change)
    desc = [c.desc for c in changes]
    assert len(desc) == 1 + 1 + 8 + 8 + 8 and kernel.log == []
    assert M.plan_slot(fake_dp(S.build_spec(plan["lab-r1-h2"]), kernel), sp["slots"][1], True, core.Change) == []


def test_backup_endpoints_for_the_task_ips_only_when_they_fit(plan):
    """The first subflow (from the task IP) is made backup by an endpoint without the subflow flag, when
    the namespace has room beside the per-NIC endpoints (kernel: 8 in all)."""
    dual = S.build_spec(plan["lab-r1-h2"], mptcp=True)            # 4 NICs x 2 families = 8: no room
    assert M.backup_endpoints(dual, dual["slots"][0]) == []
    h = copy.deepcopy(plan["lab-r1-h2"])
    for n in h["nics"]:
        for k in ("address", "gateway", "subnet"):
            n[k].pop("ipv6", None)
    v4 = S.build_spec(h, mptcp=True)                              # IPv4 only: 4 + 1
    assert v4["families"] == ["ipv4"]
    assert M.backup_endpoints(v4, v4["slots"][0]) == [v4["slots"][0]["task_ipv4"]]
    two = S.build_spec(plan["lab-r1-h1"], mptcp=True)             # 2 NICs dual stack: 4 + 2
    assert M.backup_endpoints(two, two["slots"][0]) == [two["slots"][0]["task_ipv4"], two["slots"][0]["task_ipv6"]]


# ---- mptcp_families (issue 14): room for the backup endpoint on a 4-NIC dual-stack slot --------------
def test_families_ipv4_on_four_nic_dual_stack(plan):
    """4 NICs dual stack, MPTCP for IPv4 only: 4 subflow endpoints (the NICs' IPv4 addresses) + the
    backup endpoint of the task IPv4; rules and per-NIC table routes of IPv4 only."""
    host = plan["lab-r1-h2"]
    sp = S.build_spec(host, mptcp=True, mptcp_families=["ipv4"])
    assert sp["families"] == ["ipv4", "ipv6"] and sp["mptcp_families"] == ["ipv4"]
    assert "mptcp_families" not in S.build_spec(host, mptcp=True), "unset: the spec of earlier releases"
    slot = sp["slots"][0]
    assert M.endpoints(sp, slot) == [(sn["ipv4"], sn["ifname"]) for sn in slot["nics"]]
    assert M.backup_endpoints(sp, slot) == [slot["task_ipv4"]]
    assert len(M.endpoints(sp, slot)) + len(M.backup_endpoints(sp, slot)) == 5
    assert sorted(M.rules(sp, slot)) == sorted((4, 1000, sn["ipv4"] + "/32", str(1100 + sn["index"]))
                                               for sn in slot["nics"])
    assert [(r[0], r[1]) for r in M.routes(sp, slot)] == [(4, 1100), (4, 1101), (4, 1102), (4, 1103)]
    v6 = S.build_spec(host, mptcp=True, mptcp_families=["ipv6"])
    assert M.backup_endpoints(v6, v6["slots"][0]) == [v6["slots"][0]["task_ipv6"]]
    assert all(":" in a for a, d in M.endpoints(v6, v6["slots"][0]))
    # both listed = unset (the 8 container addresses, no room for a backup endpoint)
    both = S.build_spec(host, mptcp=True, mptcp_families=["ipv6", "ipv4", "ipv4"])
    assert both["mptcp_families"] == ["ipv4", "ipv6"]
    assert len(M.endpoints(both, both["slots"][0])) == 8 and M.backup_endpoints(both, both["slots"][0]) == []


def test_families_check_spec_counts_the_mptcp_families(plan, kernel):
    """5 NICs dual stack needs 10 endpoints (refused, test_too_many_endpoints_or_subflows); with one
    family 5 + 1 backup fit."""
    host = _grown(plan["lab-r1-h2"], 5)
    sp = S.build_spec(host, ebpf=False, mptcp=True, mptcp_families=["ipv6"])
    desc = run_plan(fake_dp(sp, kernel), sp["slots"][0])
    assert sum(d.startswith("mptcp endpoint ") for d in desc) == 5 + 1
    assert any(d.startswith("mptcp limits in mn-slot1: subflows 5 ") for d in desc)
    assert "mptcp endpoint %s backup in mn-slot1" % sp["slots"][0]["task_ipv6"] in desc


@pytest.mark.parametrize("value, match", [
    ([], r"mptcp_families: \[\] is empty\. Fix: .*host_datapath_mptcp_families: \[ipv4\]"),
    (["ipv5"], r"mptcp_families: 'ipv5' is not an address family \(ipv4 or ipv6\)\. Fix: "),
    ("ipv4", r"mptcp_families: 'ipv4' is not a list\. Fix: "),
    (["ipv6"], r"mptcp_families: 'ipv6' is not planned for host lab-r1-h2 \(planned: ipv4\)\. Fix: .*\(ipv4\)"),
])
def test_families_bad_input(plan, value, match):
    h = copy.deepcopy(plan["lab-r1-h2"])
    for n in h["nics"]:
        for k in ("address", "gateway", "subnet"):
            n[k].pop("ipv6", None)
    with pytest.raises(S.DatapathInputError, match=match):
        S.build_spec(h, mptcp=True, mptcp_families=value)


def test_families_switch_on_a_live_slot_deletes_first(plan, kernel):
    """both -> [ipv4] on a live 4-NIC dual-stack slot: the 4 IPv6 endpoints, their rules and the IPv6
    routes of the per-NIC tables go first, then the backup endpoint is added (never more than 8
    endpoints); second run nothing; back to both: the backup goes before the IPv6 endpoints come;
    turned off from [ipv4]: every family's leftovers removed."""
    host = plan["lab-r1-h2"]
    dp = fake_dp(S.build_spec(host, mptcp=True), kernel)
    slot = dp.spec["slots"][0]
    run_plan(dp, slot)
    assert len(kernel.endpoints) == 8 and len(kernel.rules) == 8 and len(kernel.routes) == 8
    count = {"max": 0}
    add = kernel.ip

    def ip(args, netns=None, check=True):
        out = add(args, netns, check)
        count["max"] = max(count["max"], len(kernel.endpoints))
        assert len(kernel.endpoints) <= M.MAX_ENDPOINTS, "ERANGE: %s" % " ".join(args)
        return out
    kernel.ip = ip

    dp.spec = S.build_spec(host, mptcp=True, mptcp_families=["ipv4"])
    desc = run_plan(dp, slot)
    v6 = [sn["ipv6"] for sn in slot["nics"]]
    deletes = [i for i, d in enumerate(desc) if d.startswith(("delete ", "flush "))]
    adds = [i for i, d in enumerate(desc) if not d.startswith(("delete ", "flush "))]
    assert deletes and adds and max(deletes) < min(adds), desc
    assert sorted(d.split()[3] for d in desc if d.startswith("delete mptcp endpoint")) == sorted(v6)
    assert sum(d.startswith("delete stale rule in mn-slot1: from fd") for d in desc) == 4
    assert sum(d.startswith("flush table 110") and "(IPv6)" in d for d in desc) == 4
    assert desc[adds[0]:] == ["mptcp endpoint %s backup in mn-slot1" % slot["task_ipv4"]]
    assert sorted(kernel.endpoints) == sorted([sn["ipv4"] for sn in slot["nics"]] + [slot["task_ipv4"]])
    assert kernel.endpoints[slot["task_ipv4"]]["flags"] == ("backup",)
    assert all(f == 4 for f, dummy, dummy, dummy in kernel.rules) and len(kernel.rules) == 4
    assert sorted(kernel.routes) == [(4, 1100), (4, 1101), (4, 1102), (4, 1103)]
    assert run_plan(dp, slot) == [], "second run changes nothing"

    # check mode of the switch back lists exactly what the run then does, deletions first
    dp.spec = S.build_spec(host, mptcp=True)
    dp.live.forget()
    before_back = copy.deepcopy(kernel.endpoints)
    check = [c.desc for c in M.plan_slot(dp, slot, False, core.Change)]
    desc = run_plan(dp, slot)
    assert check == desc
    assert desc[0] == "delete mptcp endpoint %s (id %d) in mn-slot1: not wanted" % (
        slot["task_ipv4"], before_back[slot["task_ipv4"]]["id"])
    assert sum(d.startswith("mptcp endpoint fd") for d in desc) == 4
    assert len(kernel.endpoints) == 8 and count["max"] == 8
    assert run_plan(dp, slot) == []

    # off, from an IPv4-only MPTCP spec: the IPv6 endpoints, rules and routes go too
    dp.spec = S.build_spec(host, mptcp=False, mptcp_families=["ipv4"])
    desc = run_plan(dp, slot)
    assert sum(d.startswith("delete mptcp endpoint") for d in desc) == 8
    assert (kernel.endpoints, kernel.rules, kernel.routes) == ({}, set(), {})
    assert run_plan(dp, slot) == []
