"""A small two-zone fabric for the monitor tests (zone z1: 4 racks x 4 hosts x 4 NICs, 2 spines)."""
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.fabric import FabricIndex
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology


def data(racks=4, hosts=4, nics=4):
    def zone(zid, nracks):
        return {"id": zid, "name": "z%d" % zid,
                "spines": [{"id": s, "name": "z%d-s%d" % (zid, s)} for s in (1, 2)],
                "racks": [{"id": r, "name": "z%dr%d" % (zid, r),
                           "hosts": [{"id": h, "name": "z%dr%dh%d" % (zid, r, h), "nics": nics}
                                     for h in range(1, hosts + 1)]} for r in range(1, nracks + 1)]}
    return {
        "name": "mon", "region": {"name": "r"},
        "capacity": {"buildings": 1, "zones": 2, "racks": 8, "hosts": 8, "nics": 8, "task_slots": 2, "spines": 2},
        "pools": {"ipv6": "fd00:30::/40", "infrastructure": {"ipv6": "fd00:fe::/64"}},
        "asn": {"spine": 4200000001, "tor": 4200001001, "host": 4201000001},
        "buildings": [{"id": 1, "name": "b1", "zones": [zone(1, racks), zone(2, 2)]}],
    }


def plan():
    return FabricPlan(load_topology(data(), "monitor-test")).allocate()


def index():
    return FabricIndex.from_plan(plan())
