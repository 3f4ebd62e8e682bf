# -*- coding: utf-8 -*-
"""The lab's namespace primitives (module_utils/lab/netns.py), which the engine's links step and the
datapath, sidecar and ToR harnesses build with: two namespaces of this test's own, a veth pair created
inside both, addresses without DAD, one ping across (fd00::/8 only), and removal in reverse, also after
a half-finished build. Needs root."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab import netns as NS
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_exists

pytestmark = pytest.mark.e2e


def _ip(ns, *argv):
    return subprocess.run(["ip", "-n", ns] + list(argv), capture_output=True, text=True, check=True).stdout


def test_namespaces_veth_addresses_and_removal_in_reverse():
    if os.geteuid() != 0:
        pytest.fail("needs root (network namespaces)")
    prefix = "mnp-%s" % uuid.uuid4().hex[:4]
    a, b = prefix + "-a", prefix + "-b"
    owned = NS.Namespaces(error=AssertionError)
    try:
        owned.add(a, NS.KEEP_ADDR_ON_DOWN + NS.NO_DAD)
        owned.add(b, NS.KEEP_ADDR_ON_DOWN + NS.NO_DAD)
        owned.veth(a, "pa", b, "pb")
        owned.address(a, "pa", "fd00:77::1/64")
        owned.address(b, "pb", "fd00:77::2/64")
        assert "fd00:77::1/64" in _ip(a, "-6", "addr", "show", "dev", "pa")
        assert "tentative" not in _ip(b, "-6", "addr", "show", "dev", "pb")        # no DAD wait
        assert "state UP" in _ip(a, "link", "show", "lo") or "LOOPBACK,UP" in _ip(a, "link", "show", "lo")
        assert subprocess.run(["nsenter", "--net=/run/netns/" + a, "sysctl", "-n",
                               "net.ipv6.conf.all.keep_addr_on_down"], capture_output=True, text=True,
                              check=True).stdout.strip() == "1"
        # the pair exists only inside the two namespaces
        assert "pa" not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout.split()
        ping = subprocess.run(["ip", "netns", "exec", a, "ping", "-6", "-c", "1", "-W", "2", "fd00:77::2"],
                              capture_output=True, text=True, check=False)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        # a failing step names the command and raises the owner's error type; what was made stays owned
        with pytest.raises(AssertionError, match="ip netns add %s failed rc=" % a):
            owned.add(a)
        with pytest.raises(LabError):
            NS.veth_pair(a, "pa", b, "pb2")                                      # pa exists: the default type
        assert owned.names == [a, b]
    finally:
        owned.remove()
    assert not netns_exists(a) and not netns_exists(b)
    assert owned.names == []
    owned.remove()                                                               # nothing left: a no-op
