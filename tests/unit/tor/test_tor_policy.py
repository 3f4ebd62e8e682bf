# -*- coding: utf-8 -*-
"""ToR policy model, templates and golden files (pure Python, no devices)."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.frr import apply as frr_apply, state as frr_state
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
GOLDEN = os.path.join(REPO, "tests", "golden", "tor")
sys.path.insert(0, GOLDEN)

import regenerate  # noqa: E402


def lab_plan(mutate=None):
    with open(os.path.join(REPO, "inventories", "lab", "fabric.yml")) as fh:
        data = yaml.safe_load(fh)
    if mutate:
        mutate(data)
    return FabricPlan(load_topology(data)).allocate()


def lab_rack(plan=None, name="lab-r1"):
    plan = plan or lab_plan()
    return plan.rack_data(next(r for r in plan.topo.racks if r.name == name))


# -- golden files ------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(regenerate.CASES))
def test_golden_files_match(case):
    rendered = regenerate.render_case(case)
    d = os.path.join(GOLDEN, case)
    on_disk = sorted(f[:-4] for f in os.listdir(d) if f.endswith(".cfg"))
    assert on_disk == sorted(rendered), "devices differ; regenerate with tests/golden/tor/regenerate.py"
    for device, cfg in rendered.items():
        with open(os.path.join(d, device + ".cfg")) as fh:
            assert fh.read() == cfg["text"], (
                "%s/%s.cfg drifted: run PYTHONPATH=.build .venv/bin/python tests/golden/tor/regenerate.py "
                "and review the diff" % (case, device))


@pytest.mark.skipif(not os.path.exists("/usr/bin/vtysh"), reason="needs vtysh (FRR) for the syntax check")
def test_frr_golden_files_pass_vtysh_dry_run():
    bad = []
    for case in regenerate.CASES:
        d = os.path.join(GOLDEN, case)
        for f in sorted(os.listdir(d)):
            path = os.path.join(d, f)
            if not f.endswith(".cfg") or "service routing protocols" in open(path).read():
                continue
            p = subprocess.run(["vtysh", "-C", "-f", path], capture_output=True, text=True, check=False)
            if p.returncode != 0:
                bad.append((f, p.stdout + p.stderr))
    assert bad == []


# -- the model ---------------------------------------------------------------------------------

def test_one_neighbor_per_slot_and_nic_from_container_addresses():
    rack = lab_rack()
    sc = tor_policy.tor_structured_config(rack)
    for h, g in zip(rack["hosts"], sc["host_groups"]):
        assert [s["slot"] for s in g["slots"]] == [s["slot"] for s in h["slots"]]
        for slot, gs in zip(h["slots"], g["slots"]):
            (pg,) = gs["peer_groups"]
            assert pg["name"] == "HOST-%s-S%d" % (h["name"], slot["slot"])
            assert [n["address"] for n in pg["neighbors"]] == [sn["address"]["ipv6"] for sn in slot["nics"]]
            assert pg["address_families"] == ["ipv6", "ipv4"]  # IPv4 NLRI over the IPv6 session
            for n in pg["neighbors"]:
                assert n["slot"] == slot["slot"]
                assert ipaddress.ip_address(n["address"]) in ipaddress.ip_network(h["nics"][n["nic"]]["subnet"]["ipv6"])
        assert g["asn"] == h["asn"]
    assert sc["counts"]["neighbors"] == 2 * 2 + 4 * 2
    assert sc["counts"]["peer_groups"] == sc["counts"]["slots"] == 4


def test_prefix_lists_permit_exactly_the_slot_task_ip():
    rack = lab_rack()
    sc = tor_policy.tor_structured_config(rack)
    all_task_ips = {fam: {s["task_ip"][fam] for h in rack["hosts"] for s in h["slots"]} for fam in ("ipv4", "ipv6")}
    for h, g in zip(rack["hosts"], sc["host_groups"]):
        for slot, gs in zip(h["slots"], g["slots"]):
            for fam, bits in (("ipv4", 32), ("ipv6", 128)):
                (e,) = gs["prefix_lists"][fam]["entries"]
                assert e == {"seq": 10, "action": "permit", "prefix": "%s/%d" % (slot["task_ip"][fam], bits)}
                permitted = {str(a) for a in ipaddress.ip_network(e["prefix"])}
                assert permitted == {slot["task_ip"][fam]}
                # No other slot's task IP, on this host or any other, is permitted here.
                assert not (permitted & (all_task_ips[fam] - {slot["task_ip"][fam]}))
                assert gs["maximum_prefix"][fam] == 1
    names = [gs["prefix_lists"][f]["name"] for g in sc["host_groups"] for gs in g["slots"] for f in ("ipv4", "ipv6")]
    assert len(names) == len(set(names)) == 8


def test_frr_sibling_slot_task_ip_only_in_its_own_list():
    text = tor_policy.render(tor_policy.tor_structured_config(lab_rack()))
    lines = [line for line in text.splitlines() if " 198.18.0.9/32" in line]
    assert lines == ["ip prefix-list PL-TASK-lab-r1-h1-S2-IPV4 seq 10 permit 198.18.0.9/32"]
    assert "ge 32" not in text and "ge 128" not in text
    assert "  neighbor HOST-lab-r1-h1-S1 route-map RM-HOST-lab-r1-h1-S1-IPV4-IN in" in text
    assert "  neighbor HOST-lab-r1-h1-S2 route-map RM-HOST-lab-r1-h1-S2-IPV4-IN in" in text
    assert " match ip address prefix-list PL-TASK-lab-r1-h1-S2-IPV4\n" in text


def test_single_slot_host_has_exact_match_without_ge():
    plan = lab_plan(lambda d: d["buildings"][0]["zones"][0]["racks"][0]["hosts"][0].update(task_slots=1))
    sc = tor_policy.tor_structured_config(lab_rack(plan))
    (slot,) = sc["host_groups"][0]["slots"]
    (e,) = slot["prefix_lists"]["ipv4"]["entries"]
    assert e["prefix"] == "198.18.0.8/32" and "ge" not in e
    text = tor_policy.render(sc)
    assert "permit 198.18.0.8/32\n" in text and "HOST-lab-r1-h1-S2" not in text


def test_ipv4_sessions_option_gives_separate_groups():
    sc = tor_policy.tor_structured_config(lab_rack(), {"ipv4_transport": "ipv4"})
    pgs = sc["host_groups"][0]["slots"][0]["peer_groups"]
    assert [(p["name"], p["address_families"]) for p in pgs] == [
        ("HOST-lab-r1-h1-S1-IPV6", ["ipv6"]), ("HOST-lab-r1-h1-S1-IPV4", ["ipv4"])]
    assert sc["counts"]["neighbors"] == 2 * (2 * 2 + 4 * 2)
    assert sc["counts"]["peer_groups"] == 8


def test_frr_text_policy_invariants():
    sc = tor_policy.tor_structured_config(lab_rack(), {"md5": "required"},
                                          {"lab-r1-h1": "k1", "lab-r1-h2": "k2"})
    text = tor_policy.render(sc)
    assert "no bgp ebgp-requires-policy" not in text
    assert text.count("route-map RM-HOSTS-OUT out") == 8           # 4 slot groups x 2 families
    assert "maximum-paths 16" in text and "bgp bestpath as-path multipath-relax" in text
    assert "timers 3 9" in text and "ttl-security hops 2" in text
    assert text.count("graceful-restart-disable") == 12            # per host session (FRR 8.4)
    assert "set community no-export no-advertise additive" in text
    assert "ip route 198.18.0.0/23 blackhole" in text and "network 198.18.0.0/23" in text
    assert "neighbor HOST-lab-r1-h1-S1 password k1" in text and "neighbor HOST-lab-r1-h1-S2 password k1" in text
    assert text.count("maximum-prefix 1 100 restart 5") == 8
    assert "force" not in text                                      # FRR 8.4: counts accepted routes
    assert "maximum-prefix 1 100 restart 5" in text


def test_redact_and_frr_apply_redaction():
    sc = tor_policy.tor_structured_config(lab_rack(), {}, {"lab-r1-h1": "s3cr3t"})
    assert "s3cr3t" not in yaml.safe_dump(tor_policy.redact(sc))
    assert frr_apply.redact(" neighbor X password s3cr3t\n") == " neighbor X password <redacted>\n"
    assert frr_apply.redact("   neighbor X password 0 s3cr3t") == "   neighbor X password 0 <redacted>"
    d = frr_apply.format_delta([], ["router bgp 1\n neighbor HOST-a-S1 password s3cr3t"])
    assert "s3cr3t" not in d and "<redacted>" in d


def test_eos_rendering():
    rack = lab_rack()
    sc = tor_policy.tor_structured_config(rack, platform="eos")
    text = tor_policy.render(sc)
    assert "ttl maximum-hops 2" in text and "maximum-paths 16 ecmp 16" in text
    assert "port-channel load-balance trident fields ip" in text
    assert "ip route 198.18.0.0/23 Null0" in text
    assert text.count("maximum-routes 9 ") == 4   # counted before policy: 1 + headroom, per slot group
    assert "ipv6 prefix-list PL-TASK-lab-r1-h1-S2-IPV6\n   seq 10 permit fd00:10::9/128\n" in text
    assert "      neighbor HOST-lab-r1-h2-S2 route-map RM-HOST-lab-r1-h2-S2-IPV4-IN in" in text
    assert "interface host1-0" not in text


def test_sonic_uses_frr_templates():
    sc = tor_policy.tor_structured_config(lab_rack(), platform="sonic")
    assert sc["capabilities"]["templates"] == "frr"
    assert "router bgp" in tor_policy.render(sc)


def test_spine_accepts_only_rack_aggregates():
    plan = lab_plan()
    sc = tor_policy.spine_structured_config(plan.spine_data(plan.topo.spines[0]))
    text = tor_policy.render(sc)
    assert "ip prefix-list PL-RACK-lab-r1-IPV4 seq 10 permit 198.18.0.0/23\n" in text
    assert "le " not in text.split("router bgp")[0]
    assert text.count("route-map RM-TOR-") == 2 * 2 * 2 + 4      # defs (permit+deny) + in bindings


def test_fib_size():
    sc = tor_policy.tor_structured_config(lab_rack())
    fib = tor_policy.fib_size(sc)
    assert fib["ipv4"]["host_routes"] == 4 and fib["ipv4"]["host_route_next_hops"] == 2 * 2 + 2 * 4


# -- negative input: errors name field, value and fix --------------------------------------------

def _problems(exc):
    return [(p.path, p.value, p.message, p.fix) for p in exc.value.problems]


def test_missing_md5_key_when_required():
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.tor_structured_config(lab_rack(), {"md5": "required"}, {"lab-r1-h1": "k1"})
    (path, value, msg, fix), = _problems(exc)
    assert path == "md5_keys.lab-r1-h2" and "required" in msg and "lab-r1-h2" in fix


def test_uplink_md5_on_both_ends_of_every_spine_session():
    plan = lab_plan()
    keys = {"lab-r1-h1": "k1", "lab-r1-h2": "k2", "lab-r2-h1": "k3", "lab-r2-h2": "k4", "lab-spine1": "spine-k"}
    out = tor_policy.build_fabric_configs(plan, {"md5": "required", "uplink_md5": "required"}, keys)
    sessions = 0
    for name in ("lab-r1-tor", "lab-r2-tor"):
        ups = out[name]["structured"]["uplinks"]
        assert ups and all(u["md5_key"] == "spine-k" for u in ups)
        for u in ups:
            assert " neighbor %s password spine-k\n" % u["address"] in out[name]["text"]
            # the spine has the same key on the other end of this very session
            assert " neighbor %s password spine-k\n" % u["local"] in out["lab-spine1"]["text"]
            sessions += 1
    assert out["lab-spine1"]["text"].count(" password spine-k") == sessions == 4
    from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact
    assert "spine-k" not in str(redact(out["lab-spine1"]["structured"])) + redact(out["lab-r1-tor"]["text"])
    # optional (the default) without a spine key: no password; off: none even with a key
    plain = tor_policy.build_fabric_configs(plan, {}, {"lab-r1-h1": "k1"})
    assert " password" not in plain["lab-spine1"]["text"]
    off = tor_policy.build_fabric_configs(plan, {"uplink_md5": "off"}, keys)
    assert " password" not in off["lab-spine1"]["text"]
    assert " password spine-k" not in off["lab-r1-tor"]["text"]


def test_missing_uplink_md5_key_when_required_on_tor_and_spine():
    plan = lab_plan()
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.tor_structured_config(lab_rack(plan), {"uplink_md5": "required"}, {})
    (path, value, msg, fix), = _problems(exc)
    assert path == "md5_keys.lab-spine1" and "uplink_md5" in msg and "lab-r1-tor" in msg and "lab-spine1" in fix
    spine = plan.spine_data(plan.topo.spines[0])
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.spine_structured_config(spine, {"uplink_md5": "required"}, md5_keys={"lab-spine1": "a b"})
    (path, value, msg, fix), = _problems(exc)
    assert path == "md5_keys.lab-spine1" and "a b" not in str(exc.value) and value == "<3 characters>"


def test_unknown_platform():
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.tor_structured_config(lab_rack(), platform="junos")
    (path, value, msg, fix), = _problems(exc)
    assert value == "junos" and "platform" in path and "eos" in fix and "frr" in fix


def test_maximum_paths_below_nic_count_or_design_minimum():
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.tor_structured_config(lab_rack(), {"maximum_paths": 2})
    (path, value, msg, fix), = _problems(exc)
    assert path == "options.maximum_paths" and value == 2 and "at least 8" in fix
    big = lab_plan(lambda d: d["buildings"][0]["zones"][0]["racks"][0]["hosts"][1].update(nics=8))
    with pytest.raises(tor_policy.TorPolicyError):
        tor_policy.tor_structured_config(lab_rack(big), {"maximum_paths": 7})
    tor_policy.tor_structured_config(lab_rack(big), {"maximum_paths": 8})


def test_bad_options_collected_together_and_secret_never_echoed():
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.tor_structured_config(
            lab_rack(), {"timers": {"keepalive": 3, "hold": 5}, "hop_limit": {"mode": "ttl", "hops": 2},
                         "md5": "required"}, {"lab-r1-h1": "has space", "lab-r1-h2": "ok"})
    paths = [p[0] for p in _problems(exc)]
    assert paths == ["options.timers", "options.hop_limit.mode", "md5_keys.lab-r1-h1"]
    assert "has space" not in str(exc.value)


def test_unknown_option():
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.tor_structured_config(lab_rack(), {"max_paths": 8})
    assert "maximum_paths" in _problems(exc)[0][3]


# -- frr_state parsers ---------------------------------------------------------------------------

def test_frr_state_parsers():
    nb = frr_state.parse_neighbors({"fd00::4": {
        "bgpState": "Established", "remoteAs": 7, "peerGroup": "HOST-x", "bgpTimerUpMsec": 5,
        "gracefulRestartInfo": {"localGrMode": "Disable"},
        "addressFamilyInfo": {"ipv4Unicast": {"acceptedPrefixCounter": 1, "prefixAllowedMax": 1},
                              "ipv6Unicast": {"acceptedPrefixCounter": 1}}}})
    assert nb["fd00::4"]["accepted"] == {"ipv4": 1, "ipv6": 1} and nb["fd00::4"]["established"]
    routes = frr_state.parse_routes({"198.18.0.8/32": [{"protocol": "bgp", "selected": True, "installed": True,
                                                        "nexthops": [{"ip": "198.18.0.4", "interfaceName": "h1-0",
                                                                      "active": True, "fib": True},
                                                                     {"ip": "198.18.0.20", "interfaceName": "h1-1",
                                                                      "active": True, "fib": True}]}]})
    assert frr_state.ecmp_width({"routes": {"ipv4": routes}}, "198.18.0.8/32") == 2
    assert frr_state.more_specifics(["198.18.0.0/23", "198.18.0.8/32", "198.19.5.0/24"],
                                    ["198.18.0.0/23"]) == ["198.18.0.8/32"]
    assert frr_state.split_json_stream('{"a": 1}\n{"b": 2}\n') == [{"a": 1}, {"b": 2}]
    assert frr_apply.parse_reload_test("\nLines To Delete\n===============\nno x\n\nLines To Add\n============\ny\n") \
        == (["no x"], ["y"])


def test_frr_state_max_prefix_trip_and_sessions_by_host():
    # Shapes recorded from FRR 8.4.4 after a maximum-prefix tear-down (live test) and a healthy peer.
    data = {
        "fd00:10::4": {"bgpState": "Idle", "peerGroup": "HOST-lab-r1-h1-S1", "lastResetDueTo": "BGP Notification send",
                       "lastErrorCodeSubcode": "0601",
                       "lastNotificationReason": "Cease/Maximum Number of Prefixes Reached",
                       "addressFamilyInfo": {"ipv4Unicast": {"acceptedPrefixCounter": 0, "prefixAllowedMax": 1}}},
        "fd00:10:0:1::4": {"bgpState": "Established", "peerGroup": "HOST-lab-r1-h1-S1",
                           "addressFamilyInfo": {"ipv4Unicast": {"acceptedPrefixCounter": 1}}},
        "fd00:10::5": {"bgpState": "Established", "peerGroup": "HOST-lab-r1-h1-S2",
                       # An old NOTIFICATION survives re-establishment: not tripped now.
                       "lastErrorCodeSubcode": "0601"},
        "fd00:ff::1": {"bgpState": "Established", "peerGroup": "SPINES-IPV6"},
    }
    nb = frr_state.parse_neighbors(data)
    assert nb["fd00:10::4"]["max_prefix_tripped"] is True
    assert "Maximum Number of Prefixes" in nb["fd00:10::4"]["last_notification"]
    assert nb["fd00:10::5"]["max_prefix_tripped"] is False
    facts = {"neighbors": nb, "routes": {}, "bgp": {}}
    assert frr_state.summarize(facts)["max_prefix_tripped"] == ["fd00:10::4"]
    assert frr_state.sessions_by_host(facts) == {"lab-r1-h1": {
        "total": 3, "established": 2,
        "slots": {1: {"total": 2, "established": 1}, 2: {"total": 1, "established": 1}}}}
    assert frr_state.slot_of_group("HOST-a-b-S12-IPV4") == ("a-b", 12)
    assert frr_state.slot_of_group("SPINES-IPV4") is None


def test_maximum_prefix_threshold_auto_and_explicit():
    frr = tor_policy.tor_structured_config(lab_rack())
    assert frr["policy"]["maximum_prefix_threshold"] == 100       # limit 1: 75 % would round to 0
    assert tor_policy.tor_structured_config(lab_rack(), {"maximum_prefix": 4})["policy"]["maximum_prefix_threshold"] == 75
    assert "maximum-prefix 4 restart 5\n" in tor_policy.render(tor_policy.tor_structured_config(lab_rack(), {"maximum_prefix": 4}))
    eos = tor_policy.tor_structured_config(lab_rack(), platform="eos")
    assert eos["policy"]["maximum_prefix_threshold"] == 75
    with pytest.raises(tor_policy.TorPolicyError) as exc:
        tor_policy.tor_structured_config(lab_rack(), {"maximum_prefix_threshold": 0})
    assert _problems(exc)[0][0] == "options.maximum_prefix_threshold"


def test_lab_builds_spine_and_tor_uplinks_with_the_spine_key(tmp_path):
    """The lab's spines get their TCP-MD5 key at build time (lab_fabric passes the inventory's keys),
    the ToRs' uplink part the same one, so the rollout's ToR policy (uplink_md5) finds matching ends;
    the lab's plan hash leaves the keys out (no key-derived value in the state file)."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab
    fabric = os.path.join(REPO, "inventories", "lab", "fabric.yml")
    keyed = open_lab(fabric, state_root=str(tmp_path), md5_keys={"lab-spine1": "lab-spine-k"}).spec
    plain = open_lab(fabric, state_root=str(tmp_path)).spec
    spine = keyed.spine_config(0, keyed.spines[0])
    assert spine.count(" password lab-spine-k\n") == 4 and " password" not in plain.spine_config(0, plain.spines[0])
    tor = keyed.tor_config(keyed.racks[0])
    assert tor.count(" password lab-spine-k\n") == 2
    full = tor_policy.build_fabric_configs(lab_plan(), {"md5": "required", "uplink_md5": "required"},
                                           {"lab-r1-h1": "a", "lab-r1-h2": "b", "lab-r2-h1": "c", "lab-r2-h2": "d",
                                            "lab-spine1": "lab-spine-k"})
    ups = [line for line in full["lab-r1-tor"]["text"].splitlines() if "password lab-spine-k" in line]
    assert ups == [line for line in tor.splitlines() if "password lab-spine-k" in line]
    # the lab_* modules open the lab without keys: same hash, and none derived from a key
    assert keyed.plan_hash() == plain.plan_hash()
