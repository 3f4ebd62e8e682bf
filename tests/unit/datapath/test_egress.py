# -*- coding: utf-8 -*-
"""Unit tests of the egress policy (pure): validation, the mn_ecfg entry, the program's constants."""
import os
import re
import struct

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as S, core, bpf
from dp_links import fake_links

SRC = os.path.join("roles", "host_datapath", "files", "bpf", "multinic_datapath.c")


def test_policy_values():
    assert S.check_egress_policy(None) == "hash"
    assert S.check_egress_policy("hash") == "hash"
    assert S.check_egress_policy("least_loaded") == "least_loaded"
    # kernel forwarding always hashes
    assert S.check_egress_policy("least_loaded", ebpf=False) == "hash"


@pytest.mark.parametrize("bad", ["leastloaded", "LEAST_LOADED", "", "round_robin", 1])
def test_bad_policy_names_field_value_and_fix(bad):
    with pytest.raises(S.DatapathInputError) as e:
        S.check_egress_policy(bad)
    msg = str(e.value)
    assert msg.startswith("host_datapath_egress_policy: %r is not an egress policy." % (bad,))
    assert "Fix: set hash" in msg and "least_loaded" in msg


def test_bad_policy_fails_before_any_change(plan, tmp_path):
    """Datapath.validate() is the first step of apply() and of check mode: nothing is touched."""
    sp = S.build_spec(plan["lab-r1-h2"])
    dp = core.Datapath(sp, core.Options(state_dir=str(tmp_path), egress_policy="fastest"))
    dp.live.links = lambda netns=None: dict((n["name"], {}) for n in sp["nics"])
    with pytest.raises(S.DatapathInputError, match="host_datapath_egress_policy: 'fastest'"):
        dp.validate()
    assert os.listdir(str(tmp_path)) == []


def test_ecfg_map_entry(plan):
    sp = S.build_spec(plan["lab-r1-h2"])
    host_links, ns_links = fake_links(sp)
    assert "mn_ecfg" not in bpf.desired_maps(sp, host_links, ns_links)   # an object without the map
    for policy, code in (("hash", 0), ("least_loaded", 1)):
        m = bpf.desired_maps(sp, host_links, ns_links, egress=policy)
        assert m["mn_ecfg"] == {struct.pack("<I", 0): struct.pack("<II", code, S.EGRESS_FLOW_IDLE_S)}


def test_policy_codes_flow_table_and_stats_agree_with_the_program():
    src = open(SRC).read()
    assert int(re.search(r"#define EGRESS_HASH (\d+)", src).group(1)) == bpf.EGRESS_CODES["hash"]
    assert int(re.search(r"#define EGRESS_LEAST_LOADED (\d+)", src).group(1)) == bpf.EGRESS_CODES["least_loaded"]
    assert int(re.search(r"#define MN_FLOW_MAX (\d+)", src).group(1)) == S.EGRESS_FLOW_ENTRIES
    block = re.search(r"struct \{([^}]*)\} mn_flows SEC", src).group(1)
    assert "BPF_MAP_TYPE_LRU_HASH" in block and "MN_FLOW_MAX" in block
    # the stats enum, in order, is what Bpf.stats() names
    enum = re.search(r"enum \{(.*?)ST_MAX,", src, re.S).group(1)
    names = [n.lower()[3:] for n in re.findall(r"\b(ST_[A-Z_]+)\b", enum)]
    assert names == list(bpf.STATS)
    # mn_ecfg's value is two u32 (policy, idle seconds), as ecfg_value packs it
    assert re.search(r"struct ecfg_val \{\s*__u32 policy;[^}]*__u32 idle_s;[^}]*\}", src)
    assert len(bpf.ecfg_value("hash")) == 8
