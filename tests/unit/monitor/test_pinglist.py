"""Pinglist rendering from the plan: own rack, one rotating host per other rack of the zone, targets."""
import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import pinglist as pl
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import plan_topology


def _topology(racks=3, hosts=2, nics=4, zones=1):
    zl = []
    for z in range(zones):
        rl = []
        for r in range(racks):
            rl.append({"id": r + 1, "name": "z%d-r%d" % (z + 1, r + 1),
                       "hosts": [{"id": h + 1, "name": "z%d-r%d-h%d" % (z + 1, r + 1, h + 1),
                                  "nics": nics if h else 2} for h in range(hosts)]})
        zl.append({"id": z + 1, "name": "az%d" % (z + 1), "spines": [{"id": 1, "name": "sp%d" % (z + 1)}],
                   "racks": rl})
    return {"name": "t", "region": {"name": "t", "id": 1},
            "capacity": {"buildings": 1, "zones": 2, "racks": 4, "hosts": 4, "nics": 8, "task_slots": 2,
                         "spines": 2},
            "pools": {"ipv6": "fd00:10::/48", "ipv4": "198.18.0.0/16",
                      "infrastructure": {"ipv6": "fd00:ff::/64", "ipv4": "198.19.0.0/24"}},
            "asn": {"spine": 4200000001, "tor": 4200001001, "host": 4201000001},
            "buildings": [{"id": 1, "name": "b1", "zones": zl}]}


@pytest.fixture(scope="module")
def plan():
    return plan_topology(_topology(zones=2))


def test_own_rack_zone_racks_and_targets(plan):
    lists = pl.from_plan(plan, ["z1-r1-h2"], targets=[{"name": "storage", "ipv6": "fd00:5::2"}])
    p = lists["z1-r1-h2"]
    assert (p["host"], p["rack"], p["zone"]) == ("z1-r1-h2", "z1-r1", "az1")
    kinds = [(t["kind"], t["name"]) for t in p["targets"]]
    assert kinds == [("rack", "z1-r1-h1"), ("zone", "z1-r2"), ("zone", "z1-r3"), ("target", "storage")]
    # only hosts of its own zone; every other rack of the zone lists each of its hosts as a candidate
    zone_r2 = p["targets"][1]
    assert [c["host"] for c in zone_r2["candidates"]] == ["z1-r2-h1", "z1-r2-h2"]
    assert all(not t["name"].startswith("z2") for t in p["targets"])
    assert [n["name"] for n in p["nics"]] == ["eth0", "eth1", "eth2", "eth3"]
    assert all(":" in n["address"] for n in p["nics"])


def test_nic_pairing_and_rotation(plan):
    p = pl.from_plan(plan, ["z1-r1-h2"])["z1-r1-h2"]
    pairs = pl.probe_pairs(p, 0)
    assert len(pairs) == 4 * 3
    # local NIC i -> the 2-NIC peer's NIC i mod 2
    peer = dict((n["index"], a) for n, t, h, a in pairs if t == "z1-r1-h1")
    h1 = plan.host_data([h for h in plan.topo.hosts if h.name == "z1-r1-h1"][0])
    assert peer[0] == peer[2] == h1["nics"][0]["address"]["ipv6"]
    assert peer[1] == peer[3] == h1["nics"][1]["address"]["ipv6"]
    # the zone target rotates every rotate_rounds rounds over both hosts of the rack
    hosts = [set(h for n, t, h, a in pl.probe_pairs(p, r) if t == "z1-r2") for r in range(0, 40, 10)]
    assert all(len(x) == 1 for x in hosts)
    assert set().union(*hosts) == {"z1-r2-h1", "z1-r2-h2"}
    assert hosts[0] != hosts[1]


def test_hosts_of_a_rack_start_their_rotation_apart(plan):
    lists = pl.from_plan(plan, ["z1-r2-h1", "z1-r2-h2", "z1-r3-h1", "z1-r3-h2"])
    picks = set()
    for name, p in lists.items():
        picks.add(tuple(h for n, t, h, a in pl.probe_pairs(p, 0) if t == "z1-r1" and n["index"] == 0))
    assert len(picks) == 2   # not every prober on the same host of z1-r1


def test_ipv4_family(plan):
    p = pl.from_plan(plan, ["z1-r1-h1"], family="ipv4")["z1-r1-h1"]
    assert all(":" not in a for n, t, h, a in pl.probe_pairs(p, 0))


@pytest.mark.parametrize("kwargs, field", [
    ({"family": "ipv5"}, "fabric_monitor_family"),
    ({"rotate_rounds": 0}, "fabric_monitor_rotate_rounds"),
    ({"targets": [{"name": "s"}]}, "fabric_monitor_targets[0]"),
    ({"targets": [{"ipv6": "fd00:5::2"}]}, "fabric_monitor_targets[0]"),
    ({"targets": [{"name": "s", "ipv6": "not-an-address"}]}, "fabric_monitor_targets[0].ipv6"),
    ({"targets": [{"name": "s", "ipv6": "fd00::1"}, {"name": "s", "ipv6": "fd00::2"}]}, "used twice"),
    ({"targets": [{"name": "z1-r2", "ipv6": "fd00::1"}]}, "also a host or rack"),
])
def test_bad_input_names_the_field(plan, kwargs, field):
    with pytest.raises(pl.PinglistError) as err:
        pl.from_plan(plan, ["z1-r1-h2"], **kwargs)
    assert field in str(err.value) and "fix:" in str(err.value)


def test_unknown_host(plan):
    with pytest.raises(pl.PinglistError, match="nohost.*not in the plan"):
        pl.from_plan(plan, ["nohost"])
