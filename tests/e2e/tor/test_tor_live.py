# -*- coding: utf-8 -*-
"""Live ToR policy tests: real FRR (rendered config applied with frr-reload.py), real ExaBGP sidecars.

Every assertion reads observed state: the ToR's kernel FIB (``ip -j route``), FRR's JSON, nstat
counters and bgpd's log. Run as root: ``.venv/bin/pytest tests/e2e/tor -v``.
"""

from __future__ import annotations

import json
import time

from tor_harness import sh, wait_for

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.frr import apply as frr_apply, state as frr_state

TOR = "lab-r1-tor"
SPINE = "lab-spine1"


def facts(lab, device=TOR, received=False, neighbors=None):
    r = lab.routers[device]
    return frr_state.collect(lab.run_in(device), r["target"], received=received, neighbors=neighbors)


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
    by_host = frr_state.sessions_by_host(f)
    for h in torlab.rack_data["hosts"]:
        group = f["neighbors"]
        sessions = [n for n in group.values() if str(n["peer_group"]).startswith("HOST-%s-S" % h["name"])]
        assert len(sessions) == h["nic_count"] * h["task_slot_count"]
        assert all(n["established"] for n in sessions)
        # One peer-group per slot, holding exactly that slot's sessions (one per NIC).
        for slot in h["slots"]:
            members = sorted(a for a, n in group.items() if n["peer_group"] == "HOST-%s-S%d" % (h["name"], slot["slot"]))
            assert members == sorted(sn["address"]["ipv6"] for sn in slot["nics"])
        assert by_host[h["name"]]["established"] == by_host[h["name"]]["total"] == len(sessions)
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


def test_slot_cannot_announce_sibling_slot_task_ip(torlab):
    """Per-slot policy: slot 1's sidecar announces slot 2's task IP on every NIC. Each of slot 1's
    sessions receives it and rejects it (counted), slot 2's route keeps exactly slot 2's next hops,
    and both slots' own task IPs stay at full ECMP width."""
    h1 = torlab.host("lab-r1-h1")
    s1, s2 = h1["slots"]
    cmds = []
    for sn in s1["nics"]:
        peer = h1["nics"][sn["index"]]["gateway"]["ipv6"]
        for fam in ("ipv4", "ipv6"):
            cmds.append("neighbor %s announce route %s next-hop %s"
                        % (peer, host_prefix(s2["task_ip"][fam]), sn["address"][fam]))
    sessions = [sn["address"]["ipv6"] for sn in s1["nics"]]
    torlab.slot_command("lab-r1-h1", 1, *cmds)
    try:
        def seen():
            f = facts(torlab, received=True, neighbors=sessions)
            return f if all(f["neighbors"][a].get("received") == {"ipv4": 2, "ipv6": 2} for a in sessions) else None
        f = wait_for(seen, timeout=15)
        assert f, "slot 1's sessions never received the sibling announcement: %s" % {
            a: facts(torlab, received=True)["neighbors"][a].get("received") for a in sessions}
        for a in sessions:
            n = f["neighbors"][a]
            assert n["established"]
            assert n["accepted"] == {"ipv4": 1, "ipv6": 1}, (a, n)
            assert n["rejected"] == {"ipv4": 1, "ipv6": 1}, (a, n)
            for fam in ("ipv4", "ipv6"):
                assert host_prefix(s2["task_ip"][fam]) in n["received_prefixes"][fam]
        for fam in ("ipv4", "ipv6"):
            p2 = host_prefix(s2["task_ip"][fam])
            assert not set(sessions) & set(f["bgp"][fam][p2]["peers"]), f["bgp"][fam][p2]
            want = sorted("%s@%s" % (sn["address"][fam], h1["nics"][sn["index"]]["tor_port"]) for sn in s2["nics"])
            assert kernel_nexthops(torlab, p2) == want, (p2, kernel_nexthops(torlab, p2))
            for slot in (s1, s2):
                assert frr_state.ecmp_width(f, host_prefix(slot["task_ip"][fam])) == h1["nic_count"]
    finally:
        torlab.slot_command("lab-r1-h1", 1, *[c.replace(" announce ", " withdraw ") for c in cmds])


def _rogue(lab):
    """Announcements lab-r1-h1 slot 2 has no right to make, per family."""
    h1, h2 = lab.rack_data["hosts"][0], lab.rack_data["hosts"][1]
    r2 = lab.plan.rack_data(next(r for r in lab.topo.racks if r.name == "lab-r2"))
    own = h1["slots"][1]
    out = {}
    for fam, bits in (("ipv4", 32), ("ipv6", 128)):
        out[fam] = {
            "sibling slot's task IP": host_prefix(h1["slots"][0]["task_ip"][fam]),
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
                if what in ("other host's task IP", "sibling slot's task IP"):
                    # Present, but only from its owner's sessions (one per NIC of its host).
                    assert sess not in rib["peers"], (what, p, rib)
                    owner = h1 if what.startswith("sibling") else torlab.host("lab-r1-h2")
                    assert frr_state.ecmp_width(f, p) == owner["nic_count"], (what, p)
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

    from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
    from tor_harness import LAB_FABRIC

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
    # Exactly slot 2 of lab-r1-h1 goes: its peer-group (FRR deletes the members with it), its
    # route-maps and its prefix-lists. Nothing of any other slot changes.
    assert " no neighbor HOST-lab-r1-h1-S2 peer-group" in diff
    assert "+ no ip prefix-list PL-TASK-lab-r1-h1-S2-IPV4 seq 10 permit 198.18.0.9/32" in diff
    assert "+ no ipv6 prefix-list PL-TASK-lab-r1-h1-S2-IPV6 seq 10 permit fd00:10::9/128" in diff
    assert "- no route-map RM-HOST-lab-r1-h1-S2-IPV4-IN permit 10" in diff
    assert "mnt-lab-key" not in diff and "<redacted>" in diff
    changed_lines = [line for line in diff.splitlines() if line.startswith(("- ", "+ ")) and "router bgp" not in line
                     and "address-family" not in line]
    assert changed_lines and all(("lab-r1-h1-S2" in line) for line in changed_lines), changed_lines
    # The unchanged plan converges to no change at all (second run: 0 changed).
    same = torlab.configs[TOR]["text"]
    assert frr_apply.converge(run, target, same, check_mode=True)["changed"] is False
    # Applied for real: slot 2's sessions are gone from bgpd, slot 1 keeps its full width; then the
    # original plan is restored and slot 2 comes back on every NIC.
    slot2 = [sn["address"]["ipv6"] for sn in torlab.host("lab-r1-h1")["slots"][1]["nics"]]
    try:
        assert frr_apply.converge(run, target, text)["changed"] is True

        def slot2_gone():
            f = facts(torlab)
            return f if frr_state.ecmp_width(f, "198.18.0.9/32") == 0 else None
        f = wait_for(slot2_gone, timeout=10, interval=0.1)
        assert f, "slot 2's task IP still routed after its peer-group was removed"
        assert not set(slot2) & set(f["neighbors"]), sorted(f["neighbors"])
        assert "HOST-lab-r1-h1-S2" not in frr_state.sessions_by_group(f)
        assert frr_state.ecmp_width(f, "198.18.0.8/32") == 2
        assert frr_apply.converge(run, target, text, check_mode=True)["changed"] is False
    finally:
        frr_apply.converge(run, target, same)
    assert wait_for(lambda: frr_state.ecmp_width(facts(torlab), "198.18.0.9/32") == 2, timeout=30)


def _log_lines(path, needle, sess):
    with open(path) as fh:
        return [line for line in fh.read().splitlines() if needle in line and sess in line]


def test_max_prefix_backstop_trips_at_limit_plus_two_and_flood_is_counted(torlab):
    """maximum-prefix on FRR 8.4.4 (limit 1 per session and family, ``restart 5``).

    With the exact per-slot prefix-list a session can never accept more than its own task IP, so the
    limit is a backstop. To see where FRR trips, a test-only override widens this one slot's IPv4
    list (``seq 20 permit 198.18.100.0/29 ge 32``), i.e. a policy that permits more than the limit.
    FRR counts ACCEPTED routes and checks before counting the route being added:
      - a flood of 20 rejected routes + 1 permitted extra route -> 2 accepted against limit 1:
        nothing logged (threshold 100 %), session kept, the flood visible as received - accepted;
      - one more permitted route (3rd accepted) -> ``%MAXPFXEXCEED``, Cease/6-1 NOTIFICATION, session
        down (Idle until the restart timer or a clear); the slot's task IP loses that NIC's next hop.
    """
    h1 = torlab.host("lab-r1-h1")
    slot, sibling = h1["slots"]
    sess = slot["nics"][0]["address"]["ipv6"]
    peer = h1["nics"][0]["gateway"]["ipv6"]
    nh4 = slot["nics"][0]["address"]["ipv4"]
    own4 = host_prefix(slot["task_ip"]["ipv4"])
    plist = "PL-TASK-lab-r1-h1-S1-IPV4"
    override = "ip prefix-list %s seq 20 permit 198.18.100.0/29 ge 32" % plist
    junk = ["neighbor %s announce route 198.18.101.%d/32 next-hop %s" % (peer, i, nh4) for i in range(1, 21)]
    extra = ["neighbor %s announce route 198.18.100.%d/32 next-hop %s" % (peer, i, nh4) for i in (1, 2)]
    target = torlab.routers[TOR]["target"]
    logfile = "%s/bgpd.log" % torlab.routers[TOR]["dir"]
    assert facts(torlab)["neighbors"][sess]["maximum_prefix"] == {"ipv4": 1, "ipv6": 1}
    # Threshold 100 (auto for limit 1): no "%MAXPFX ... reaches 1, max 1" noise on every
    # re-evaluation of a session's one route (FRR 8.4 logged it for all 12 sessions at 75 %).
    assert not _log_lines(logfile, "%MAXPFX", "")
    try:
        torlab.vtysh(TOR, "configure terminal", override)
        assert override in torlab.vtysh(TOR, "show running-config").stdout
        # Phase 1: the flood (20 rejected) + 1 permitted extra: 2 accepted > limit 1, no tear-down.
        torlab.slot_command("lab-r1-h1", 1, *(junk + extra[:1]))

        def flooded():
            f = facts(torlab, received=True, neighbors=[sess])
            n = f["neighbors"][sess]
            return f if n.get("received", {}).get("ipv4") == 22 and n["accepted"].get("ipv4") == 2 \
                and "198.18.100.1/32" in f["routes"]["ipv4"] else None
        f = wait_for(flooded, timeout=15)
        assert f, facts(torlab, received=True, neighbors=[sess])["neighbors"][sess]
        n = f["neighbors"][sess]
        assert n["established"] and not n["max_prefix_tripped"]
        assert n["rejected"]["ipv4"] == 20 and n["rejected"].get("ipv6", 0) == 0
        assert f["summary"]["rejected"] >= 20
        assert all(("198.18.101.%d/32" % i) in n["received_prefixes"]["ipv4"] for i in range(1, 21))
        assert f["routes"]["ipv4"].get("198.18.101.1/32") is None
        assert f["routes"]["ipv4"]["198.18.100.1/32"]["protocol"] == "bgp"
        time.sleep(1.0)   # give bgpd time to (not) act on 2 > 1
        assert facts(torlab)["neighbors"][sess]["established"], "FRR tore down at limit + 1"
        assert not _log_lines(logfile, "%MAXPFX", sess)   # silent: the rejected count is the signal

        # Phase 2: a 3rd accepted route -> tear-down.
        torlab.slot_command("lab-r1-h1", 1, extra[1])
        down = wait_for(lambda: not facts(torlab)["neighbors"][sess]["established"], timeout=10, interval=0.05)
        assert down, "no tear-down with 3 accepted routes against limit 1"
        (line,) = _log_lines(logfile, "%MAXPFXEXCEED", sess)
        assert "2 exceed, limit 1" in line, line       # counted before the 3rd route was added
        assert _log_lines(logfile, "Maximum Number of Prefixes Reached", sess)
        # The slot keeps its other NIC; the sibling slot keeps everything (zebra follows bgpd).
        widths = {fam: {host_prefix(slot["task_ip"][fam]): h1["nic_count"] - 1,
                        host_prefix(sibling["task_ip"][fam]): h1["nic_count"]} for fam in ("ipv4", "ipv6")}

        def settled():
            f = facts(torlab)
            ok = all(frr_state.ecmp_width(f, p) == w for ws in widths.values() for p, w in ws.items())
            return f if ok and f["routes"]["ipv4"].get("198.18.100.1/32") is None else None
        f = wait_for(settled, timeout=10, interval=0.1)
        assert f, {p: frr_state.ecmp_width(facts(torlab), p) for ws in widths.values() for p in ws}
        n = f["neighbors"][sess]
        assert n["max_prefix_tripped"] and n["state"] != "Established", n
        assert f["summary"]["max_prefix_tripped"] == [sess]
        assert "Maximum Number of Prefixes" in n["last_notification"]
        # It stays down (restart timer 5 min): ExaBGP's reconnects are refused.
        time.sleep(4)
        assert not facts(torlab)["neighbors"][sess]["established"]
    finally:
        torlab.stop_slot("lab-r1-h1", 1)
        torlab.vtysh(TOR, "configure terminal", "no " + override)
        sh(["ip", "netns", "exec", torlab.ns("t1")] + target.vtysh("-c", "clear bgp %s" % sess), check=False)
        torlab.start_slot("lab-r1-h1", 1, md5_key="mnt-lab-key-h1")
    assert override not in torlab.vtysh(TOR, "show running-config").stdout
    assert wait_for(lambda: frr_state.ecmp_width(facts(torlab), own4) == h1["nic_count"], timeout=30)
