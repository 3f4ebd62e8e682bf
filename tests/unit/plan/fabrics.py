"""Topology builders shared by the planner tests."""
import copy
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def load_example(name="example"):
    with open(os.path.join(ROOT, "inventories", name, "fabric.yml")) as handle:
        return yaml.safe_load(handle)


def small(**over):
    """A compact, valid dual-stack fabric for negative tests: mutate a deep copy."""
    data = {
        "name": "t",
        "region": {"name": "r"},
        "capacity": {"buildings": 2, "zones": 2, "racks": 4, "hosts": 4, "nics": 8, "task_slots": 4, "spines": 2},
        "pools": {"ipv6": "fd00:20::/48", "ipv4": "198.18.0.0/16",
                  "infrastructure": {"ipv6": "fd00:ff::/64", "ipv4": "198.19.0.0/24"}},
        "asn": {"spine": 4200000001, "tor": 4200001001, "host": 4201000001},
        "buildings": [{"id": 1, "name": "b1", "zones": [
            {"id": 1, "name": "z1", "spines": [{"id": 1, "name": "s1"}], "racks": [
                {"id": 1, "name": "r1", "hosts": [{"id": 1, "name": "h1", "nics": 2},
                                                  {"id": 2, "name": "h2", "nics": 4}]},
                {"id": 2, "name": "r2", "hosts": [{"id": 1, "name": "h3", "nics": 4}]}]}]}],
    }
    data = copy.deepcopy(data)
    data.update(over)
    return data
