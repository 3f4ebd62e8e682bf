# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Namespaces, veth pairs and addresses: the one way the lab makes them.

The engine's links step (``wiring``) and the test and bench harnesses (``labkit``, ``tests/e2e/tor``)
call these. veth pairs are created directly inside both namespaces (never visible in the machine's
own); IPv6 addresses go in without duplicate address detection (a lab link has no duplicate, and DAD
would hold the address tentative for a second); ``Namespaces`` remembers what a harness created and
removes it in reverse order, also after a half-finished build.
"""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, run_command
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_exists

# every harness namespace: addresses stay when a link goes down (NIC failure tests), no DAD wait
KEEP_ADDR_ON_DOWN = (("net.ipv6.conf.all.keep_addr_on_down", 1), ("net.ipv6.conf.default.keep_addr_on_down", 1))
NO_DAD = (("net.ipv6.conf.all.accept_dad", 0), ("net.ipv6.conf.default.accept_dad", 0))
FORWARDING = (("net.ipv4.ip_forward", 1), ("net.ipv6.conf.all.forwarding", 1))
L4_MULTIPATH_HASH = (("net.ipv4.fib_multipath_hash_policy", 1), ("net.ipv6.fib_multipath_hash_policy", 1))


def sysctl(name, pairs, error=LabError):
    """Set sysctls inside namespace ``name``; pairs: a dict or (key, value) pairs."""
    items = list(pairs.items() if isinstance(pairs, dict) else pairs)
    if items:
        run_command(["nsenter", "--net=/run/netns/%s" % name, "sysctl", "-q", "-w"]
                    + ["%s=%s" % (k, v) for k, v in items], error=error)


def veth_pair(ns_a, dev_a, ns_b, dev_b, up=False, error=LabError):
    """A veth pair ns_a:dev_a <-> ns_b:dev_b, created inside both namespaces at once."""
    run_command(["ip", "link", "add", dev_a, "netns", ns_a, "type", "veth", "peer", "name", dev_b, "netns", ns_b],
                error=error)
    if up:
        link_up(ns_a, dev_a, error)
        link_up(ns_b, dev_b, error)


def link_up(ns, dev, error=LabError):
    run_command(["ip", "-n", ns, "link", "set", dev, "up"], error=error)


def address(ns, dev, cidr, error=LabError):
    """Add an address (IPv6 without DAD)."""
    argv = ["ip", "-n", ns, "addr", "add", cidr, "dev", dev]
    run_command(argv + (["nodad"] if ":" in cidr else []), error=error)


class Namespaces(object):
    """The namespaces one harness owns: made with lo up and the asked sysctls, removed in reverse."""

    def __init__(self, error=LabError):
        self.error = error
        self.names = []

    def add(self, name, sysctls=()):
        run_command(["ip", "netns", "add", name], error=self.error)
        self.names.append(name)
        link_up(name, "lo", self.error)
        sysctl(name, sysctls, self.error)
        return name

    def veth(self, ns_a, dev_a, ns_b, dev_b, up=True):
        veth_pair(ns_a, dev_a, ns_b, dev_b, up=up, error=self.error)

    def address(self, ns, dev, cidr):
        address(ns, dev, cidr, self.error)

    def sysctl(self, ns, pairs):
        sysctl(ns, pairs, self.error)

    def remove(self, also=()):
        """Delete ``also`` (namespaces made by code under test, e.g. slot namespaces) and then ours, newest
        first; a namespace already gone is skipped."""
        for name in list(also) + list(reversed(self.names)):
            if netns_exists(name):
                run_command(["ip", "netns", "del", name], check=False)
        self.names = []
