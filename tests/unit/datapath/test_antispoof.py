# -*- coding: utf-8 -*-
"""Unit tests of anti-spoofing (pure): allowed sources from the spec, mn_src/mn_veth encoding, the
map bound, the nftables ruleset and its live comparison, counter parsing."""
import ipaddress
import json
import os
import re
import struct

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import antispoof as A, bpf, spec as S
from dp_links import fake_links


def _links(sp):
    return fake_links(sp, first_veth_ifindex=20)


def test_allowed_sources_are_task_ips_and_container_addresses_of_the_slot_only(plan):
    h = plan["lab-r1-h2"]
    sp = S.build_spec(h)
    allowed = A.allowed_sources(sp)
    assert sorted(allowed) == [s["slot"] for s in h["slots"]]
    for slot in h["slots"]:
        want = set(slot["task_ip"].values()) | set(a for n in slot["nics"] for a in n["address"].values())
        assert set(allowed[slot["slot"]]) == set(str(ipaddress.ip_address(a)) for a in want)
        assert len(allowed[slot["slot"]]) == 2 + 2 * len(h["nics"])
    one, two = allowed[1], allowed[2]
    assert not set(one) & set(two), "slots must not share an allowed source"
    # no NIC address, gateway or another host's task IP
    others = set(n["address"]["ipv4"] for n in h["nics"]) | set(n["gateway"]["ipv6"] for n in h["nics"])
    others |= set(plan["lab-r1-h1"]["slots"][0]["task_ip"].values())
    assert not others & set(one + two)


def test_a_family_the_host_does_not_plan_is_not_allowed(plan):
    h = plan["lab-r1-h1"]
    v4only = dict(h, nics=[dict(n, address={"ipv4": n["address"]["ipv4"]}) for n in h["nics"]])
    sp = S.build_spec(v4only)
    assert all(":" not in a for addrs in A.allowed_sources(sp).values() for a in addrs)
    body, dummy = A.render_ruleset(sp)
    assert "type ipv6_addr\n\t}" in body, "empty IPv6 set: every global IPv6 source is dropped"


def test_map_encoding_slot_in_mn_veth_and_mn_src(plan):
    sp = S.build_spec(plan["lab-r1-h1"])
    host, ns = _links(sp)
    m = bpf.desired_maps(sp, host, ns)
    for s in sp["slots"]:
        for v in s["nics"]:
            assert struct.unpack("<II", m["mn_veth"][struct.pack("<I", host[v["veth"]]["ifindex"])]) == (v["index"], s["slot"])
    assert len(m["mn_src"]) == sum(len(a) for a in A.allowed_sources(sp).values()) == 2 * (2 + 2 * 2)
    tip4 = sp["slots"][1]["task_ipv4"]
    key = A.src_key(2, tip4)
    assert len(key) == 24 and m["mn_src"][key] == struct.pack("<I", 1)
    assert key == struct.pack("<II", 2, 2) + ipaddress.ip_address(tip4).packed + b"\0" * 12
    assert A.src_key(1, tip4) not in m["mn_src"], "slot 1 may not send as slot 2's task IP"
    tip6 = sp["slots"][0]["task_ipv6"]
    assert A.src_key(1, tip6)[4:8] == struct.pack("<I", 10) and A.src_key(1, tip6) in m["mn_src"]


def test_mn_src_size_holds_every_host_the_veth_limit_allows():
    src = open(os.path.join("roles", "host_datapath", "files", "bpf", "multinic_datapath.c")).read()
    block = re.search(r"struct \{([^}]*)\} mn_src SEC", src).group(1)
    assert int(re.search(r"max_entries, (\d+)", block).group(1)) == A.SRC_ENTRIES
    worst = max((S.EBPF_VETH_ENTRIES // n) * (2 + 2 * n) for n in range(1, S.EBPF_MAX_NICS + 1))
    assert worst <= A.SRC_ENTRIES
    enum = re.search(r"enum \{([^}]*)\}", src).group(1)
    names = re.findall(r"ST_([A-Z_]+)", enum)
    assert [n.lower() for n in names[:-1]] == list(bpf.STATS), "mn_stats slots and bpf.STATS in the same order"


def test_nft_ruleset_per_slot_chain_on_its_veths(plan):
    sp = S.build_spec(plan["lab-r1-h2"], ebpf=False)
    script = A.nft_script(sp)
    assert script.startswith("table netdev netscale_multinic\ndelete table netdev netscale_multinic\n")
    for s in sp["slots"]:
        n = s["slot"]
        devs = ", ".join('"%s"' % v["veth"] for v in s["nics"])
        assert "type filter hook ingress devices = { %s } priority -500; policy accept;" % devs in script
        assert 'meta protocol { ip, ip6 } counter name "spoof_slot%d" drop' % n in script
        assert "ip saddr @src4_slot%d accept" % n in script and "ip6 saddr @src6_slot%d accept" % n in script
    assert A.desired_sets(sp)["src6_slot1"] == sorted(a for a in A.allowed_sources(sp)[1] if ":" in a)


def test_digest_ignores_counter_values_but_not_the_addresses(plan):
    sp = S.build_spec(plan["lab-r1-h1"], ebpf=False)
    b0, d0 = A.render_ruleset(sp)
    b1, d1 = A.render_ruleset(sp, {1: (7, 560)})
    assert d0 == d1 and "packets 7 bytes 560" in b1 and b0 != b1
    other = S.build_spec(plan["lab-r1-h2"], ebpf=False)
    assert A.render_ruleset(other)[1] != d0


def _live_json(sp, sets=None, counters=None, chains=None):
    objs = [{"metainfo": {"version": "1.0.6"}}, {"table": {"family": "netdev", "name": A.NFT_TABLE}}]
    for slot, (pk, by) in (counters or {}).items():
        objs.append({"counter": {"name": "spoof_slot%d" % slot, "packets": pk, "bytes": by}})
    for name, elems in (sets if sets is not None else A.desired_sets(sp)).items():
        o = {"name": name, "type": "ipv4_addr"}
        if elems:
            o["elem"] = elems
        objs.append({"set": o})
    for c in (chains if chains is not None else ["slot%d" % s["slot"] for s in sp["slots"]]):
        objs.append({"chain": {"name": c, "hook": "ingress"}})
    return json.dumps({"nftables": objs})


def test_live_comparison(plan):
    sp = S.build_spec(plan["lab-r1-h1"], ebpf=False)
    dummy, digest = A.render_ruleset(sp)
    text = 'table netdev netscale_multinic {\n\tcomment "netscale.multinic anti-spoofing %s"\n}' % digest
    live = A.parse_live(text, _live_json(sp, counters={1: (3, 180)}))
    assert A.live_matches(sp, live) and live["counters"] == {1: (3, 180)}
    assert A.parse_live("", "") is None and not A.live_matches(sp, None)
    stale = A.parse_live(text.replace(digest, "0" * 16), _live_json(sp))
    assert not A.live_matches(sp, stale)
    sets = A.desired_sets(sp)
    sets["src4_slot1"] = sets["src4_slot1"][1:]          # an element removed by hand
    assert not A.live_matches(sp, A.parse_live(text, _live_json(sp, sets=sets)))
    assert not A.live_matches(sp, A.parse_live(text, _live_json(sp, chains=["slot1"])))  # chain gone with its veths


def test_spoof_counts_from_bpftool_dump():
    def hx(b):
        return ["0x%02x" % x for x in b]
    per_cpu = [{"cpu": 0, "value": hx(struct.pack("<Q", 5))}, {"cpu": 1, "value": hx(struct.pack("<Q", 7))}]
    dump = [{"key": hx(struct.pack("<I", 1)), "values": per_cpu},
            {"key": hx(struct.pack("<I", 2)), "values": [{"cpu": 0, "value": hx(struct.pack("<Q", 0))}]}]
    assert A.spoof_counts_from_dump(dump) == {1: 12, 2: 0}


class _Proc(object):
    def __init__(self, rc, out=""):
        self.returncode, self.stdout, self.stderr = rc, out, ""


class _FakeRunner(object):
    """nft reads answered from a fake live table (None = absent); writes recorded, not run."""

    def __init__(self, text=None, js=None):
        self.text, self.js, self.log, self.ran = text, js, [], []

    def read(self, argv, check=True):
        if argv[:2] == ["nft", "list"]:
            return _Proc(0, self.text) if self.text else _Proc(1)
        if argv[:3] == ["nft", "-j", "list"]:
            return _Proc(0, self.js) if self.js else _Proc(1)
        raise AssertionError(argv)

    def run(self, argv, check=True, stdin=None, record=True):
        self.ran.append((argv, stdin))
        return _Proc(0)


def _datapath(plan, runner, ebpf=False):
    from ansible_collections.netscale.multinic.plugins.module_utils.datapath import core
    return core.Datapath(S.build_spec(plan["lab-r1-h1"], ebpf=ebpf), core.Options(state_dir="/nonexistent"), runner)


def test_kernel_mode_plans_the_table_once_and_keeps_counters(plan, monkeypatch):
    from ansible_collections.netscale.multinic.plugins.module_utils.datapath import core
    monkeypatch.setattr(core.shutil, "which", lambda name: "/usr/sbin/" + name)
    fresh = _FakeRunner()
    dp = _datapath(plan, fresh)
    changes = dp._plan_antispoof()
    assert [c.desc for c in changes] == ["nftables table netdev netscale_multinic: anti-spoofing on 4 veths of 2 slots"]
    changes[0].fn()
    argv, script = fresh.ran[0]
    assert argv == ["nft", "-f", "-"] and script == A.nft_script(dp.spec)
    dummy, digest = A.render_ruleset(dp.spec)
    text = 'table netdev netscale_multinic {\n\tcomment "netscale.multinic anti-spoofing %s"\n}' % digest
    same = _FakeRunner(text, _live_json(dp.spec, counters={2: (9, 540)}))
    assert _datapath(plan, same)._plan_antispoof() == [], "second run: 0 changed"
    stale = _FakeRunner(text.replace(digest, "f" * 16), _live_json(dp.spec, counters={2: (9, 540)}))
    c = _datapath(plan, stale)._plan_antispoof()
    c[0].fn()
    assert "counter spoof_slot2 {\n\t\tpackets 9 bytes 540" in stale.ran[0][1], "counters carried over a rebuild"


def test_kernel_mode_without_nft_fails_naming_host_and_fix(plan, monkeypatch):
    from ansible_collections.netscale.multinic.plugins.module_utils.datapath import core
    monkeypatch.setattr(core.shutil, "which", lambda name: None)
    with pytest.raises(core.datapath_run.CommandError) as err:
        _datapath(plan, _FakeRunner())._plan_antispoof()
    assert "lab-r1-h1 has no nft command" in str(err.value) and "install the nftables package" in str(err.value)


def test_ebpf_mode_removes_a_left_table_and_removal_deletes_it(plan, monkeypatch):
    from ansible_collections.netscale.multinic.plugins.module_utils.datapath import core
    monkeypatch.setattr(core.shutil, "which", lambda name: "/usr/sbin/" + name)
    left = _FakeRunner("table netdev netscale_multinic {\n}", _live_json(S.build_spec(plan["lab-r1-h1"])))
    dp = _datapath(plan, left, ebpf=True)
    assert dp._plan_antispoof() == []
    off = dp._plan_antispoof_off()
    assert [c.desc for c in off] == ["delete nftables table netdev netscale_multinic (eBPF mode checks sources in its program)"]
    assert [c.desc for c in dp._plan_removal_antispoof()] == ["delete nftables table netdev netscale_multinic"]
    off[0].fn()
    assert left.ran == [(["nft", "delete", "table", "netdev", "netscale_multinic"], None)]
    assert _datapath(plan, _FakeRunner(), ebpf=True)._plan_antispoof_off() == []
