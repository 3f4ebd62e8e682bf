"""Planner: concrete addresses of the lab fabric and the structural invariants of design section 2."""
import ipaddress

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan, _cover, clog2
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

from fabrics import load_example, small


@pytest.fixture(scope="module")
def lab():
    topo = load_topology(load_example("lab"), "lab")
    return topo, FabricPlan(topo).allocate()


def test_lab_host_allocation_is_as_documented(lab):
    topo, plan = lab
    h = plan.host_data(topo.host_by_name("lab-r1-h2"))
    assert h["nic_count"] == 4
    assert h["prefix"] == {"ipv6": "fd00:10:0:8::/61", "ipv4": "198.18.0.128/25"}
    nic1 = h["nics"][1]
    assert nic1["subnet"] == {"ipv6": "fd00:10:0:9::/64", "ipv4": "198.18.0.144/28"}
    assert nic1["gateway"] == {"ipv6": "fd00:10:0:9::1", "ipv4": "198.18.0.145"}
    assert nic1["address"] == {"ipv6": "fd00:10:0:9::2", "ipv4": "198.18.0.146"}
    # slot block is 4 (2 slots rounded up to at least 4): containers at 4.., task IPs at 8.. of NIC 0
    assert h["slots"][1]["nics"][1]["address"] == {"ipv6": "fd00:10:0:9::5", "ipv4": "198.18.0.149"}
    assert h["slots"][0]["task_ip"] == {"ipv6": "fd00:10:0:8::8", "ipv4": "198.18.0.136"}
    assert h["task_ip_prefixes"] == {"ipv6": ["fd00:10:0:8::8/127"], "ipv4": ["198.18.0.136/31"]}
    assert h["asn"] == 4201000001 + 1 and h["tor_asn"] == 4200001001


def test_every_address_lies_in_its_nic_subnet_and_host_and_rack(lab):
    topo, plan = lab
    for rack in topo.racks:
        rd = plan.rack_data(rack)
        for fam in ("ipv6", "ipv4"):
            rack_net = ipaddress.ip_network(rd["prefix"][fam])
            for h in rd["hosts"]:
                host_net = ipaddress.ip_network(h["prefix"][fam])
                assert host_net.subnet_of(rack_net)
                for nic in h["nics"]:
                    subnet = ipaddress.ip_network(nic["subnet"][fam])
                    assert subnet.subnet_of(host_net)
                    for key in ("gateway", "address"):
                        assert ipaddress.ip_address(nic[key][fam]) in subnet
                nic0 = ipaddress.ip_network(h["nics"][0]["subnet"][fam])
                covers = [ipaddress.ip_network(c) for c in h["task_ip_prefixes"][fam]]
                for slot in h["slots"]:
                    task = ipaddress.ip_address(slot["task_ip"][fam])
                    assert task in nic0, "task IP must be carved from NIC 0's subnet"
                    assert any(task in c for c in covers)
                    for k, nic in enumerate(slot["nics"]):
                        assert ipaddress.ip_address(nic["address"][fam]) in ipaddress.ip_network(h["nics"][k]["subnet"][fam])


def test_task_ip_cover_is_exact():
    assert _cover(8, 2, 4) == ["0.0.0.8/31"]
    assert _cover(8, 3, 4) == ["0.0.0.8/31", "0.0.0.10/32"]
    assert _cover(16, 8, 6) == ["::10/125"]
    assert _cover(17, 6, 6) == ["::11/128", "::12/127", "::14/127", "::16/128"]  # 17..22


def test_clog2():
    assert [clog2(n) for n in (1, 2, 3, 4, 5, 8, 9, 252, 256, 257)] == [0, 1, 2, 2, 3, 3, 4, 8, 8, 9]


def test_prefix_lengths_follow_capacities():
    topo = load_topology(small(), "t")
    lay = FabricPlan(topo).layouts
    assert lay[6].lengths == {"nic": 64, "host": 61, "rack": 59, "zone": 57, "building": 56, "region": 55}
    # IPv4 NIC subnet: 4 blocks of 4 (slots 4): /28
    assert lay[4].lengths["nic"] == 28 and lay[4].lengths["region"] == 19


def test_spine_and_tor_links_pair_up(lab):
    topo, plan = lab
    spine = plan.spine_data(topo.spines[0])
    tors = {plan.rack_data(r)["tor"]["name"]: plan.rack_data(r)["tor"] for r in topo.racks}
    for down in spine["downlinks"]:
        up = [u for u in tors[down["tor"]]["uplinks"] if u["spine"] == spine["name"]][0]
        assert up["ipv6"] == down["ipv6"] and up["ipv4"] == down["ipv4"]
        assert ipaddress.ip_network(down["ipv6"]["prefix"]).prefixlen == 127
        assert ipaddress.ip_network(down["ipv4"]["prefix"]).prefixlen == 31
    assert spine["asn"] == 4200000001
    assert len({t["router_id"] for t in tors.values()} | {spine["router_id"]}) == len(tors) + 1


def test_ipv6_only_fabric_and_router_id_fallback():
    data = small()
    del data["pools"]["ipv4"]
    del data["pools"]["infrastructure"]["ipv4"]
    topo = load_topology(data, "t")
    plan = FabricPlan(topo).allocate()
    h = plan.host_data(topo.hosts[0])
    assert set(h["nics"][0]["address"]) == {"ipv6"}
    rid = plan.rack_data(topo.racks[0])["tor"]["router_id"]
    assert ipaddress.ip_address(rid) in ipaddress.ip_network("240.0.0.0/4")


def test_pinned_prefix_is_used():
    data = small()
    data["buildings"][0]["zones"][0]["racks"][1]["ipv6_prefix"] = "fd00:20:0:18::/61"
    data["capacity"]["hosts"] = 1
    data["buildings"][0]["zones"][0]["racks"][0]["hosts"] = [{"id": 1, "name": "h1", "nics": 2}]
    data["buildings"][0]["zones"][0]["racks"][1]["hosts"] = [{"id": 1, "name": "h3", "nics": 4}]
    topo = load_topology(data, "t")
    plan = FabricPlan(topo)
    assert plan.rack_data(topo.racks[1])["prefix"]["ipv6"] == "fd00:20:0:18::/61"


def test_summary_counts(lab):
    topo, plan = lab
    s = plan.summary()
    assert s["counts"]["hosts"] == 4 and s["counts"]["nics"] == 14 and s["counts"]["task_slots"] == 8
    assert s["hosts_by_nic_count"] == {"2": 1, "4": 3}


def test_topology_doc_tables_are_current():
    import subprocess
    import sys
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.run([sys.executable, os.path.join(root, "scripts", "gen-topology-doc.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout
