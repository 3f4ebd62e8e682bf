# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Live harness for the health gates (prefix ``mnr``): the VipInjector agent's harness (real FRR ToR
with the tor_policy-rendered config, real ExaBGP per slot with the real helper), with every kernel
object, temp dir and process named with ``mnr`` instead of ``mnv``.

Only construction and naming differ from ``labkit/mnv_harness.py``; start/stop and
cleanup (``close()``: processes by recorded PID, namespaces, temp dir) are inherited.
"""

from __future__ import annotations

import os
import pwd
import tempfile

from labkit.mnv_harness import Harness, lab_host, sh


class MnrHarness(Harness):
    """Same topology as the VipInjector harness: a ToR namespace, one namespace per task slot."""

    def __init__(self, host="lab-r1-h2", slots=(1,), ttl_mode="gtsm", md5=None, tag=None):
        # Deliberately not calling Harness.__init__: it creates an mnv-* temp dir.
        self.host = lab_host(host)
        self.slots = list(slots)
        self.ttl_mode = ttl_mode
        self.md5 = md5
        self.tag = tag or ("%x" % (os.getpid() & 0xFFFF))
        self.tor = "mnr-%s-tor" % self.tag
        self.ns = dict((s, "mnr-%s-s%d" % (self.tag, s)) for s in self.slots)
        self.tmp = tempfile.mkdtemp(prefix="mnr-%s-" % self.tag)
        os.chmod(self.tmp, 0o755)
        self.frr_dir = os.path.join(self.tmp, "frr")
        self.pids = []
        self.procs = {}
        self.models = {}
        self.nobody = pwd.getpwnam("nobody")
        self.n = int(self.host["nic_count"])

    def tor_port(self, slot, k):
        return "mnr%s%dk%d" % (self.tag[-4:], slot, k)

    def build(self):
        sh(["ip", "netns", "add", self.tor])
        for ns in self.ns.values():
            sh(["ip", "netns", "add", ns])
        for ns in [self.tor] + list(self.ns.values()):
            for k, v in (("net.ipv6.conf.all.keep_addr_on_down", 1),
                         ("net.ipv6.conf.default.keep_addr_on_down", 1),
                         ("net.ipv4.fib_multipath_hash_policy", 1),
                         ("net.ipv6.fib_multipath_hash_policy", 1)):
                sh(["ip", "netns", "exec", ns, "sysctl", "-qw", "%s=%s" % (k, v)])
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        sh(["ip", "netns", "exec", self.tor, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        sh(["ip", "netns", "exec", self.tor, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"])
        for nic in self.host["nics"]:
            k = nic["index"]
            t = "t%d" % k
            sh(["ip", "-n", self.tor, "link", "add", t, "type", "bridge"])
            sh(["ip", "-n", self.tor, "addr", "add", "%s/%s" % (nic["gateway"]["ipv4"],
                                                                nic["subnet"]["ipv4"].split("/")[1]), "dev", t])
            sh(["ip", "-n", self.tor, "addr", "add", "%s/64" % nic["gateway"]["ipv6"], "dev", t, "nodad"])
            sh(["ip", "-n", self.tor, "link", "set", t, "up"])
        for s, ns in self.ns.items():
            sd = [x for x in self.host["slots"] if x["slot"] == s][0]
            for nic in self.host["nics"]:
                k = nic["index"]
                a = [x for x in sd["nics"] if x["index"] == k][0]["address"]
                tn, cn = self.tor_port(s, k), "eth%d" % k
                sh(["ip", "link", "add", tn, "type", "veth", "peer", "name", cn, "netns", ns])
                sh(["ip", "link", "set", tn, "netns", self.tor])
                sh(["ip", "-n", self.tor, "link", "set", tn, "master", "t%d" % k, "up"])
                plen4 = nic["subnet"]["ipv4"].split("/")[1]
                sh(["ip", "-n", ns, "addr", "add", "%s/%s" % (a["ipv4"], plen4), "dev", cn])
                sh(["ip", "-n", ns, "addr", "add", "%s/64" % a["ipv6"], "dev", cn, "nodad"])
                sh(["ip", "-n", ns, "link", "set", cn, "up"])
            sh(["ip", "-n", ns, "addr", "add", "%s/32" % sd["task_ip"]["ipv4"], "dev", "lo"])
            sh(["ip", "-n", ns, "addr", "add", "%s/128" % sd["task_ip"]["ipv6"], "dev", "lo", "nodad"])

    def vtysh_argv(self):
        return ["vtysh", "--vty_socket", self.frr_dir]

    def runtime_dir(self):
        return os.path.join(self.tmp, "run")
