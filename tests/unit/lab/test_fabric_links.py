# -*- coding: utf-8 -*-
"""lab/wiring.fabric_links: the one description of a fabric's links (the engine's nodes and the ToR test harness
wire from it): every spine downlink to its ToR's uplink, every GPU host NIC to its ToR port, addresses from the
plan, filtered by ToR and host."""
import os

from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab
from ansible_collections.netscale.multinic.plugins.module_utils.lab.wiring import fabric_links

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def test_links_of_the_lab_fabric(tmp_path):
    spec = open_lab(os.path.join(REPO, "inventories", "lab", "fabric.yml"), state_root=str(tmp_path)).spec
    links = fabric_links(spec.spines, spec.racks)
    uplinks = [ln for ln in links if ln["a"] in set(s["name"] for s in spec.spines)]
    assert len(uplinks) == sum(len(s["downlinks"]) for s in spec.spines) > 0
    assert len(links) - len(uplinks) == sum(len(h["nics"]) for h in spec.hosts)
    rack = spec.racks[0]
    up = rack["tor"]["uplinks"][0]
    first = next(ln for ln in uplinks if ln["b"] == rack["tor"]["name"] and ln["b_dev"] == up["interface"])
    assert first["owner"] == rack["tor"]["name"] and [a[0] for a in first["addresses"]] == ["ipv6", "ipv4"]
    host = rack["hosts"][0]
    nic = host["nics"][0]
    nic_link = next(ln for ln in links if ln["b"] == host["name"] and ln["b_dev"] == nic["name"])
    assert nic_link["a"] == rack["tor"]["name"] and nic_link["a_dev"] == nic["tor_port"]
    assert nic_link["addresses"][0] == ("ipv6", nic["gateway"]["ipv6"], nic["address"]["ipv6"],
                                        nic["subnet"]["ipv6"].split("/")[1])
    # filtered: one ToR's uplinks only; one host's NICs only
    only = fabric_links(spec.spines, spec.racks, hosts=(host["name"],), tors=(rack["tor"]["name"],))
    assert set(ln["owner"] for ln in only) == {rack["tor"]["name"], host["name"]}
    assert len([ln for ln in only if ln["owner"] == host["name"]]) == len(host["nics"])
    assert fabric_links((), spec.racks, hosts=()) == []
