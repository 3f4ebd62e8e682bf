# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Passive signals of the monitoring agent: what the host already knows about its NICs and sessions.

Read every ``passive_interval`` seconds, each source with a bounded cost (files, one bfdd control
socket per slot with a short deadline, one ``bpftool``/``nft`` call with a timeout):

* NIC counters from ``/sys/class/net/<nic>/``: carrier, ``carrier_changes``, receive/transmit errors
  and drops (:func:`read_nic_counters`);
* the NIC watcher's egress set (host_datapath role; ``/run/netscale-multinic/egress-state.json``,
  see datapath/health.EGRESS_STATE_FILE): which NICs it took out;
* the vipinjector sidecars' status (``/run/netscale-vipinjector/slot<s>/status.json``): the BGP
  session state per NIC and slot;
* BFD session state per NIC and slot from the per-slot bfdd responders' control sockets
  (``/run/netscale-vipinjector-bfd/slot<s>/bfdd.sock``, the protocol of datapath/bfdstate);
* the datapath's anti-spoofing drop counters (datapath/facts.spoof_counts).

:func:`changes` compares two snapshots and returns the events (pure, unit-tested).
"""

from __future__ import annotations

import glob
import json
import os
import re
import socket
import time

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bfdstate

NIC_FILES = {
    "carrier_changes": "carrier_changes",
    "rx_errors": "statistics/rx_errors",
    "tx_errors": "statistics/tx_errors",
    "rx_dropped": "statistics/rx_dropped",
    "tx_dropped": "statistics/tx_dropped",
}
EGRESS_STATE_FILE = "/run/netscale-multinic/egress-state.json"
SIDECAR_DIR = "/run/netscale-vipinjector"
BFD_DIR = "/run/netscale-vipinjector-bfd"
EGRESS_STALE_AFTER = 5.0   # the watcher rewrites the file every second while a NIC is out


def _read_int(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (IOError, OSError, ValueError):
        return None


def read_nic_counters(names, root="/sys/class/net"):
    """{nic: {"present", "carrier", "carrier_changes", "rx_errors", ...}}; a missing NIC or file gives
    present False / None (never an exception)."""
    out = {}
    for name in names:
        base = os.path.join(root, name)
        if not os.path.isdir(base):
            out[name] = {"present": False}
            continue
        item = {"present": True, "carrier": _read_int(os.path.join(base, "carrier"))}
        for key, rel in NIC_FILES.items():
            item[key] = _read_int(os.path.join(base, rel))
        out[name] = item
    return out


def read_egress(path=EGRESS_STATE_FILE, now=None):
    """{"present": bool, "fresh": bool, "out": [nic names]} of the NIC watcher's published egress set."""
    now = time.time() if now is None else now
    try:
        with open(path) as f:
            data = json.load(f)
        out = sorted(str(x) for x in data.get("out_nics") or [])
        updated = float(data.get("updated", 0))
    except (IOError, OSError, ValueError, TypeError, AttributeError):
        return {"present": False, "fresh": False, "out": []}
    # an empty out set is not rewritten every second: it stays valid; a non-empty one must be fresh
    fresh = not out or (now - updated) <= EGRESS_STALE_AFTER
    return {"present": True, "fresh": fresh, "out": out if fresh else []}


def read_sidecars(base=SIDECAR_DIR, nics=()):
    """{(slot, nic): "up" | other state} of every sidecar's BGP sessions. The sidecar names a NIC by its
    plan index; ``nics`` (pinglist NICs: index, name) turn it into the interface name."""
    names = dict((str(n["index"]), n["name"]) for n in nics)
    out = {}
    for path in sorted(glob.glob(os.path.join(base, "slot*", "status.json"))):
        m = re.search(r"slot(\d+)", os.path.basename(os.path.dirname(path)))
        if not m:
            continue
        try:
            with open(path) as f:
                st = json.load(f)
        except (IOError, OSError, ValueError):
            continue
        for s in st.get("sessions") or []:
            if s.get("nic") is not None:
                out[(int(m.group(1)), names.get(str(s["nic"]), str(s["nic"])))] = str(s.get("state"))
    return out


def bfd_snapshot(sock_path, deadline=0.3):
    """[(peer, state)] of a bfdd control socket: subscribe, collect the status messages bfdd sends at
    once, close. Bounded by ``deadline`` seconds; [] when the socket does not answer."""
    out = {}
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dec = bfdstate.Decoder()
    end = time.monotonic() + deadline
    try:
        s.settimeout(deadline)
        s.connect(sock_path)
        s.sendall(bfdstate.notify_request())
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                data = s.recv(65536)
            except socket.timeout:
                break
            if not data:
                break
            for mtype, dummy, body in dec.feed(data):
                if mtype == bfdstate.BMT_RESPONSE:
                    continue
                st = bfdstate.session_state(body)
                if st:
                    out[st[1]] = st[2]
    except (IOError, OSError, ValueError):
        pass
    finally:
        s.close()
    return sorted(out.items())


def read_bfd(nics, base=BFD_DIR, deadline=0.3):
    """{(slot, nic): state} of the per-slot BFD responders; sessions map to NICs by peer address (the
    ToR's gateway on that NIC, ``nics``: pinglist NICs with ``gateway``)."""
    by_gw = {}
    for n in nics:
        for gw in (n.get("gateway"), n.get("gateway4"), n.get("gateway6")):
            if gw:
                by_gw[str(gw)] = n["name"]
    out = {}
    for path in sorted(glob.glob(os.path.join(base, bfdstate.SOCKET_GLOB))):
        m = re.search(r"slot(\d+)", path)
        if not m:
            continue
        for peer, state in bfd_snapshot(path, deadline):
            nic = by_gw.get(peer)
            if nic:
                out[(int(m.group(1)), nic)] = state
    return out


def sessions_per_nic(states, nics):
    """{nic: (up, total)} from {(slot, nic): state}."""
    out = dict((n, [0, 0]) for n in nics)
    for (dummy, nic), state in states.items():
        if nic in out:
            out[nic][1] += 1
            if state == "up":
                out[nic][0] += 1
    return dict((k, tuple(v)) for k, v in out.items())


def _inc(old, new, key):
    a = (old or {}).get(key)
    b = (new or {}).get(key)
    if a is None or b is None:
        return 0
    return b - a if b >= a else b   # a counter reset (driver reload) counts from 0


def changes(old, new):
    """Events between two passive snapshots (dicts of the agent's ``collect``): a list of
    ``(kind, nic, slot, value, detail)``. ``old`` None (first snapshot): nothing."""
    if old is None:
        return []
    out = []
    for nic, c in sorted(new["nics"].items()):
        o = old["nics"].get(nic) or {}
        if c.get("present") != o.get("present"):
            out.append(("nic_missing" if not c.get("present") else "nic_present", nic, None, None,
                        "NIC %s %s" % (nic, "disappeared" if not c.get("present") else "appeared")))
            continue
        if not c.get("present"):
            continue
        d = _inc(o, c, "carrier_changes")
        if d:
            out.append(("nic_carrier_change", nic, None, d, "NIC %s: %d carrier changes, carrier now %s"
                        % (nic, d, "up" if c.get("carrier") == 1 else "down")))
        errs = _inc(o, c, "rx_errors") + _inc(o, c, "tx_errors")
        if errs:
            out.append(("nic_errors", nic, None, errs, "NIC %s: %d receive/transmit errors" % (nic, errs)))
        drops = _inc(o, c, "rx_dropped") + _inc(o, c, "tx_dropped")
        if drops:
            out.append(("nic_drops", nic, None, drops, "NIC %s: %d receive/transmit drops" % (nic, drops)))
    was_out = set(old["egress"]["out"])
    now_out = set(new["egress"]["out"])
    for nic in sorted(now_out - was_out):
        out.append(("egress_out", nic, None, None, "NIC watcher took %s out of the egress set" % nic))
    for nic in sorted(was_out - now_out):
        out.append(("egress_in", nic, None, None, "NIC watcher put %s back into the egress set" % nic))
    for kind, proto in (("bgp", "BGP"), ("bfd", "BFD")):
        o, n = old[kind], new[kind]
        for key in sorted(set(o) | set(n)):
            a, b = o.get(key), n.get(key)
            if a == b:
                continue
            slot, nic = key
            if b == "up":
                ev = kind + "_session_up"
            elif b is None:
                ev = kind + "_session_gone"
            else:
                ev = kind + "_session_down"
            if a is None and b == "up":
                continue   # a new session that came up: not a change worth an event
            out.append((ev, nic, slot, None, "%s session of slot %d on %s: %s -> %s" % (proto, slot, nic, a, b)))
    for slot, count in sorted((new.get("spoof") or {}).items()):
        d = count - (old.get("spoof") or {}).get(slot, count)
        if d > 0:
            out.append(("spoofed_packets", None, slot, d, "slot %d sent %d packets from addresses it does not own"
                        % (slot, d)))
    return out


def read_spoof(state_dir="/var/lib/netscale-multinic", bpffs_root="/sys/fs/bpf", timeout=2.0):
    """{slot: spoofed packets dropped} of the datapath the host runs (eBPF map mn_spoof or the
    nftables counters), {} when it cannot be read (not deployed, tool missing, timeout)."""
    import subprocess
    from ansible_collections.netscale.multinic.plugins.module_utils.datapath import antispoof
    try:
        with open(os.path.join(state_dir, "datapath.json")) as f:
            st = json.load(f)
    except (IOError, OSError, ValueError):
        return {}
    spec = st.get("spec") or {}
    if spec.get("ebpf"):
        if not st.get("bpf_version"):
            return {}
        argv = ["bpftool", "-j", "map", "dump", "pinned", os.path.join(
            bpffs_root, "netscale-multinic", "v-" + st["bpf_version"], "maps", "mn_spoof")]
    else:
        argv = ["nft", "-j", "list", "counters", "table", antispoof.NFT_FAMILY, antispoof.NFT_TABLE]
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if p.returncode:
        return {}
    try:
        if spec.get("ebpf"):
            return antispoof.spoof_counts_from_dump(json.loads(p.stdout or "[]"))
        live = antispoof.parse_live("-", p.stdout)
        return dict((slot, v[0]) for slot, v in live["counters"].items())
    except (ValueError, KeyError, TypeError):
        return {}
