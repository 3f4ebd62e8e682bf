"""VipInjector pure core: renderer, guard (commands and configuration scan), rise/fall and the
helper's desired-state machine. No network, no root."""
import json
import os
import shutil

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import guard as rt

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
NONE = {"type": "none"}  # explicit consent: no workload health check


@pytest.fixture(scope="module")
def hosts():
    topo = load_topology(yaml.safe_load(open(os.path.join(REPO, "inventories", "lab", "fabric.yml"))))
    plan = FabricPlan(topo).allocate()
    return dict((h.name, plan.host_data(h)) for h in topo.hosts)


@pytest.fixture(scope="module")
def inst(hosts):
    return render.render_instance(hosts["lab-r1-h2"], 1, {"md5_password": "k#ey-1", "health": NONE})


def _alloc(inst):
    hc = json.loads(inst["files"]["helper.json"])
    return rt.Allocation(hc["allocation"], hc["sessions"])


# ------------------------------------------------------------------ renderer
def test_render_one_session_per_nic_with_plan_addresses(hosts, inst):
    conf = inst["files"]["exabgp.conf"]
    h = hosts["lab-r1-h2"]
    for k, nic in enumerate(h["nics"]):
        assert "neighbor %s {" % nic["gateway"]["ipv6"] in conf
        assert "local-address %s;" % h["slots"][0]["nics"][k]["address"]["ipv6"] in conf
    assert conf.count("neighbor fd00:") == 4
    assert "local-as 4201000002;" in conf and "peer-as 4200001001;" in conf
    assert "hold-time 9;" in conf and "outgoing-ttl 255;" in conf
    assert conf.count('md5-password "k#ey-1";') == 4
    assert "route " not in conf.replace("route-refresh", "")  # announces nothing by itself
    hc = json.loads(inst["files"]["helper.json"])
    assert hc["allocation"] == ["198.18.0.136/32", "fd00:10:0:8::8/128"]
    assert hc["sessions"][2]["next_hop"] == {"ipv4": "198.18.0.164", "ipv6": "fd00:10:0:a::4"}
    assert "k#ey-1" not in inst["files"]["helper.json"] + inst["files"]["exabgp.env"]
    env = inst["files"]["exabgp.env"]
    assert "exabgp_api_cli=false" in env and "exabgp_log_level=INFO" in env


def test_render_is_deterministic_and_two_nic_host(hosts):
    a = render.render_instance(hosts["lab-r1-h1"], 2, {"health": NONE})
    b = render.render_instance(hosts["lab-r1-h1"], 2, {"health": NONE})
    assert a["files"] == b["files"]
    assert a["files"]["exabgp.conf"].count("inherit vipinjector;") == 2


def test_render_ipv4_sessions_and_no_ttl(hosts):
    r = render.render_instance(hosts["lab-r2-h1"], 1, {"session_family": "ipv4", "outgoing_ttl": None, "health": NONE})
    conf = r["files"]["exabgp.conf"]
    assert "outgoing-ttl" not in conf
    assert "neighbor 198.18." in conf and "neighbor fd00" not in conf


@pytest.mark.parametrize("opts,field", [
    ({"hold_time": 2}, "hold_time"),
    ({"outgoing_ttl": 256}, "outgoing_ttl"),
    ({"session_family": "ipx"}, "session_family"),
    ({"health": {"type": "tcp"}}, "health.host"),
    ({"health": {"type": "bogus"}}, "health.type"),
    ({"path_check": {"type": "route", "rise": 0}}, "path_check.rise"),
    ({"log_level": "DEBUG"}, "log_level"),
    ({"md5_password": 'a"b'}, "md5_password"),
    ({"md5_password": "a'b"}, "md5_password"),
    ({"md5_password": "a b"}, "md5_password"),
    ({"md5_password": "a\tb"}, "md5_password"),
    ({"nope": 1}, "nope"),
    ({"announce_families": []}, "announce_families"),
])
def test_render_bad_input_names_field_value_fix(hosts, opts, field):
    with pytest.raises(render.RenderError) as ei:
        render.render_instance(hosts["lab-r1-h2"], 1, dict({"health": NONE}, **opts))
    msg = str(ei.value)
    assert field in msg and "Fix:" in msg
    assert 'a"b' not in msg and "a'b" not in msg  # keys are never echoed


def test_render_refuses_a_slot_without_an_explicit_health_check(hosts):
    for opts in ({}, {"health": {}}, {"health": {"interval": 2}}, {"health": {"type": None}}):
        with pytest.raises(render.RenderError) as ei:
            render.render_instance(hosts["lab-r1-h2"], 1, opts)
        msg = str(ei.value)
        assert msg.startswith("health.type:") and "vipinjector_health" in msg and "type: none" in msg, msg
    conf = render.render_instance(hosts["lab-r1-h2"], 1, {"health": {"type": "tcp", "host": "::1", "port": 80}})
    assert json.loads(conf["files"]["helper.json"])["health"]["type"] == "tcp"


def test_render_unknown_slot(hosts):
    with pytest.raises(render.RenderError, match="slot.*no such task slot"):
        render.render_instance(hosts["lab-r1-h2"], 9, {"health": NONE})


@pytest.mark.skipif(shutil.which("exabgp") is None and not os.path.exists(os.path.join(REPO, ".venv/bin/exabgp")),
                    reason="exabgp not installed")
def test_rendered_config_passes_exabgp_validate(hosts, tmp_path):
    helper = tmp_path / "helper"
    helper.write_text("#!/bin/sh\n")
    helper.chmod(0o755)
    r = render.render_instance(hosts["lab-r1-h2"], 2, {"install_dir": str(tmp_path), "health": NONE})
    conf = r["files"]["exabgp.conf"].replace(os.path.join(str(tmp_path), "venv", "bin", "python3") + " ", "")
    conf = conf.replace(os.path.join(str(tmp_path), "bin", "vipinjector-helper"), str(helper))
    ok, out = render.exabgp_validate(conf, os.path.join(REPO, ".venv", "bin", "exabgp"))
    assert ok, out
    ok, out = render.exabgp_validate(conf.replace("hold-time 9;", "hold-time banana;"),
                                     os.path.join(REPO, ".venv", "bin", "exabgp"))
    assert not ok


# ------------------------------------------------------------------ guard
def test_guard_accepts_own_announcements(inst):
    a = _alloc(inst)
    p = a.check("neighbor fd00:10:0:9::1 announce route 198.18.0.136/32 next-hop 198.18.0.148")
    assert p["action"] == "announce"
    a.check("neighbor fd00:10:0:9::1 announce route fd00:10:0:8::8/128 next-hop fd00:10:0:9::4")
    a.check("neighbor fd00:10:0:9::1 withdraw route 198.18.0.136/32")
    # another prefix only when the configuration guard found it (refused mode withdraws it)
    with pytest.raises(rt.GuardError, match="not this instance"):
        a.check("neighbor fd00:10:0:9::1 withdraw route 198.18.0.2/32")
    a.check("neighbor fd00:10:0:9::1 withdraw route 198.18.0.2/32", ["198.18.0.2/32"])


@pytest.mark.parametrize("cmd,why", [
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.137/32 next-hop 198.18.0.148", "not this instance"),
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.136/31 next-hop 198.18.0.148", "not this instance"),
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.136/32 next-hop 198.18.0.132", "next-hop"),
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.136/32", "no next-hop"),
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.136/32 next-hop 198.18.0.148 community 1:1", "attributes"),
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.136/32 next-hop self", "next-hop self"),
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.136/32 next-hop 198.18.0.132 next-hop 198.18.0.148",
     "repeats"),
    ("neighbor fd00:10:0:9::1 withdraw route 198.18.0.136/32 next-hop 198.18.0.148", "attributes"),
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.136/32 next-hop 198.18.0.148\nannounce route "
     "198.18.0.7/32 next-hop self", "one line"),
    ("neighbor fd00:10:0:9::1 announce route 198.18.0.136/32 next-hop 198.18.0.148; announce route "
     "198.18.0.7/32", "separator"),
    ("neighbor fd00:10:0:9::1%eth0 announce route 198.18.0.136/32 next-hop 198.18.0.148", "zone"),
    ("neighbor fd00:10:0:9::1  announce route 198.18.0.136/32 next-hop 198.18.0.148", "single spaces"),
    ("neighbor fd00:10:0:99::1 announce route 198.18.0.136/32 next-hop self", "not one of"),
    ("announce route 198.18.0.136/32 next-hop self", "neighbor"),
    ("neighbor fd00:10:0:9::1 announce flow route { match { destination 1.2.3.4/32; } }", "nothing else"),
    ("neighbor fd00:10:0:9::1 announce attributes next-hop self nlri 198.18.0.7/32", "nothing else"),
    ("shutdown", "nothing else"),
])
def test_guard_refuses(inst, cmd, why):
    with pytest.raises(rt.GuardError, match=why):
        _alloc(inst).check(cmd)


def test_allocation_rejects_non_host_routes():
    with pytest.raises(rt.GuardError, match="not a host route"):
        rt.Allocation(["198.18.0.0/24"], [{"peer": "fd00::1", "local": "fd00::2"}])


def test_scan_clean_rendered_config(inst):
    assert rt.scan_exabgp_config(inst["files"]["exabgp.conf"], _alloc(inst)) == []


@pytest.mark.parametrize("snippet,kind", [
    ("    static {\n        route 198.18.0.8/32 next-hop self;\n    }\n", "foreign-prefix"),
    ("    route 198.18.0.8/32 next-hop self;\n", "foreign-prefix"),
    ("    announce {\n        ipv4 {\n            unicast 198.18.0.9/32 next-hop self;\n        }\n    }\n", "foreign-prefix"),
    ("    announce {\n        ipv6 {\n            unicast fd00:10::9/128 next-hop self;\n        }\n    }\n", "foreign-prefix"),
    ("    static {\n        route 198.18.0.136/32 next-hop self;\n    }\n", "static-route"),
    ("    flow {\n        route x {\n            match { destination 198.19.9.9/32; }\n            then { discard; }\n        }\n    }\n", "foreign-prefix"),
    ("    md5-ip 198.18.0.200;\n", "foreign-address"),
])
def test_scan_finds_hand_edits(inst, snippet, kind):
    conf = inst["files"]["exabgp.conf"].replace("    inherit vipinjector;\n", "    inherit vipinjector;\n" + snippet, 1)
    found = rt.scan_exabgp_config(conf, _alloc(inst))
    assert any(f["kind"] == kind for f in found), found


def test_scan_ignores_comments_and_quoted_hash(inst):
    conf = inst["files"]["exabgp.conf"] + "\n# route 198.18.0.8/32 next-hop self;\n"
    assert rt.scan_exabgp_config(conf, _alloc(inst)) == []


# ------------------------------------------------------------------ rise/fall
def test_risefall_first_result_decides_then_debounces():
    r = rt.RiseFall(rise=2, fall=3)
    assert r.feed(True) and r.is_up
    assert not r.feed(False) and not r.feed(False) and r.is_up
    assert r.feed(False) and not r.is_up
    assert not r.feed(True) and r.feed(True) and r.is_up
    assert not r.feed(False) and not r.feed(True) and not r.feed(False) and r.is_up  # streak resets


def test_risefall_rejects_zero():
    with pytest.raises(ValueError):
        rt.RiseFall(0, 1)


# ------------------------------------------------------------------ desired state
def _core(inst, **kw):
    return rt.HelperCore(_alloc(inst), **kw)


def test_core_announces_only_when_healthy_and_path_up(inst):
    c = _core(inst, rise=1, fall=1, path_rise=1, path_fall=1)
    assert c.reconcile() == []  # health unknown
    c.health.feed(True)
    cmds = c.reconcile()
    assert len(cmds) == 8 and all(" announce route " in x for x in cmds)
    assert "neighbor fd00:10:0:a::1 announce route 198.18.0.136/32 next-hop 198.18.0.164" in cmds
    assert c.reconcile() == []  # idempotent
    peer1 = rt._addr("fd00:10:0:9::1")
    c.paths[peer1].feed(False)
    cmds = c.reconcile()
    assert sorted(cmds) == ["neighbor fd00:10:0:9::1 withdraw route 198.18.0.136/32",
                            "neighbor fd00:10:0:9::1 withdraw route fd00:10:0:8::8/128"]
    c.paths[peer1].feed(True)
    assert len(c.reconcile()) == 2


def test_core_drain_health_stop_withdraw_everything(inst):
    for action in ("drain", "health", "stop"):
        c = _core(inst, rise=1, fall=1)
        c.health.feed(True)
        c.reconcile()
        if action == "drain":
            c.drained = True
        elif action == "health":
            c.health.feed(False)
        else:
            c.stopping = True
        cmds = c.reconcile()
        assert len(cmds) == 8 and all(" withdraw route " in x for x in cmds)
        assert c.status()["announced_prefixes"] == []


def test_core_refused_never_announces_and_withdraws_foreign_on_session_up(inst):
    c = _core(inst, rise=1, fall=1)
    c.set_refused([{"kind": "foreign-prefix", "value": "198.18.0.8/32", "message": "x"}])
    c.health.feed(True)
    assert c.reconcile() == []
    peer = rt._addr("fd00:10:0:8::1")
    c.session_event(peer, "up")
    assert c.refused_withdraws_for(peer) == ["neighbor fd00:10:0:8::1 withdraw route 198.18.0.8/32"]
    st = c.status()
    assert st["guard"]["refused"] and st["announced_prefixes"] == []


def test_core_session_up_reannounces(inst):
    c = _core(inst, rise=1, fall=1)
    c.health.feed(True)
    c.reconcile()
    peer = rt._addr("fd00:10:0:b::1")
    c.session_event(peer, "down")
    assert c.reconcile() == []  # ExaBGP keeps the routes for the next establishment
    c.session_event(peer, "up")
    assert len(c.reconcile()) == 2


def test_prometheus_text(inst):
    c = _core(inst, rise=1, fall=1)
    c.health.feed(True)
    c.reconcile()
    c.session_event(rt._addr("fd00:10:0:8::1"), "up")
    text = rt.prometheus_text(c.status(now=1.0), "lab-r1-h2/slot1")
    assert 'netscale_vipinjector_session_up{instance="lab-r1-h2/slot1",nic="0",peer="fd00:10:0:8::1"} 1' in text
    assert 'netscale_vipinjector_health_up{instance="lab-r1-h2/slot1"} 1' in text
    assert text.count("netscale_vipinjector_announced{") == 8


def test_parse_api_command():
    p = rt.parse_api_command("neighbor 198.18.0.1 withdraw route 198.18.0.9")
    assert str(p["prefix"]) == "198.18.0.9/32" and p["action"] == "withdraw"


# ------------------------------------------------------------------ fail closed
@pytest.mark.parametrize("error", [OSError("ip: not found"), ValueError("not JSON"),
                                   __import__("subprocess").TimeoutExpired(["ip"], 2.0)])
def test_task_ip_check_that_cannot_run_refuses(inst, monkeypatch, error):
    from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import sidecar
    cfg = json.loads(inst["files"]["helper.json"])
    cfg["require_local_task_ip"] = True

    def failing(args, timeout=2.0):
        raise error
    monkeypatch.setattr(sidecar, "_ip_json", failing)
    helper = sidecar.Helper(cfg, log=open(os.devnull, "w"))
    helper.check_task_ip_local()
    assert [r["kind"] for r in helper.core.refused] == ["task-ip-unverified"]
    assert helper.core.status()["guard"]["refused"]


def test_task_ip_check_refuses_an_address_not_held(inst, monkeypatch):
    from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import sidecar
    cfg = json.loads(inst["files"]["helper.json"])
    cfg["require_local_task_ip"] = True
    monkeypatch.setattr(sidecar, "_ip_json", lambda args, timeout=2.0: [{"addr_info": [{"local": "fd00:99::1"}]}])
    helper = sidecar.Helper(cfg, log=open(os.devnull, "w"))
    helper.check_task_ip_local()
    assert [r["kind"] for r in helper.core.refused] == ["task-ip-not-local"]


# ------------------------------------------------------------------ only the rendered config runs
from hypothesis import given, settings, strategies as st  # noqa: E402

_ATTACKS = [
    'process rogue {\n    run /bin/sh -c "echo announce route 198.18.9.9/32 next-hop self";\n    encoder text;\n}',
    "    api { processes [ vipinjector rogue ]; }",
    "include /tmp/more.conf;",
    "    static { route 198.18.0.8/32 next-hop self; }",
    "neighbor fd00:10::99 { local-as 1; peer-as 2; }",
    "    flow { route x { match { destination 198.18.0.0/15; } then { discard; } } }",
    "    announce { ipv6 { unicast ::ffff:198.18.3.3/128 next-hop self; } }",
    "",
    "#",
]


def test_the_rendered_config_passes_the_guard(inst):
    cfg = json.loads(inst["files"]["helper.json"])
    from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import guard
    assert guard.config_findings(inst["files"]["exabgp.conf"], cfg) == []
    assert "k#ey-1" not in inst["files"]["helper.json"], "the helper's copy of the rendering is redacted"


def test_a_second_process_is_refused_and_named(inst):
    from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import guard
    cfg = json.loads(inst["files"]["helper.json"])
    conf = inst["files"]["exabgp.conf"] + _ATTACKS[0] + "\n"
    findings = guard.config_findings(conf, cfg)
    assert findings[0]["kind"] == "not-rendered" and "process rogue" in findings[0]["value"]


@settings(max_examples=200, deadline=None)
@given(attack=st.sampled_from(_ATTACKS), where=st.floats(min_value=0, max_value=1),
       replace=st.booleans())
def test_any_line_the_role_did_not_write_is_refused(inst, attack, where, replace):
    from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import guard
    cfg = json.loads(inst["files"]["helper.json"])
    lines = inst["files"]["exabgp.conf"].splitlines()
    at = int(where * (len(lines) - 1))
    if replace:
        if lines[at] == attack:
            return
        lines[at] = attack
    else:
        lines.insert(at, attack)
    assert guard.config_findings("\n".join(lines) + "\n", cfg), (at, attack)
