# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshots of a case's devices (remediate/case_snapshot.py): the nodes per scope from the plan, bad cases named,
node entries from rollout_snapshot results (ok, unreachable, failed, nothing ran), the index (every target once,
kept nodes, partial), redaction and modes of what is written, and the health report's link."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import case_snapshot as cs
from ansible_collections.netscale.multinic.plugins.module_utils.report import snapshot as rsnap

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SECRET = "Zq8-not-a-real-key-7Hk"


@pytest.fixture(scope="module")
def fabric():
    """Two zones: z1 with racks r1 (h1, h2), r2 (h3) and r3 (h4), spines s1, s2; z2 with rack r9 (h9), spine s9."""
    topo = {
        "name": "t", "region": {"name": "rg", "id": 1},
        "capacity": {"buildings": 1, "zones": 2, "racks": 4, "hosts": 4, "nics": 4, "task_slots": 2, "spines": 2},
        "pools": {"ipv6": "fd00:10::/48", "ipv4": "198.18.0.0/16",
                  "infrastructure": {"ipv6": "fd00:ff::/64", "ipv4": "198.19.0.0/24"}},
        "asn": {"spine": 4200000001, "tor": 4200001001, "host": 4201000001},
        "buildings": [{"id": 1, "name": "b1", "zones": [
            {"id": 1, "name": "z1", "spines": [{"id": 1, "name": "s1"}, {"id": 2, "name": "s2"}],
             "racks": [{"id": 1, "name": "r1", "hosts": [{"id": 1, "name": "h1", "nics": 2},
                                                         {"id": 2, "name": "h2", "nics": 4}]},
                       {"id": 2, "name": "r2", "tor": {"name": "r2-leaf"}, "hosts": [{"id": 1, "name": "h3", "nics": 4}]},
                       {"id": 3, "name": "r3", "hosts": [{"id": 1, "name": "h4", "nics": 4}]}]},
            {"id": 2, "name": "z2", "spines": [{"id": 1, "name": "s9"}],
             "racks": [{"id": 1, "name": "r9", "hosts": [{"id": 1, "name": "h9", "nics": 2}]}]}]}],
    }
    return budget.FabricView.from_topology(load_topology(topo))


def case(kind, cid="c1@100", state="open", **scope):
    sc = {"kind": kind}
    sc.update(scope)
    return {"case": {"id": cid, "state": state, "scope": sc, "root_cause": "because", "detections": 3,
                     "start": 100.0, "end": None, "repeats": 0, "opened_at": 190.0}}


def nodes(event, fabric):
    return [(t["node"], t["kind"], t["role"]) for t in cs.targets(cs.check_case(event), fabric)]


@pytest.mark.parametrize("event,want", [
    (case("nic", host="h2", nic=1), [("h2", "host", "host"), ("r1-tor", "frr", "tor")]),
    (case("nic", host="h2", nic=1, tor="r1-tor", rack="r1", zone="z1"), [("h2", "host", "host"), ("r1-tor", "frr", "tor")]),
    (case("host", host="h3"), [("h3", "host", "host"), ("r2-leaf", "frr", "tor")]),
    (case("tor", tor="r1-tor"), [("r1-tor", "frr", "tor"), ("h1", "host", "host"), ("h2", "host", "host")]),
    (case("uplink", tor="r2-leaf", spine="s2"), [("r2-leaf", "frr", "tor"), ("s2", "frr", "spine")]),
    (case("uplink", tor="r2-leaf", spine=None), [("r2-leaf", "frr", "tor"), ("s1", "frr", "spine"), ("s2", "frr", "spine")]),
    (case("spine", spine="s1", zone="z1"),
     [("s1", "frr", "spine"), ("r1-tor", "frr", "tor"), ("r2-leaf", "frr", "tor"), ("r3-tor", "frr", "tor")]),
    (case("zone", zone="z2"), [("s9", "frr", "spine")]),
    (case("agent", host="h9"), [("h9", "host", "host")]),
])
def test_nodes_per_scope(fabric, event, want):
    assert nodes(event, fabric) == want
    # a bare case (a line of the case file without the wrapper, without state) gives the same nodes
    bare = dict(event["case"])
    bare.pop("state")
    assert nodes(bare, fabric) == want


@pytest.mark.parametrize("event,field,value", [
    ({"case": {"id": "c1", "state": "open"}}, "case.scope", "None"),
    (case("nic", host="h1", nic=0)["case"] | {"scope": "nic"}, "case.scope", "'nic'"),
    (case("rack", host="h1"), "case.scope.kind", "'rack'"),
    (case(None, host="h1"), "case.scope.kind", "None"),
    (case("target", host="h1"), "case.scope.kind", "'target'"),
    (case("nic", cid="bad id!", host="h1", nic=0), "case.id", "'bad id!'"),
    (case("nic", state="opened", host="h1", nic=0), "case.state", "'opened'"),
    (case("nic", nic=0), "case.scope.host", "None"),
    (case("nic", host="h-nowhere", nic=0), "case.scope.host", "'h-nowhere'"),
    (case("nic", host="h1", nic=0, tor="r2-leaf"), "case.scope.tor", "'r2-leaf'"),
    (case("tor", tor="r7-tor"), "case.scope.tor", "'r7-tor'"),
    (case("uplink", tor="r1-tor", spine="s7"), "case.scope.spine", "'s7'"),
    (case("spine"), "case.scope.spine", "None"),
    (case("zone", zone="z5"), "case.scope.zone", "'z5'"),
    ("not a case", "case_snapshot_case", "'not a case'"),
])
def test_bad_cases_name_the_field_the_value_and_the_fix(fabric, event, field, value):
    with pytest.raises(cs.SnapshotError) as err:
        cs.targets(cs.check_case(event), fabric)
    text = str(err.value)
    assert text.startswith(field + ":") and value in text and "Fix:" in text


def test_case_dir_is_one_per_id_and_stays_inside(tmp_path):
    assert cs.case_dir_name("r2-h3/nic2@1795000005") == "r2-h3+nic2@1795000005"
    ids = ["r1-tor/any-spine@5", "r1-tor_any-spine@5", "r1-tor/any/spine@5", "r1-tor-any-spine@5", "r1.tor/s@5"]
    assert len(set(cs.case_dir_name(i) for i in ids)) == len(ids)
    assert all("/" not in cs.case_dir_name(i) for i in ids)
    with pytest.raises(cs.SnapshotError):
        cs.case_dir_name("../etc")
    assert cs.node_file("lab r1/h2") == "lab_r1_h2.json"


def triage(run_ok=True):
    """A rollout_snapshot triage result of an FRR box whose running config and neighbour JSON carry the key."""
    config = "router bgp 4200001001\n neighbor fd00::1 password %s\n neighbor fd00::2 password 7 %s\n" % (SECRET, SECRET)

    def run(argv):
        if argv[0] == "vtysh" and "show running-config" in argv:
            return 0, config, ""
        if argv[0] == "vtysh":
            return 0, json.dumps({"peers": {"fd00::1": {"password": SECRET, "state": "Established"}}}), ""
        return (0, "[]", "") if run_ok else (127, "", "%s: not installed" % argv[0])
    return {"changed": False, "node": "r1-tor", "kind": "frr", "profile": "triage", "time": 1234.5,
            "commands": rsnap.capture(run, "frr"), "invocation": {"module_args": {"kind": "frr"}}}


def test_node_entries_ok_unreachable_failed_and_no_result():
    t = {"node": "r1-tor", "kind": "frr", "role": "tor", "file": "r1-tor.json"}
    body, entry = cs.node_entry(t, triage(), 2000.0)
    assert entry["ok"] and entry["reason"] is None and entry["taken_at"] == 1234.5 and entry["commands_failed"] == []
    assert "invocation" not in body["snapshot"] and body["snapshot"]["commands"]["bgp"]["rc"] == 0
    unreachable = {"unreachable": True, "changed": False, "msg": "Failed to connect to the host via ssh: refused"}
    assert cs.node_entry(t, unreachable, 2000.0)[1]["reason"] == "unreachable: Failed to connect to the host via ssh: refused"
    failed = {"failed": True, "msg": "MODULE FAILURE\nSee stdout/stderr"}
    assert cs.node_entry(t, failed, 2000.0)[1]["reason"] == "failed: MODULE FAILURE"
    for nothing in (None, {}):
        entry = cs.node_entry(t, nothing, 2000.0)[1]
        assert not entry["ok"] and entry["reason"].startswith("no result")
    skipped = cs.node_entry(t, {"skipped": True, "skip_reason": "Conditional result was False"}, 2000.0)[1]
    assert not skipped["ok"] and skipped["reason"].startswith("skipped")


def test_a_snapshot_where_no_command_ran_is_failed_and_partial_commands_are_named():
    t = {"node": "h1", "kind": "host", "role": "host", "file": "h1.json"}
    res = {"changed": False, "commands": {"a": {"rc": 127}, "b": {"rc": 1}}}
    entry = cs.node_entry(t, res, 1.0)[1]
    assert not entry["ok"] and entry["reason"] == "no command succeeded (a, b)"
    res["commands"]["b"]["rc"] = 0
    entry = cs.node_entry(t, res, 1.0)[1]
    assert entry["ok"] and entry["commands_failed"] == ["a"]
    assert not cs.node_entry(t, {"changed": False, "commands": {}}, 1.0)[1]["ok"]


def test_written_files_carry_no_key_and_are_private(tmp_path):
    t = {"node": "r1-tor", "kind": "frr", "role": "tor", "file": "r1-tor.json"}
    body, dummy = cs.node_entry(t, triage(), 2000.0)
    path = str(tmp_path / "cases" / "t" / "c+1" / t["file"])
    assert cs.write_json(path, body, check_mode=True) is True and not os.path.exists(path)
    assert cs.write_json(path, body) is True
    text = open(path).read()
    assert SECRET not in text and text.count("<redacted>") >= 3
    assert "neighbor fd00::1 password <redacted>" in text
    assert os.stat(path).st_mode & 0o777 == 0o600
    for folder in ("cases", "cases/t", "cases/t/c+1"):
        assert os.stat(str(tmp_path / folder)).st_mode & 0o777 == 0o700, folder
    assert cs.write_json(path, body) is False          # same content, same mode: unchanged


def plan_for(fabric, tmp_path, event, **kw):
    return cs.plan(event, fabric, "t", str(tmp_path), 500.0, **kw)


def test_plan_index_every_target_once_and_partial(fabric, tmp_path):
    p = plan_for(fabric, tmp_path, case("tor", cid="r1-tor@100", tor="r1-tor"), inventory=["r1-tor", "h1", "localhost"])
    assert p["case_dir"] == str(tmp_path / "t" / "r1-tor@100")
    assert [t["node"] for t in p["take"]] == ["r1-tor", "h1"] and [t["node"] for t in p["not_in_inventory"]] == ["h2"]
    ok = cs.node_entry(p["take"][0], triage(), 600.0)[1]
    idx = cs.index(p, [ok, None])
    assert [(n["node"], n["ok"]) for n in idx["nodes"]] == [("r1-tor", True), ("h1", False), ("h2", False)]
    assert idx["failed"] == ["h1", "h2"] and idx["complete"] is False
    assert [n["reason"] for n in idx["nodes"][1:]] == [cs.NO_RESULT,
                                                       "not in the inventory: cannot be reached"]
    assert (idx["case"], idx["scope"]["kind"], idx["root_cause"], idx["fabric"], idx["taken_at"]) == (
        "r1-tor@100", "tor", "because", "t", 500.0)
    text = cs.summary(idx)
    assert text.startswith("case r1-tor@100 (tor): 1 of 3 node snapshots; PARTIAL, missing: h1 (no result")


def test_a_second_run_keeps_the_ok_nodes_and_takes_the_missing_ones(fabric, tmp_path):
    event = case("nic", cid="h2/nic2@100", host="h2", nic=1)
    p = plan_for(fabric, tmp_path, event)
    host_ok = cs.node_entry(p["take"][0], {"changed": False, "time": 510.0, "commands": {"a": {"rc": 0}}}, 600.0)[1]
    first = cs.index(p, [host_ok, cs.node_entry(p["take"][1], {"unreachable": True, "msg": "down"}, 600.0)[1]])
    assert cs.write_json(p["index_path"], first)
    again = plan_for(fabric, tmp_path, event)
    assert [t["node"] for t in again["take"]] == ["r1-tor"] and [e["node"] for e in again["kept"]] == ["h2"]
    tor_ok = cs.node_entry(again["take"][0], triage(), 900.0)[1]
    second = cs.index(again, [tor_ok])
    assert second["complete"] and second["taken_at"] == 500.0 and second["nodes"][0] == host_ok
    assert cs.write_json(p["index_path"], second)
    third = plan_for(fabric, tmp_path, event)
    assert third["take"] == [] and cs.index(third, []) == second
    assert cs.write_json(p["index_path"], cs.index(third, [])) is False
    forced = plan_for(fabric, tmp_path, event, force=True)
    assert [t["node"] for t in forced["take"]] == ["h2", "r1-tor"] and forced["kept"] == []


def test_an_unreadable_index_is_an_error_not_overwritten(fabric, tmp_path):
    event = case("agent", cid="h9@1", host="h9")
    folder = tmp_path / "t" / "h9@1"
    folder.mkdir(parents=True)
    (folder / "index.json").write_text("{torn")
    with pytest.raises(cs.SnapshotError) as err:
        plan_for(fabric, tmp_path, event)
    assert "not a case snapshot index" in str(err.value) and "Fix:" in str(err.value)


def test_link_for_the_health_report(fabric, tmp_path):
    assert cs.link(str(tmp_path / "t"), "h2/nic2@100") is None
    p = plan_for(fabric, tmp_path, case("nic", cid="h2/nic2@100", host="h2", nic=1))
    cs.write_json(p["index_path"], cs.index(p, []))
    got = cs.link(str(tmp_path / "t"), "h2/nic2@100")
    assert got == {"index": str(tmp_path / "t" / "h2+nic2@100" / "index.json"), "complete": False, "nodes": 2,
                   "failed": ["h2", "r1-tor"]}
    (tmp_path / "t" / "h2+nic2@100" / "index.json").write_text("[]")
    broken = cs.link(str(tmp_path / "t"), "h2/nic2@100")
    assert broken["complete"] is False and "not a case snapshot index" in broken["error"]


def test_the_lab_fabric_resolves_from_its_topology_file():
    with open(os.path.join(REPO, "inventories", "lab", "fabric.yml")) as handle:
        fab = budget.FabricView.from_topology(load_topology(yaml.safe_load(handle)))
    assert nodes(case("nic", host="lab-r1-h2", nic=1), fab) == [("lab-r1-h2", "host", "host"),
                                                                ("lab-r1-tor", "frr", "tor")]
    assert nodes(case("spine", spine="lab-spine1"), fab) == [("lab-spine1", "frr", "spine"),
                                                             ("lab-r1-tor", "frr", "tor"), ("lab-r2-tor", "frr", "tor")]
