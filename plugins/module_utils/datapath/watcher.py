# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""netscale.multinic NIC watcher (installed by the host_datapath role, run by systemd).

Shipped to hosts as ``/usr/lib/netscale-multinic/netscale-multinic-watcher.py``, one file bundled
from this module and its imports (``scripts/build-host-programs.py``; the hosts have no Ansible).

A NIC flap removes state the datapath needs: admin-down deletes the NIC's proxy ND/ARP entries and
its per-NIC table routes; a veth going down loses its link-local gateway address. This watcher
follows link events (`ip -o monitor link`, netlink, no extra Python packages) and, whenever a
watched device comes (back) up, re-applies that device's idempotent commands from the runtime
file the role writes (/var/lib/netscale-multinic/runtime.json). SIGHUP re-applies everything.
Carrier loss needs no agent: the tc program (or the kernel's linkdown handling) fails over.

Gray failures (carrier up, gateway silent or one-way loss, ARP/ND replies lost): the watcher probes
every NIC's gateway (ARP / IPv6 NS on packet sockets, default every 100 ms, dead after 3 misses),
follows the gateway's kernel neighbour state (`ip -o monitor neigh`: FAILED = dead at once) and the
link events, and takes a dead NIC out of the egress set: eBPF mode - the NIC_OUT bit of mn_nics in
every pinned version; kernel mode - the per-NIC tables' default routes. Hold-down and BGP-style
dampening decide when it returns (:mod:`.health`). Every transition is logged, and the effective
egress set is published in /run/netscale-multinic/egress-state.json, which the vipinjector helpers read
to withdraw the task IPs on an out NIC's BGP sessions (the ToR then stops sending on it too).
BFD: the watcher also subscribes to the session state of the vipinjector role's per-slot BFD
responders (FRR bfdd control sockets ``<bfd_dir>/slot<s>/bfdd.sock``, found and re-found every
second, reconnected after a responder restart): a NIC whose sessions that have been Up are all Down
is dead until one is Up again (:mod:`.bfdstate`).
Admin drain: the NICs named in the host's drain marker (/var/lib/netscale-multinic/admin-drain.json,
written by the fabric_drain module; :mod:`...drain_marker`) are kept out of the egress set whatever
their health, across restarts of the watcher (read at start, before the first write) and reboots; the
marker is polled every 0.1 s, and the drained NICs are published (``drained``) with the egress set.

eBPF mode: a second thread follows `ip -o monitor address route rule` and keeps the program's
host-local maps (mn_local4/6, see :mod:`.localmap`) equal
to the host's local and main tables, so an address or route added by other software after the
load is host-local for the workloads too (events are coalesced: the sync runs once the burst has
been quiet for 5 ms, at most 50 ms after its first event; plus a full check every 30 s).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bfdstate
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import localmap
from ansible_collections.netscale.multinic.plugins.module_utils import drain_marker as marker
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

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


def reapply_batches(runtime, devs=None):
    """Split the runtime file's per-device commands into sysctl writes and ``ip -batch`` input.

    Returns ``(sysctls, batches)``: ``[(key, value)]`` and ``{family flag or "": [batch line]}``,
    only for ``devs`` when given (a device that came back up), else for every device (SIGHUP).
    """
    sysctls = []
    batches = {}
    for dev, cmds in sorted(runtime.get("devices", {}).items()):
        if devs is not None and dev not in devs:
            continue
        for cmd in cmds:
            if cmd[0] == "sysctl":
                sysctls.append((cmd[1], cmd[2]))
            elif cmd[0] in ("-4", "-6"):
                batches.setdefault(cmd[0], []).append(" ".join(cmd[1:]))
            else:
                batches.setdefault("", []).append(" ".join(cmd))
    return sysctls, batches


def reapply(path, devs=None, skip=()):
    """Re-run the runtime commands (of ``devs``, else all) but the batch lines in ``skip`` (the own
    default routes of NICs the gray-failure detection holds out)."""
    sysctls, batches = reapply_batches(load(path), devs)
    batches = dict((fam, [x for x in lines if x not in skip]) for fam, lines in batches.items())
    batches = dict((fam, lines) for fam, lines in batches.items() if lines)
    for key, value in sysctls:
        try:
            with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
                f.write(value)
        except (IOError, OSError) as e:
            log("sysctl %s: %s" % (key, e))
    for fam, lines in sorted(batches.items()):
        argv = ["ip"] + ([fam] if fam else []) + ["-force", "-batch", "-"]
        p = subprocess.run(argv, input="\n".join(lines) + "\n", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, check=False)
        log("re-applied %d %s commands for %s (rc=%d)%s" % (
            len(lines), fam or "ip", ",".join(devs or ["all"]), p.returncode,
            (": " + p.stderr.strip()[:300]) if p.returncode else ""))


def announce(rt, dev):
    """Unsolicited NA / gratuitous ARP for the addresses proxied on dev, so a neighbour that the
    ToR marked INCOMPLETE/FAILED while the NIC was away is refreshed at once (NS retries wait 1 s)."""
    addrs = [c[3] for c in rt.get("devices", {}).get(dev, []) if c[:3] == ["neigh", "replace", "proxy"]]
    if not addrs:
        return
    try:
        link = json.loads(subprocess.run(["ip", "-j", "link", "show", "dev", dev], stdout=subprocess.PIPE,
                                         universal_newlines=True, check=False).stdout)[0]
        mac = bytes(int(x, 16) for x in link["address"].split(":"))
        ifindex = socket.if_nametoindex(dev)
    except (IOError, OSError, ValueError, IndexError, KeyError) as e:
        log("announce %s: %s" % (dev, e))
        return
    sent = 0
    for a in addrs:
        try:
            if ":" in a:
                s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, ifindex)
                na = struct.pack("!BBHI16s", 136, 0, 0, 0x20000000, socket.inet_pton(socket.AF_INET6, a))
                na += struct.pack("!BB6s", 2, 1, mac)  # target link-layer address option
                s.sendto(na, ("ff02::1", 0, 0, ifindex))
            else:
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
                s.bind((dev, 0x0806))
                ip = socket.inet_aton(a)
                arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac, ip, b"\0" * 6, ip)
                s.send(b"\xff" * 6 + mac + struct.pack("!H", 0x0806) + arp)
            s.close()
            sent += 1
        except (IOError, OSError) as e:
            log("announce %s on %s: %s" % (a, dev, e))
    log("announced %d addresses on %s" % (sent, dev))


def ip_json(args):
    p = subprocess.run(["ip", "-j"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False)
    if p.returncode != 0 or not p.stdout.strip():
        return []
    return json.loads(p.stdout)


def map_dump(pin):
    p = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", pin], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if p.returncode != 0:
        raise OSError("bpftool map dump %s: %s" % (pin, p.stderr.strip()))
    out = {}
    for e in json.loads(p.stdout or "[]"):
        if "value" in e:
            out[bytes(int(x, 16) for x in e["key"])] = bytes(int(x, 16) for x in e["value"])
    return out


def _hex(b):
    return " ".join("%02x" % x for x in b)


def sync_local(path):
    """Make every pinned version's mn_local4/6 and its CFG_USE_LOCAL_MAP flag match the host."""
    b = load(path).get("bpf")
    if not b or not os.path.isdir(b.get("base", "")):
        return None
    maps_dirs = [os.path.join(b["base"], d, "maps") for d in sorted(os.listdir(b["base"])) if d.startswith("v-")]
    maps_dirs = [d for d in maps_dirs if os.path.exists(os.path.join(d, localmap.MAPS[0]))]
    if not maps_dirs:
        return None
    want, use_map, reason = localmap.compute(ip_json, b["nics"], b["veths"])
    n = 0
    for d in maps_dirs:
        lines = []
        cfg_pin = os.path.join(d, "mn_cfg")
        zero = struct.pack("<I", 0)
        have_cfg = map_dump(cfg_pin).get(zero, struct.pack("<II", 0, 0))
        new_cfg = localmap.cfg_value(struct.unpack("<II", have_cfg)[0], use_map)
        cfg_line = "map update pinned %s key hex %s value hex %s" % (cfg_pin, _hex(zero), _hex(new_cfg))
        if new_cfg != have_cfg and not use_map:
            lines.append(cfg_line)   # stop trusting the maps before changing them
        for name in localmap.MAPS:
            pin = os.path.join(d, name)
            for op, k, v in localmap.map_ops(map_dump(pin), want[name]):
                if op == "update":
                    lines.append("map update pinned %s key hex %s value hex %s" % (pin, _hex(k), _hex(v)))
                else:
                    lines.append("map delete pinned %s key hex %s" % (pin, _hex(k)))
        if new_cfg != have_cfg and use_map:
            lines.append(cfg_line)   # trust them once they are complete
        if lines:
            p = subprocess.run(["bpftool", "batch", "file", "/dev/stdin"], input="\n".join(lines) + "\n",
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                               check=False)
            log("host-local maps %s: %d updates (use_map=%s: %s) rc=%d%s" % (
                d, len(lines), use_map, reason, p.returncode, (": " + p.stderr.strip()[:300]) if p.returncode else ""))
            n += len(lines)
    return n


class LocalSync(threading.Thread):
    """Follows address/route/rule events and re-syncs the host-local maps (coalesced)."""
    QUIET = 0.005
    MAX_DELAY = 0.05
    PERIOD = 30.0

    def __init__(self, path):
        threading.Thread.__init__(self, name="local-sync", daemon=True)
        self.path = path
        self.event = threading.Event()
        self.last = 0.0
        self.mon = subprocess.Popen(["ip", "-o", "monitor", "address", "route", "rule"], stdout=subprocess.PIPE,
                                    universal_newlines=True, bufsize=1)
        threading.Thread(target=self._read, name="local-events", daemon=True).start()

    def _read(self):
        for dummy in self.mon.stdout:
            self.last = time.monotonic()
            self.event.set()
        log("address/route monitor ended")

    def run(self):
        while True:
            self.event.wait(self.PERIOD)
            if self.event.is_set():
                first = time.monotonic()
                while time.monotonic() - self.last < self.QUIET and time.monotonic() - first < self.MAX_DELAY:
                    time.sleep(self.QUIET / 2)
                self.event.clear()
            try:
                sync_local(self.path)
            except (IOError, OSError, ValueError, KeyError) as e:
                log("host-local map sync: %s" % e)


ARP_REPLY = 2
ETH_P_ARP = 0x0806
ETH_P_IPV6 = 0x86DD
PACKET_OUTGOING = 4
SO_ATTACH_FILTER = 26
# classic BPF for the IPv6 probe socket: ICMPv6 (next header 58 at 20) neighbour advertisement (136 at 54)
NA_FILTER = ((0x30, 0, 0, 20), (0x15, 0, 3, 58), (0x30, 0, 0, 54), (0x15, 0, 1, 136), (0x06, 0, 0, 0xFFFF),
             (0x06, 0, 0, 0))
NEIGH = re.compile(r"^(?:Deleted |Miss )?(\S+) dev (\S+)\b.*\b(FAILED|INCOMPLETE)\s*$")


def arp_request(mac, sip, tip, dmac=None):
    """An Ethernet frame with an ARP request for ``tip`` (to ``dmac``, else broadcast)."""
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac, socket.inet_aton(sip or "0.0.0.0"), b"\0" * 6,
                      socket.inet_aton(tip))
    return (dmac or b"\xff" * 6) + mac + struct.pack("!H", ETH_P_ARP) + arp


def arp_reply_from(frame):
    """The sender IPv4 address of an ARP reply frame (with Ethernet header), and its MAC; else None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x06":
        return None
    op, sha, spa = struct.unpack("!H6s4s", frame[20:32])
    if op != ARP_REPLY:
        return None
    return socket.inet_ntoa(spa), sha


def na_target(frame):
    """The target address of an IPv6 neighbour advertisement frame, else None."""
    if len(frame) < 78 or frame[12:14] != b"\x86\xdd" or frame[20] != 58 or frame[54] != 136:
        return None
    return socket.inet_ntop(socket.AF_INET6, frame[62:78])


def solicited_node(addr):
    b = socket.inet_pton(socket.AF_INET6, addr)
    return "ff02::1:ff%02x:%02x%02x" % (b[13], b[14], b[15])


class Prober(object):
    """Packet sockets of one NIC: sends a probe for its gateway, recognises the gateway's replies."""

    def __init__(self, nic):
        self.nic = nic
        self.name = nic["name"]
        self.v4 = bool(nic.get("gw4"))
        self.gw = nic["gw4"] if self.v4 else nic.get("gw6")
        self.gw_mac = None
        self.sock = None
        self.tx = None
        self.mac = None
        self.errors = 0

    def open(self):
        self.close()
        ifindex = socket.if_nametoindex(self.name)
        link = json.loads(subprocess.run(["ip", "-j", "link", "show", "dev", self.name], stdout=subprocess.PIPE,
                                         universal_newlines=True, check=False).stdout or "[{}]")[0]
        self.mac = bytes(int(x, 16) for x in link["address"].split(":"))
        if self.v4:
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP))
            self.sock.bind((self.name, ETH_P_ARP))
        else:
            import ctypes
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
            prog = b"".join(struct.pack("HBBI", *ins) for ins in NA_FILTER)
            self._filter = ctypes.create_string_buffer(prog)
            fprog = struct.pack("HL", len(NA_FILTER), ctypes.addressof(self._filter))
            self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
            self.sock.bind((self.name, ETH_P_IPV6))
            self.tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
            self.tx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
            self.tx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, ifindex)
        self.sock.setblocking(False)

    def close(self):
        for s in (self.sock, self.tx):
            if s is not None:
                s.close()
        self.sock = self.tx = None

    def send(self):
        try:
            if self.sock is None:
                self.open()
            if self.v4:
                self.sock.send(arp_request(self.mac, self.nic.get("addr4"), self.gw, self.gw_mac))
            else:
                ns = struct.pack("!BBHI16s", 135, 0, 0, 0, socket.inet_pton(socket.AF_INET6, self.gw))
                ns += struct.pack("!BB6s", 1, 1, self.mac)  # source link-layer address option
                self.tx.sendto(ns, (solicited_node(self.gw), 0, 0, socket.if_nametoindex(self.name)))
            self.errors = 0
        except (IOError, OSError, ValueError, KeyError, IndexError) as e:
            self.errors += 1
            if self.errors == 1:
                log("probe %s: %s" % (self.name, e))
            self.close()

    def receive(self):
        """True when a reply of the gateway was waiting."""
        got = False
        while self.sock is not None:
            try:
                frame, addr = self.sock.recvfrom(2048)
            except (BlockingIOError, InterruptedError):
                break
            except (IOError, OSError):
                self.close()
                break
            if addr[2] == PACKET_OUTGOING:
                continue
            if self.v4:
                r = arp_reply_from(frame)
                if r and r[0] == self.gw:
                    got = True
                    self.gw_mac = r[1]
            elif na_target(frame) == self.gw:
                got = True
        return got


class Health(threading.Thread):
    """Gray-failure detection (see the module docstring and :mod:`.health`)."""
    CHECK = 0.02
    REASSERT = 1.0
    ADMIN_POLL = 0.1
    STATE_FILE = health.EGRESS_STATE_FILE

    def __init__(self, path, admin_file=marker.ADMIN_DRAIN_FILE):
        threading.Thread.__init__(self, name="health", daemon=True)
        self.path = path
        self.lock = threading.Lock()
        self.admin_file = admin_file
        self.admin = set()       # NIC names of the admin-drain marker
        self.admin_key = None    # (mtime, size, inode) of the marker last read
        self.admin_next = 0.0
        rt = load(path)
        self.cfg = rt.get("detect")
        self.base = (rt.get("bpf") or {}).get("base", "")
        self.detector = None
        self.applied = None
        self.versions = None
        self.asserted = 0.0
        if not self.cfg:
            return
        names = [n["name"] for n in self.cfg["nics"]]
        self.detector = health.Detector(names, self.cfg["params"], time.monotonic())
        self.probers = [Prober(n) for n in self.cfg["nics"]]
        self.index = dict((n["name"], n["index"]) for n in self.cfg["nics"])
        self.names = names
        self.read_admin()

    @property
    def enabled(self):
        return self.detector is not None

    def _transitions(self, changes):
        for nic, what, reason in changes:
            log("egress set: %s %s (%s)" % (nic, "OUT" if what == "out" else "back IN", reason))
        if changes:
            self.apply()

    def link(self, dev, up):
        if not self.enabled or up:
            return
        with self.lock:
            self._transitions(self.detector.down(dev, time.monotonic(), "link down"))

    def neigh(self, line):
        m = NEIGH.match(line)
        if not m or not self.enabled:
            return
        addr, dev, state = m.groups()
        nic = [n for n in self.cfg["nics"] if n["name"] == dev and addr in (n.get("gw4"), n.get("gw6"))]
        if nic and state == "FAILED":
            with self.lock:
                self._transitions(self.detector.down(dev, time.monotonic(), "gateway %s FAILED" % addr))

    def bfd(self, changes):
        """NIC-level BFD transitions of :class:`bfdstate.Tracker`."""
        if not self.enabled:
            return
        with self.lock:
            now = time.monotonic()
            for nic, what, reason in changes:
                if what == "down":
                    self._transitions(self.detector.block(nic, now, "bfd", reason))
                else:
                    log("bfd: %s healthy again (%s)" % (nic, reason))
                    self._transitions(self.detector.unblock(nic, now, "bfd"))

    def read_admin(self):
        """Re-read the admin-drain marker when it changed. Returns True when the drained NICs changed."""
        if not self.admin_file:
            return False
        try:
            st = os.stat(self.admin_file)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            key = None
        if key == self.admin_key:
            return False
        self.admin_key = key
        nics, dummy_host, note = marker.parse(marker.read(self.admin_file) if key else None)
        if note != "admin drain ok" and key is not None:
            log("admin drain: %s: %s" % (self.admin_file, note))
        by_index = dict((int(i), n) for n, i in self.index.items())
        unknown = sorted(i for i in nics if i not in by_index)
        if unknown:
            log("admin drain: %s names NIC indexes %s this host does not have: ignored" % (self.admin_file, unknown))
        admin = set(by_index[i] for i in nics if i in by_index)
        if admin == self.admin:
            return False
        for nic in sorted(admin - self.admin):
            log("egress set: %s admin-drained (%s)" % (nic, self.admin_file))
        for nic in sorted(self.admin - admin):
            log("egress set: %s admin drain lifted" % nic)
        self.admin = admin
        return True

    def effective(self):
        return health.effective_out(self.detector.out(), self.names, getattr(self, "admin", ()))

    def apply(self, force=False):
        """Write the effective egress set (idempotent); callers hold the lock."""
        out = self.effective()
        if out == self.applied and not force:
            return
        if self.cfg["ebpf"]:
            idx = set(self.index[n] for n in out)
            for d in self._version_dirs(self.base):
                pin = os.path.join(d, "mn_nics")
                try:
                    ops = health.nic_flag_updates(map_dump(pin), idx)
                except (IOError, OSError, ValueError) as e:
                    log("egress set: %s: %s" % (pin, e))
                    continue
                if ops:
                    lines = ["map update pinned %s key hex %s value hex %s" % (pin, _hex(k), _hex(v)) for k, v in ops]
                    p = subprocess.run(["bpftool", "batch", "file", "/dev/stdin"], input="\n".join(lines) + "\n",
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                       check=False)
                    if p.returncode:
                        log("egress set: bpftool rc=%d: %s" % (p.returncode, p.stderr.strip()[:300]))
        else:
            for fam, lines in sorted(health.kernel_route_lines(self.cfg, out).items()):
                p = subprocess.run(["ip", fam, "-force", "-batch", "-"], input="\n".join(lines) + "\n",
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                   check=False)
                err = [x for x in p.stderr.strip().splitlines() if "No such process" not in x and
                       "Command failed" not in x]
                if err:
                    log("egress set: ip %s: %s" % (fam, " ".join(err)[:300]))
        if out != self.applied:
            log("egress set: out=%s" % (",".join(sorted(out)) or "none"))
        self.publish(out)
        self.applied = out

    def publish(self, out):
        """Write the egress set to STATE_FILE for the vipinjector helpers (atomic; see health.EGRESS_STATE_FILE)."""
        path = self.STATE_FILE
        try:
            atomic_write(path, json.dumps(health.egress_state(out, self.index, time.time(), getattr(self, "admin", ())),
                                          sort_keys=True),
                         mode=0o644)
        except (IOError, OSError) as e:
            log("egress set: %s: %s" % (path, e))

    @staticmethod
    def _version_dirs(base):
        if not os.path.isdir(base):
            return []
        return [os.path.join(base, d, "maps") for d in sorted(os.listdir(base)) if d.startswith("v-")
                and os.path.exists(os.path.join(base, d, "maps", "mn_nics"))]

    def skip_lines(self):
        """Kernel mode: the runtime file's own-default route lines of the NICs that are out."""
        if not self.enabled or self.cfg["ebpf"]:
            return set()
        with self.lock:
            out = self.effective()
        lines = set()
        for fam_lines in health.kernel_route_lines(self.cfg, set()).values():
            lines.update(x for x in fam_lines if "metric %d " % self.cfg["metric_own"] in x and
                         any(x.endswith(" dev " + n) for n in out))
        return lines

    def reapplied(self):
        """After the runtime commands were re-run (they restore every route): the egress set again."""
        if self.enabled:
            with self.lock:
                self.apply(force=True)

    def run(self):
        if not self.enabled:
            return
        interval = self.cfg["params"]["interval_ms"] / 1000.0
        threading.Thread(target=self._neigh_events, name="neigh-events", daemon=True).start()
        if self.cfg["params"].get("bfd", True):
            BfdEvents(self, self.cfg["params"].get("bfd_dir", health.DEFAULTS["bfd_dir"])).start()
        log("gray-failure detection: %s mode, probe every %d ms x %d, hold-down %.1f s (NICs %s)" % (
            "ebpf" if self.cfg["ebpf"] else "kernel", self.cfg["params"]["interval_ms"],
            self.cfg["params"]["multiplier"], self.cfg["params"]["hold_down"], ",".join(self.names)))
        with self.lock:
            self.apply(force=True)
        nxt = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= nxt:
                for p in self.probers:
                    p.send()
                nxt = nxt + interval if now - nxt < interval else now + interval  # behind: no burst
            socks = [p.sock for p in self.probers if p.sock is not None]
            wait = max(0.0, min(nxt - time.monotonic(), self.CHECK))
            if socks:
                select.select(socks, [], [], wait)
            else:
                time.sleep(wait)
            now = time.monotonic()
            for p in self.probers:
                if p.receive():
                    self.detector.reply(p.name, now)
            # liveness is checked every CHECK seconds, not only once a probe interval: a dead NIC
            # leaves within interval x multiplier + CHECK (+ the map/route write)
            with self.lock:
                self._transitions(self.detector.tick(now))
                if now >= self.admin_next:
                    self.admin_next = now + self.ADMIN_POLL
                    if self.read_admin():
                        self.apply(force=True)   # publishes the drained NICs even when the out set is the same
                if self.applied and now - self.asserted >= self.REASSERT:
                    # a NIC is out: re-write it every REASSERT s (a role re-run restores the kernel
                    # routes; the lines are idempotent)
                    self.asserted = now
                    self.apply(force=True)
                if self.cfg["ebpf"]:
                    vers = self._version_dirs(self.base)
                    if vers != self.versions:
                        self.versions = vers
                        self.apply(force=True)

    def _neigh_events(self):
        mon = subprocess.Popen(["ip", "-o", "monitor", "neigh"], stdout=subprocess.PIPE, universal_newlines=True,
                               bufsize=1)
        for line in mon.stdout:
            self.neigh(line.strip())
        log("neighbour monitor ended")


class BfdEvents(threading.Thread):
    """Follows the BFD session state of every per-slot responder (bfdd control sockets under
    ``bfd_dir``) and hands NIC-level transitions to :meth:`Health.bfd`. Sockets are looked for every
    RESCAN seconds; a lost one (responder stopped or restarted) is logged, forgotten and reconnected."""
    RESCAN = 1.0

    def __init__(self, gray, bfd_dir):
        threading.Thread.__init__(self, name="bfd-events", daemon=True)
        self.gray = gray
        self.pattern = os.path.join(bfd_dir, bfdstate.SOCKET_GLOB)
        self.tracker = bfdstate.Tracker(gray.cfg["nics"])
        self.conns = {}      # path -> (socket, Decoder)
        self.failed = set()  # paths whose connect failed (logged once)
        self.stopped = threading.Event()

    def _connect(self, path):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(1.0)
            s.connect(path)
            s.sendall(bfdstate.notify_request())
            s.setblocking(False)
        except (IOError, OSError) as e:
            s.close()
            if path not in self.failed:
                log("bfd: cannot subscribe to %s: %s (retrying)" % (path, e))
                self.failed.add(path)
            return
        self.failed.discard(path)
        self.conns[path] = (s, bfdstate.Decoder())
        log("bfd: subscribed to %s" % path)

    def _lost(self, path, why):
        s = self.conns.pop(path)[0]
        s.close()
        log("bfd: lost %s (%s): not a BFD failure, its sessions are forgotten; reconnecting" % (path, why))
        self.gray.bfd(self.tracker.lost(path))

    def _read(self, path):
        s, dec = self.conns[path]
        try:
            data = s.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except (IOError, OSError) as e:
            self._lost(path, str(e))
            return
        if not data:
            self._lost(path, "closed")
            return
        try:
            msgs = dec.feed(data)
        except ValueError as e:
            self._lost(path, str(e))
            return
        for mtype, dummy, body in msgs:
            if mtype == bfdstate.BMT_RESPONSE:
                if body.get("status") != "ok":
                    log("bfd: %s refused the subscription: %s" % (path, body))
                continue
            st = bfdstate.session_state(body)
            if st and self.tracker.nic_of(st[1]):
                log("bfd: %s %s %s" % (bfdstate.short_source(path), st[3], st[2]))
            self.gray.bfd(self.tracker.update(path, body))

    def run(self):
        log("bfd: following the session state of the responders at %s" % self.pattern)
        nxt = 0.0
        while not self.stopped.is_set():
            now = time.monotonic()
            if now >= nxt:
                nxt = now + self.RESCAN
                found = set(glob.glob(self.pattern))
                for path in sorted(found - set(self.conns)):
                    self._connect(path)
                self.failed &= found
            socks = dict((c[0].fileno(), p) for p, c in self.conns.items())
            if not socks:
                time.sleep(max(0.0, nxt - time.monotonic()))
                continue
            try:
                ready = select.select(list(socks), [], [], max(0.0, nxt - time.monotonic()))[0]
            except (IOError, OSError, ValueError):
                ready = list(socks)
            for fd in ready:
                self._read(socks[fd])
        for s, dummy in self.conns.values():
            s.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--runtime", default="/var/lib/netscale-multinic/runtime.json")
    ap.add_argument("--admin-drain", default=marker.ADMIN_DRAIN_FILE,
                    help="the host's admin-drain marker (NICs kept out of the egress set)")
    args = ap.parse_args(argv)
    hup = []
    local = LocalSync(args.runtime)
    gray = Health(args.runtime, args.admin_drain)
    signal.signal(signal.SIGHUP, lambda *a: (hup.append(1), local.event.set()))
    mon = subprocess.Popen(["ip", "-o", "monitor", "link"], stdout=subprocess.PIPE, universal_newlines=True,
                           bufsize=1)
    reapply(args.runtime, skip=gray.skip_lines())   # an admin-drained NIC's own routes stay out (kernel mode)
    local.start()
    local.event.set()
    gray.start()
    state = {}
    log("watching links (runtime %s, pid %d)" % (args.runtime, os.getpid()))
    for line in mon.stdout:
        if hup:
            del hup[:]
            reapply(args.runtime, skip=gray.skip_lines())
            gray.reapplied()
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
        if now != (True, True):
            gray.link(dev, False)   # carrier lost or admin down: dead at once (idempotent)
        if now[0] and (before is None or not before[0] or (now[1] and not before[1])):
            watched = load(args.runtime).get("devices", {})
            if dev in watched:
                reapply(args.runtime, [dev], skip=gray.skip_lines())
                gray.reapplied()
                if now[1]:
                    announce(load(args.runtime), dev)
    return 1
