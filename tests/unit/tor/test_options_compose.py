# -*- coding: utf-8 -*-
"""The ToR policy options the tor_bgp role and the rollout's change-scope check render with
(tor_policy.options.compose, through tor_render): the fabric's spine networks and multihop-BFD hosts under
the user's options, merged key by key as the role's Jinja did (combine, recursive)."""
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy import options as O


def test_nothing_given_is_the_users_options():
    assert O.compose({}) == {}
    assert O.compose({"md5": "required"}) == {"md5": "required"}
    assert O.compose(None, spine_networks={}, bfd_multihop_hosts=None) == {}


def test_bfd_enabled_keeps_the_multihop_hosts():
    got = O.compose({"bfd": {"enabled": True, "interval_ms": 50}}, bfd_multihop_hosts=["h1"])
    assert got == {"bfd": {"enabled": True, "interval_ms": 50, "multihop_hosts": ["h1"]}}


def test_the_users_multihop_hosts_win():
    assert O.compose({"bfd": {"multihop_hosts": ["h9"]}}, bfd_multihop_hosts=["h1"]) == {
        "bfd": {"multihop_hosts": ["h9"]}}


def test_spine_networks_merge_per_family():
    got = O.compose({"spine_networks": {"ipv4": ["198.19.5.0/24"]}},
                    spine_networks={"ipv4": ["198.19.9.0/24"], "ipv6": ["fd00:5::/64"]})
    assert got == {"spine_networks": {"ipv4": ["198.19.5.0/24"], "ipv6": ["fd00:5::/64"]}}


def test_inputs_are_not_changed():
    user = {"bfd": {"enabled": True}}
    fabric = {"ipv4": ["198.19.9.0/24"]}
    O.compose(user, spine_networks=fabric, bfd_multihop_hosts=("h1",))
    assert user == {"bfd": {"enabled": True}} and fabric == {"ipv4": ["198.19.9.0/24"]}


def test_multihop_hosts_are_those_on_the_kernel_datapath():
    assert O.multihop_hosts([("h1", False), ("h2", None), ("h3", True), ("h4", False)]) == ["h1", "h4"]
    assert O.multihop_hosts([]) == []
