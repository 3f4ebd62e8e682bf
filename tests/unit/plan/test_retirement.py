"""Decommission tombstones: a host or rack that leaves the topology is retired only with consent,
its allocation stays reserved in plan/retired.yml until released, and the ToR configs drop it."""
import os

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import plan_topology, run_plan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.store import RetirementError, load_retired

from fabrics import small


def _write(tmp_path, data):
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _snapshot(folder):
    out = {}
    for base, _d, files in os.walk(folder):
        for f in files:
            out[os.path.relpath(os.path.join(base, f), folder)] = open(os.path.join(base, f)).read()
    return out


def _rack(data, i):
    return data["buildings"][0]["zones"][0]["racks"][i]


@pytest.fixture
def planned(tmp_path):
    data = small()
    dest = str(tmp_path / "intended")
    run_plan(_write(tmp_path, data), dest)
    old = yaml.safe_load(open(os.path.join(dest, "plan/racks/r1.yml")))
    return data, dest, dict((h["name"], h) for h in old["hosts"])


def _problems(info):
    return [(p.path, p.value, p.message, p.fix) for p in info.value.problems]


def test_removed_host_needs_consent_and_nothing_is_written(tmp_path, planned):
    data, dest, old = planned
    snap = _snapshot(dest)
    _rack(data, 0)["hosts"].pop(1)  # h2
    path = _write(tmp_path, data)
    with pytest.raises(RetirementError) as info:
        run_plan(path, dest)
    (field, value, msg, fix), = _problems(info)
    assert field == "decommission" and value == "h2"
    assert "host h2 (rack r1, prefix %s" % old["h2"]["prefix"]["ipv6"] in msg and "left the topology" in msg
    assert "decommission: [h2]" in fix and "playbooks/decommission.yml" in fix
    assert info.value.retiring == ["h2"]
    assert _snapshot(dest) == snap, "nothing written on refusal"


def test_consent_moves_the_allocation_to_retired(tmp_path, planned):
    data, dest, old = planned
    _rack(data, 0)["hosts"].pop(1)
    path = _write(tmp_path, data)
    check = run_plan(path, dest, decommission=["h2"], check_mode=True)
    assert check["retired"] == ["h2"] and "plan/retired.yml" in check["written"]
    assert not os.path.exists(os.path.join(dest, "plan/retired.yml")), "check mode writes nothing"
    result = run_plan(path, dest, decommission=["h2"])
    assert result["retired"] == ["h2"] and result["renumbered"] == []
    assert set(result["written"]) == {"plan/racks/r1.yml", "plan/retired.yml", "plan/summary.yml"}
    (entry,) = load_retired(dest)
    assert entry["name"] == "h2" and entry["kind"] == "host" and entry["rack"] == "r1"
    assert entry["reserved"] == {"prefix": old["h2"]["prefix"], "asn": old["h2"]["asn"]}
    assert entry["allocation"] == old["h2"]
    rack = yaml.safe_load(open(os.path.join(dest, "plan/racks/r1.yml")))
    assert [h["name"] for h in rack["hosts"]] == ["h1"]
    # idempotent, with or without the consent repeated
    snap = _snapshot(dest)
    assert not run_plan(path, dest, decommission=["h2"])["changed"]
    assert not run_plan(path, dest)["changed"] and _snapshot(dest) == snap


def test_retired_addresses_are_not_reused_until_released(tmp_path, planned):
    data, dest, old = planned
    _rack(data, 0)["hosts"].pop(1)
    run_plan(_write(tmp_path, data), dest, decommission=["h2"])
    snap = _snapshot(dest)
    _rack(data, 0)["hosts"].append({"id": 2, "name": "h5", "nics": 2})   # h2's id: h2's prefix and ASN
    path = _write(tmp_path, data)
    with pytest.raises(RetirementError) as info:
        run_plan(path, dest)
    probs = _problems(info)
    assert len(probs) == 1, probs
    field, value, msg, fix = probs[0]
    assert field == "buildings[0].zones[0].racks[0].hosts[1]"
    assert value == "prefix %s" % old["h2"]["prefix"]["ipv6"] or value == "prefix %s" % old["h2"]["prefix"]["ipv4"]
    assert "h5 reuses the prefix of retired host h2" in msg and "release: [h2]" in fix
    assert _snapshot(dest) == snap
    result = run_plan(path, dest, release=["h2"])
    assert result["released"] == ["h2"] and "plan/retired.yml" in result["written"]
    assert not os.path.exists(os.path.join(dest, "plan/retired.yml")), "no tombstone left: file removed"
    rack = yaml.safe_load(open(os.path.join(dest, "plan/racks/r1.yml")))
    assert [h["prefix"] for h in rack["hosts"] if h["name"] == "h5"] == [old["h2"]["prefix"]]


def test_retired_name_is_reserved_too(tmp_path, planned):
    data, dest, _old = planned
    _rack(data, 0)["hosts"].pop(1)
    run_plan(_write(tmp_path, data), dest, decommission=["h2"])
    _rack(data, 0)["hosts"].append({"id": 3, "name": "h2", "nics": 2})   # the stale name, another id
    path = _write(tmp_path, data)
    with pytest.raises(RetirementError) as info:
        run_plan(path, dest)
    (field, value, msg, fix), = _problems(info)
    assert field == "buildings[0].zones[0].racks[0].hosts[1]" and value == "name h2"
    assert "reuses the name of retired host h2" in msg and "release: [h2]" in fix
    assert run_plan(path, dest, release=["h2"])["released"] == ["h2"]


def test_removed_rack_retires_with_its_hosts(tmp_path, planned):
    data, dest, _old = planned
    old_r2 = run_plan(_write(tmp_path, data), dest) and yaml.safe_load(open(os.path.join(dest, "plan/racks/r2.yml")))
    _rack(data, 0)  # r1 stays
    data["buildings"][0]["zones"][0]["racks"].pop(1)
    path = _write(tmp_path, data)
    with pytest.raises(RetirementError) as info:
        run_plan(path, dest, decommission=["h3"])   # its host alone is not consent for the rack
    msgs = [p[2] for p in _problems(info)]
    assert any(m.startswith("rack r2 (ToR r2-tor, prefix ") and "hosts: h3" in m for m in msgs), msgs
    result = run_plan(path, dest, decommission=["r2"])
    assert result["retired"] == ["r2"] and result["removed"] == ["plan/racks/r2.yml"]
    (entry,) = load_retired(dest)
    assert entry["kind"] == "rack" and entry["hosts"] == ["h3"] and entry["tor"] == "r2-tor"
    assert entry["reserved"] == {"prefix": old_r2["prefix"], "tor_asn": old_r2["tor"]["asn"],
                                 "loopback": old_r2["tor"]["loopback"]}
    # a new rack with r2's id gets r2's prefix, ToR ASN and loopback: refused, naming each
    data["buildings"][0]["zones"][0]["racks"].append({"id": 2, "name": "r9", "hosts": [{"id": 1, "name": "h9", "nics": 2}]})
    with pytest.raises(RetirementError) as info:
        run_plan(_write(tmp_path, data), dest)
    probs = _problems(info)
    assert probs[0][0] == "buildings[0].zones[0].racks[1]" and "r9 reuses the" in probs[0][2] and "rack r2" in probs[0][2]


def test_bad_consent_and_release_names(tmp_path, planned):
    data, dest, _old = planned
    snap = _snapshot(dest)
    path = _write(tmp_path, data)
    with pytest.raises(RetirementError) as info:
        run_plan(path, dest, decommission=["h1", "nope"], release=["ghost"])
    probs = dict((p[1], p) for p in _problems(info))
    assert probs["h1"][0] == "decommission" and "still in the topology at buildings[0].zones[0].racks[0].hosts[0]" in probs["h1"][2]
    assert "remove it from the topology file first" in probs["h1"][3]
    assert probs["nope"][2] == "no host or rack of this name left the topology"
    assert probs["ghost"][0] == "release" and "not a retired host or rack" in probs["ghost"][2]
    assert _snapshot(dest) == snap


def test_rename_is_a_move_not_a_retirement(tmp_path, planned):
    from ansible_collections.netscale.multinic.plugins.module_utils.errors import PlanChangedError
    data, dest, _old = planned
    _rack(data, 0)["hosts"][1]["name"] = "h2-new"
    with pytest.raises(PlanChangedError):
        run_plan(_write(tmp_path, data), dest)
    result = run_plan(_write(tmp_path, data), dest, allow_renumber=True)
    assert result["retired"] == [] and load_retired(dest) == []


def test_tor_config_drops_the_retired_host(tmp_path, planned):
    data, dest, old = planned
    before = tor_policy.build_fabric_configs(plan_topology(data), {}, {})["r1-tor"]["text"]
    _rack(data, 0)["hosts"].pop(1)
    after = tor_policy.build_fabric_configs(plan_topology(data), {}, {})["r1-tor"]["text"]
    h1, h2 = old["h1"], old["h2"]
    for nic in h2["nics"]:
        for fam in ("ipv4", "ipv6"):
            gateway = " address %s/" % nic["gateway"][fam]
            assert gateway in before and gateway not in after, "ToR port of the retired host left"
    for slot in h2["slots"]:
        for sn in slot["nics"]:
            # sessions over IPv6 (session family auto); no IPv4 container address either
            assert "neighbor %s " % sn["address"]["ipv6"] in before
            for fam in ("ipv4", "ipv6"):
                assert sn["address"][fam] not in after, "neighbour of the retired host left on the ToR"
        for fam in ("ipv4", "ipv6"):
            assert slot["task_ip"][fam] in before and slot["task_ip"][fam] not in after, "prefix-list entry left"
    assert "PL-TASK-h2-" in before and "PL-TASK-h2-" not in after and "RM-HOST-h2-" not in after
    assert "neighbor %s " % h1["slots"][0]["nics"][0]["address"]["ipv6"] in after, "the other host stays"
    assert "PL-TASK-h1-S1-IPV6" in after


def test_tor_config_drops_the_nics_and_slots_a_host_no_longer_has(planned):
    data, _dest, old = planned
    before = tor_policy.build_fabric_configs(plan_topology(data), {}, {})["r1-tor"]["text"]
    h2 = _rack(data, 0)["hosts"][1]
    h2["nics"], h2["task_slots"] = 2, 2   # 4 NICs / 4 slots -> 2 / 2
    after = tor_policy.build_fabric_configs(plan_topology(data), {}, {})["r1-tor"]["text"]
    slots = old["h2"]["slots"]
    for slot in slots:
        for sn in slot["nics"]:
            kept = slot["slot"] <= 2 and sn["index"] < 2
            assert ("neighbor %s " % sn["address"]["ipv6"] in after) == kept, (slot["slot"], sn["index"])
    for slot in slots:
        kept = slot["slot"] <= 2
        assert ("PL-TASK-h2-S%d-IPV6 seq 10 permit %s/128" % (slot["slot"], slot["task_ip"]["ipv6"]) in after) == kept
        assert "PL-TASK-h2-S%d-IPV6" % slot["slot"] in before
    for nic in old["h2"]["nics"]:
        assert (" address %s/" % nic["gateway"]["ipv6"] in after) == (nic["index"] < 2)
