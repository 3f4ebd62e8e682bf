# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change-scoped rollout (rollout_scope=changed): the change set from the plan on disk and the new
topology, the ToRs whose RENDERED config changed (real renderer), the module, and the journal's waves
of the scope."""

from __future__ import annotations

import copy
import json
import os

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import plan_topology, run_plan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.store import load_yaml
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import journal as jr
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import scope as sc
from ansible_collections.netscale.multinic.plugins.modules import rollout_scope

BASE = {
    "name": "t",
    "region": {"name": "r"},
    "capacity": {"buildings": 2, "zones": 2, "racks": 4, "hosts": 4, "nics": 8, "task_slots": 4, "spines": 2},
    "pools": {"ipv6": "fd00:20::/48", "ipv4": "198.18.0.0/16",
              "infrastructure": {"ipv6": "fd00:ff::/64", "ipv4": "198.19.0.0/24"}},
    "asn": {"spine": 4200000001, "tor": 4200001001, "host": 4201000001},
    "buildings": [{"id": 1, "name": "b1", "zones": [
        {"id": 1, "name": "z1", "spines": [{"id": 1, "name": "s1"}], "racks": [
            {"id": 1, "name": "r1", "hosts": [{"id": 1, "name": "h1", "nics": 2}]},
            {"id": 2, "name": "r2", "hosts": [{"id": 1, "name": "h3", "nics": 4}]}]}]}],
}
RACK_TORS = {"r1": "r1-tor", "r2": "r2-tor", "r3": "r3-tor"}


def racks_of(data):
    return data["buildings"][0]["zones"][0]["racks"]


def grown():
    """BASE plus one host in rack r1 and one rack r3 with one host."""
    data = copy.deepcopy(BASE)
    racks_of(data)[0]["hosts"].append({"id": 2, "name": "h2", "nics": 4})
    racks_of(data).append({"id": 3, "name": "r3", "hosts": [{"id": 1, "name": "h5", "nics": 2}]})
    return data


def write(tmp_path, data, name="fabric.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def rendered(data):
    """{tor: config text} from the product's renderer (no keys: md5 off)."""
    cfgs = tor_policy.build_fabric_configs(plan_topology(copy.deepcopy(data)), {"md5": "off"}, {})
    return dict((n, c["text"]) for n, c in cfgs.items() if c["kind"] == "tor")


def written_vs(old, new, dest):
    """What tor_render in check mode lists: config files whose new text differs from the copy on disk."""
    out = []
    for name, text in sorted(new.items()):
        path = os.path.join(dest, "configs", name + ".cfg")
        if old.get(name) != text:
            out.append(path)
    return out


def plan_racks(data):
    return dict((r.name, load_yaml(yaml.safe_dump(p))) for r, p in
                ((r, plan_topology(copy.deepcopy(data)).rack_data(r)) for r in plan_topology(copy.deepcopy(data)).topo.racks))


def test_grow_by_a_host_and_a_rack_scopes_to_them_and_the_tors_whose_rendered_config_changed(tmp_path):
    old_cfg, new_cfg = rendered(BASE), rendered(grown())
    written = written_vs(old_cfg, new_cfg, str(tmp_path))
    tors = sc.tors_from_written(written, RACK_TORS.values())
    # the real renderer: r1's ToR gets h2's neighbours, r3's ToR is new, r2's text is byte-identical
    assert tors == ["r1-tor", "r3-tor"]
    assert old_cfg["r2-tor"] == new_cfg["r2-tor"]
    s = sc.compute(plan_racks(BASE), plan_racks(grown()), tors, ["h1", "h2", "h3", "h5"], RACK_TORS)
    assert s["hosts"] == {"added": ["h2", "h5"], "removed": [], "changed": [], "unchanged": ["h1", "h3"]}
    assert s["racks"]["added"] == ["r3"] and s["racks"]["unchanged"] == ["r1", "r2"]
    assert s["deploy"] == ["h2", "h5"]
    assert s["tors"] == {"changed": ["r1-tor", "r3-tor"], "unchanged": ["r2-tor"], "removed": []}
    assert s["untouched"] == {"hosts": ["h1", "h3"], "tors": ["r2-tor"]}
    assert not s["nothing"]
    assert "deploy 2 host(s) (h2, h5)" in s["message"] and "ToR policy on r1-tor, r3-tor" in s["message"]


def test_no_change_scopes_to_nothing_and_says_so():
    tors = sc.tors_from_written(written_vs(rendered(BASE), rendered(BASE), "/i"), RACK_TORS.values())
    assert tors == []
    s = sc.compute(plan_racks(BASE), plan_racks(BASE), tors, ["h1", "h3"], {"r1": "r1-tor", "r2": "r2-tor"})
    assert s["nothing"] and s["deploy"] == [] and s["tors"]["changed"] == []
    assert s["message"].startswith("scope changed: nothing to deploy")
    assert s["untouched"] == {"hosts": ["h1", "h3"], "tors": ["r1-tor", "r2-tor"]}


def test_changed_spec_and_removed_host():
    new = copy.deepcopy(BASE)
    racks_of(new)[1]["hosts"][0]["nics"] = 2     # h3 shrinks
    old = grown()
    s = sc.compute(plan_racks(old), plan_racks(new), ["r2-tor"], ["h1", "h3"], {"r1": "r1-tor", "r2": "r2-tor"})
    assert s["hosts"]["changed"] == ["h3"] and s["hosts"]["removed"] == ["h2", "h5"]
    assert s["racks"]["removed"] == ["r3"] and s["tors"]["removed"] == ["r3-tor"]
    assert s["deploy"] == ["h3"] and s["untouched"]["hosts"] == ["h1"]
    assert "playbooks/decommission.yml" in s["message"]


def test_mode_all_keeps_every_host_and_tor():
    s = sc.compute(plan_racks(BASE), plan_racks(grown()), [], ["h1", "h2", "h3", "h5"], RACK_TORS, mode="all")
    assert s["deploy"] == ["h1", "h2", "h3", "h5"] and s["tors"]["changed"] == ["r1-tor", "r2-tor", "r3-tor"]
    assert s["hosts"]["added"] == ["h2", "h5"]   # still reported


def test_no_plan_on_disk_means_everything_is_added(tmp_path):
    assert sc.read_racks(str(tmp_path / "missing"), load_yaml) == {}
    s = sc.compute({}, plan_racks(BASE), ["r1-tor", "r2-tor"], ["h1", "h3"], {"r1": "r1-tor", "r2": "r2-tor"})
    assert s["deploy"] == ["h1", "h3"] and s["hosts"]["added"] == ["h1", "h3"]


def test_bad_input_names_field_value_and_fix():
    with pytest.raises(sc.ScopeError) as info:
        sc.check_mode_value("some")
    assert "rollout_scope='some'" in str(info.value) and "'changed'" in str(info.value)
    with pytest.raises(sc.ScopeError) as info:
        sc.compute({}, {}, ["x-tor"], [], {"r1": "r1-tor"})
    assert "x-tor" in str(info.value) and "r1-tor" in str(info.value)


def run_module(capsys, **args):
    args["_ansible_check_mode"] = False
    with patch_module_args(args), pytest.raises(SystemExit):
        rollout_scope.main()
    return json.loads(capsys.readouterr().out)


def test_module_compares_the_plan_on_disk_with_the_new_topology(tmp_path, capsys):
    dest = str(tmp_path / "intended")
    run_plan(write(tmp_path, BASE), dest, per_fabric=True)
    before = sorted(os.listdir(os.path.join(dest, "t", "plan", "racks")))
    res = run_module(capsys, plan_dir=os.path.join(dest, "t", "plan"), topology=write(tmp_path, grown(), "new.yml"),
                     rendered_written=[os.path.join(dest, "configs", "r1-tor.cfg"),
                                       os.path.join(dest, "configs", "r3-tor.cfg"),
                                       os.path.join(dest, "structured_configs", "r2-tor.yml")],
                     hosts=["h1", "h2", "h3", "h5"], rack_tors=RACK_TORS)
    assert not res.get("failed"), res
    s = res["scope"]
    assert s["hosts"]["added"] == ["h2", "h5"] and s["hosts"]["unchanged"] == ["h1", "h3"], s["hosts"]
    assert s["tors"]["changed"] == ["r1-tor", "r3-tor"] and s["deploy"] == ["h2", "h5"]
    assert sorted(os.listdir(os.path.join(dest, "t", "plan", "racks"))) == before, "read-only"
    # the same topology: nothing (the YAML round trip makes on-disk and computed data compare equal)
    res = run_module(capsys, plan_dir=os.path.join(dest, "t", "plan"), topology=write(tmp_path, BASE, "same.yml"),
                     hosts=["h1", "h3"], rack_tors={"r1": "r1-tor", "r2": "r2-tor"})
    assert res["scope"]["nothing"] and res["scope"]["hosts"]["unchanged"] == ["h1", "h3"]


HOSTS = [{"name": "h1", "rack": "r1"}, {"name": "h2", "rack": "r1"}, {"name": "h3", "rack": "r2"},
         {"name": "h5", "rack": "r3"}]


def test_journal_freezes_waves_of_the_scope_only_and_resume_keeps_the_recorded_scope():
    s = sc.compute(plan_racks(BASE), plan_racks(grown()), ["r1-tor", "r3-tor"], [h["name"] for h in HOSTS], RACK_TORS)
    rec = jr.replay([])
    rec["id"] = "rid"
    plan, ev, _notes = jr.open_plan(rec, "a" * 64, hosts=HOSTS, waves_spec=["100%"], rack_tors=RACK_TORS, scope=s)
    assert plan["order"] == ["h2", "h5"] and [w["name"] for w in plan["waves"]] == ["canary", "fleet-100pct"]
    assert plan["waves"][0]["hosts"] == ["h2"]            # canary: the first rack of the scope
    assert plan["tors"] == ["r1-tor", "r3-tor"]           # not r2-tor (its rendered config did not change)
    assert ev["scope"]["deploy"] == ["h2", "h5"] and ev["scope"]["tors"] == ["r1-tor", "r3-tor"]
    doc = jr.new_job("rid", "j1", now=1.0)
    jr.append(doc, "open", dict(ev, meta={}), now=1.0)
    rec = jr.replay(jr.merge([doc]))
    assert rec["scope"]["tors"] == ["r1-tor", "r3-tor"]
    # resume: the plan on disk is the new one now, a re-computed scope is empty - the recorded one wins
    empty = sc.compute(plan_racks(grown()), plan_racks(grown()), [], [h["name"] for h in HOSTS], RACK_TORS)
    plan, ev, _notes = jr.open_plan(rec, "a" * 64, hosts=HOSTS, rack_tors=RACK_TORS, scope=empty)
    assert plan["order"] == ["h2", "h5"] and plan["tors"] == ["r1-tor", "r3-tor"] and "scope" not in ev


def test_journal_with_an_empty_scope_has_no_wave_and_no_tor():
    s = sc.compute(plan_racks(BASE), plan_racks(BASE), [], ["h1", "h3"], RACK_TORS)
    rec = jr.replay([])
    rec["id"] = "rid"
    plan, ev, _notes = jr.open_plan(rec, "a" * 64, hosts=HOSTS[:1] + HOSTS[2:3], rack_tors=RACK_TORS, scope=s)
    assert plan["waves"] == [] and plan["order"] == [] and plan["tors"] == [] and ev["waves"] == []
    with pytest.raises(jr.JournalError) as info:
        jr.open_plan(rec, "a" * 64, hosts=HOSTS, rack_tors=RACK_TORS, scope=s, start_wave="fleet-100pct")
    assert "no host to deploy" in str(info.value)
    # without a scope nothing changes: every host, the ToRs of every rack of the waves
    plan, _ev, _notes = jr.open_plan(rec, "a" * 64, hosts=HOSTS, waves_spec=["100%"], rack_tors=RACK_TORS)
    assert plan["order"] == ["h1", "h2", "h3", "h5"] and plan["tors"] == ["r1-tor", "r2-tor", "r3-tor"]


def test_report_lists_the_scope_and_every_untouched_host_and_tor(tmp_path):
    from ansible_collections.netscale.multinic.plugins.module_utils.report import model
    s = sc.compute(plan_racks(BASE), plan_racks(grown()), ["r1-tor", "r3-tor"], [h["name"] for h in HOSTS], RACK_TORS)
    r = model.load(str(tmp_path))
    model.apply_event(r, "preflight", {"plan": "changes: 2 added, 0 removed", "scope": s}, now=1.0)
    model.apply_event(r, "tor", {"name": "r2-tor", "rack": "r2", "changed": False,
                                 "status": "unchanged (out of scope, not touched)"}, now=2.0)
    md = model.render_markdown(r)
    assert "## Change scope (rollout_scope=changed)" in md
    assert "| hosts | h2, h5 | none | none | h1, h3 |" in md
    assert "| ToRs (rendered config) | | r1-tor, r3-tor | none | r2-tor |" in md
    assert "| r2-tor | r2 | False (unchanged (out of scope, not touched)) |" in md
    assert "Deployed through the canary and waves with every gate: h2, h5" in md
    r = model.load(str(tmp_path / "none"))
    nothing = sc.compute(plan_racks(BASE), plan_racks(BASE), [], ["h1", "h3"], RACK_TORS)
    model.apply_event(r, "preflight", {"scope": nothing}, now=1.0)
    md = model.render_markdown(r)
    assert "Nothing to deploy: no host was added or changed; no wave ran and no gate was evaluated." in md
    assert "gates passed" in md and "| canary" not in md      # no wave row: no gate reported as passed
    # the default mode (scope all) renders no scope section
    r = model.load(str(tmp_path / "all"))
    model.apply_event(r, "preflight", {"scope": {"mode": "all"}}, now=1.0)
    assert "Change scope" not in model.render_markdown(r)
