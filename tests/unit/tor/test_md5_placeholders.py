# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendered configs on disk carry <md5:NAME> placeholders, never keys; filling them back gives the keyed
config exactly; a placeholder without a key is reported, not guessed."""

from __future__ import annotations

from hypothesis import given, strategies as st

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.frr.key_placeholders import (
    fill_placeholders, placeholder_names, with_placeholders)
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan

import os

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def test_lab_configs_round_trip_without_a_key_on_disk():
    plan = load_plan(os.path.join(REPO, "inventories", "lab", "fabric.yml"))
    keys = {"lab-r1-h1": "k1-Ab", "lab-r1-h2": "k2-Cd", "lab-r2-h1": "k3-Ef", "lab-r2-h2": "k4-Gh",
            "lab-spine1": "ks-Ij"}
    configs = tor_policy.build_fabric_configs(plan, {"md5": "required", "uplink_md5": "required"}, keys)
    seen = set()
    for name, cfg in configs.items():
        on_disk, names = with_placeholders(cfg["text"], keys)
        assert not any(k in on_disk for k in keys.values()), name
        assert names == placeholder_names(on_disk)
        seen.update(names)
        filled, missing = fill_placeholders(on_disk, dict((n, keys[n]) for n in names))
        assert missing == [] and filled == cfg["text"], name
        if names:
            _text, missing = fill_placeholders(on_disk, {})
            assert missing == names
    assert seen == set(keys)


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
                       st.from_regex(r"[A-Za-z0-9]{8,20}", fullmatch=True), min_size=1, max_size=5))
def test_any_keys_round_trip(keys):
    text = "".join(" neighbor P%d password %s\n" % (i, k) for i, k in enumerate(keys.values()))
    on_disk, names = with_placeholders(text, keys)
    assert not any(("password %s\n" % k) in on_disk for k in keys.values())
    filled, missing = fill_placeholders(on_disk, keys)
    assert missing == [] and filled == text


def test_saved_frr_configs_are_made_owner_only(tmp_path):
    from ansible_collections.netscale.multinic.plugins.module_utils.frr.apply import tighten_config_modes

    for name, mode in (("frr.conf", 0o640), ("frr.conf.sav", 0o644), ("daemons", 0o640)):
        p = tmp_path / name
        p.write_text("x")
        p.chmod(mode)
    assert sorted(os.path.basename(p) for p in tighten_config_modes(str(tmp_path))) == ["frr.conf", "frr.conf.sav"]
    assert oct((tmp_path / "frr.conf").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "frr.conf.sav").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "daemons").stat().st_mode & 0o777) == "0o640"   # holds no key: left alone
    assert tighten_config_modes(str(tmp_path)) == []                       # second run: nothing to do
