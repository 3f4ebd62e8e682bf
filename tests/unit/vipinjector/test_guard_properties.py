"""Property tests of the VipInjector guard (issue 13, deliverable 3): generated variants of the
configuration and of process-API commands, none of which may get through.

* the configuration guard (``config_findings``: exactly the rendering, plus the scanner) refuses
  every configuration that is not the rendered one, and names the offending line; the scanner alone
  (``scan_exabgp_config``, the defence that needs no rendering) refuses every route-bearing or
  process-bearing insertion;
* the process-API guard (``parse_api_command`` via ``Allocation.check``) refuses every command but
  ``neighbor OWN-PEER announce route OWN-TASK-IP next-hop OWN-NEXT-HOP`` and the withdraw of an own
  task IP, and ``HelperCore`` never emits anything else whatever the event sequence.
"""
import ipaddress
import json
import os

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import guard, render

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _instance():
    topo = load_topology(yaml.safe_load(open(os.path.join(REPO, "inventories", "lab", "fabric.yml"))))
    plan = FabricPlan(topo).allocate()
    hosts = dict((h.name, plan.host_data(h)) for h in topo.hosts)
    return render.render_instance(hosts["lab-r1-h2"], 1, {"md5_password": "k#ey-1", "health": {"type": "none"}})


INST = _instance()
CONF = INST["files"]["exabgp.conf"]
CFG = json.loads(INST["files"]["helper.json"])
ALLOC = guard.Allocation(CFG["allocation"], CFG["sessions"])
OWN_V4 = ipaddress.ip_network(CFG["allocation"][0])
OWN_V6 = ipaddress.ip_network(CFG["allocation"][1])
OWN_V4_ADDR = OWN_V4.network_address
PEERS = [s["peer"] for s in CFG["sessions"]]
NH = dict((s["peer"], s["next_hop"]) for s in CFG["sessions"])

# ------------------------------------------------------------------ value strategies
v4_addr = st.integers(0, 2 ** 32 - 1).map(lambda i: str(ipaddress.IPv4Address(i)))
lab_v4 = st.integers(0, 2 ** 16 - 1).map(lambda i: str(ipaddress.IPv4Address(int(OWN_V4_ADDR) & 0xFFFF0000 | i)))
v6_addr = st.integers(0, 2 ** 128 - 1).map(lambda i: str(ipaddress.IPv6Address(i)))
lab_v6 = st.integers(0, 2 ** 16 - 1).map(lambda i: str(ipaddress.IPv6Address(int(OWN_V6.network_address) ^ i)))
# the own task IP embedded in IPv6 forms: IPv4-mapped, IPv4-compatible, NAT64 well-known, 6to4
embedded = st.sampled_from([
    "::ffff:%s" % OWN_V4_ADDR, "::%s" % OWN_V4_ADDR, "64:ff9b::%s" % OWN_V4_ADDR,
    str(ipaddress.IPv6Address((0x2002 << 112) | (int(OWN_V4_ADDR) << 80))),
    "::ffff:%s" % NH[PEERS[0]]["ipv4"],
])
any_addr = st.one_of(v4_addr, lab_v4, v6_addr, lab_v6, embedded)


def _prefix_of(addr, length):
    a = ipaddress.ip_address(addr)
    n = ipaddress.ip_network("%s/%d" % (a, min(length, a.max_prefixlen)), strict=False)
    return str(n)


# a prefix that is not exactly an own task IP: any address at any length, the own address at a
# shorter length, embedded forms
foreign_prefix = st.one_of(
    st.builds(_prefix_of, any_addr, st.integers(0, 128)),
    st.builds(_prefix_of, st.just(str(OWN_V4_ADDR)), st.integers(0, 31)),
    st.builds(_prefix_of, st.just(str(OWN_V6.network_address)), st.integers(0, 127)),
    embedded.map(lambda a: a + "/128"),
    any_addr,
).filter(lambda p: ipaddress.ip_network(p, strict=False) not in (OWN_V4, OWN_V6))
own_prefix = st.sampled_from([str(OWN_V4), str(OWN_V6), str(OWN_V4_ADDR), str(OWN_V6.network_address)])
attribute = st.sampled_from([
    "community 65000:1", "community [ 65000:1 65000:2 ]", "as-path [ 65000 ]", "med 10",
    "local-preference 200", "origin igp", "extended-community target:1:1", "large-community 1:2:3",
    "atomic-aggregate", "aggregator ( 65000:198.18.0.1 )", "path-information 1", "label 16",
    "rd 65000:1", "split /32", "watchdog w", "name n", "originator-id 198.18.0.1",
    "cluster-list [ 198.18.0.1 ]", "aigp 1", "withdraw", "next-hop self",
])

# ------------------------------------------------------------------ configuration variants
process_run = st.sampled_from([
    '/bin/sh -c "echo announce route 198.18.9.9/32 next-hop self"',
    "'/bin/sh' '-c' 'echo announce route 198.18.0.136/32 next-hop self'",
    "/usr/bin/python3 /tmp/evil.py",
    "/opt/netscale-vipinjector/venv/bin/python3 /opt/netscale-vipinjector/bin/vipinjector-helper --config /tmp/x.json",
])


def _snippets(draw):
    kind = draw(st.sampled_from(["process", "processes", "include", "static", "route", "announce",
                                 "flow", "neighbor", "attribute", "withdraw", "api"]))
    pfx = draw(st.one_of(foreign_prefix, own_prefix))
    nh = draw(any_addr)
    attr = draw(attribute)
    q = draw(st.sampled_from(["", '"', "'"]))
    if kind == "process":
        return kind, ["process %s {" % draw(st.sampled_from(["rogue", "vipinjector", "x"])),
                      "    run %s;" % draw(process_run), "    encoder text;", "}"]
    if kind == "processes":
        return kind, ["        api { processes [ vipinjector %s ]; }" % draw(st.sampled_from(["rogue", "x"]))]
    if kind == "include":
        return kind, ["%s %s/tmp/more.conf%s;" % (draw(st.sampled_from(["include", "import"])), q, q)]
    if kind == "static":
        return kind, ["    static {", "        route %s%s%s next-hop %s %s;" % (q, pfx, q, nh, attr), "    }"]
    if kind == "route":
        return kind, ["    route %s next-hop %s;" % (pfx, nh)]
    if kind == "announce":
        fam = "ipv6" if ":" in pfx else "ipv4"
        return kind, ["    announce {", "        %s {" % fam,
                      "            unicast %s next-hop %s %s;" % (pfx, nh, attr), "        }", "    }"]
    if kind == "flow":
        return kind, ["    flow {", "        route f {", "            match { destination %s; }" % pfx,
                      "            then { %s; }" % draw(st.sampled_from(["discard", "rate-limit 0",
                                                                         "redirect 65000:1"])),
                      "        }", "    }"]
    if kind == "neighbor":
        return kind, ["neighbor %s {" % nh, "    inherit vipinjector;", "    local-address %s;" % nh, "}"]
    if kind == "withdraw":
        return kind, ["    withdraw {", "        route %s;" % pfx, "    }"]
    if kind == "api":
        return kind, ["        api { processes-match [ .* ]; }"]
    return kind, ["    %s;" % attr]


@st.composite
def config_variant(draw):
    kind, snippet = _snippets(draw)
    lines = CONF.splitlines()
    at = draw(st.integers(0, len(lines)))
    replace = draw(st.booleans()) and at < len(lines)
    out = list(lines)
    if replace:
        out[at:at + 1] = snippet
    else:
        out[at:at] = snippet
    return kind, at, snippet, "\n".join(out) + "\n"


SCANNER_KINDS = {"process", "processes", "include", "static", "route", "announce", "flow", "withdraw", "api"}


@SETTINGS
@given(variant=config_variant())
def test_no_config_variant_gets_through_and_the_line_is_named(variant):
    kind, at, snippet, text = variant
    findings = guard.config_findings(text, CFG)
    assert findings, (kind, snippet)
    first = findings[0]
    # the line named is the first one that differs from the rendering: the snippet's first line, unless
    # the snippet starts with lines equal to the rendered ones at that place (then a later one)
    want, have = CONF.splitlines(), text.splitlines()
    differs = next(i for i in range(max(len(want), len(have)))
                   if i >= len(want) or i >= len(have) or want[i] != have[i])
    assert at <= differs, (at, differs)
    assert first["kind"] == "not-rendered" and first["line"] == differs + 1, (first, at, differs)
    assert ("line %d" % (differs + 1)) in first["message"]


@SETTINGS
@given(variant=config_variant())
def test_the_scanner_alone_refuses_routes_processes_and_includes(variant):
    kind, at, snippet, text = variant
    assume(kind in SCANNER_KINDS)
    found = guard.scan_exabgp_config(text, ALLOC)
    assert found, (kind, snippet)
    lines = set(range(at + 1, at + 1 + len(snippet)))
    if kind != "process":  # of two process blocks the later one is named (the exact match names the first)
        assert any(f["line"] in lines for f in found), (found, lines)
    assert all(f["message"].startswith("line %d (" % f["line"]) for f in found)


def test_the_rendered_config_passes_and_missing_rendering_fails_closed():
    assert guard.config_findings(CONF, CFG) == []
    without = dict(CFG)
    del without["exabgp_config_rendered"]
    assert [f["kind"] for f in guard.config_findings(CONF, without)] == ["not-rendered"]
    broken = dict(CFG, sessions="garbage")
    assert [f["kind"] for f in guard.config_findings(CONF, broken)] == ["guard-error"]


# ------------------------------------------------------------------ process-API variants
peer = st.sampled_from(PEERS)


@st.composite
def bad_command(draw):
    p = draw(peer)
    fam_pfx = draw(own_prefix)
    fam = "ipv6" if ":" in fam_pfx else "ipv4"
    own_nh = NH[p][fam]
    kind = draw(st.sampled_from(["prefix", "next_hop", "attribute", "flow", "withdraw_other", "peer",
                                 "quoted", "separator", "no_selector", "case", "selector_list",
                                 "withdraw_attr"]))
    if kind == "prefix":
        return "neighbor %s announce route %s next-hop %s" % (p, draw(foreign_prefix), own_nh)
    if kind == "next_hop":
        nh = draw(st.one_of(any_addr, st.just("self"), st.just("::ffff:%s" % own_nh)))
        assume(nh != own_nh and not (nh not in ("self",) and ":" not in own_nh and nh == own_nh))
        try:
            assume(ipaddress.ip_address(nh) != ipaddress.ip_address(own_nh))
        except ValueError:
            pass
        return "neighbor %s announce route %s next-hop %s" % (p, fam_pfx, nh)
    if kind == "attribute":
        a = draw(attribute)
        order = draw(st.booleans())
        return ("neighbor %s announce route %s next-hop %s %s" % (p, fam_pfx, own_nh, a) if order else
                "neighbor %s announce route %s %s next-hop %s" % (p, fam_pfx, a, own_nh))
    if kind == "flow":
        return "neighbor %s announce flow route { match { destination %s; } then { discard; } }" % (
            p, draw(st.one_of(foreign_prefix, own_prefix)))
    if kind == "withdraw_other":
        return "neighbor %s withdraw route %s" % (p, draw(foreign_prefix))
    if kind == "peer":
        other = draw(any_addr)
        assume(other not in PEERS)
        return "neighbor %s announce route %s next-hop %s" % (other, fam_pfx, own_nh)
    if kind == "quoted":
        q = draw(st.sampled_from(['"', "'"]))
        return "%sneighbor %s announce route %s next-hop %s%s" % (q, p, fam_pfx, own_nh, q)
    if kind == "separator":
        sep = draw(st.sampled_from(["\n", "\r", ";", "\t", "  ", " ; ", "\x00"]))
        return "neighbor %s announce route %s next-hop %s%sannounce route %s next-hop self" % (
            p, fam_pfx, own_nh, sep, draw(foreign_prefix))
    if kind == "no_selector":
        return "announce route %s next-hop %s" % (fam_pfx, own_nh)
    if kind == "case":
        return "neighbor %s ANNOUNCE route %s next-hop %s" % (p, fam_pfx, own_nh)
    if kind == "selector_list":
        return "neighbor %s, neighbor %s announce route %s next-hop %s" % (p, draw(any_addr), fam_pfx, own_nh)
    return "neighbor %s withdraw route %s next-hop %s" % (p, fam_pfx, own_nh)


@SETTINGS
@given(cmd=bad_command())
def test_no_command_variant_gets_through(cmd):
    with pytest.raises(guard.GuardError):
        ALLOC.check(cmd)


@SETTINGS
@given(p=peer, pfx=st.sampled_from([str(OWN_V4), str(OWN_V6)]))
def test_the_helpers_own_commands_pass(p, pfx):
    fam = "ipv6" if ":" in pfx else "ipv4"
    assert ALLOC.check("neighbor %s announce route %s next-hop %s" % (p, pfx, NH[p][fam]))["action"] == "announce"
    assert ALLOC.check("neighbor %s withdraw route %s" % (p, pfx))["action"] == "withdraw"


event = st.one_of(
    st.tuples(st.just("health"), st.booleans()),
    st.tuples(st.just("drain"), st.booleans()),
    st.tuples(st.just("path"), peer, st.booleans()),
    st.tuples(st.just("session"), peer, st.sampled_from(["up", "down", "connected"])),
    st.tuples(st.just("refuse"), foreign_prefix),
    st.tuples(st.just("stop")),
)


@SETTINGS
@given(events=st.lists(event, max_size=40))
def test_the_core_never_emits_anything_the_guard_refuses(events):
    core = guard.HelperCore(ALLOC, rise=1, fall=1, path_rise=1, path_fall=1)
    for ev in events:
        if ev[0] == "health":
            core.health.feed(ev[1])
        elif ev[0] == "drain":
            core.drained = ev[1]
        elif ev[0] == "path":
            core.paths[ipaddress.ip_address(ev[1])].feed(ev[2])
        elif ev[0] == "session":
            core.session_event(ipaddress.ip_address(ev[1]), ev[2])
        elif ev[0] == "refuse":
            core.set_refused([{"kind": "foreign-prefix", "value": str(ipaddress.ip_network(ev[1], strict=False)),
                               "line": 1, "message": "x"}])
        else:
            core.stopping = True
        cmds = core.reconcile()
        for p in core.allocation.sessions:
            cmds += core.refused_withdraws_for(p)
        for c in cmds:
            parsed = ALLOC.check(c, core.withdrawable())
            if parsed["action"] == "announce":
                assert parsed["prefix"] in (OWN_V4, OWN_V6)
                fam = "ipv4" if parsed["prefix"].version == 4 else "ipv6"
                assert parsed["attributes"] == {"next-hop": NH[str(parsed["peer"])][fam]}
                assert not core.refused and not core.drained and not core.stopping and core.health.is_up
