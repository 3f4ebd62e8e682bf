# -*- coding: utf-8 -*-
"""Unit tests of the NUMA preference (pure): spec validation, the mn_numa map content, sysfs facts,
and the program's sizes/layout."""
import os
import re
import struct

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as S, bpf, facts
from dp_links import fake_links

SRC = os.path.join("roles", "host_datapath", "files", "bpf", "multinic_datapath.c")


def _nics(plan):
    return [n["name"] for n in plan["lab-r1-h2"]["nics"]]


def test_map_holds_local_masks_of_slots_with_a_preference(plan):
    names = _nics(plan)                      # eth0..eth3 on the 4-NIC lab host, slots 1 and 2
    assert len(names) == 4
    numa = {"nic_numa": {names[0]: 0, names[1]: 0, names[2]: 1, names[3]: 1}, "slot_numa": {1: 0, 2: 1},
            "spill_flows": 3}
    sp = S.build_spec(plan["lab-r1-h2"], numa=numa)
    assert sp["numa"]["local_masks"] == {"1": 0b0011, "2": 0b1100}
    assert sp["numa"]["nic_nodes"] == dict(zip(names, [0, 0, 1, 1]))
    m = bpf.desired_maps(sp, *fake_links(sp), numa=True)
    assert m["mn_numa"] == {struct.pack("<I", 1): struct.pack("<II", 0b0011, 3),
                            struct.pack("<I", 2): struct.pack("<II", 0b1100, 3)}
    assert "mn_numa" not in bpf.desired_maps(sp, *fake_links(sp))      # an object without the map


def test_no_entry_when_every_nic_or_none_is_local_or_the_node_is_unknown(plan):
    names = _nics(plan)
    cases = [
        ({n: 0 for n in names}, {1: 0, 2: 1}),           # all local to slot 1, none to slot 2
        ({names[0]: 0, names[1]: -1}, {1: 0, 2: -1}),    # slot 2 unknown; slot 1: only eth0 known -> mask 1
        ({}, {1: 0}),                                    # no NIC node known (virtual NICs)
    ]
    want = [{}, {"1": 0b0001}, {}]
    for (nn, sn), w in zip(cases, want):
        sp = S.build_spec(plan["lab-r1-h2"], numa={"nic_numa": nn, "slot_numa": sn})
        assert sp["numa"]["local_masks"] == w, (nn, sn)
        assert sp["numa"]["spill_flows"] == S.NUMA_SPILL_FLOWS
    # without the option: no numa key, and an empty map (stale entries are deleted by map_diff)
    sp = S.build_spec(plan["lab-r1-h2"])
    assert "numa" not in sp
    assert bpf.desired_maps(sp, *fake_links(sp), numa=True)["mn_numa"] == {}


@pytest.mark.parametrize("numa,field,value", [
    ({"nic_numa": {"eth9": 0}, "slot_numa": {1: 0}}, "host_datapath_nic_numa", "'eth9'"),
    ({"nic_numa": {"eth0": "zero"}, "slot_numa": {1: 0}}, "host_datapath_nic_numa.eth0", "'zero'"),
    ({"nic_numa": {"eth0": -2}, "slot_numa": {1: 0}}, "host_datapath_nic_numa.eth0", "-2"),
    ({"nic_numa": {"eth0": True}, "slot_numa": {1: 0}}, "host_datapath_nic_numa.eth0", "True"),
    ({"slot_numa": {7: 0}}, "host_datapath_slot_numa", "7"),
    ({"slot_numa": {1: 1.5}}, "host_datapath_slot_numa.1", "1.5"),
    ({"slot_numa": [0, 1]}, "host_datapath_slot_numa", "[0, 1]"),
    ({"slot_numa": {1: 0}, "spill_flows": -1}, "host_datapath_numa_spill_flows", "-1"),
])
def test_bad_input_names_field_value_and_fix(plan, numa, field, value):
    with pytest.raises(S.DatapathInputError) as e:
        S.build_spec(plan["lab-r1-h2"], numa=numa)
    msg = str(e.value)
    assert msg.startswith(field + ": " + value), msg
    assert "Fix:" in msg


def test_nic_nodes_from_sysfs(tmp_path):
    for name, node in (("eth0", "0\n"), ("eth1", "1\n"), ("eth2", "-1\n")):
        os.makedirs(str(tmp_path / name / "device"))
        (tmp_path / name / "device" / "numa_node").write_text(node)
    os.makedirs(str(tmp_path / "veth0"))          # virtual: no device/
    got = facts.nic_numa_nodes(["eth0", "eth1", "eth2", "veth0", "gone"], sys_net=str(tmp_path))
    assert got == {"eth0": 0, "eth1": 1, "eth2": -1, "veth0": -1, "gone": -1}


def test_program_map_size_and_layout_agree():
    src = open(SRC).read()
    assert int(re.search(r"#define MN_NUMA_ENTRIES (\d+)", src).group(1)) == S.EBPF_NUMA_ENTRIES
    assert S.EBPF_NUMA_ENTRIES >= S.EBPF_VETH_ENTRIES   # one entry per slot, slots x NICs <= mn_veth
    block = re.search(r"struct \{([^}]*)\} mn_numa SEC", src).group(1)
    assert "BPF_MAP_TYPE_HASH" in block and "MN_NUMA_ENTRIES" in block and "struct numa_val" in block
    assert re.search(r"struct numa_val \{\s*__u32 local_mask;[^}]*__u32 spill_flows;[^}]*\}", src)
