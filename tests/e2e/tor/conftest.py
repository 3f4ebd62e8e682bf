# -*- coding: utf-8 -*-
"""Fixtures for the live ToR policy tests: one harness per module (FRR spine + 2 ToRs, ExaBGP per slot)."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from tor_harness import TorLab, wait_for  # noqa: E402

from ansible_collections.netscale.multinic.plugins.module_utils.frr import state as frr_state  # noqa: E402

MD5 = {"lab-r1-h1": "mnt-lab-key-h1", "lab-r1-h2": "mnt-lab-key-h2"}


def _require_live():
    missing = [p for p in ("/usr/lib/frr/bgpd", "/usr/lib/frr/frr-reload.py", "/usr/bin/vtysh") if not os.path.exists(p)]
    if os.geteuid() != 0:
        pytest.fail("live ToR tests need root (network namespaces, FRR)")
    if missing or not shutil.which("ip"):
        pytest.fail("live ToR tests need FRR and iproute2 (run scripts/setup.sh): missing %s" % missing)


@pytest.fixture(scope="module")
def torlab():
    _require_live()
    lab = TorLab(md5_keys=MD5)
    try:
        lab.setup()
        for host, key in MD5.items():
            for slot in (1, 2):
                lab.start_slot(host, slot, md5_key=key)
        ok = wait_for(lambda: _all_established(lab), timeout=30)
        assert ok, "host sessions did not come up: %s" % lab.vtysh("lab-r1-tor", "show bgp summary").stdout
        yield lab
    finally:
        lab.teardown()


def _all_established(lab):
    """Every host session and uplink Established, and the other rack's aggregate learned."""
    data = lab.vjson("lab-r1-tor", "show bgp neighbors json")
    hosts = [a for a, n in data.items() if str(n.get("peerGroup", "")).startswith("HOST-")]
    if len(hosts) != 12 or not all(n.get("bgpState") == "Established" for n in data.values()):
        return False
    r2 = lab.plan.rack_data(next(r for r in lab.topo.racks if r.name == "lab-r2"))
    v4 = lab.vjson("lab-r1-tor", "show ip route %s json" % r2["prefix"]["ipv4"])
    v6 = lab.vjson("lab-r1-tor", "show ipv6 route %s json" % r2["prefix"]["ipv6"])
    if not (v4 and v6):
        return False
    # Every task IP of the rack at full ECMP width (one next hop per NIC of its host).
    r = lab.routers["lab-r1-tor"]
    f = frr_state.collect(lab.run_in("lab-r1-tor"), r["target"])
    return all(frr_state.ecmp_width(f, s["task_ip"][fam] + ("/32" if fam == "ipv4" else "/128")) == h["nic_count"]
               for h in lab.rack_data["hosts"] for s in h["slots"] for fam in ("ipv4", "ipv6"))
