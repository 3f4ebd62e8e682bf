# -*- coding: utf-8 -*-
"""The lab's FRR configs come from the product's ToR policy: spines with the storage prefixes, ToRs
with the uplink part only (no host sessions before the rollout)."""
import os

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _spec(tmp_path):
    return open_lab(os.path.join(REPO, "inventories", "lab", "fabric.yml"), state_root=str(tmp_path)).spec


def test_tor_starts_with_the_uplink_part_of_its_policy(tmp_path):
    spec = _spec(tmp_path)
    rack = spec.racks[0]
    text = spec.tor_config(rack)
    assert text == tor_policy.render(tor_policy.tor_uplinks_config(rack, {"render_interfaces": False}))
    assert "peer-group SPINES-IPV6" in text and "network %s" % rack["prefix"]["ipv6"] in text
    assert "HOST-" not in text and "interface " not in text


def test_first_spine_originates_the_storage_prefixes(tmp_path):
    spec = _spec(tmp_path)
    text = spec.spine_config(0, spec.spines[0])
    assert "  network fd00:5::/64\n" in text and "  network 198.19.5.0/24\n" in text
    full = tor_policy.spine_structured_config(spec.spines[0], {"render_interfaces": False,
                                                               "spine_networks": {"ipv6": ["fd00:5::/64"],
                                                                                  "ipv4": ["198.19.5.0/24"]}})
    assert text == tor_policy.render(full)


def test_given_tor_config_dir_wins(tmp_path):
    (tmp_path / "lab-r1-tor.cfg").write_text("! mine\n")
    spec = open_lab(os.path.join(REPO, "inventories", "lab", "fabric.yml"), state_root=str(tmp_path),
                    tor_config_dir=str(tmp_path)).spec
    assert spec.tor_config(spec.racks[0]) == "! mine\n"
    assert "HOST-" not in spec.tor_config(spec.racks[1])
