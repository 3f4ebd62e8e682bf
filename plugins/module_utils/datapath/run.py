# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Command runner and kernel-state readers (iproute2 JSON, /proc/sys) for the datapath core.

iproute2, tc, nsenter and sysctl exist on every Linux host; pyroute2 is not required on hosts.
"""

from __future__ import annotations

import json
import os
import subprocess

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError

NETNS_DIR = "/run/netns"


class CommandError(MultinicError):
    pass


class Runner(object):
    """Runs commands; records every command that changed something (for logs and tests)."""

    def __init__(self):
        self.log = []

    def run(self, argv, check=True, stdin=None, record=True):
        if record:
            self.log.append(" ".join(argv))
        p = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, check=False)
        if check and p.returncode != 0:
            raise CommandError("command failed (rc=%d): %s: %s" % (p.returncode, " ".join(argv),
                                                                   (p.stderr or p.stdout).strip()))
        return p

    def read(self, argv, check=True):
        return self.run(argv, check=check, record=False)

    def ip(self, args, netns=None, check=True):
        argv = ["ip"] + (["-n", netns] if netns else []) + list(args)
        return self.run(argv, check=check)

    def ip_json(self, args, netns=None):
        argv = ["ip", "-j"] + (["-n", netns] if netns else []) + list(args)
        p = self.read(argv, check=False)
        if p.returncode != 0 or not p.stdout.strip():
            return []
        return json.loads(p.stdout)


def netns_exists(name):
    return os.path.exists(os.path.join(NETNS_DIR, name))


def sysctl_path(key):
    return "/proc/sys/" + key.replace(".", "/")


def sysctl_get(key):
    try:
        with open(sysctl_path(key)) as f:
            return f.read().strip()
    except (IOError, OSError):
        return None


def sysctl_set(key, value):
    with open(sysctl_path(key), "w") as f:
        f.write(str(value))


def netns_sysctl_get(runner, netns, keys):
    p = runner.read(["nsenter", "--net=%s/%s" % (NETNS_DIR, netns), "sysctl", "-e", "-n"] + list(keys),
                    check=False)
    vals = p.stdout.split("\n")
    return dict((k, (vals[i].strip() if i < len(vals) else None)) for i, k in enumerate(keys))


def netns_sysctl_set(runner, netns, pairs):
    runner.run(["nsenter", "--net=%s/%s" % (NETNS_DIR, netns), "sysctl", "-q", "-w"] +
               ["%s=%s" % (k, v) for k, v in pairs])


def norm_dst(dst, family):
    if dst in ("default", "0.0.0.0/0", "::/0"):
        return "default"
    if "/" not in dst:
        return dst + ("/32" if family == 4 else "/128")
    return dst


def norm_route(r, family):
    """Canonical, comparable form of one `ip -j route` entry."""
    if "nexthops" in r:
        nhs = [(n.get("gateway"), n.get("dev"), "onlink" in (n.get("flags") or []))
               for n in r["nexthops"]]
    else:
        nhs = [(r.get("gateway"), r.get("dev"), "onlink" in (r.get("flags") or []))]
    metric = r.get("metric", 0 if family == 4 else 1024)
    return {"dst": norm_dst(r.get("dst", "default"), family), "type": r.get("type", "unicast"),
            "nexthops": sorted(nhs, key=lambda x: (x[1] or "", x[0] or "")),
            "src": r.get("prefsrc"), "metric": metric}
