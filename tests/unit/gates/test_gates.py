# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gate engine, condition language and built-in gates on recorded input.

The FRR fixtures were captured from a real FRR 8.4.4 ToR (tor_policy-rendered config) with two real
ExaBGP sidecars of lab-r1-h2 (4 NICs, 2 slots): ``tor_idle`` (no sidecar), ``tor_up`` (both up),
``tor_nic_down`` (NIC eth2 of slot 1 cut on the ToR side). The spine, probe and ping fixtures are
in the exact output formats of FRR, lab_probe and iputils ping.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.gates import builtin, engine, expr, measure
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def fx(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read() if name.endswith(".txt") else json.load(f)


@pytest.fixture(scope="module")
def lab():
    with open(os.path.join(REPO, "inventories", "lab", "fabric.yml")) as f:
        topo = load_topology(yaml.safe_load(f))
    plan = FabricPlan(topo).allocate()
    hosts = dict((h.name, plan.host_data(h)) for h in topo.hosts)
    spine = plan.spine_data(topo.spines[0])
    return hosts, spine


class FakeClock(object):
    def __init__(self):
        self.t = 1000.0
        self.sleeps = []

    def clock(self):
        return self.t

    def sleep(self, s):
        self.sleeps.append(s)
        self.t += s


def seq(*values):
    it = iter(values)

    def measure_fn():
        v = next(it)
        if isinstance(v, Exception):
            raise v
        return v
    return measure_fn


def run(spec):
    c = FakeClock()
    return engine.run_gate(spec, clock=c.clock, sleep=c.sleep), c


# --- condition language -------------------------------------------------------------------------

def test_expr_basics():
    env = {"a": 3, "b": 3, "shares": {"eth0": 0.25}, "tol": 0.1}
    assert expr.evaluate("a == b and a > 0", env)
    assert expr.evaluate("abs(shares['eth0'] - 1 / 4) <= tol", env)
    assert not expr.evaluate("not (a == b)", env)
    assert expr.evaluate("1 < a <= 3", env)
    assert expr.evaluate("max(a, b, 7) == 7 and 'eth0' in shares", env)
    assert expr.names("established == expected and x > max_loss") == ["established", "expected", "max_loss", "x"]


@pytest.mark.parametrize("bad", ["a.__class__", "[x for x in a]", "__import__('os')", "open('/etc/passwd')",
                                 "lambda: 1", ""])
def test_expr_refuses_unsafe(bad):
    with pytest.raises(expr.ConditionError):
        expr.evaluate(bad, {"a": 1})


def test_expr_unknown_name_is_named():
    with pytest.raises(expr.ConditionError, match="unknown name 'establishd'"):
        expr.evaluate("establishd == 1", {"established": 1})


# --- engine semantics ---------------------------------------------------------------------------

def test_pass_after_all_measurements():
    spec = engine.GateSpec("g", seq({"x": 1}, {"x": 1}, {"x": 1}), "x == 1", interval=2, count=3)
    res, c = run(spec)
    assert res["verdict"] == "pass" and res["counts"]["successful"] == 3
    assert c.sleeps == [2, 2] and res["seconds"] == 4


def test_fail_when_failures_exceed_limit():
    spec = engine.GateSpec("g", seq({"x": 0}, {"x": 1}, {"x": 0}, {"x": 1}), "x == 1", count=4, failure_limit=1)
    res, c = run(spec)
    assert res["verdict"] == "fail" and res["counts"]["failed"] == 2 and len(res["measurements"]) == 3


def test_failure_within_limit_passes():
    spec = engine.GateSpec("g", seq({"x": 0}, {"x": 1}, {"x": 1}), "x == 1", count=3, failure_limit=1)
    assert run(spec)[0]["verdict"] == "pass"


def test_inconclusive_between_conditions():
    spec = engine.GateSpec("g", seq({"x": 5}), "x < 3", failure_condition="x > 10", count=1)
    res = run(spec)[0]
    assert res["verdict"] == "inconclusive" and res["measurements"][0]["phase"] == "inconclusive"


def test_inconclusive_limit():
    spec = engine.GateSpec("g", seq({"x": 5}, {"x": 1}, {"x": 5}), "x < 3", failure_condition="x > 10",
                           count=3, inconclusive_limit=1)
    res = run(spec)[0]
    assert res["verdict"] == "inconclusive" and res["counts"]["inconclusive"] == 2


def test_consecutive_errors_make_it_inconclusive():
    err = engine.MeasurementError("vtysh: connection refused")
    spec = engine.GateSpec("g", seq(err, err, err), "x == 1", count=5, error_limit=2)
    res = run(spec)[0]
    assert res["verdict"] == "inconclusive" and "consecutive" in res["reason"]


def test_errors_leave_too_little_evidence_for_a_pass():
    err = engine.MeasurementError("no data yet")
    spec = engine.GateSpec("g", seq(err, {"x": 1}, {"x": 1}), "x == 1", count=3, error_limit=2)
    res = run(spec)[0]
    assert res["verdict"] == "inconclusive"
    assert res["evidence"] == {"measurements": 3, "successful": 2, "required_successes": 3, "errors": 1}


def test_errors_then_success_passes_when_min_successful_allows():
    err = engine.MeasurementError("no data yet")
    spec = engine.GateSpec("g", seq(err, {"x": 1}, {"x": 1}), "x == 1", count=3, error_limit=2, min_successful=2)
    assert run(spec)[0]["verdict"] == "pass"


def test_one_success_and_four_errors_is_not_a_pass():
    err = engine.MeasurementError("device did not answer")
    spec = engine.GateSpec("g", seq({"x": 1}, err, err, err, err), "x == 1", count=5, error_limit=4)
    res = run(spec)[0]
    assert res["verdict"] == "inconclusive" and "only 1 of 5" in res["reason"]


def test_failure_limit_excuses_failures_not_errors():
    err = engine.MeasurementError("no data")
    ok, bad = {"x": 1}, {"x": 0}
    excused = engine.GateSpec("g", seq(ok, bad, ok, ok), "x == 1", count=4, failure_limit=1)
    assert run(excused)[0]["verdict"] == "pass"
    short = engine.GateSpec("g", seq(ok, bad, err, ok), "x == 1", count=4, failure_limit=1)
    assert run(short)[0]["verdict"] == "inconclusive"


def test_min_successful_is_validated():
    with pytest.raises(engine.GateDefinitionError, match="min_successful=7"):
        engine.GateSpec("g", seq({"x": 1}), "x == 1", count=3, min_successful=7)


def test_success_threshold_stops_early():
    spec = engine.GateSpec("g", seq({"x": 0}, {"x": 1}, {"x": 1}, {"x": 0}), "x == 1", count=30,
                           failure_limit=29, success_threshold=2, interval=1)
    res, c = run(spec)
    assert res["verdict"] == "pass" and len(res["measurements"]) == 3 and c.sleeps == [1, 1]


def test_success_threshold_never_reached_fails():
    spec = engine.GateSpec("g", seq({"x": 0}, {"x": 1}, {"x": 0}, {"x": 1}, {"x": 0}), "x == 1", count=5, failure_limit=4,
                           success_threshold=2)
    res = run(spec)[0]
    assert res["verdict"] == "fail" and "never 2 consecutive" in res["reason"]


def test_condition_on_missing_value_is_inconclusive_at_once():
    spec = engine.GateSpec("g", seq({"y": 1}, {"y": 1}), "x == 1", count=2)
    res = run(spec)[0]
    assert res["verdict"] == "inconclusive" and "unknown name 'x'" in res["reason"]
    assert len(res["measurements"]) == 1


def test_params_visible_to_condition_and_values_win():
    spec = engine.GateSpec("g", seq({"loss": 0.5, "limit": 9}), "loss <= limit", params={"limit": 0.0})
    assert run(spec)[0]["verdict"] == "pass"


@pytest.mark.parametrize("field,value,msg", [
    ("count", 0, "count=0 must be an integer >= 1"),
    ("failure_limit", -1, "failure_limit=-1"),
    ("interval", "5s", "interval='5s' must be a number of seconds"),
    ("success_condition", "x ==", "syntax error"),
    ("success_threshold", 9, "success_threshold=9 must be null or an integer in 1..count (1)"),
])
def test_bad_definitions_name_field_and_value(field, value, msg):
    kw = {"success_condition": "x == 1"}
    kw[field] = value
    with pytest.raises(engine.GateDefinitionError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        engine.GateSpec("bad", seq({"x": 1}), **kw)


def test_combine():
    assert engine.combine([{"verdict": "pass"}, {"verdict": "inconclusive"}]) == "inconclusive"
    assert engine.combine([{"verdict": "fail"}, {"verdict": "inconclusive"}]) == "fail"
    assert engine.combine([]) == "inconclusive", "no gate judged: nothing passed"


# --- built-in gates on recorded FRR output ------------------------------------------------------

def _gate(gate, data, success_condition=None, **kw):
    d = builtin.definition(gate)
    m = measure.measurement(gate, "values", data=data, **kw)
    spec = engine.GateSpec(gate, m, success_condition or d["success_condition"], params=d["params"], count=1)
    return run(spec)[0]


def test_sessions_all_established(lab):
    hosts = lab[0]
    v = builtin.values_bgp_sessions(fx("tor_up_neighbors.json"), [hosts["lab-r1-h2"]])
    assert (v["expected"], v["established"]) == (8, 8)
    assert _gate("bgp_sessions", fx("tor_up_neighbors.json"), hosts=[hosts["lab-r1-h2"]])["verdict"] == "pass"


def test_sessions_idle_and_nic_down_are_named(lab):
    hosts = lab[0]
    v = builtin.values_bgp_sessions(fx("tor_idle_neighbors.json"), [hosts["lab-r1-h2"]])
    assert v["established"] == 0 and v["expected"] == 8
    v = builtin.values_bgp_sessions(fx("tor_nic_down_neighbors.json"), [hosts["lab-r1-h2"]])
    assert v["established"] == 7
    assert [(d["host"], d["slot"], d["nic"]) for d in v["detail"]] == [("lab-r1-h2", 1, "eth2")]
    res = _gate("bgp_sessions", fx("tor_nic_down_neighbors.json"), hosts=[hosts["lab-r1-h2"]])
    assert res["verdict"] == "fail"


def test_sessions_of_a_host_without_sidecars_fail(lab):
    hosts = lab[0]
    # lab-r1-h1 is configured on the same ToR but has no sidecar running in the capture
    v = builtin.values_bgp_sessions(fx("tor_up_neighbors.json"), [hosts["lab-r1-h1"]])
    assert v["expected"] == 4 and v["established"] == 0


def test_ecmp_width(lab):
    hosts = lab[0]
    routes = [fx("tor_up_routes_ipv4.json"), fx("tor_up_routes_ipv6.json")]
    v = builtin.values_ecmp_width(routes, [hosts["lab-r1-h2"]])
    assert (v["task_routes"], v["at_width"], v["min_width_ratio"]) == (4, 4, 1.0)
    routes = [fx("tor_nic_down_routes_ipv4.json"), fx("tor_nic_down_routes_ipv6.json")]
    v = builtin.values_ecmp_width(routes, [hosts["lab-r1-h2"]])
    assert v["at_width"] == 2 and v["min_width_ratio"] == 0.75
    assert sorted(d["prefix"] for d in v["detail"]) == ["198.18.0.136/32", "fd00:10:0:8::8/128"]
    assert all(d["width"] == 3 and d["expected"] == 4 for d in v["detail"])
    assert v["present"] == 4
    idle = [fx("tor_idle_routes_ipv4.json"), fx("tor_idle_routes_ipv6.json")]
    assert _gate("ecmp_width", idle, hosts=[hosts["lab-r1-h2"]])["verdict"] == "fail"


def test_drained_condition_of_decommission(lab):
    """playbooks/decommission.yml's drain gate: ecmp_width with `task_routes > 0 and present == 0`."""
    hosts = lab[0]
    cond = "task_routes > 0 and present == 0"
    idle = [fx("tor_idle_routes_ipv4.json"), fx("tor_idle_routes_ipv6.json")]
    assert builtin.values_ecmp_width(idle, [hosts["lab-r1-h2"]])["present"] == 0
    assert _gate("ecmp_width", idle, hosts=[hosts["lab-r1-h2"]], success_condition=cond)["verdict"] == "pass"
    # one NIC's next hop gone is not drained: the task IPs are still routed to the host
    down = [fx("tor_nic_down_routes_ipv4.json"), fx("tor_nic_down_routes_ipv6.json")]
    assert _gate("ecmp_width", down, hosts=[hosts["lab-r1-h2"]], success_condition=cond)["verdict"] == "fail"


def test_spine_task_routes(lab):
    spine = lab[1]
    aggs = [d["rack_prefix"]["ipv4"] for d in spine["downlinks"]]
    v = builtin.values_spine_task_routes([fx("spine_clean_routes_ipv4.json")], aggs)
    assert (v["task_routes"], v["aggregates_missing"]) == (0, 0)
    v = builtin.values_spine_task_routes([fx("spine_leak_routes_ipv4.json")], aggs)
    assert v["task_routes"] == 1 and v["aggregates_missing"] == 1
    assert "198.18.0.136/32" in v["detail"]
    assert _gate("spine_task_routes", [fx("spine_leak_routes_ipv4.json")], rack_prefixes=aggs)["verdict"] == "fail"


def test_nic_shares(lab):
    hosts = lab[0]
    h = [hosts["lab-r1-h2"]]
    v = builtin.values_nic_shares(fx("probe_balanced.json"), 4)
    assert v["directions"] == 2 and v["max_deviation"] == 0.0174 and v["idle_nics"] == 0
    assert _gate("nic_shares", fx("probe_balanced.json"), hosts=h)["verdict"] == "pass"
    v = builtin.values_nic_shares(fx("probe_nic_idle.json"), 4)
    assert v["worst"] == "down eth2" and v["idle_nics"] == 1 and v["detail"] == ["down eth2"]
    assert _gate("nic_shares", fx("probe_nic_idle.json"), hosts=h)["verdict"] == "fail"
    one_way = dict(fx("probe_balanced.json"))
    del one_way["down"]
    assert _gate("nic_shares", one_way, hosts=h)["verdict"] == "fail"


def test_nic_shares_missing_evidence_is_not_balance(lab):
    h = [lab[0]["lab-r1-h2"]]
    probe = json.loads(json.dumps(fx("probe_balanced.json")))
    for direction in ("up", "down"):
        only = sorted(probe[direction]["nic_shares"])[0]
        probe[direction]["nic_shares"] = {only: 1.0}
    v = builtin.values_nic_shares(probe, 4)
    assert v["idle_nics"] == 6 and v["max_deviation"] == 0.75
    assert _gate("nic_shares", probe, hosts=h)["verdict"] == "fail"
    # no NIC count (no single host given): no data, never a pass
    assert _gate("nic_shares", probe, hosts=[])["verdict"] == "inconclusive"


def test_probe_loss():
    assert builtin.values_probe_loss(fx("ping_clean.txt"))["loss_percent"] == 0.0
    v = builtin.values_probe_loss(fx("ping_loss.txt"))
    assert (v["transmitted"], v["received"], v["loss_percent"]) == (20, 17, 15.0)
    assert _gate("probe_loss", fx("ping_clean.txt"))["verdict"] == "pass"
    assert _gate("probe_loss", fx("ping_loss.txt"))["verdict"] == "fail"
    with pytest.raises(engine.MeasurementError):
        builtin.values_probe_loss("connect: Network is unreachable\n")


def test_sidecars():
    up = {"1": dict(fx("sidecar_up_slot1.json"), present=True), "2": dict(fx("sidecar_up_slot2.json"), present=True)}
    v = builtin.values_sidecars(up, [1, 2])
    assert (v["slots"], v["healthy"]) == (2, 2)
    down = {"1": dict(fx("sidecar_nic_down_slot1.json"), present=True), "2": up["2"]}
    v = builtin.values_sidecars(down, [1, 2])
    assert v["healthy"] == 1 and v["detail"][0]["slot"] == 1
    v = builtin.values_sidecars({"1": {"present": False}}, [1, 2])
    assert v["healthy"] == 0 and v["unhealthy"] == 2


def test_frr_adapter_with_fake_vtysh(lab):
    hosts = lab[0]
    text = json.dumps(fx("tor_up_routes_ipv4.json")) + "\n" + json.dumps(fx("tor_up_routes_ipv6.json"))
    calls = []

    def fake_run(argv):
        calls.append(argv)
        return 0, text, ""
    m = measure.measurement("ecmp_width", "frr", run=fake_run, hosts=[hosts["lab-r1-h2"]],
                            vtysh=["vtysh", "--vty_socket", "/x"])
    assert m()["at_width"] == 4
    assert calls[0][:3] == ["vtysh", "--vty_socket", "/x"] and "show ipv6 route json" in calls[0]

    def broken(argv):
        return 1, "", "vtysh: failed to connect to any daemons"
    m = measure.measurement("bgp_sessions", "frr", run=broken, hosts=[hosts["lab-r1-h2"]])
    spec = engine.GateSpec("s", m, "established == expected", count=3, error_limit=1)
    res = run(spec)[0]
    assert res["verdict"] == "inconclusive" and "failed to connect" in res["measurements"][0]["detail"]


def test_definition_overrides():
    d = builtin.definition("nic_shares", params={"share_tolerance": 0.05}, count=None)
    assert d["params"] == {"share_tolerance": 0.05, "min_directions": 2} and d["count"] == 1
    with pytest.raises(engine.MeasurementError, match="unknown built-in gate"):
        builtin.definition("bogus")


def _proc(root, pid, name, state, ppid):
    d = root / str(pid)
    d.mkdir()
    (d / "status").write_text("Name:\t%s\nUmask:\t0022\nState:\t%s\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\n"
                              % (name, state, pid, pid, ppid))


def test_sidecar_processes_stopped_or_gone_fail_the_gate(tmp_path):
    """A SIGSTOPped ExaBGP keeps its sessions Established until the hold timer and its helper's status file
    says 'up': the gate reads the processes' state from /proc and does not pass on it."""
    proc = tmp_path / "proc"
    proc.mkdir()
    run = tmp_path / "run"
    _proc(proc, 40, "exabgp", "S (sleeping)", 1)
    _proc(proc, 41, "python3", "S (sleeping)", 40)
    _proc(proc, 50, "exabgp", "T (stopped)", 1)
    _proc(proc, 51, "python3", "S (sleeping)", 50)
    for slot, pid in ((1, 41), (2, 51), (3, 99)):
        (run / ("slot%d" % slot)).mkdir(parents=True)
        (run / ("slot%d" % slot) / "status.json").write_text(json.dumps(dict(fx("sidecar_up_slot1.json"), pid=pid)))
    data = measure.vipinjector_input(str(run), [1, 2, 3], proc_root=str(proc))
    assert [p["state"] for p in data["1"]["processes"]] == ["S", "S"]
    assert data["2"]["processes"][1] == {"pid": 50, "name": "exabgp", "state": "T"}
    assert data["3"]["processes"] == [{"pid": 99, "name": "", "state": "gone"}]
    v = builtin.values_sidecars(data, [1, 2, 3])
    assert v["healthy"] == 1
    reasons = dict((d["slot"], " ".join(d["reasons"])) for d in v["detail"])
    assert "50 (exabgp) stopped" in reasons[2] and "gone" in reasons[3]
    assert _gate("sidecars", data, slots=[1, 2, 3])["verdict"] == "fail"
    # the same statuses with every process running pass
    assert _gate("sidecars", {"1": data["1"]}, slots=[1])["verdict"] == "pass"
