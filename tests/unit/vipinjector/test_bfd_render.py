# -*- coding: utf-8 -*-
"""Host side of BFD (vipinjector.bfd): one peer per (slot, NIC) BGP session with the session's two
addresses, the ToR profile's timers; bad input named; FRR's parser accepts the files."""
import os
import subprocess

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import bfd, render

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="module")
def plan():
    topo = load_topology(yaml.safe_load(open(os.path.join(REPO, "inventories", "lab", "fabric.yml"))))
    return FabricPlan(topo).allocate()


@pytest.fixture(scope="module")
def host(plan):
    return [plan.host_data(h) for h in plan.topo.hosts if h.name == "lab-r1-h2"][0]


def test_one_peer_per_bgp_session_same_addresses(host):
    r = bfd.render_bfd(host, 1, {"enabled": True})
    inst = render.render_instance(host, 1, {"health": {"type": "none"}})
    sessions = [(s["peer"], s["local"], s["name"]) for s in inst["model"]["sessions"]]
    assert [(p["peer"], p["local"], p["interface"]) for p in r["model"]["peers"]] == sessions
    text = r["files"]["bfdd.conf"]
    for peer, local, ifname in sessions:
        assert " peer %s local-address %s interface %s\n  profile multinic-hosts\n" % (peer, local, ifname) in text
    assert text.count("  profile multinic-hosts\n") == len(sessions)
    assert " profile multinic-hosts\n  detect-multiplier 3\n  receive-interval 100\n  transmit-interval 100\n" in text
    assert "multihop" not in text and "passive-mode" not in text


def test_tor_sees_the_same_pairs(plan, host):
    """The ToR policy's neighbors of this slot are the responder's local addresses, its gateways the peers."""
    racks = [plan.rack_data(r) for r in plan.topo.racks]
    rack = [r for r in racks if host["name"] in [h["name"] for h in r["hosts"]]][0]
    sc = tor_policy.tor_structured_config(rack, {"bfd": {"enabled": True}})
    g = [g for g in sc["host_groups"] if g["host"] == host["name"]][0]
    pg = [s for s in g["slots"] if s["slot"] == 1][0]["peer_groups"][0]
    tor_pairs = sorted((n["address"], n["gateway"]) for n in pg["neighbors"])
    host_pairs = sorted((p["local"], p["peer"]) for p in bfd.render_bfd(host, 1, {"enabled": True})["model"]["peers"])
    assert tor_pairs == host_pairs
    assert sc["policy"]["bfd"] == {"enabled": True, "profile": "multinic-hosts", "interval_ms": 100, "multiplier": 3,
                                   "check_control_plane_failure": True, "multihop_hosts": []}
    assert not g["bfd_multihop"]


@pytest.mark.parametrize("platform", ["frr", "eos"])
def test_kernel_datapath_hosts_get_multihop_bfd_on_both_ends(plan, host, platform):
    """A host on the kernel datapath (bfd.multihop_hosts): its peer-groups use ebgp-multihop, so the ToR's
    bgpd asks for multihop BFD; the responder renders multihop peers with the same address pairs. Other
    hosts of the rack keep ttl-security and single-hop BFD."""
    racks = [plan.rack_data(r) for r in plan.topo.racks]
    rack = [r for r in racks if host["name"] in [h["name"] for h in r["hosts"]]][0]
    others = [h["name"] for h in rack["hosts"] if h["name"] != host["name"]]
    keys = dict((h["name"], "k-%s" % h["name"]) for h in rack["hosts"])
    sc = tor_policy.tor_structured_config(rack, {"bfd": {"enabled": True, "multihop_hosts": [host["name"]]}}, keys,
                                          platform)
    assert [g["host"] for g in sc["host_groups"] if g["bfd_multihop"]] == [host["name"]]
    text = tor_policy.render(sc)
    hop = ("ebgp-multihop 2", "ttl maximum-hops 2") if platform == "eos" else ("ebgp-multihop 2", "ttl-security hops 2")
    for g in sc["host_groups"]:
        for s in g["slots"]:
            for pg in s["peer_groups"]:
                multihop = " neighbor %s %s\n" % (pg["name"], hop[0])
                single = " neighbor %s %s\n" % (pg["name"], hop[1])
                if g["host"] == host["name"]:
                    assert multihop in text and single not in text, pg["name"]
                else:
                    assert single in text and multihop not in text, pg["name"]
                assert " neighbor %s bfd\n" % pg["name"] in text
    assert others
    # the host side of the same sessions, multihop (no interface: the slot's route to each gateway picks the veth)
    peers = bfd.render_bfd(host, 1, {"enabled": True, "multihop": True})["files"]["bfdd.conf"]
    pg = [s for s in [g for g in sc["host_groups"] if g["host"] == host["name"]][0]["slots"] if s["slot"] == 1][0]
    for n in pg["peer_groups"][0]["neighbors"]:
        assert " peer %s multihop local-address %s\n" % (n["gateway"], n["address"]) in peers
    # BFD off: the list changes nothing (the hop-limit mode stays the policy's)
    sc = tor_policy.tor_structured_config(rack, {"bfd": {"enabled": False, "multihop_hosts": [host["name"]]}}, keys,
                                          platform)
    assert not any(g["bfd_multihop"] for g in sc["host_groups"])


def test_multihop_hosts_must_be_a_list_of_names(plan, host):
    racks = [plan.rack_data(r) for r in plan.topo.racks]
    rack = [r for r in racks if host["name"] in [h["name"] for h in r["hosts"]]][0]
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.tor_structured_config(rack, {"bfd": {"enabled": True, "multihop_hosts": "lab-r1-h2"}})
    assert "options.bfd.multihop_hosts" in str(exc.value) and "list of host names" in str(exc.value)


def test_timers_multihop_passive(host):
    text = bfd.render_bfd(host, 2, {"enabled": True, "interval_ms": 300, "multiplier": 5, "multihop": True,
                                    "passive": True, "profile": "p1"})["files"]["bfdd.conf"]
    assert "  detect-multiplier 5\n  receive-interval 300\n  transmit-interval 300\n  passive-mode\n" in text
    assert text.count(" multihop local-address ") == host["nic_count"] and " interface " not in text


def test_ipv4_sessions(host):
    peers = bfd.render_bfd(host, 1, {"enabled": True}, session_family="ipv4")["model"]["peers"]
    assert all(":" not in p["peer"] and ":" not in p["local"] for p in peers)


@pytest.mark.parametrize("opts,field", [
    ({"interval_ms": 5}, "interval_ms"),
    ({"interval_ms": True}, "interval_ms"),
    ({"multiplier": 1}, "multiplier"),
    ({"profile": "a b"}, "profile"),
    ({"multihop": "yes"}, "multihop"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_input(host, opts, field):
    with pytest.raises(bfd.BfdRenderError) as ei:
        bfd.render_bfd(host, 1, opts)
    assert "vipinjector_bfd.%s" % field in str(ei.value) and "Fix:" in str(ei.value)


def test_unknown_slot(host):
    with pytest.raises(bfd.BfdRenderError, match="slot"):
        bfd.render_bfd(host, 99, {"enabled": True})


def test_tor_rejects_bad_bfd_options(plan):
    rack = plan.rack_data(plan.topo.racks[0])
    for bad, field in (({"enabled": True, "check_control_plane_failure": "yes"}, "check_control_plane_failure"),
                       ({"enabled": True, "nope": 1}, "nope")):
        with pytest.raises(tor_policy.TorPolicyError) as ei:
            tor_policy.tor_structured_config(rack, {"bfd": bad})
        assert "options.bfd.%s" % field in str(ei.value)


def test_tor_renders_check_control_plane_failure_only_when_asked(plan):
    rack = plan.rack_data(plan.topo.racks[0])
    on = tor_policy.render(tor_policy.tor_structured_config(rack, {"bfd": {"enabled": True}}))
    off = tor_policy.render(tor_policy.tor_structured_config(
        rack, {"bfd": {"enabled": True, "check_control_plane_failure": False}}))
    assert " bfd check-control-plane-failure\n" in on and "check-control-plane-failure" not in off
    assert on.count(" bfd profile multinic-hosts\n") == on.count(" bfd check-control-plane-failure\n") > 0


@pytest.mark.skipif(not os.path.exists("/usr/bin/vtysh"), reason="needs vtysh (FRR) for the syntax check")
@pytest.mark.parametrize("opts", [{"enabled": True},
                                  {"enabled": True, "multihop": True, "passive": True, "interval_ms": 300}])
def test_frr_parser_accepts_the_files(host, tmp_path, opts):
    r = bfd.render_bfd(host, 1, opts)
    for name, text in r["files"].items():
        path = tmp_path / name
        path.write_text(text)
        p = subprocess.run(["vtysh", "-C", "-f", str(path)], capture_output=True, text=True, check=False)
        assert p.returncode == 0, p.stdout + p.stderr
