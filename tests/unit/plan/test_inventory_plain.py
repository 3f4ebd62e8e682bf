"""The fabric inventory plugin hands its variables to Ansible without ansible-core 2.19's per-value
copy-and-tag walk (docs/topology.md, "The inventory at fleet scale"). That is safe only for plain data:
every value of the view is a dict, list, str, int, bool or None (exact types, no subclass, no tuple, no
set, no object), for the example fabric, the lab fabric with a running lab and a synthetic region."""
import json
import os
import sys

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab.inventory import LabInventory, fabric_view
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import start_time
from ansible_collections.netscale.multinic.plugins.module_utils.plan.inventory_model import fabric_inventory
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import read_topology_file

from fabrics import load_example

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAIN = (dict, list, str, int, bool, type(None))


def _not_plain(value, path, out):
    if type(value) not in PLAIN:  # pylint: disable=unidiomatic-typecheck
        out.append("%s: %s" % (path, type(value).__name__))
    elif isinstance(value, dict):
        for key, item in value.items():
            if type(key) is not str:  # pylint: disable=unidiomatic-typecheck
                out.append("%s: key %r" % (path, key))
            _not_plain(item, "%s.%s" % (path, key), out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _not_plain(item, "%s[%d]" % (path, i), out)
    return out


def _check(view):
    bad = []
    for name, entry in view.hosts.items():
        _not_plain(entry["vars"], name, bad)
    assert not bad, bad[:20]
    assert view.hosts


def test_example_view_is_plain_data():
    _check(fabric_inventory(load_example("example"), "inventories/example/fabric.yml"))


def test_lab_view_with_a_running_lab_is_plain_data(tmp_path):
    state = tmp_path / "lab"
    state.mkdir()
    pid = os.getpid()
    (state / "state.json").write_text(json.dumps({"nodes": {
        "lab-r1-h1": {"pid": pid, "started": start_time(pid), "netns": "x"},
        "lab-storage": {"pid": pid, "started": start_time(pid)}}}))
    view = fabric_inventory(load_example("lab"), "inventories/lab/fabric.yml", extensions=[LabInventory(str(tmp_path))])
    assert view.hosts["lab-r1-h1"]["vars"]["ansible_nsenter_pid"] == pid
    _check(view)


def test_synthetic_region_view_is_plain_data_and_shares_host_data_with_its_rack():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import plan_scale
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    view = fabric_inventory(plan_scale.synthetic("quick"), "quick.yml")
    _check(view)
    tor = next(e for e in view.hosts.values() if "multinic_rack" in e["vars"])
    for host in tor["vars"]["multinic_rack"]["hosts"]:
        assert view.hosts[host["name"]]["vars"]["multinic_host"] is host


def test_plugin_reader_and_ansible_types_give_the_same_view():
    """fabric_view (the lookup's path: Ansible-loaded data made plain) and the plugin's path (the C
    loader) give equal variables."""
    path = os.path.join(ROOT, "inventories", "example", "fabric.yml")
    data = read_topology_file(path)
    a = fabric_inventory(data, path)
    b = fabric_view(read_topology_file(path), path)
    assert a.groups == b.groups
    assert json.dumps(a.hosts, sort_keys=True) == json.dumps(b.hosts, sort_keys=True)


def test_unplain_value_is_reported():
    assert _not_plain({"a": (1, 2), "b": {"c": {1}}}, "h", []) == ["h.a: tuple", "h.b.c: set"]


@pytest.mark.parametrize("name", ["example", "lab"])
def test_c_loader_reads_the_same_data_as_pyyaml(name):
    import yaml
    path = os.path.join(ROOT, "inventories", name, "fabric.yml")
    with open(path) as handle:
        assert read_topology_file(path) == yaml.safe_load(handle)
