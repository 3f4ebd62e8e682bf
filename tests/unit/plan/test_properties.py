"""Property-based tests (hypothesis): for random fabrics within their capacities,
no two allocations overlap, every child lies in its parent, and adding, removing or reordering
entities changes no existing allocation."""
import ipaddress

from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

CAP = {"buildings": 3, "zones": 2, "racks": 5, "hosts": 3, "nics": 8, "task_slots": 3, "spines": 2}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def fabrics(draw):
    """A random valid topology dict: a sparse choice of ids at every level."""
    buildings = []
    for b in draw(st.sets(st.integers(1, CAP["buildings"]), min_size=1)):
        zones = []
        for z in draw(st.sets(st.integers(1, CAP["zones"]), min_size=1)):
            racks = []
            for r in draw(st.sets(st.integers(1, CAP["racks"]), min_size=1, max_size=3)):
                hosts = [{"id": h, "name": "h-%d-%d-%d-%d" % (b, z, r, h),
                          "nics": draw(st.integers(1, CAP["nics"])),
                          "task_slots": draw(st.integers(1, CAP["task_slots"]))}
                         for h in draw(st.sets(st.integers(1, CAP["hosts"]), min_size=1))]
                racks.append({"id": r, "name": "r-%d-%d-%d" % (b, z, r), "hosts": hosts})
            spines = [{"id": s, "name": "s-%d-%d-%d" % (b, z, s)}
                      for s in draw(st.sets(st.integers(1, CAP["spines"])))]
            zones.append({"id": z, "name": "z-%d-%d" % (b, z), "spines": spines, "racks": racks})
        buildings.append({"id": b, "name": "b-%d" % b, "zones": zones})
    return {"name": "prop", "region": {"name": "p"}, "capacity": dict(CAP),
            "pools": {"ipv6": "fd00:30::/48", "ipv4": "198.18.0.0/16",
                      "infrastructure": {"ipv6": "fd00:fe::/64", "ipv4": "198.19.0.0/24"}},
            "asn": {"spine": 4200000001, "tor": 4200001001, "host": 4201000001},
            "buildings": buildings}


def _allocations(plan):
    """Every allocation as (owner, kind, family, network) with single addresses as /32 or /128."""
    out = []
    for rack in plan.topo.racks:
        rd = plan.rack_data(rack)
        for h in rd["hosts"]:
            for fam in ("ipv6", "ipv4"):
                for nic in h["nics"]:
                    out.append((h["name"], "nic-subnet", fam, ipaddress.ip_network(nic["subnet"][fam])))
                    for key in ("gateway", "address"):
                        out.append((h["name"], key, fam, ipaddress.ip_network(nic[key][fam])))
                for slot in h["slots"]:
                    out.append((h["name"], "task", fam, ipaddress.ip_network(slot["task_ip"][fam])))
                    for nic in slot["nics"]:
                        out.append((h["name"], "container", fam, ipaddress.ip_network(nic["address"][fam])))
    return out


@SETTINGS
@given(fabrics())
def test_no_overlaps_and_children_inside_parents(data):
    topo = load_topology(data, "prop")
    plan = FabricPlan(topo).allocate()
    allocs = _allocations(plan)
    for fam in ("ipv6", "ipv4"):
        subnets = sorted((a[3] for a in allocs if a[2] == fam and a[1] == "nic-subnet"),
                         key=lambda n: int(n.network_address))
        for left, right in zip(subnets, subnets[1:]):
            assert not left.overlaps(right), (left, right)
        singles = [a[3] for a in allocs if a[2] == fam and a[1] != "nic-subnet"]
        assert len(singles) == len(set(singles)), "an address is allocated twice"
    summary = plan.summary()
    for rack in topo.racks:
        rd = plan.rack_data(rack)
        zone = rack.parent
        for fam, lay in ((f, plan.layouts[int(f[-1])]) for f in ("ipv6", "ipv4")):
            region = ipaddress.ip_network(summary["families"][fam]["region_aggregate"])
            zone_net = ipaddress.ip_network(plan._prefixes(zone)[fam])
            building_net = ipaddress.ip_network(plan._prefixes(zone.parent)[fam])
            rack_net = ipaddress.ip_network(rd["prefix"][fam])
            assert rack_net.subnet_of(zone_net) and zone_net.subnet_of(building_net) and building_net.subnet_of(region)
            for h in rd["hosts"]:
                assert ipaddress.ip_network(h["prefix"][fam]).subnet_of(rack_net)


def _by_host(plan):
    out = {}
    for rack in plan.topo.racks:
        rd = plan.rack_data(rack)
        rack_view = {k: rd[k] for k in ("prefix",)}
        rack_view["tor"] = {k: v for k, v in rd["tor"].items() if k != "uplinks"}
        out[rd["name"]] = rack_view
        for h in rd["hosts"]:
            out[h["name"]] = {k: v for k, v in h.items() if k != "path"}
    return out


@SETTINGS
@given(fabrics(), st.randoms(use_true_random=False), st.integers(0, 3))
def test_growth_shrink_and_reorder_change_no_existing_allocation(data, rnd, extra_racks):
    before = _by_host(FabricPlan(load_topology(data, "prop")).allocate())
    # Mutate: drop a random host, add racks/hosts on free ids, shuffle every list.
    zones = [z for b in data["buildings"] for z in b["zones"]]
    racks = [r for z in zones for r in z["racks"]]
    victim_rack = rnd.choice(racks)
    if len(victim_rack["hosts"]) > 1:
        victim_rack["hosts"].pop(rnd.randrange(len(victim_rack["hosts"])))
    for n in range(extra_racks):
        zone = rnd.choice(zones)
        free = sorted(set(range(1, CAP["racks"] + 1)) - {r["id"] for r in zone["racks"]})
        if free:
            rid = free[0]
            zone["racks"].append({"id": rid, "name": "%s-new%d" % (zone["name"], rid),
                                  "hosts": [{"id": 1, "name": "%s-new%d-h1" % (zone["name"], rid), "nics": 2}]})
    for rack in racks:
        free = sorted(set(range(1, CAP["hosts"] + 1)) - {h["id"] for h in rack["hosts"]})
        if free and rnd.random() < 0.3:
            rack["hosts"].append({"id": free[-1], "name": rack["name"] + "-x", "nics": 4})
    for b in data["buildings"]:
        rnd.shuffle(b["zones"])
        for z in b["zones"]:
            rnd.shuffle(z["racks"])
            for r in z["racks"]:
                rnd.shuffle(r["hosts"])
    rnd.shuffle(data["buildings"])
    after = _by_host(FabricPlan(load_topology(data, "prop")).allocate())
    for name, alloc in before.items():
        if name in after:
            assert after[name] == alloc, name
