# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report model, Markdown, SVG plot, snapshot normalisation and dump comparison."""

from __future__ import annotations

import json
import os
import xml.dom.minidom

from ansible_collections.netscale.multinic.plugins.module_utils.gates import builtin
from ansible_collections.netscale.multinic.plugins.module_utils.report import model, snapshot, svg

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gates", "fixtures")


def probe(name):
    with open(os.path.join(FIX, name)) as f:
        return json.load(f)


def gate_result(target, data, verdict):
    return {"gate": "nic_shares", "target": target, "verdict": verdict, "reason": "r", "seconds": 5.1,
            "values": builtin.values_nic_shares(data, 4),
            "measurements": [{"index": 0, "phase": "successful", "values": {}}]}


def test_events_render_markdown_json_svg(tmp_path):
    d = str(tmp_path / "20250101T000000Z")
    r = model.load(d)
    model.apply_event(r, "start", {"fabric": "lab", "canary": "rack lab-r1"}, now=100.0)
    model.apply_event(r, "preflight", {"plan": "unchanged", "tors_reachable": 2}, now=101.0)
    model.apply_event(r, "tor", {"name": "lab-r1-tor", "rack": "lab-r1", "changed": True, "gates": []}, now=102.0)
    model.apply_event(r, "wave", {"name": "canary", "hosts": ["lab-r1-h2"], "status": "passed", "started": 103.0,
                                  "ended": 110.5, "gates": [gate_result("lab-r1-h2", probe("probe_balanced.json"), "pass")]},
                      now=110.5)
    bad = gate_result("lab-r2-h1", probe("probe_nic_idle.json"), "fail")
    model.apply_event(r, "wave", {"name": "fleet-5pct", "hosts": ["lab-r2-h1"], "status": "rolled_back",
                                  "failed_hosts": ["lab-r2-h1"], "gates": [bad]}, now=120.0)
    model.apply_event(r, "snapshot", {"node": "lab-r2-h1", "wave": "fleet-5pct", "path": "snapshots/x.json"}, now=121)
    model.apply_event(r, "finish", {"status": "failed", "failed_wave": "fleet-5pct"}, now=130.0)
    paths = model.write(d, r, tolerance=0.1)
    md = open(paths["markdown"]).read()
    assert "| canary | lab-r1-h2 | passed | 7.5 | 1/1 |  |" in md
    assert "nic_shares@lab-r2-h1" in md and "down eth2" in md          # the failing NIC is named
    assert "![per-NIC shares](nic_shares.svg)" in md
    js = json.load(open(paths["json"]))
    assert js["run"]["status"] == "failed" and js["run"]["seconds"] == 30.0
    assert [w["name"] for w in js["waves"]] == ["canary", "fleet-5pct"]
    doc = xml.dom.minidom.parse(paths["svg"])        # well-formed SVG
    rects = [e for e in doc.getElementsByTagName("rect") if e.getElementsByTagName("title")]
    assert len(rects) == 16                           # 2 hosts x 2 directions x 4 NICs
    assert any("lab-r2-h1 down eth2: 0.0%" in e.getElementsByTagName("title")[0].firstChild.data for e in rects)
    # re-loading continues the same run (an interrupted run keeps its report)
    again = model.load(d)
    assert len(again["events"]) == 7


def test_upsert_wave_and_slim_passed_gates():
    r = model.empty("x")
    ms = [{"index": i, "phase": "successful", "values": {"a": i}} for i in range(10)]
    model.apply_event(r, "wave", {"name": "w", "status": "running"})
    model.apply_event(r, "wave", {"name": "w", "status": "passed", "gates": [
        {"gate": "bgp_sessions", "verdict": "pass", "measurements": ms, "invocation": {"x": 1}}]})
    assert len(r["waves"]) == 1 and r["waves"][0]["status"] == "passed"
    g = r["waves"][0]["gates"][0]
    assert "invocation" not in g and g["measurements"][-1]["values"] == {"a": 9} and g["measurements"][0]["values"] == {}


def test_svg_escapes_names():
    text = svg.shares_svg([{"host": "<h&1>", "direction": "up", "shares": {"eth0": 1.0}, "verdict": "pass"}])
    xml.dom.minidom.parseString(text)


def test_state_dump_normalises_and_diffs():
    outputs = {
        ("ip", "-j", "address", "show"): json.dumps([{"ifname": "eth0", "mtu": 1500, "operstate": "UP", "flags": ["UP"],
                                                      "address": "aa:bb", "addr_info": [
                                                          {"family": "inet6", "local": "fd00:10::2", "prefixlen": 64,
                                                           "valid_life_time": 4294967295}]}]),
        ("sysctl", "-a"): "net.ipv4.conf.all.rp_filter = 2\nnet.ipv6.conf.eth0.stable_secret = x\n"
                          "kernel.hostname = h\nnet.ipv4.fib_multipath_hash_policy = 1\n",
        ("tc", "-j", "filter", "show", "dev", "eth0", "ingress"): json.dumps(
            [{"protocol": "all", "pref": 100, "kind": "bpf", "options": {"handle": "0x1", "prog": {
                "id": 42, "name": "mn_ingress", "tag": "abcd", "jited": 1}}}]),
    }

    def run(argv):
        key = tuple(argv)
        if key in outputs:
            return 0, outputs[key], ""
        if argv[0] == "systemctl":
            return 0, "netscale-vipinjector@1.service loaded active running VipInjector\n", ""
        return 0, "[]", ""
    before = snapshot.state_dump(run)
    assert before["sysctls"] == {"net.ipv4.conf.all.rp_filter": "2", "net.ipv4.fib_multipath_hash_policy": "1"}
    assert "valid_life_time" not in before["addresses"][0]["addr_info"][0]
    assert before["tc"]["eth0/ingress"][0]["options"]["prog"] == {"name": "mn_ingress", "tag": "abcd", "jited": 1}
    # a reload of the same program (new id) is not a difference; a changed sysctl is
    outputs[("tc", "-j", "filter", "show", "dev", "eth0", "ingress")] = outputs[
        ("tc", "-j", "filter", "show", "dev", "eth0", "ingress")].replace('"id": 42', '"id": 77')
    assert snapshot.diff_dumps(before, snapshot.state_dump(run)) == []
    outputs[("sysctl", "-a")] = "net.ipv4.conf.all.rp_filter = 1\nnet.ipv4.fib_multipath_hash_policy = 1\n"
    diff = snapshot.diff_dumps(before, snapshot.state_dump(run))
    assert diff == ['sysctls.net.ipv4.conf.all.rp_filter: "2" -> "1"']


def test_triage_capture_records_failures():
    def run(argv):
        if argv[0] == "bpftool":
            raise OSError("No such file or directory")
        return 0, "[]" if "-j" in argv else "text", ""
    snap = snapshot.capture(run, "host")
    assert snap["bpf_programs"]["rc"] == 127 and snap["addresses"]["stdout"] == []
    assert set(entry[0] for entry in snapshot.FRR_TRIAGE) == set(snapshot.capture(run, "frr"))


def test_consented_warnings_are_listed_under_their_wave_and_counted():
    r = model.empty("w1")
    model.apply_event(r, "start", {"id": "w1"}, now=1.0)
    model.apply_event(r, "wave", {"name": "canary", "hosts": ["h1"], "status": "passed",
                                  "warnings": ["h1 slot 1: health check disabled by type: none"]}, now=2.0)
    md = model.render_markdown(r)
    assert "| warnings | 1 (listed under their waves) |" in md
    assert "- warning: h1 slot 1: health check disabled by type: none" in md
    model.apply_event(r, "wave", {"name": "fleet", "hosts": ["h2"], "status": "passed"}, now=3.0)
    assert "| warnings | 1 " in model.render_markdown(r)


def test_start_events_from_the_journal_open():
    plan = {"waves": [{"name": "canary", "hosts": ["r2-h1"]}], "skipped": [{"name": "x"}], "deferred": [],
            "order": ["r2-h1"], "tors": ["r2-tor"]}
    run = {"id": "R", "rollout_id": "J", "started": 1.5, "fabric": "f", "inventory": "t.yml", "check_mode": False,
           "canary": {}, "waves_spec": ["100%"], "start_wave": "", "plan": {"changed": True, "added": [1, 2]},
           "renumber_consent": False, "gpu_hosts": 3}
    opened = {"path": "/j/run.json", "new": True, "notes": [], "plan_hash": "abc"}
    events = model.start_events(run, plan, opened)
    assert [e for e, _d in events] == ["start", "preflight"]
    start, pre = events[0][1], events[1][1]
    assert start["canary"] == "first rack" and start["skipped_waves"] == ["x"] and start["journal"] == "/j/run.json"
    assert pre == {"plan": "changes: 2 added, 0 removed", "renumber_consent": False, "gpu_hosts": 3,
                   "tors": ["r2-tor"], "plan_hash": "abc", "scope": {"mode": "all"}}
    scope = {"mode": "changed", "message": "m", "tors": {"changed": ["r1-tor", "r2-tor"], "removed": []}}
    events = model.start_events(run, plan, opened, {"r1": "r1-tor", "r2": "r2-tor", "r3": "r3-tor"}, scope)
    assert events[1][1]["scope"] == {"mode": "changed", "message": "m", "deploy": ["r2-h1"],
                                     "tors": {"changed": ["r2-tor"], "removed": []}}
    assert scope["tors"]["changed"] == ["r1-tor", "r2-tor"]   # the caller's scope is not changed
    assert events[2:] == [("tor", {"name": "r1-tor", "rack": "r1", "changed": False,
                                   "status": "unchanged (out of scope, not touched)"}),
                          ("tor", {"name": "r3-tor", "rack": "r3", "changed": False,
                                   "status": "unchanged (out of scope, not touched)"})]
    assert model.plan_line({"changed": False}) == "unchanged"


def test_record_writes_the_report_and_a_failed_snapshot(tmp_path):
    d = str(tmp_path / "r")
    out = model.record(d, "start", {"id": "R", "waves": []}, check_mode=True)
    assert out["status"] == "running" and out["summary"]["id"] == "R"
    assert json.load(open(os.path.join(d, "report.json")))["run"]["check_mode"] is True
    snap = model.record(d, "snapshot", {"node": "h1", "wave": "canary", "kind": "host"},
                        snapshot={"unreachable": True, "msg": "gone"})
    rep = json.load(open(os.path.join(d, "report.json")))
    assert rep["snapshots"][0]["captured"] is False and rep["snapshots"][0]["error"] == "gone"
    assert snap["summary"]["path"] == "snapshots/canary/h1.json"
    assert os.stat(os.path.join(d, "snapshots", "canary", "h1.json")).st_mode & 0o777 == 0o600


def test_parallel_snapshots_listed_in_the_plays_host_order(tmp_path):
    d = str(tmp_path / "r")
    order = ["h3", "h1", "h2"]
    for node, kind in (("h2", "host"), ("t1", "frr"), ("h3", "host"), ("h1", "host")):
        with model.locked(d):
            model.record(d, "snapshot", {"node": node, "wave": "w", "kind": kind}, snapshot={"node": node}, order=order)
    model.record(d, "snapshot", {"node": "h1", "wave": "w2", "kind": "host"}, snapshot={}, order=order)
    rep = json.load(open(os.path.join(d, "report.json")))
    assert [(s["wave"], s["node"]) for s in rep["snapshots"]] == [("w", "h3"), ("w", "h1"), ("w", "h2"), ("w", "t1"),
                                                                  ("w2", "h1")]
