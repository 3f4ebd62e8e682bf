# -*- coding: utf-8 -*-
"""Snapshots of everything the lab could leave behind, restricted to the lab's own prefix
(other agents share this machine): named namespaces, root-namespace links with lab names,
processes in the lab's cgroups, mounts, cgroup dirs, state files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import STATE_ROOT  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import cgroup2_root  # noqa: E402

TOPOLOGY = os.path.join(REPO, "inventories", "lab", "fabric.yml")
VENV_BIN = os.path.join(REPO, ".venv", "bin")


def env():
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + ":" + e.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    e["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    e.pop("NETSCALE_LAB_FAIL_AT", None)
    return e


def playbook(*args, check=True, timeout=600):
    p = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook")] + list(args), cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=timeout, check=False)
    if check and p.returncode != 0:
        detail = (" ".join(args), p.returncode, p.stdout[-4000:], p.stderr[-2000:])
        raise AssertionError("ansible-playbook %s failed rc=%d\n%s\n%s" % detail)
    return p


def recap(stdout, host):
    for line in stdout.splitlines():
        if line.startswith(host + " ") and "ok=" in line:
            return dict(kv.split("=") for kv in line.split(":", 1)[1].split())
    raise AssertionError("no recap for %s in:\n%s" % (host, stdout[-2000:]))


def lab_names():
    import yaml
    with open(TOPOLOGY) as f:
        topo = yaml.safe_load(f)
    return topo["name"], topo


def snapshot():
    fabric, dummy = lab_names()
    netns = sorted(x.split()[0] for x in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
                   .stdout.splitlines() if x.startswith("mnl-"))
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=False).stdout)
    lab_link_names = ("host", "up-s", "down-r", "storage")
    root_links = sorted(li["ifname"] for li in links if li["ifname"].startswith(lab_link_names))
    procs = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                cg = f.read()
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cl = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open("/proc/%s/stat" % pid) as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except OSError:
            continue
        if zombie:  # already dead; only its parent's wait() is pending (init reaps it)
            continue
        if "/mnl/%s" % fabric in cg or "mnl-box" in cl or "mnl-host" in cl:
            procs.append("%s %s" % (pid, cl[:80]))
    with open("/proc/self/mountinfo") as f:
        mounts = sorted(line.split(" - ")[0].split(None, 4)[4].split()[0] for line in f
                        if "netscale-multinic/lab" in line or "/run/netns/mnl-" in line)
    cgdir = os.path.join(cgroup2_root(), "mnl")
    cgroups = sorted(root for root, _d, _f in os.walk(cgdir)) if os.path.isdir(cgdir) else []
    files = os.path.exists(os.path.join(STATE_ROOT, fabric))
    return {"netns": netns, "root_links": root_links, "processes": procs, "mounts": mounts,
            "cgroups": cgroups, "state_dir": files}


def lab_state():
    fabric, dummy = lab_names()
    with open(os.path.join(STATE_ROOT, fabric, "state.json")) as f:
        return json.load(f)


def nsenter(pid, *argv, check=True):
    p = subprocess.run(["nsenter", "-t", str(pid), "-n", "-m", "-u", "--"] + list(argv),
                       capture_output=True, text=True, timeout=60, check=False)
    if check and p.returncode != 0:
        raise AssertionError("%s in %s failed: %s" % (" ".join(argv), pid, p.stderr))
    return p
