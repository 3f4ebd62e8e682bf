"""Bad input: every case fails with the path in the file, the value and a fix, and writes nothing."""

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.errors import TopologyError
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import run_plan

from fabrics import small

RACK0 = "buildings[0].zones[0].racks[0]"


def _zone(d):
    return d["buildings"][0]["zones"][0]


def _host(d, i=0):
    return _zone(d)["racks"][0]["hosts"][i]


def mutate_overlap(d):
    d["pools"]["infrastructure"]["ipv6"] = "fd00:20:0:1::/64"


def mutate_overlap_v4(d):
    d["pools"]["infrastructure"]["ipv4"] = "198.18.3.0/24"


def mutate_pin_outside(d):
    _zone(d)["racks"][0]["ipv6_prefix"] = "fd00:99::/59"


def mutate_pin_wrong_length(d):
    _zone(d)["racks"][0]["ipv4_prefix"] = "198.18.0.0/24"


def mutate_too_many_buildings(d):
    d["capacity"]["buildings"] = 1
    d["buildings"].append({"id": 2, "name": "b2", "zones": [{"id": 1, "name": "z9", "racks": []}]})


def mutate_too_many_racks(d):
    d["capacity"]["racks"] = 1


def mutate_too_many_hosts(d):
    d["capacity"]["hosts"] = 1


def mutate_zone_id_over_capacity(d):
    _zone(d)["id"] = 3


def mutate_spine_id_over_capacity(d):
    _zone(d)["spines"][0]["id"] = 7


def mutate_duplicate_rack_id(d):
    _zone(d)["racks"][1]["id"] = 1


def mutate_duplicate_host_name(d):
    _zone(d)["racks"][1]["hosts"][0]["name"] = "h1"


def mutate_nics_zero(d):
    _host(d, 1)["nics"] = 0


def mutate_nics_over(d):
    _host(d, 1)["nics"] = 9


def mutate_slots_over(d):
    _host(d, 1)["task_slots"] = 5


def mutate_host_outside_rack(d):
    _zone(d)["hosts"] = [{"id": 9, "name": "stray", "nics": 2}]


def mutate_v4_pool_too_small(d):
    d["pools"]["ipv4"] = "198.18.0.0/22"


def mutate_v6_pool_too_small(d):
    d["pools"]["ipv6"] = "fd00:20::/60"


def mutate_malformed_prefix(d):
    d["pools"]["ipv6"] = "fd00:zz::/48"


def mutate_host_bits(d):
    d["pools"]["ipv4"] = "198.18.0.1/16"


def mutate_prefix_no_length(d):
    d["pools"]["ipv4"] = "198.18.0.0"


def mutate_unknown_key(d):
    _host(d, 0)["nic"] = _host(d, 0).pop("nics")


def mutate_unknown_top_key(d):
    d["capacities"] = d.pop("capacity")


def mutate_bad_name(d):
    _zone(d)["racks"][0]["name"] = "Rack_1"


def mutate_nic_names_count(d):
    _host(d, 0)["nic_names"] = ["eth0"]


def mutate_asn_overlap(d):
    d["asn"]["host"] = 4200001002


CASES = [
    (mutate_overlap, "pools.infrastructure.ipv6", "fd00:20:0:1::/64", "outside fd00:20::/48"),
    (mutate_overlap_v4, "pools.infrastructure.ipv4", "198.18.3.0/24", "outside 198.18.0.0/16"),
    (mutate_pin_outside, RACK0 + ".ipv6_prefix", "fd00:99::/59", "inside fd00:20::/57"),
    (mutate_pin_wrong_length, RACK0 + ".ipv4_prefix", "198.18.0.0/24", "pin a /23"),
    (mutate_too_many_buildings, "buildings", "2 buildings", "raise capacity.buildings"),
    (mutate_too_many_racks, "buildings[0].zones[0].racks", "2 racks", "raise capacity.racks"),
    (mutate_too_many_hosts, RACK0 + ".hosts", "2 hosts", "raise capacity.hosts"),
    (mutate_zone_id_over_capacity, "buildings[0].zones[0].id", "3", "1..2"),
    (mutate_spine_id_over_capacity, "buildings[0].zones[0].spines[0].id", "7", "1..2"),
    (mutate_duplicate_rack_id, "buildings[0].zones[0].racks[1].id", "1", "its own id"),
    (mutate_duplicate_host_name, "buildings[0].zones[0].racks[1].hosts[0]", "'h1'", "unique"),
    (mutate_nics_zero, RACK0 + ".hosts[1].nics", "0", "1..8"),
    (mutate_nics_over, RACK0 + ".hosts[1].nics", "9", "1..8"),
    (mutate_slots_over, RACK0 + ".hosts[1].task_slots", "5", "1..4"),
    (mutate_host_outside_rack, "buildings[0].zones[0].hosts", "1 host(s)", "racks[k].hosts"),
    (mutate_v4_pool_too_small, "pools.ipv4", "198.18.0.0/22", "/19 or larger"),
    (mutate_v6_pool_too_small, "pools.ipv6", "fd00:20::/60", "/55 or larger"),
    (mutate_malformed_prefix, "pools.ipv6", "fd00:zz::/48", "CIDR form"),
    (mutate_host_bits, "pools.ipv4", "198.18.0.1/16", "198.18.0.0/16"),
    (mutate_prefix_no_length, "pools.ipv4", "198.18.0.0", "append the length"),
    (mutate_unknown_key, RACK0 + ".hosts[0].nic", "2", "did you mean 'nics'"),
    (mutate_unknown_top_key, "capacities", "dict", "did you mean 'capacity'"),
    (mutate_bad_name, RACK0 + ".name", "Rack_1", "lowercase"),
    (mutate_nic_names_count, RACK0 + ".hosts[0].nic_names", "eth0", "one interface name per NIC"),
    (mutate_asn_overlap, "asn.host", "4200001002", "4200001017"),
]


@pytest.mark.parametrize("mutate,path,value,fix", CASES, ids=[c[0].__name__[7:] for c in CASES])
def test_bad_input_names_path_value_fix_and_writes_nothing(tmp_path, mutate, path, value, fix, tree_digest):
    good = tmp_path / "good.yml"
    good.write_text(yaml.safe_dump(small()))
    intended = tmp_path / "intended"
    run_plan(str(good), str(intended))
    before = tree_digest(str(intended))

    data = small()
    mutate(data)
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(TopologyError) as info:
        run_plan(str(bad), str(intended))
    problems = info.value.problems
    matching = [p for p in problems if p.path == path]
    assert matching, "no problem reported at %s; got: %s" % (path, [str(p) for p in problems])
    text = str(matching[0])
    assert value in text, text
    assert fix in matching[0].fix, text
    assert tree_digest(str(intended)) == before, "intended/ changed on bad input"
