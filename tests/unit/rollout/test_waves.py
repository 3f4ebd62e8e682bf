# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.rollout.waves import WaveError, plan_waves, racks_to_restore

LAB = [{"name": "lab-r1-h1", "rack": "lab-r1"}, {"name": "lab-r1-h2", "rack": "lab-r1"},
       {"name": "lab-r2-h1", "rack": "lab-r2"}, {"name": "lab-r2-h2", "rack": "lab-r2"}]
BIG = [{"name": "h%03d" % i, "rack": "r%02d" % (i // 10)} for i in range(200)]


def test_default_canary_is_first_rack():
    p = plan_waves(LAB)
    assert [w["name"] for w in p["waves"]] == ["canary", "fleet-5pct", "fleet-25pct"]
    assert p["waves"][0]["hosts"] == ["lab-r1-h1", "lab-r1-h2"]
    assert p["serial"] == [2, 1, 1] and p["order"] == [h["name"] for h in LAB]


def test_big_fleet_cumulative_waves():
    p = plan_waves(BIG, waves=["5%", "25%", "100%"])
    assert p["serial"] == [10, 1, 39, 150]
    assert sum(p["serial"]) == 200 and len(set(p["order"])) == 200


def test_canary_by_hosts_percent_racks():
    assert plan_waves(LAB, {"hosts": ["lab-r2-h2"]})["waves"][0]["hosts"] == ["lab-r2-h2"]
    assert plan_waves(BIG, {"percent": "1%"})["waves"][0]["size"] == 2
    p = plan_waves(LAB, {"racks": ["lab-r2"]}, waves=["100%"])
    assert p["waves"][0]["hosts"] == ["lab-r2-h1", "lab-r2-h2"] and p["waves"][1]["racks"] == ["lab-r1"]


def test_resume_from_named_wave():
    p = plan_waves(LAB, start_wave="fleet-25pct")
    assert [w["name"] for w in p["skipped"]] == ["canary", "fleet-5pct"]
    assert p["order"] == ["lab-r2-h2"] and p["serial"] == [1]


@pytest.mark.parametrize("kw,msg", [
    ({"canary": {"hosts": ["nope"]}}, "rollout_canary.hosts: nope not among"),
    ({"canary": {"racks": ["r9"]}}, "rollout_canary.racks: r9 not among"),
    ({"canary": {"rack": ["lab-r1"]}}, "unknown key"),
    ({"waves": ["150%"]}, r"rollout_waves\[0\]='150%'"),
    ({"waves": ["abc"]}, r"rollout_waves\[0\]='abc'"),
    ({"start_wave": "fleet-50"}, "no such wave; waves of this rollout: canary, fleet-5pct, fleet-25pct"),
])
def test_bad_specs_name_field(kw, msg):
    with pytest.raises(WaveError, match=msg):
        plan_waves(LAB, **kw)


def test_racks_to_restore():
    p = plan_waves(LAB)
    assert racks_to_restore(p["waves"], "canary", []) == ["lab-r1", "lab-r2"]
    # fleet-5pct (lab-r2-h1) failed after the canary passed: rack 1 keeps the new policy
    assert racks_to_restore(p["waves"], "fleet-5pct", ["canary"]) == ["lab-r2"]
    assert racks_to_restore(p["waves"], "fleet-25pct", ["canary", "fleet-5pct"]) == []


def test_end_wave_and_fleet_alias():
    p = plan_waves(LAB, end_wave="canary")
    assert [w["name"] for w in p["waves"]] == ["canary"] and [w["name"] for w in p["deferred"]] == ["fleet-5pct", "fleet-25pct"]
    p = plan_waves(LAB, start_wave="fleet")
    assert [w["name"] for w in p["skipped"]] == ["canary"] and p["order"] == ["lab-r2-h1", "lab-r2-h2"]
    with pytest.raises(WaveError, match="no fleet wave"):
        plan_waves(LAB[:2], start_wave="fleet")
