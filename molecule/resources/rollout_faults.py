# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a rollout and inject faults into the lab at points its journal records (Molecule fault scenarios).

  rollout_faults.py --journal <journal dir of the rollout> --log <file> --lab-state <lab state.json> \\
      --faults '<JSON list>' -- ansible-playbook ...

Each fault: {"when": [...], "do": ..., ...}; ``when`` is ["host", <host>, <state>] or
["wave_host", <wave>, <index>, <state>] (the index-th host of that wave in the journal's plan). Actions:

- ``write``: write ``text`` to ``path`` (e.g. the nsenter PID file of an extra inventory: the host's
  connection fails from then on); ``restore`` is written back at the end;
- ``flap``: ``count`` times: NIC ``nic`` of lab host ``node`` down, ``period``/2 s, up, ``period``/2 s
  (``ip link`` in the node's network namespace); reports the NIC's carrier_changes before and after;
- ``sigstop``: SIGSTOP to the main PID of systemd unit ``unit`` on lab host ``node`` (found with systemctl
  inside the node); reports the process state after; SIGCONT at the end, also on failure.

Prints one JSON line: the playbook's rc and what each fault did. Processes are addressed by PID only.
"""

import argparse
import glob
import json
import subprocess
import sys
import time


def journal_events(path):
    for name in sorted(glob.glob(path + "/*.json")):
        try:
            with open(name) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue   # being replaced: the next poll reads it
        yield from doc.get("events") or []


def resolve(when, events):
    """The (host, state) a trigger waits for, or None while the journal does not name the host yet."""
    if when[0] == "host":
        return when[1], when[2]
    for ev in events:
        if ev.get("type") == "open":
            for w in ev.get("waves") or []:
                if w.get("name") == when[1] and len(w.get("hosts") or []) > int(when[2]):
                    return w["hosts"][int(when[2])], when[3]
    return None


def fired(when, events):
    target = resolve(when, events)
    if not target:
        return None
    host, state = target
    for ev in events:
        if ev.get("type") == "host" and host in (ev.get("hosts") or [ev.get("name")]) and ev.get("state") == state:
            return host
    return None


def in_node(pid, argv):
    return subprocess.run(["nsenter", "--target", str(pid), "--all", "--"] + argv, capture_output=True,
                          text=True, check=False)


def carrier_changes(netns, nic):
    p = subprocess.run(["ip", "netns", "exec", netns, "cat", "/sys/class/net/%s/carrier_changes" % nic],
                       capture_output=True, text=True, check=False)
    return int(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip().isdigit() else None


def do_fault(fault, host, lab, cleanup):
    out = {"do": fault["do"], "host": host, "t": time.time()}
    if fault["do"] == "write":
        with open(fault["path"], "w") as f:
            f.write(fault["text"])
        if "restore" in fault:
            cleanup.append(("write", fault["path"], fault["restore"]))
    elif fault["do"] == "flap":
        node = lab["nodes"][fault.get("node", host)]
        netns, nic = node["netns"], fault["nic"]
        half = float(fault.get("period", 0.5)) / 2
        out["carrier_changes_before"] = carrier_changes(netns, nic)
        started = time.monotonic()
        for dummy in range(int(fault.get("count", 10))):
            subprocess.run(["ip", "-n", netns, "link", "set", nic, "down"], check=True)
            time.sleep(half)
            subprocess.run(["ip", "-n", netns, "link", "set", nic, "up"], check=True)
            time.sleep(half)
        out["storm_seconds"] = round(time.monotonic() - started, 2)
        out["carrier_changes_after"] = carrier_changes(netns, nic)
        out["flaps"] = int(fault.get("count", 10))
    elif fault["do"] == "sigstop":
        node_pid = lab["nodes"][fault.get("node", host)]["pid"]
        p = in_node(node_pid, ["systemctl", "show", "-p", "MainPID", "--value", fault["unit"]])
        main = int(p.stdout.strip() or 0)
        out["pid"] = main
        if main > 1:
            in_node(node_pid, ["kill", "-STOP", str(main)])
            cleanup.append(("sigcont", node_pid, main))
            st = in_node(node_pid, ["cat", "/proc/%d/status" % main]).stdout
            out["state"] = next((line.split()[1] for line in st.splitlines() if line.startswith("State:")), "?")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--journal", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lab-state", required=True)
    ap.add_argument("--faults", required=True)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    faults = json.loads(a.faults)
    with open(a.lab_state) as f:
        lab = json.load(f)
    done, cleanup = [], []
    with open(a.log, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        pending = list(faults)
        while proc.poll() is None and pending:
            events = list(journal_events(a.journal))
            for fault in list(pending):
                host = fired(fault["when"], events)
                if host:
                    pending.remove(fault)
                    done.append(do_fault(fault, host, lab, cleanup))
            time.sleep(0.2)
        rc = proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
        for item in cleanup:
            if item[0] == "write":
                with open(item[1], "w") as f:
                    f.write(item[2])
            elif item[0] == "sigcont":
                in_node(item[1], ["kill", "-CONT", str(item[2])])
    print(json.dumps({"rc": rc, "faults": done, "not_fired": [f["when"] for f in pending]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
