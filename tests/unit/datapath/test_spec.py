# -*- coding: utf-8 -*-
"""Unit tests of the datapath spec (pure): names, addresses, routes, proxies, map encoding, bad input."""
import copy
import struct

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as S, core, bpf


def test_spec_names_and_addresses(plan):
    sp = S.build_spec(plan["lab-r1-h2"])
    assert [n["name"] for n in sp["nics"]] == ["eth0", "eth1", "eth2", "eth3"]
    assert sp["slots"][0]["netns"] == "mn-slot1"
    assert [v["veth"] for v in sp["slots"][1]["nics"]] == ["ms2-eth0", "ms2-eth1", "ms2-eth2", "ms2-eth3"]
    assert sp["slots"][0]["task_ipv6"] == plan["lab-r1-h2"]["slots"][0]["task_ip"]["ipv6"]
    assert sp["families"] == ["ipv4", "ipv6"]


def test_same_code_two_and_four_nics(plan):
    for name, n in (("lab-r1-h1", 2), ("lab-r1-h2", 4)):
        dp = core.Datapath(S.build_spec(plan[name]), core.Options(state_dir="/nonexistent"))
        ns = dp.ns_routes(dp.spec["slots"][0])
        default = [r for r in ns if r[2] == "default"]
        assert len(default) == 2 and all(len(r[3]) == n for r in default)
        # each ToR gateway pinned to its own veth, /32 and /128, sourced from that NIC's address
        pins = [r for r in ns if r[2] != "default"]
        assert len(pins) == 2 * n
        assert len(dp.rules()) == 2 * 2 * n * 2
        assert len(dp.proxies()) == 2 * (2 * n + 2)


def test_bad_input(plan):
    with pytest.raises(S.DatapathInputError, match="no entry for this host"):
        S.build_spec(None)
    bad = copy.deepcopy(plan["lab-r1-h1"])
    bad["nics"][0]["name"] = "averyverylongname"
    with pytest.raises(S.DatapathInputError, match="too long"):
        S.build_spec(bad)
    sp = S.build_spec(plan["lab-r1-h1"])
    with pytest.raises(S.DatapathInputError, match="eth1 of the plan not found"):
        S.check_nics(sp, ["eth0", "eno1"])
    with pytest.raises(S.DatapathInputError, match="plan has 2 NICs"):
        S.check_nics(sp, ["eth0", "eth1", "eth2"])
    S.check_nics(sp, ["eth0", "eth1", "mgmt0"])


def test_map_encoding(plan):
    sp = S.build_spec(plan["lab-r1-h1"])
    host_links = {"eth0": {"ifindex": 2, "address": "02:00:00:00:00:02"},
                  "eth1": {"ifindex": 3, "address": "02:00:00:00:00:03"}}
    ns_links = {}
    i = 10
    for s in sp["slots"]:
        ns_links[s["netns"]] = {}
        for v in s["nics"]:
            host_links[v["veth"]] = {"ifindex": i, "address": "02:00:00:00:01:%02x" % i}
            ns_links[s["netns"]][v["ifname"]] = {"ifindex": 2, "address": "02:00:00:00:02:%02x" % i}
            i += 1
    m = bpf.desired_maps(sp, host_links, ns_links)
    assert len(m["mn_nics"]) == bpf.MAX_NICS
    assert struct.unpack("<II", m["mn_cfg"][struct.pack("<I", 0)]) == (2, 0)
    # per slot: 2 NICs x (container v4 + v6 + task v4 + v6)
    assert len(m["mn_ingress"]) == 2 * 2 * 4
    key = bpf.ing_key(3, sp["slots"][0]["nics"][1]["ipv6"])
    veth_if, dmac, smac = struct.unpack("<I6s6s", m["mn_ingress"][key])
    assert veth_if == host_links["ms1-eth1"]["ifindex"]
    assert len(key) == 24 and len(m["mn_ingress"][key]) == 16


def _grown(host, nics=None, slots=None):
    """The plan entry of ``host`` with its NIC list / slot list repeated to the given counts."""
    h = copy.deepcopy(host)
    if nics:
        base = h["nics"][0]
        h["nics"] = [dict(copy.deepcopy(base), index=i, name="eth%d" % i) for i in range(nics)]
        for slot in h["slots"]:
            first = slot["nics"][0]
            slot["nics"] = [dict(copy.deepcopy(first), index=i) for i in range(nics)]
    if slots:
        first = h["slots"][0]
        h["slots"] = [dict(copy.deepcopy(first), slot=i + 1) for i in range(slots)]
    return h


def test_ebpf_limits_agree_with_the_program():
    import os
    import re
    src = open(os.path.join("roles", "host_datapath", "files", "bpf", "multinic_datapath.c")).read()
    assert int(re.search(r"#define MN_MAX_NICS (\d+)", src).group(1)) == S.EBPF_MAX_NICS == bpf.MAX_NICS

    def entries(name):
        block = re.search(r"struct \{([^}]*)\} %s SEC" % name, src).group(1)
        return int(re.search(r"max_entries, (\d+)", block).group(1))
    assert entries("mn_veth") == S.EBPF_VETH_ENTRIES
    assert entries("mn_ingress") == S.EBPF_INGRESS_ENTRIES


def test_more_nics_than_the_ebpf_datapath_holds_is_refused_naming_host_and_limit(plan):
    h = _grown(plan["lab-r1-h2"], nics=9)
    with pytest.raises(S.DatapathInputError) as err:
        S.build_spec(h, ebpf=True)
    text = str(err.value)
    assert "lab-r1-h2 has 9 NICs" in text and "at most 8" in text and "host_datapath_ebpf: false" in text
    assert len(S.build_spec(h, ebpf=False)["nics"]) == 9, "kernel forwarding has no such limit"
    assert len(S.build_spec(_grown(plan["lab-r1-h2"], nics=8), ebpf=True)["nics"]) == 8


def test_slots_times_nics_beyond_mn_veth_is_refused(plan):
    h = _grown(plan["lab-r1-h2"], nics=8, slots=129)
    with pytest.raises(S.DatapathInputError, match=r"129 slots x 8 NICs = 1032 veths.*at most 1024 \(mn_veth\)"):
        S.build_spec(h, ebpf=True)
