# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""labkit.awx_jobs: the job templates and workflow are read from awx/configure.yml, and job slicing
splits the name-ordered hosts as AWX's get_script_data does."""

from __future__ import annotations

from hypothesis import given, strategies as st

from labkit.awx_jobs import AwxObjects, inventory_hosts, slice_inventory


def test_templates_and_workflow_come_from_configure_yml():
    o = AwxObjects(overrides={"awx_fleet_slices": 3, "awx_canary": {"racks": ["r9"]}})
    canary = o.job_templates["multinic rollout 1 canary"]
    fleet = o.job_templates["multinic rollout 2 fleet"]
    assert canary["playbook"] == fleet["playbook"] == "playbooks/rollout.yml"
    assert canary["extra_vars"]["rollout_canary"] == {"racks": ["r9"]}   # native value, not a string
    assert fleet["job_slice_count"] == 3 and int(canary["job_slice_count"]) == 1
    kinds = [k for _i, _n, k in o.workflow_order("multinic rollout")]
    assert kinds == ["job_template", "workflow_approval", "job_template"]


def _inv(names):
    return {"_meta": {"hostvars": dict((n, {"v": n}) for n in names)},
            "all": {"children": ["ungrouped", "g"], "vars": {"x": 1}},
            "g": {"hosts": sorted(names, reverse=True), "vars": {"y": 2}}}


@given(st.sets(st.text("abcdefgh-0123", min_size=1, max_size=6), min_size=1, max_size=20),
       st.integers(min_value=1, max_value=5))
def test_slices_partition_the_name_ordered_hosts(names, count):
    inv = _inv(names)
    slices = [slice_inventory(inv, k, count) for k in range(1, count + 1)]
    seen = [h for s in slices for h in s["_meta"]["hostvars"]]
    assert sorted(seen) == sorted(names)                      # every host in exactly one slice
    for k, s in enumerate(slices, 1):
        assert sorted(s["_meta"]["hostvars"]) == sorted(names)[k - 1::count]
        assert set(s["g"]["hosts"]) == set(s["_meta"]["hostvars"])
        assert s["g"]["vars"] == {"y": 2} and s["all"]["vars"] == {"x": 1}
    assert inventory_hosts(inv) == sorted(names)
