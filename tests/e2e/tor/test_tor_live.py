# -*- coding: utf-8 -*-
"""Live ToR policy tests: real FRR (rendered config applied with frr-reload.py), real ExaBGP sidecars.

Every assertion reads observed state: the ToR's kernel FIB (``ip -j route``), FRR's JSON, nstat
counters and bgpd's log. Run as root: ``.venv/bin/pytest tests/e2e/tor -v``.
"""

from __future__ import annotations

import json
import time

import pytest

from harness import sh, wait_for

from ansible_collections.netscale.multinic.plugins.module_utils import frr_apply, frr_state, tor_policy

TOR = "lab-r1-tor"
SPINE = "lab-spine1"


def facts(lab, device=TOR, received=False):
    r = lab.routers[device]
    return frr_state.collect(lab.run_in(device), r["target"], received=received)


def kernel_nexthops(lab, prefix):
    fam = "-6" if ":" in prefix else "-4"
    out = lab.nsexec("t1", "ip", "-j", fam, "route", "show", prefix).stdout
    routes = json.loads(out or "[]")
    if not routes:
        return []
    r = routes[0]
    if "nexthops" in r:
        return sorted("%s@%s" % (h["gateway"], h["dev"]) for h in r["nexthops"])
    return ["%s@%s" % (r.get("gateway"), r.get("dev"))]


def host_prefix(addr):
    return addr + ("/128" if ":" in addr else "/32")


def test_ecmp_width_equals_nic_count(torlab):
    f = facts(torlab)
    for h in torlab.rack_data["hosts"]:
        group = f["neighbors"]
        sessions = [n for n in group.values() if n["peer_group"] == "HOST-%s" % h["name"]]
        assert len(sessions) == h["nic_count"] * h["task_slot_count"]
        assert all(n["established"] for n in sessions)
        # IPv4 NLRI rides the IPv6 sessions: every session carries both families.
        assert all(n["accepted"] == {"ipv4": 1, "ipv6": 1} for n in sessions), sessions
        assert all(n["graceful_restart"] == "Disable" for n in sessions)
        for slot in h["slots"]:
            for fam in ("ipv4", "ipv6"):
                p = host_prefix(slot["task_ip"][fam])
                want = sorted("%s@%s" % (sn["address"][fam], h["nics"][sn["index"]]["tor_port"]) for sn in slot["nics"])
                assert kernel_nexthops(torlab, p) == want, p
                assert frr_state.ecmp_width(f, p) == h["nic_count"], (p, f["routes"][fam].get(p))


def test_host_routes_tagged_no_export_no_advertise(torlab):
    slot = torlab.rack_data["hosts"][0]["slots"][0]
    for fam in ("ipv4", "ipv6"):
        p = host_prefix(slot["task_ip"][fam])
        data = torlab.vjson(TOR, "show bgp %s unicast %s json" % (fam, p))
        comms = {c for path in data["paths"] for c in path.get("community", {}).get("list", [])}
        assert {"noExport", "noAdvertise"} <= comms, data["paths"][0].get("community")


def _rogue(lab):
    """Announcements lab-r1-h1 slot 2 has no right to make, per family."""
    h1, h2 = lab.rack_data["hosts"][0], lab.rack_data["hosts"][1]
    r2 = lab.plan.rack_data(next(r for r in lab.topo.racks if r.name == "lab-r2"))
    own = h1["slots"][1]
    out = {}
    for fam, bits in (("ipv4", 32), ("ipv6", 128)):
        out[fam] = {
            "other host's task IP": host_prefix(h2["slots"][0]["task_ip"][fam]),
            "rack aggregate": lab.rack_data["prefix"][fam],
            "default route": "0.0.0.0/0" if fam == "ipv4" else "::/0",
            "other rack's aggregate": r2["prefix"][fam],
            "other rack's task IP": host_prefix(r2["hosts"][0]["slots"][0]["task_ip"][fam]),
            "too short (task-IP cover)": h1["task_ip_prefixes"][fam][0],
            "too short (NIC subnet)": h1["nics"][0]["subnet"][fam],
            "host route that is no task IP": host_prefix(own["nics"][0]["address"][fam]),
        }
    return out


def test_rogue_announcements_rejected_and_counted(torlab):
    h1 = torlab.rack_data["hosts"][0]
    slot = h1["slots"][1]
    sess = slot["nics"][0]["address"]["ipv6"]        # this slot's NIC-0 session
    peer = h1["nics"][0]["gateway"]["ipv6"]
    nh = {"ipv4": slot["nics"][0]["address"]["ipv4"], "ipv6": sess}
    rogue = _rogue(torlab)
    cmds = ["neighbor %s announce route %s next-hop %s" % (peer, p, nh[fam])
            for fam, ps in rogue.items() for p in ps.values()]
    legit_v4 = host_prefix(slot["task_ip"]["ipv4"])
    torlab.slot_command("lab-r1-h1", 2, *cmds)
    try:
        def seen():
            f = facts(torlab, received=True)
            n = f["neighbors"][sess]
            return f if n.get("received", {}).get("ipv4") == 1 + len(rogue["ipv4"]) and \
                n.get("received", {}).get("ipv6") == 1 + len(rogue["ipv6"]) else None
        f = wait_for(seen, timeout=15)
        assert f, "ToR never received the rogue announcements: %s" % facts(torlab, received=True)["neighbors"][sess]
        n = f["neighbors"][sess]
        assert n["established"], "rogue announcements must not cost the session (max-prefix counts accepted)"
        assert n["accepted"] == {"ipv4": 1, "ipv6": 1}
        assert n["rejected"] == {"ipv4": len(rogue["ipv4"]), "ipv6": len(rogue["ipv6"])}
        for fam, ps in rogue.items():
            for what, p in ps.items():
                assert p in n["received_prefixes"][fam], (what, p)
                rib = f["bgp"][fam].get(p)
                route = f["routes"][fam].get(p)
                if what == "other host's task IP":
                    # Present, but only from its owner's four sessions.
                    assert sess not in rib["peers"], (what, p, rib)
                    assert frr_state.ecmp_width(f, p) == 4
                elif what in ("rack aggregate",):
                    assert route["protocol"] == "static", (what, p, route)
                    assert sess not in (rib or {}).get("peers", []), (what, p, rib)
                elif what in ("other rack's aggregate",):
                    assert route["protocol"] == "bgp" and route["via"][0].endswith("%up-s1"), (what, route)
                    assert sess not in (rib or {}).get("peers", [])
                elif what in ("too short (NIC subnet)",):
                    assert route["protocol"] == "connected", (what, p, route)
                else:
                    assert rib is None, (what, p, rib)
                    assert route is None or route["protocol"] != "bgp", (what, p, route)
        # The legitimate route keeps all its next hops.
        assert frr_state.ecmp_width(f, legit_v4) == h1["nic_count"]
        # And nothing rogue reached the spine.
        sf = facts(torlab, SPINE)
        spine_bgp = set(sf["bgp"]["ipv4"]) | set(sf["bgp"]["ipv6"])
        for fam, ps in rogue.items():
            for what, p in ps.items():
                if what not in ("rack aggregate", "other rack's aggregate"):
                    assert p not in spine_bgp, (what, p)
    finally:
        torlab.slot_command("lab-r1-h1", 2, *[c.replace(" announce ", " withdraw ") for c in cmds])


def test_spine_has_aggregates_and_zero_host_routes(torlab):
    sf = facts(torlab, SPINE)
    aggregates = {fam: [torlab.plan.rack_data(r)["prefix"][fam] for r in torlab.topo.racks] for fam in ("ipv4", "ipv6")}
    for fam in ("ipv4", "ipv6"):
        for agg in aggregates[fam]:
            assert sf["routes"][fam].get(agg, {}).get("protocol") == "bgp", (agg, sf["routes"][fam].get(agg))
            assert sf["routes"][fam][agg]["nexthops"] == 1
        bgp_prefixes = [p for p, r in sf["routes"][fam].items() if r["protocol"] == "bgp"]
        leaks = frr_state.more_specifics(bgp_prefixes, aggregates[fam]) + \
            frr_state.more_specifics(list(sf["bgp"][fam]), aggregates[fam])
        assert leaks == [], leaks
    # What the ToR advertises upstream: its rack aggregate only.
    for fam, addr in (("ipv4", "198.19.0.128"), ("ipv6", "fd00:ff:0:0:8000::")):
        adv = torlab.vjson(TOR, "show bgp %s unicast neighbors %s advertised-routes json" % (fam, addr))
        assert sorted(adv.get("advertisedRoutes", {})) == [torlab.rack_data["prefix"][fam]]


def _md5_failures(lab):
    out = lab.nsexec("t1", "nstat", "-asz", "TcpExtTCPMD5Failure").stdout
    for line in out.splitlines():
        if line.startswith("TcpExtTCPMD5Failure"):
            return int(line.split()[1])
    return 0


def test_wrong_md5_never_establishes(torlab):
    host = torlab.host("lab-r1-h2")
    addrs = [sn["address"]["ipv6"] for sn in host["slots"][1]["nics"]]
    before = _md5_failures(torlab)
    torlab.stop_slot("lab-r1-h2", 2)
    torlab.start_slot("lab-r1-h2", 2, md5_key="wrong-key-on-purpose")
    try:
        established = []
        deadline = time.time() + 12   # > hold time and ExaBGP's reconnect interval
        while time.time() < deadline:
            nb = facts(torlab)["neighbors"]
            established += [a for a in addrs if nb[a]["established"]]
            time.sleep(0.5)
        assert established == []
        assert _md5_failures(torlab) > before
    finally:
        torlab.stop_slot("lab-r1-h2", 2)
        torlab.start_slot("lab-r1-h2", 2, md5_key="mnt-lab-key-h2")
    assert wait_for(lambda: all(facts(torlab)["neighbors"][a]["established"] for a in addrs), timeout=30)


def test_check_mode_diff_against_changed_plan_changes_nothing(torlab):
    # Changed plan: lab-r1-h1 runs one task slot instead of two.
    import copy

    import yaml

    from ansible_collections.netscale.multinic.plugins.module_utils.planner import FabricPlan
    from ansible_collections.netscale.multinic.plugins.module_utils.topology import load_topology
    from harness import LAB_FABRIC

    with open(LAB_FABRIC) as fh:
        data = yaml.safe_load(fh)
    changed = copy.deepcopy(data)
    changed["buildings"][0]["zones"][0]["racks"][0]["hosts"][0]["task_slots"] = 1
    plan = FabricPlan(load_topology(changed)).allocate()
    text = tor_policy.build_fabric_configs(plan, {}, torlab.md5_keys, devices=[TOR])[TOR]["text"]
    run, target = torlab.run_in(TOR), torlab.routers[TOR]["target"]
    before = torlab.vtysh(TOR, "show running-config").stdout
    res = frr_apply.converge(run, target, text, check_mode=True)
    after = torlab.vtysh(TOR, "show running-config").stdout
    assert before == after
    assert res["changed"] is True
    diff = res["diff"]
    # Exactly the slot-2 sessions of lab-r1-h1 go, and its prefix-lists narrow to the one task IP.
    assert "no neighbor fd00:10::5 peer-group HOST-lab-r1-h1" in diff
    assert "no neighbor fd00:10:0:1::5 peer-group HOST-lab-r1-h1" in diff
    assert "ip prefix-list PL-TASK-lab-r1-h1-IPV4 seq 10 permit 198.18.0.8/32" in diff
    assert "mnt-lab-key" not in diff
    removed = [line for line in diff.splitlines() if line.startswith("- ") and "neighbor fd00:" in line]
    assert all(("::5" in line) for line in removed), removed
    # The unchanged plan converges to no change at all (second run: 0 changed).
    same = torlab.configs[TOR]["text"]
    assert frr_apply.converge(run, target, same, check_mode=True)["changed"] is False


def test_max_prefix_trips_on_flood_and_is_logged(torlab):
    """A sidecar floods: its sibling slot's task IP (the per-host prefix-list accepts it) plus 20 junk
    routes on one session whose limit is 1 accepted route per family.

    Measured on FRR 8.4.4: the %MAXPFX warning is logged, but the session is not torn down with 2
    accepted routes against a limit of 1 (bgpd checks before counting; "force" is unusable, see
    tor_policy.PLATFORMS). The tear-down half is reported as xfail, never as a pass.
    """
    h1 = torlab.host("lab-r1-h1")
    slot, sibling = h1["slots"][0], h1["slots"][1]
    sess = slot["nics"][0]["address"]["ipv6"]
    peer = h1["nics"][0]["gateway"]["ipv6"]
    nh4 = slot["nics"][0]["address"]["ipv4"]
    flood = ["neighbor %s announce route %s/32 next-hop %s" % (peer, sibling["task_ip"]["ipv4"], nh4)]
    flood += ["neighbor %s announce route 198.18.100.%d/32 next-hop %s" % (peer, i, nh4) for i in range(1, 21)]
    target = torlab.routers[TOR]["target"]
    assert facts(torlab)["neighbors"][sess]["maximum_prefix"] == {"ipv4": 1, "ipv6": 1}
    logfile = "%s/bgpd.log" % torlab.routers[TOR]["dir"]
    try:
        torlab.slot_command("lab-r1-h1", 1, *flood)

        def warned():
            lines = [line for line in open(logfile).read().splitlines() if "%MAXPFX" in line and sess in line]
            return lines
        assert wait_for(warned, timeout=15), open(logfile).read()[-2000:]
        tripped = wait_for(lambda: not facts(torlab)["neighbors"][sess]["established"], timeout=10)
        f = facts(torlab, received=True)
        n = f["neighbors"][sess]
        assert n["received"]["ipv4"] == 22 and n["accepted"]["ipv4"] in (0, 2), n
        if not tripped:
            pytest.xfail("FRR 8.4.4: %%MAXPFX logged, session kept with 2 accepted routes > limit 1 "
                         "(received %d, accepted %d)" % (n["received"]["ipv4"], n["accepted"]["ipv4"]))
        assert any("MAXPFXEXCEED" in line for line in open(logfile).read().splitlines() if sess in line)
        p = host_prefix(slot["task_ip"]["ipv4"])
        assert frr_state.ecmp_width(f, p) == h1["nic_count"] - 1
    finally:
        torlab.stop_slot("lab-r1-h1", 1)
        sh(["ip", "netns", "exec", torlab.ns("t1")] + target.vtysh("-c", "clear bgp %s" % sess), check=False)
        torlab.start_slot("lab-r1-h1", 1, md5_key="mnt-lab-key-h1")
