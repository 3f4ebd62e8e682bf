#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# Apache License 2.0 (see LICENSE)
"""netscale.multinic NIC watcher (installed by the host_datapath role, run by systemd).

A NIC flap removes state the datapath needs: admin-down deletes the NIC's proxy ND/ARP entries and
its per-NIC table routes; a veth going down loses its link-local gateway address. This watcher
follows link events (`ip -o monitor link`, netlink, no extra Python packages) and, whenever a
watched device comes (back) up, re-applies that device's idempotent commands from the runtime
file the role writes (/var/lib/netscale-multinic/runtime.json). SIGHUP re-applies everything.
Failover itself needs no agent: the tc program (or the kernel's linkdown handling) does it.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

LINE = re.compile(r"^(?:Deleted )?\d+: ([^:@ ]+)(?:@\S+)?: <([^>]*)>")


def log(msg):
    sys.stdout.write("%s %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stdout.flush()


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError) as e:
        log("cannot read %s: %s" % (path, e))
        return {"devices": {}}


def reapply(path, devs=None):
    rt = load(path)
    batch = []
    for dev, cmds in sorted(rt.get("devices", {}).items()):
        if devs is not None and dev not in devs:
            continue
        for cmd in cmds:
            if cmd[0] == "sysctl":
                try:
                    with open("/proc/sys/" + cmd[1].replace(".", "/"), "w") as f:
                        f.write(cmd[2])
                except (IOError, OSError) as e:
                    log("sysctl %s: %s" % (cmd[1], e))
            else:
                batch.append(" ".join(cmd))
    if batch:
        p = subprocess.run(["ip", "-force", "-batch", "-"], input="\n".join(batch) + "\n",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        log("re-applied %d commands for %s (rc=%d)%s" % (len(batch), ",".join(devs or ["all"]), p.returncode,
                                                        (": " + p.stderr.strip()[:300]) if p.returncode else ""))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runtime", default="/var/lib/netscale-multinic/runtime.json")
    args = ap.parse_args(argv)
    hup = []
    signal.signal(signal.SIGHUP, lambda *a: hup.append(1))
    mon = subprocess.Popen(["ip", "-o", "monitor", "link"], stdout=subprocess.PIPE, universal_newlines=True,
                           bufsize=1)
    reapply(args.runtime)
    state = {}
    log("watching links (runtime %s, pid %d)" % (args.runtime, os.getpid()))
    for line in mon.stdout:
        if hup:
            del hup[:]
            reapply(args.runtime)
        m = LINE.match(line)
        if not m:
            continue
        dev, flags = m.group(1), m.group(2).split(",")
        now = ("UP" in flags, "LOWER_UP" in flags)
        before = state.get(dev)
        state[dev] = now
        if line.startswith("Deleted"):
            state.pop(dev, None)
            continue
        if now[0] and (before is None or not before[0] or (now[1] and not before[1])):
            watched = load(args.runtime).get("devices", {})
            if dev in watched:
                reapply(args.runtime, [dev])
    return 1


if __name__ == "__main__":
    sys.exit(main())
