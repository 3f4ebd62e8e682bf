"""Inventory view: groups by level/role/NIC count, allocations as host vars, lab connection vars."""
import json
import os

from ansible_collections.netscale.multinic.plugins.module_utils.plan.inventory_model import build_inventory
from ansible_collections.netscale.multinic.plugins.module_utils.lab.inventory import LabInventory
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology

from fabrics import load_example


def test_example_groups_and_hostvars():
    topo = load_topology(load_example("example"), "example")
    view = build_inventory(topo, "inventories/example/fabric.yml", extensions=[LabInventory("/nonexistent")])
    assert view.groups["rack_b1_az1_r1"] == "zone_b1_az1"
    assert view.groups["zone_b1_az1"] == "building_b1"
    assert view.groups["building_b1"] == "region_rgn1"
    h = view.hosts["gpu-b1-az1-r1-h2"]
    assert set(h["groups"]) == {"gpu_hosts", "rack_b1_az1_r1", "nics_4"}
    assert h["vars"]["multinic_host"]["nic_count"] == 4
    tor = view.hosts["b1-az1-r2-tor"]
    assert "platform_eos" in tor["groups"] and tor["vars"]["multinic_rack"]["name"] == "b1-az1-r2"
    assert "spines" in view.hosts["b1-az1-spine1"]["groups"]
    assert "ansible_connection" not in h["vars"]


def test_lab_state_sets_nsenter_only_for_live_pids(tmp_path):
    topo = load_topology(load_example("lab"), "lab")
    state_dir = tmp_path / "lab"
    (state_dir / "lab").mkdir(parents=True)
    dead_pid = 2 ** 22 + 7  # above pid_max defaults: never alive
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import start_time
    (state_dir / "lab" / "state.json").write_text(json.dumps({"nodes": {
        "lab-r1-h1": {"pid": os.getpid(), "kind": "gpu_host", "started": start_time(os.getpid())},
        "lab-r2-h1": {"pid": os.getpid(), "kind": "gpu_host", "started": 1},  # PID reused by another process
        "lab-r1-h2": {"pid": dead_pid, "kind": "gpu_host"}}}))
    view = build_inventory(topo, "inventories/lab/fabric.yml", extensions=[LabInventory(str(state_dir))])
    live = view.hosts["lab-r1-h1"]["vars"]
    assert live["ansible_connection"] == "community.docker.nsenter" and live["ansible_nsenter_pid"] == os.getpid()
    assert "ansible_connection" not in view.hosts["lab-r1-h2"]["vars"]
    assert "ansible_connection" not in view.hosts["lab-r2-h1"]["vars"]
    assert "lab-storage" in view.hosts and view.hosts["lab-storage"]["groups"] == ["lab_storage"]


def test_core_inventory_has_no_lab_additions():
    topo = load_topology(load_example("lab"), "lab")
    view = build_inventory(topo, "inventories/lab/fabric.yml")
    assert "lab-storage" not in view.hosts and "lab_storage" not in view.groups
    assert all("tor_bgp_spine_networks" not in h["vars"] for h in view.hosts.values())


def test_lab_extension_gives_spine_networks_of_the_storage_node():
    topo = load_topology(load_example("lab"), "lab")
    view = build_inventory(topo, "inventories/lab/fabric.yml", extensions=[LabInventory("/nonexistent")])
    networks = view.hosts["lab-spine1"]["vars"]["tor_bgp_spine_networks"]
    assert networks == {"ipv4": ["198.19.5.0/24"], "ipv6": ["fd00:5::/64"]}
