# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lab operations: per-NIC link speed (tbf), failure injection and the traffic probe.

Every function takes an open Lab (see common.open_lab) whose state file exists, is idempotent
where that makes sense, and returns a JSON-able dict with ``changed``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

from ansible_collections.netscale.multinic.plugins.module_utils.fairness import jain
from ansible_collections.netscale.multinic.plugins.module_utils.lab import frr as frrmod
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import (
    LabError, alive, cmdline, kill, reap, run, start_time, wait_gone,
)
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import State, load

_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps)?\s*$", re.I)
_MULT = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
         "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}


def rate_bits(text):
    """'200mbit' -> 200000000 (bits/s, tc's units: SI; 'mbps' means megabytes/s as in tc)."""
    m = _RATE.match(str(text))
    if not m:
        raise LabError("speed: %r is not a rate; write it as tc does, e.g. 200mbit, 1gbit, 500kbit" % (text,))
    return int(float(m.group(1)) * _MULT[(m.group(2) or "bit").lower()])


def _in_ns(ns):
    """Command prefix that runs in a named network namespace (mount namespace untouched)."""
    return ["nsenter", "--net=" + os.path.join("/run/netns", ns), "--"]


def _state(lab):
    data = load(lab.fabric, lab.state_root)
    if data is None or data.get("status") != "ready":
        what = "missing" if data is None else data.get("status")
        raise LabError("lab %s is not running (state file %s: %s); build it first: "
                       "ansible-playbook playbooks/lab.yml" % (lab.fabric, lab.state_file, what))
    lab.state = State(lab.fabric, lab.state_root, data)
    return data


def nic_ref(lab, host, nic):
    """(host dict, nic dict) for a host name and a NIC given by name (eth1) or index (1)."""
    h = next((x for x in lab.spec.hosts if x["name"] == host), None)
    if h is None:
        raise LabError("host: %r is not a GPU host of fabric %s; use one of %s"
                       % (host, lab.fabric, ", ".join(x["name"] for x in lab.spec.hosts)))
    for n in h["nics"]:
        if str(nic) in (n["name"], str(n["index"])):
            return h, n
    raise LabError("nic: %r is not a NIC of %s; use one of %s (or their index)"
                   % (nic, host, ", ".join(n["name"] for n in h["nics"])))


def _ends(h, n, direction):
    """[(netns, dev)] that carry a setting: to_host = the ToR port, to_tor = the host NIC."""
    tor = (netns_name(h["tor"]), n["tor_port"])
    hst = (netns_name(h["name"]), n["name"])
    return {"both": [tor, hst], "to_host": [tor], "to_tor": [hst]}[direction]


# ---------------------------------------------------------------- link speed (tbf)
BFD_PORTS = ("3784", "4784")   # single-hop and multihop BFD control (RFC 5881, RFC 5883)


def _qdiscs(ns, dev):
    return json.loads(run(_in_ns(ns) + ["tc", "-j", "qdisc", "show", "dev", dev])[1] or "[]")


def _root(qdiscs):
    return next((q for q in qdiscs if q.get("root")), None)


def _root_qdisc(ns, dev):
    return _root(_qdiscs(ns, dev))


def shaping(qdiscs):
    """(rate in bit/s or None, control band present) from ``tc -j qdisc show dev D``: the rate of a root
    tbf, and whether the htb of ``control_band_commands`` sits under it."""
    root = _root(qdiscs)
    if not root or root.get("kind") != "tbf":
        return None, False
    band = any(q.get("kind") == "htb" and q.get("handle") == "10:" and q.get("parent") == "1:1" for q in qdiscs)
    return int(root.get("options", {}).get("rate", 0)) * 8, band


def tbf_fifo_bytes(options):
    """The queue a tbf keeps by itself (tc sets limit = rate x latency + burst), from its JSON options
    (rate in bytes/s, burst in bytes, lat in microseconds)."""
    return int(options["rate"]) * int(options["lat"]) // 1000000 + int(options["burst"])


def control_band_commands(dev, fifo_bytes):
    """tc argv lists (without a namespace prefix) that put an htb with two strict-priority classes under
    the root tbf 1: of ``dev``: 10:10 for what failure detection runs on - BFD control packets (UDP
    destination port 3784 or 4784, IPv4 and IPv6), ARP and ICMPv6 (neighbour discovery: the NIC
    watcher's gateway probes and their answers) - and 10:20 for the rest, in one fifo of ``fifo_bytes``
    (what the tbf's own queue holds). Both classes are far above any lab line rate, so htb serves them in
    priority order and the tbf alone shapes. A switch port queues its control plane's packets apart, and
    a host's fq_codel serves sparse flows such as these first; one tail-drop fifo for everything loses
    them with the bulk, and a lost probe or BFD packet is a false alarm."""
    cmds = [["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "htb", "default", "20"],
            ["class", "add", "dev", dev, "parent", "10:", "classid", "10:1", "htb", "rate", "10gbit", "burst", "1mb",
             "cburst", "1mb"],
            ["class", "add", "dev", dev, "parent", "10:1", "classid", "10:10", "htb", "rate", "5gbit", "ceil",
             "10gbit", "burst", "1mb", "cburst", "1mb", "prio", "0"],
            ["class", "add", "dev", dev, "parent", "10:1", "classid", "10:20", "htb", "rate", "5gbit", "ceil",
             "10gbit", "burst", "1mb", "cburst", "1mb", "prio", "1"],
            ["qdisc", "add", "dev", dev, "parent", "10:10", "handle", "110:", "bfifo", "limit", "65536"],
            ["qdisc", "add", "dev", dev, "parent", "10:20", "handle", "120:", "bfifo", "limit", str(int(fifo_bytes))]]
    pref = 1
    for proto, match in (("ipv6", "ip6"), ("ip", "ip")):
        for port in BFD_PORTS:
            cmds.append(["filter", "add", "dev", dev, "parent", "10:", "protocol", proto, "prio", str(pref), "u32",
                         "match", match, "protocol", "17", "0xff", "match", match, "dport", port, "0xffff",
                         "flowid", "10:10"])
            pref += 1
    cmds.append(["filter", "add", "dev", dev, "parent", "10:", "protocol", "ipv6", "prio", str(pref), "u32",
                 "match", "ip6", "protocol", "58", "0xff", "flowid", "10:10"])
    cmds.append(["filter", "add", "dev", dev, "parent", "10:", "protocol", "arp", "prio", str(pref + 1), "u32",
                 "match", "u32", "0", "0", "flowid", "10:10"])
    return cmds


def shape(ns, dev, rate, burst="256kb", latency="20ms", control_band=True):
    """Replace the root qdisc of ``dev`` in ``ns`` by tbf ``rate`` (and the control band under it)."""
    run(_in_ns(ns) + ["tc", "qdisc", "del", "dev", dev, "root"], check=False)
    run(_in_ns(ns) + ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", str(rate),
                      "burst", burst, "latency", latency])
    if control_band:
        root = _root_qdisc(ns, dev)
        for argv in control_band_commands(dev, tbf_fifo_bytes(root["options"])):
            run(_in_ns(ns) + ["tc"] + argv)


def set_speed(lab, host, nic, speed, direction="both", burst="256kb", latency="20ms", check=False, control_band=True):
    """tbf root qdisc at the given rate on the ToR port (traffic to the host) and/or the host NIC
    (traffic to the ToR), BFD control packets, ARP and ICMPv6 in a strict-priority band under it unless
    ``control_band`` is false; speed None removes the limit."""
    _state(lab)
    h, n = nic_ref(lab, host, nic)
    want = rate_bits(speed) if speed else None
    changed, done = False, []
    for ns, dev in _ends(h, n, direction):
        have, band = shaping(_qdiscs(ns, dev))
        if want is None:
            if have is None:
                continue
            what = "qdisc del dev %s root" % (dev,)
        else:
            if have is not None and abs(have - want) <= max(8, want // 1000) and band == bool(control_band):
                continue
            what = "qdisc replace dev %s root tbf rate %d burst %s latency %s%s" % (
                dev, want, burst, latency, " + control band (BFD, ARP, ICMPv6)" if control_band else "")
        changed = True
        done.append("%s/%s: %s" % (ns, dev, what))
        if check:
            continue
        if want is None:
            run(_in_ns(ns) + ["tc", "qdisc", "del", "dev", dev, "root"])
        else:
            shape(ns, dev, want, burst, latency, control_band)
    return {"changed": changed, "actions": done, "host": host, "nic": n["name"], "tor_port": n["tor_port"],
            "speed_bits": want, "control_band": bool(control_band) if want else None}


# ---------------------------------------------------------------- link up/down
def set_link(lab, host, nic, up, side="host", check=False):
    """Administrative link state of a NIC (host side: the ToR sees carrier loss) or its ToR port."""
    _state(lab)
    h, n = nic_ref(lab, host, nic)
    ns, dev = (netns_name(h["name"]), n["name"]) if side == "host" else (netns_name(h["tor"]), n["tor_port"])
    out = run(["ip", "-n", ns, "-j", "link", "show", "dev", dev])[1]
    flags = json.loads(out)[0].get("flags", [])
    is_up = "UP" in flags
    if is_up == bool(up):
        return {"changed": False, "netns": ns, "dev": dev, "up": is_up}
    if not check:
        run(["ip", "-n", ns, "link", "set", "dev", dev, "up" if up else "down"])
    return {"changed": True, "netns": ns, "dev": dev, "up": bool(up)}


# ---------------------------------------------------------------- silent loss (nftables netdev)
def _loss_table(dev):
    return "mnl_loss_" + re.sub(r"[^A-Za-z0-9_]", "_", dev)


def set_loss(lab, host, nic, present, direction="both", check=False):
    """Silent loss: an nftables netdev ingress chain with policy drop on the ToR port (drops what
    the host sends) and/or on the host NIC (drops what the ToR sends). Links stay up."""
    _state(lab)
    h, n = nic_ref(lab, host, nic)
    # 'to_tor' traffic is dropped where it enters the ToR, 'to_host' where it enters the host.
    where = {"both": _ends(h, n, "both"), "to_tor": _ends(h, n, "to_host"), "to_host": _ends(h, n, "to_tor")}[direction]
    changed, done = False, []
    for ns, dev in where:
        table = _loss_table(dev)
        rc = run(_in_ns(ns) + ["nft", "list", "table", "netdev", table], check=False)[0]
        exists = rc == 0
        if exists == bool(present):
            continue
        changed = True
        done.append("%s: %s table netdev %s" % (ns, "add" if present else "delete", table))
        if check:
            continue
        if present:
            rules = ('table netdev %s {\n chain ingress {\n  type filter hook ingress device "%s" priority -500;'
                     ' policy drop;\n }\n}\n' % (table, dev))
            run(_in_ns(ns) + ["nft", "-f", "-"], input_text=rules)
        else:
            run(_in_ns(ns) + ["nft", "delete", "table", "netdev", table])
    return {"changed": changed, "actions": done, "host": host, "nic": n["name"], "loss": bool(present)}


# ---------------------------------------------------------------- daemons
def _node(lab, data, node):
    if node not in data["nodes"]:
        raise LabError("node: %r is not a node of lab %s; use one of %s" % (node, lab.fabric, ", ".join(sorted(data["nodes"]))))
    return data["nodes"][node]


def _frr_pid(lab, node, daemon):
    pidfile = os.path.join(lab.node_dir(node), "run-frr", "%s.pid" % daemon)
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    cl = cmdline(pid)
    if cl and cl[0].endswith("/" + daemon) and alive(pid):
        return pid
    return None


def _cgroup_pids(cg):
    pids = []
    for root, _d, _f in os.walk(cg):
        try:
            with open(os.path.join(root, "cgroup.procs")) as f:
                pids.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return pids


def daemon(lab, node, name, action, check=False):
    """kill / start / restart an FRR daemon of a spine or ToR (by its PID file), or kill the
    processes named `name` inside a GPU host or the storage node (found in its cgroup)."""
    data = _state(lab)
    nd = _node(lab, data, node)
    if nd["kind"] in ("tor", "spine") and name in frrmod.DAEMONS:
        pid = _frr_pid(lab, node, name)
        res = {"node": node, "daemon": name, "old_pid": pid}
        if action == "kill":
            if pid is None:
                return dict(res, changed=False)
            if not check:
                os.kill(pid, signal.SIGKILL)
                wait_gone([(pid, None)], timeout=5)
            return dict(res, changed=True, killed=[pid])
        if action == "start" and pid is not None:
            return dict(res, changed=False, pid=pid)
        if check:
            return dict(res, changed=True)
        t0 = time.monotonic()
        for r in data["resources"]:  # an earlier 'kill' left a dead record: superseded by this start
            if r.get("type") == "process" and r.get("name") == "%s/%s" % (node, name) and not alive(r["pid"], r.get("started")):
                lab.state.retire(r["pid"])
        if pid is not None:  # restart
            lab.state.retire(pid)
            os.kill(pid, signal.SIGTERM)
            if wait_gone([(pid, None)], timeout=5):
                os.kill(pid, signal.SIGKILL)
                wait_gone([(pid, None)], timeout=5)
        if name == "zebra":
            # zebra leaves its kernel nexthop objects behind (lab notes)
            run(["ip", "-n", netns_name(node), "nexthop", "flush"], check=False)
        new = lab.start_daemon(node, name)
        lab.vtysh(node, ["-b", "-d", name])
        return dict(res, changed=True, pid=new, seconds=round(time.monotonic() - t0, 3))
    if action != "kill":
        raise LabError("action: %r on %s (%s) is not supported; GPU hosts run daemons as systemd units: "
                       "use ansible.builtin.systemd there, or action=kill" % (action, node, nd["kind"]))
    victims = []
    for pid in _cgroup_pids(nd["cgroup"]):
        cl = cmdline(pid)
        comm = ""
        try:
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            pass
        if comm == name or (cl and os.path.basename(cl[0]) == name):
            victims.append(pid)
    if victims and not check:
        for pid in victims:
            kill(pid, None, signal.SIGKILL)
        wait_gone([(p, None) for p in victims], timeout=5)
    return {"changed": bool(victims), "node": node, "daemon": name, "killed": victims}


# ---------------------------------------------------------------- traffic probe
def _nic_counters(ns, nics):
    out = json.loads(run(["ip", "-n", ns, "-j", "-s", "link", "show"])[1])
    by = {x["ifname"]: x.get("stats64", x.get("stats", {})) for x in out}
    return {n: {"tx": by[n]["tx"]["bytes"], "rx": by[n]["rx"]["bytes"]} for n in nics}


def probe(lab, host, netns=None, flows=16, duration=5, direction="both", family="ipv6", port=None,
          server_timeout=10.0):
    """iperf3 flows between a source on a host (the host itself or a namespace inside it, e.g.
    mn-slot1) and the storage node; per-NIC byte shares from the host NICs' counters."""
    data = _state(lab)
    h = next((x for x in lab.spec.hosts if x["name"] == host), None)
    if h is None:
        raise LabError("host: %r is not a GPU host of fabric %s; use one of %s"
                       % (host, lab.fabric, ", ".join(x["name"] for x in lab.spec.hosts)))
    if family not in lab.spec.storage_addr:
        raise LabError("family: %r has no storage address in this lab (lab.storage.%s missing)" % (family, family))
    if direction not in ("up", "down", "both"):
        raise LabError("direction: %r; use up (host to storage), down (storage to host) or both" % (direction,))
    target = lab.spec.storage_addr[family]["storage"]
    hidx = [x["name"] for x in lab.spec.hosts].index(host)
    if port is None:
        slot = int(re.sub(r"\D", "", netns) or 0) if netns else 0
        port = 5201 + hidx * 16 + slot
    st = _node(lab, data, lab.spec.storage_name)
    hp = _node(lab, data, host)["pid"]
    nics = [n["name"] for n in h["nics"]]
    # server: one-off iperf3 in the storage node, in its cgroup, recorded in the state journal
    logpath = os.path.join(lab.node_dir(lab.spec.storage_name), "iperf3-%d.log" % port)

    def pre():
        with open(os.path.join(st["cgroup"], "cgroup.procs"), "w") as f:
            f.write("0")
    with open(logpath, "ab") as logf:
        srv = subprocess.Popen(["nsenter", "-t", str(st["pid"]), "-n", "-m", "-u", "--", "iperf3", "-s", "-1",
                                "-p", str(port)], stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                               preexec_fn=pre, start_new_session=True)
    lab.state.add(type="process", name="%s/iperf3-%d" % (lab.spec.storage_name, port), pid=srv.pid,
                  started=start_time(srv.pid), node=lab.spec.storage_name, keep=False)
    try:
        _wait_listen(netns_name(lab.spec.storage_name), port, srv, server_timeout)
        client = ["iperf3", "-c", target, "-p", str(port), "-P", str(int(flows)), "-t", str(duration), "-J"]
        if direction == "down":
            client.append("-R")
        elif direction == "both":
            client.append("--bidir")
        if netns:
            argv = ["nsenter", "-t", str(hp), "-m", "--", "nsenter", "--net=/run/netns/%s" % netns, "--"] + client
        else:
            argv = ["nsenter", "-t", str(hp), "-n", "-m", "--"] + client
        before = _nic_counters(netns_name(host), nics)
        t0 = time.monotonic()
        # a run ends about 1 s after `duration`; streams hashed to a silent NIC hang instead (their SYNs or data
        # never arrive), so give up 15 s later: the probe fails and the gate has no evidence (not a pass)
        rc, out, err = run(argv, check=False, timeout=duration + 15)
        elapsed = time.monotonic() - t0
        after = _nic_counters(netns_name(host), nics)
    finally:
        kill(srv.pid, None, signal.SIGKILL)
        wait_gone([(srv.pid, None)], timeout=3)
        reap()
    try:
        res = json.loads(out)
    except ValueError:
        res = {}
    if rc != 0 or "error" in res:
        raise LabError("probe: iperf3 from %s%s to %s port %d failed (rc=%d): %s"
                       % (host, "/" + netns if netns else "", target, port, rc, res.get("error") or err.strip() or out[-500:]))
    result = {"changed": False, "host": host, "netns": netns, "target": target, "family": family, "port": port,
              "flows": int(flows), "duration": duration, "direction": direction, "seconds": round(elapsed, 2)}
    end = res.get("end", {})
    dirs = []
    if direction in ("up", "both"):
        dirs.append(("up", "tx", end.get("sum_sent", {})))
    if direction in ("down", "both"):
        key = "sum_received_bidir_reverse" if direction == "both" else "sum_received"
        dirs.append(("down", "rx", end.get(key, {})))
    for name, counter, summ in dirs:
        delta = {n: after[n][counter] - before[n][counter] for n in nics}
        total = sum(delta.values())
        result[name] = {
            "bits_per_second": round(summ.get("bits_per_second", 0.0)),
            "mbit_per_second": round(summ.get("bits_per_second", 0.0) / 1e6, 1),
            "nic_bytes": delta,
            "nic_shares": {n: (round(v / total, 4) if total else 0.0) for n, v in delta.items()},
            "jain_index": jain(delta.values()),
            "retransmits": summ.get("retransmits"),
        }
    return result


def _wait_listen(ns, port, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError("probe: iperf3 server on port %d exited (rc=%s); is the port in use?" % (port, proc.returncode))
        out = run(_in_ns(ns) + ["ss", "-Hltn", "sport", "= :%d" % port], check=False)[1]
        if out.strip():
            return
        time.sleep(0.02)
    raise LabError("probe: iperf3 server not listening on port %d after %ss" % (port, timeout))
