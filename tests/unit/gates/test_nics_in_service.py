# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gate nics_in_service on recorded input.

ToR side: ``show bfd peers json`` captured from a real FRR 8.4.4 ToR (tor_policy config with BFD, the mnv
harness) with slot 1 of lab-r1-h2 running its sidecar and BFD responder: all four sessions up, then NIC 2
silently cut on the ToR port (``tor_bfd_peers_slot1_*``). Host side: ``host_datapath_*`` are
``measure.datapath_input`` records captured on the datapath harness (labkit/dp_harness.py, lab-r1-h2 deployed by
the datapath core in kernel and in eBPF mode, then eth2 set admin down); the variations below are built in the
same JSON formats (``ip -j link show``, ``ip -j route show table T``, ``bpftool -j map dump``)."""

from __future__ import annotations

import copy
import json
import os
import struct

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.gates import builtin, engine, expr, measure
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TABLE_BASE = 1100


def fx(name):
    with open(os.path.join(HERE, "fixtures", name)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def host():
    with open(os.path.join(REPO, "inventories", "lab", "fabric.yml")) as f:
        topo = load_topology(yaml.safe_load(f))
    plan = FabricPlan(topo).allocate()
    return next(plan.host_data(h) for h in topo.hosts if h.name == "lab-r1-h2")


def slot1_only(h):
    h = copy.deepcopy(h)
    h["slots"] = [s for s in h["slots"] if s["slot"] == 1]
    return h


# --- host records in iproute2 / bpftool JSON ---------------------------------------------------------

def links(h, down=None, no_carrier=None):
    out = [{"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "operstate": "UNKNOWN"}]
    for n in h["nics"]:
        flags = ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]
        state = "UP"
        if n["name"] == down:
            flags, state = ["BROADCAST", "MULTICAST"], "DOWN"
        elif n["name"] == no_carrier:
            flags, state = ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"], "DOWN"
        out.append({"ifindex": 10 + n["index"], "ifname": n["name"], "flags": flags, "mtu": 1500,
                    "operstate": state, "link_type": "ether"})
    return out


def tables(h, fam, out_nic=None, linkdown=None):
    """{table: ``ip -j route show table T``} of the per-NIC tables (own default metric 10, fallback 20)."""
    res = {}
    live = [n for n in h["nics"] if n["name"] != out_nic]
    for n in h["nics"]:
        routes = []
        if n["name"] != out_nic:
            r = {"dst": "default", "gateway": n["gateway"][fam], "dev": n["name"], "metric": 10, "flags": []}
            if n["name"] == linkdown:
                r["flags"] = ["linkdown"]
            routes.append(r)
        routes.append({"dst": "default", "metric": 20, "flags": [], "nexthops": [
            {"gateway": m["gateway"][fam], "dev": m["name"], "weight": 1,
             "flags": ["linkdown"] if m["name"] == linkdown else []} for m in live]})
        res[str(TABLE_BASE + n["index"])] = routes
    return res


def record(h, ebpf=False, out_nic=None, nic_out_bit=None, **link_kw):
    rec = {"configured": True, "host": h["name"], "ebpf": ebpf, "table_base": TABLE_BASE, "metric_own": 10,
           "metric_fallback": 20, "links": links(h, **link_kw), "links_error": None,
           "nics": [{"name": n["name"], "index": n["index"], "families": ["ipv4", "ipv6"]} for n in h["nics"]]}
    if ebpf:
        dump = []
        for i in range(8):
            n = next((x for x in h["nics"] if x["index"] == i), None)
            val = struct.pack("<II4s16s", 10 + i if n else 0, (3 | (4 if n and n["name"] == nic_out_bit else 0))
                              if n else 0, b"\0" * 4, b"\0" * 16)
            dump.append({"key": ["0x%02x" % b for b in struct.pack("<I", i)], "value": ["0x%02x" % b for b in val]})
        rec.update({"mn_nics": dump, "mn_nics_error": None})
    else:
        linkdown = link_kw.get("no_carrier")
        rec.update({"routes": {"ipv4": tables(h, "ipv4", out_nic, linkdown),
                               "ipv6": tables(h, "ipv6", out_nic, linkdown)}, "routes_error": {}})
    return {"datapath": rec}


def vals(data, h):
    return builtin.values_for("nics_in_service", data, hosts=[h])


# --- host side ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ebpf", [False, True], ids=["kernel", "ebpf"])
def test_all_nics_in_service(host, ebpf):
    v = vals(record(host, ebpf=ebpf), host)
    assert (v["nics"], v["in_service"], v["out_of_service"], v["detail"]) == (4, 4, 0, [])
    assert v["mode"] == ("ebpf" if ebpf else "kernel") and v["evidence"] == "datapath"
    assert expr.evaluate(builtin.DEFAULTS["nics_in_service"]["success_condition"], v)


@pytest.mark.parametrize("ebpf", [False, True], ids=["kernel", "ebpf"])
def test_admin_down_and_carrier_down_named(host, ebpf):
    v = vals(record(host, ebpf=ebpf, down="eth1"), host)
    assert v["out_of_service"] == 1 and v["detail"][0]["nic"] == "eth1"
    assert "admin down" in v["detail"][0]["reasons"]
    v = vals(record(host, ebpf=ebpf, no_carrier="eth3"), host)
    assert [d["nic"] for d in v["detail"]] == ["eth3"]
    assert any(r.startswith("carrier down") for r in v["detail"][0]["reasons"])
    if not ebpf:   # the kernel keeps the route, flagged linkdown (ignore_routes_with_linkdown)
        assert any("linkdown" in r for r in v["detail"][0]["reasons"])


def test_kernel_nic_out_of_the_egress_set(host):
    # what the NIC watcher does in kernel mode: own default route deleted, left out of every fallback
    v = vals(record(host, out_nic="eth2"), host)
    assert [d["nic"] for d in v["detail"]] == ["eth2"] and v["in_service"] == 3
    reasons = " | ".join(v["detail"][0]["reasons"])
    assert "no own ipv4 default route in table 1102" in reasons and "no own ipv6 default route" in reasons
    assert "left out of the ipv4 fallback multipath default route of table 1100" in reasons


def test_ebpf_nic_out_bit_and_stale_entry(host):
    v = vals(record(host, ebpf=True, nic_out_bit="eth2"), host)
    assert [d["nic"] for d in v["detail"]] == ["eth2"]
    assert v["detail"][0]["reasons"] == ["taken out of the egress set (NIC_OUT set in mn_nics)"]
    rec = record(host, ebpf=True)
    rec["datapath"]["links"][2]["ifindex"] = 99        # eth1 re-created: mn_nics still names the old ifindex
    v = vals(rec, host)
    assert [d["nic"] for d in v["detail"]] == ["eth1"] and "points at ifindex 11" in v["detail"][0]["reasons"][0]
    # BTF-formatted dump (bpftool with the object's BTF) reads the same
    rec = record(host, ebpf=True, nic_out_bit="eth0")
    rec["datapath"]["mn_nics"] = [{"formatted": {"key": i, "value": {"ifindex": 10 + i if i < 4 else 0,
                                                                     "flags": 7 if i == 0 else 3}}}
                                  for i in range(8)]
    assert [d["nic"] for d in vals(rec, host)["detail"]] == ["eth0"]


def test_missing_evidence_is_out_of_service_never_pass(host):
    v = vals({"datapath": {"configured": False, "error": "/var/lib/netscale-multinic/datapath.json: No such file"}}, host)
    assert (v["in_service"], v["out_of_service"]) == (0, 4) and "no datapath state" in v["detail"][0]["reasons"][0]
    rec = record(host, ebpf=True)
    rec["datapath"].update({"mn_nics": None, "mn_nics_error": "bpftool failed (rc 255)"})
    assert vals(rec, host)["out_of_service"] == 4
    rec = record(host)
    del rec["datapath"]["routes"]["ipv6"]["1101"]
    rec["datapath"]["routes_error"]["ipv6/1101"] = "ip failed (rc 2)"
    v = vals(rec, host)
    assert [d["nic"] for d in v["detail"]] == ["eth1"] and "not readable: ip failed" in v["detail"][0]["reasons"][0]
    rec = record(host)
    rec["datapath"]["links"] = [ln for ln in rec["datapath"]["links"] if ln["ifname"] != "eth3"]
    assert [d["nic"] for d in vals(rec, host)["detail"]] == ["eth3"]
    rec = record(host)
    rec["datapath"]["host"] = "lab-r1-h1"
    assert vals(rec, host)["out_of_service"] == 4
    with pytest.raises(engine.MeasurementError):
        vals({}, host)


@pytest.mark.parametrize("mode", ["kernel", "ebpf"])
def test_recorded_host_state(host, mode):
    v = vals(fx("host_datapath_%s_up.json" % mode), host)
    assert (v["in_service"], v["nics"], v["mode"]) == (4, 4, mode)
    v = vals(fx("host_datapath_%s_eth2_down.json" % mode), host)
    assert [d["nic"] for d in v["detail"]] == ["eth2"] and v["detail"][0]["reasons"][0] == "admin down"
    if mode == "kernel":    # the kernel drops the NIC's own default routes with the link
        assert "no own ipv4 default route in table 1102 (metric 10): not in the egress set" in v["detail"][0]["reasons"]


# --- ToR side (recorded from a real FRR 8.4.4 ToR) -----------------------------------------------

def test_bfd_all_up_then_nic2_down(host):
    h = slot1_only(host)
    v = builtin.values_for("nics_in_service", fx("tor_bfd_peers_slot1_up.json"), hosts=[h])
    assert (v["nics"], v["in_service"], v["bfd_sessions"], v["bfd_up"]) == (4, 4, 4, 4)
    assert v["evidence"] == "bfd_peers"
    v = builtin.values_for("nics_in_service", fx("tor_bfd_peers_slot1_nic2_down.json"), hosts=[h])
    assert (v["in_service"], v["bfd_up"]) == (3, 3)
    assert v["detail"] == [{"host": "lab-r1-h2", "nic": "eth2", "index": 2,
                            "reasons": ["BFD session of slot 1 (ToR peer fd00:10:0:a::4) down"]}]


def test_bfd_session_missing_on_the_tor_counts(host):
    # slot 2 has no responder in that capture: its peers are down; a peer the ToR does not have is named so
    v = builtin.values_for("nics_in_service", fx("tor_bfd_peers_slot1_up.json"), hosts=[host])
    assert v["in_service"] == 0 and v["bfd_sessions"] == 8 and v["bfd_up"] == 4
    v = builtin.values_for("nics_in_service", {"bfd_peers": []}, hosts=[slot1_only(host)])
    assert v["out_of_service"] == 4 and v["detail"][0]["reasons"][0].endswith("not on the ToR")


def test_gate_through_the_engine(host):
    h = slot1_only(host)
    d = builtin.definition("nics_in_service", count=4, interval=0.0, failure_limit=3, success_threshold=2)
    for data, verdict in ((fx("tor_bfd_peers_slot1_up.json"), engine.PASS),
                          (fx("tor_bfd_peers_slot1_nic2_down.json"), engine.FAIL)):
        fn = measure.measurement("nics_in_service", "values", hosts=[h], data=data)
        spec = engine.GateSpec("nics_in_service", fn, d["success_condition"], interval=0.0, count=d["count"],
                               failure_limit=d["failure_limit"], success_threshold=d["success_threshold"])
        assert engine.run_gate(spec, clock=lambda: 0.0, sleep=lambda s: None)["verdict"] == verdict


# --- measurement adapters ----------------------------------------------------------------------

def test_datapath_input_reads_state_and_commands(tmp_path, host):
    spec = {"host": host["name"], "ebpf": False, "table_base": TABLE_BASE,
            "nics": [dict({"name": n["name"], "index": n["index"]},
                          ipv4={"gateway": n["gateway"]["ipv4"]}, ipv6={"gateway": n["gateway"]["ipv6"]})
                     for n in host["nics"]]}
    (tmp_path / "datapath.json").write_text(json.dumps({"spec": spec}))
    full = record(host)["datapath"]
    calls = []

    def run(argv):
        calls.append(argv)
        if argv[:3] == ["ip", "-j", "link"]:
            return 0, json.dumps(full["links"]), ""
        if argv[2] in ("-4", "-6") and argv[-1] == "1103" and argv[2] == "-6":
            return 2, "", "Error: ipv6: table does not exist"
        fam = "ipv4" if argv[2] == "-4" else "ipv6"
        return 0, json.dumps(full["routes"][fam][argv[-1]]), ""
    rec = measure.datapath_input(run, str(tmp_path))
    assert len(calls) == 1 + 8
    v = vals(rec, host)
    assert [d["nic"] for d in v["detail"]] == ["eth3"] and "table does not exist" in v["detail"][0]["reasons"][0]
    spec["ebpf"] = True
    (tmp_path / "datapath.json").write_text(json.dumps({"spec": spec, "bpf_version": "abc"}))
    calls[:] = []

    def run_ebpf(argv):
        calls.append(argv)
        if argv[0] == "bpftool":
            return 0, json.dumps(record(host, ebpf=True)["datapath"]["mn_nics"]), ""
        return 0, json.dumps(full["links"]), ""
    rec = measure.datapath_input(run_ebpf, str(tmp_path), bpffs_root="/sys/fs/bpf")
    assert calls[1] == ["bpftool", "-j", "map", "dump", "pinned", "/sys/fs/bpf/netscale-multinic/v-abc/maps/mn_nics"]
    assert vals(rec, host)["in_service"] == 4
    assert measure.datapath_input(run, str(tmp_path / "nowhere"))["datapath"]["configured"] is False


def test_frr_source_reads_bfd_peers():
    def run(argv):
        assert argv[-2:] == ["-c", "show bfd peers json"]
        return 0, json.dumps(fx("tor_bfd_peers_slot1_up.json")), ""
    assert len(measure.frr_input(run, ["vtysh"], "bfd_peers")) == 12
    assert measure.DEFAULT_SOURCE["nics_in_service"] == "datapath"
