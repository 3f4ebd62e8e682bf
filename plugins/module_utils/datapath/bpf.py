# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""eBPF object build, load/pin (bpftool), map fill and tc attach for the host datapath.

Layout in bpffs:  <bpffs>/netscale-multinic/v-<object sha256[:12]>/{progs,maps}/<name>
A new object version is loaded next to the old one, its maps are filled, every attach point is
switched with `tc filter replace` (atomic per device) and only then the old version is unpinned.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import shutil
import struct
import subprocess

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import antispoof
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import localmap
from ansible_collections.netscale.multinic.plugins.module_utils.datapath.spec import EBPF_MAX_NICS, EGRESS_FLOW_IDLE_S
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

PIN_SUBDIR = "netscale-multinic"
TC_PREF = 1100
TC_HANDLE = "0x4d4e"
PROG_NIC = "mn_nic_ingress"
PROG_VETH = "mn_veth_ingress"
MAX_NICS = EBPF_MAX_NICS
AF_INET = 2
AF_INET6 = 10
STATS = ("in_redirect", "in_pass", "out_redirect", "out_failover", "out_local", "out_pass",
         "out_noroute", "out_spoof", "out_placed", "out_pinned", "out_replaced")
# mn_ecfg policy codes (EGRESS_* in the C program)
EGRESS_CODES = {"hash": 0, "least_loaded": 1}
SOURCE_NAME = "multinic_datapath.c"
NIC_OUT = health.NIC_OUT  # mn_nics flags: set by the NIC watcher (datapath/health.py), kept by the loader


class BpfError(MultinicError):
    pass


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(65536), b""):
            h.update(chunk)
    return h.hexdigest()


def build_object(src, dest, clang="clang", include="/usr/include/x86_64-linux-gnu"):
    """Compile src to dest unless dest's stamp says it was built from this exact source.

    Returns (changed, source_sha256). The stamp file <dest>.src.sha256 holds the source hash.
    """
    want = sha256_file(src)
    stamp = dest + ".src.sha256"
    try:
        with open(stamp) as f:
            have = f.read().strip()
    except (IOError, OSError):
        have = None
    if have == want and os.path.exists(dest):
        return False, want
    d = os.path.dirname(dest)
    if d and not os.path.isdir(d):
        os.makedirs(d)
    tmp = dest + ".tmp"
    argv = [clang, "-O2", "-g", "-Wall", "-target", "bpf", "-I" + include, "-c", src, "-o", tmp]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if p.returncode != 0:
        raise BpfError("clang failed for %s: %s. Fix: install clang, llvm and libbpf-dev on the "
                       "controller (scripts/setup.sh)." % (src, p.stderr.strip()))
    os.rename(tmp, dest)
    atomic_write(stamp, want + "\n", mode=0o644)
    return True, want


def _a16(addr):
    ip = ipaddress.ip_address(addr)
    return ip.packed + b"\0" * (16 - len(ip.packed))


def _mac(text):
    return bytes(int(x, 16) for x in text.split(":"))


def ing_key(ifindex, addr):
    fam = AF_INET6 if ":" in addr else AF_INET
    return struct.pack("<II16s", ifindex, fam, _a16(addr))


def ecfg_value(policy, idle_s=EGRESS_FLOW_IDLE_S):
    """mn_ecfg[0]: (policy code, flow idle expiry in seconds)."""
    return struct.pack("<II", EGRESS_CODES[policy], int(idle_s))


def numa_map(spec):
    """mn_numa: {slot u32: (local NIC mask u32, spill flows u32)} for the slots with a preference."""
    numa = spec.get("numa") or {}
    spill = int(numa.get("spill_flows", 0))
    return dict((struct.pack("<I", int(slot)), struct.pack("<II", int(mask), spill))
                for slot, mask in (numa.get("local_masks") or {}).items())


def desired_maps(spec, host_links, ns_links, local=None, egress=None, numa=False):
    """Map contents from the spec and the live links.

    host_links: {ifname: {"ifindex": int, "address": mac}} of the host namespace.
    ns_links: {netns: {ifname: {...}}}. local: (maps, use_map, reason) of localmap.compute() for
    an object with the host-local maps, else None (the program then does the full fib lookup).
    egress: the egress policy ('hash' / 'least_loaded') for an object with mn_ecfg, else None.
    numa: the object has mn_numa (filled from spec["numa"]; empty without a preference).
    Returns {map: {key bytes: value bytes}} or raises KeyError naming the missing link.
    """
    nics = {}
    for n in spec["nics"]:
        link = host_links[n["name"]]
        flags = 0
        gw4 = b"\0" * 4
        gw6 = b"\0" * 16
        if "ipv4" in n:
            flags |= 1
            gw4 = ipaddress.ip_address(n["ipv4"]["gateway"]).packed
        if "ipv6" in n:
            flags |= 2
            gw6 = ipaddress.ip_address(n["ipv6"]["gateway"]).packed
        nics[struct.pack("<I", n["index"])] = struct.pack("<II4s16s", link["ifindex"], flags, gw4, gw6)
    for i in range(MAX_NICS):
        nics.setdefault(struct.pack("<I", i), b"\0" * 28)
    cfg = {struct.pack("<I", 0): localmap.cfg_value(len(spec["nics"]), bool(local and local[1]))}
    veth = {}
    ingress = {}
    nic_by_index = dict((n["index"], n) for n in spec["nics"])
    for slot in spec["slots"]:
        for sn in slot["nics"]:
            hv = host_links[sn["veth"]]
            cv = ns_links[slot["netns"]][sn["ifname"]]
            nic_if = host_links[nic_by_index[sn["index"]]["name"]]["ifindex"]
            veth[struct.pack("<I", hv["ifindex"])] = struct.pack("<II", sn["index"], int(slot["slot"]))
            val = struct.pack("<I6s6s", hv["ifindex"], _mac(cv["address"]), _mac(hv["address"]))
            addrs = [sn.get("ipv4"), sn.get("ipv6"), slot.get("task_ipv4"), slot.get("task_ipv6")]
            for a in addrs:
                if a:
                    ingress[ing_key(nic_if, a)] = val
    out = {"mn_nics": nics, "mn_cfg": cfg, "mn_veth": veth, "mn_ingress": ingress,
           "mn_src": antispoof.src_map(spec)}
    if local is not None:
        out.update(local[0])
    if egress is not None:
        out["mn_ecfg"] = {struct.pack("<I", 0): ecfg_value(egress)}
    if numa:
        out["mn_numa"] = numa_map(spec)
    return out


def keep_nic_out(want, have):
    """mn_nics as desired, keeping the NIC_OUT bits the NIC watcher set (gray-failure detection owns
    them: a re-run of the role must not put a NIC it took out back into the egress set)."""
    out = {}
    for k, v in want.items():
        h = have.get(k)
        if h and len(h) == len(v) and struct.unpack("<I", h[4:8])[0] & NIC_OUT:
            v = v[:4] + struct.pack("<I", struct.unpack("<I", v[4:8])[0] | NIC_OUT) + v[8:]
        out[k] = v
    return out


def order_ops(ops, desired):
    """Host-local map updates and mn_cfg in a safe order: the flag that makes the program trust
    mn_local4/6 is set only after they are filled, and cleared before they are emptied."""
    cfg = [o for o in ops if o[0] == "mn_cfg"]
    rest = [o for o in ops if o[0] != "mn_cfg"]
    use_map = struct.unpack("<II", desired["mn_cfg"][struct.pack("<I", 0)])[1] & localmap.CFG_USE_LOCAL_MAP
    return rest + cfg if use_map else cfg + rest


class Bpf(object):
    def __init__(self, runner, bpffs_root="/sys/fs/bpf"):
        self.r = runner
        self.bpffs_root = bpffs_root
        self.base = os.path.join(bpffs_root, PIN_SUBDIR)

    # --- bpffs -----------------------------------------------------------------------------
    def bpffs_mounted(self):
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                sep = parts.index("-")
                if parts[4] == self.bpffs_root and parts[sep + 1] == "bpf":
                    return True
        return False

    def mount_bpffs(self):
        if not os.path.isdir(self.bpffs_root):
            os.makedirs(self.bpffs_root)
        self.r.run(["mount", "-t", "bpf", "bpf", self.bpffs_root])

    # --- versions ---------------------------------------------------------------------------
    def vdir(self, version):
        return os.path.join(self.base, "v-" + version)

    def prog_pin(self, version, prog):
        return os.path.join(self.vdir(version), "progs", prog)

    def map_pin(self, version, name):
        return os.path.join(self.vdir(version), "maps", name)

    def versions(self):
        if not os.path.isdir(self.base):
            return []
        return sorted(d[2:] for d in os.listdir(self.base) if d.startswith("v-"))

    def has_map(self, version, name):
        return os.path.exists(self.map_pin(version, name))

    def loaded(self, version):
        return all(os.path.exists(self.prog_pin(version, p)) for p in (PROG_NIC, PROG_VETH)) and \
            all(os.path.exists(self.map_pin(version, m)) for m in ("mn_nics", "mn_cfg", "mn_veth",
                                                                   "mn_ingress", "mn_stats", "mn_src",
                                                                   "mn_spoof"))

    def load(self, obj, version):
        d = self.vdir(version)
        if os.path.isdir(d):
            self.unpin_dir(d)
        os.makedirs(d)
        self.r.run(["bpftool", "prog", "loadall", obj, os.path.join(d, "progs"), "type", "classifier",
                    "pinmaps", os.path.join(d, "maps")])

    def unpin_dir(self, d):
        # bpffs supports unlink/rmdir; shutil.rmtree does exactly that.
        shutil.rmtree(d, ignore_errors=False)

    def remove_version(self, version):
        self.r.log.append("unpin %s" % self.vdir(version))
        self.unpin_dir(self.vdir(version))

    def remove_base(self):
        if os.path.isdir(self.base):
            self.r.log.append("unpin %s" % self.base)
            shutil.rmtree(self.base)

    def prog_info(self, path):
        p = self.r.read(["bpftool", "-j", "prog", "show", "pinned", path], check=False)
        if p.returncode != 0:
            return None
        return json.loads(p.stdout)

    # --- maps -------------------------------------------------------------------------------
    def dump(self, version, name):
        p = self.r.read(["bpftool", "-j", "map", "dump", "pinned", self.map_pin(version, name)])
        out = {}
        for e in json.loads(p.stdout or "[]"):
            k = bytes(int(x, 16) for x in e["key"])
            if "value" in e:
                out[k] = bytes(int(x, 16) for x in e["value"])
        return out

    def map_diff(self, version, desired):
        """[(map, op, key, value)] needed to make the pinned maps equal to desired."""
        ops = []
        for name, want in sorted(desired.items()):
            have = self.dump(version, name)
            if name == "mn_nics":
                want = keep_nic_out(want, have)
            for k, v in sorted(want.items()):
                if have.get(k) != v:
                    ops.append((name, "update", k, v))
            if name not in ("mn_nics", "mn_cfg", "mn_ecfg"):  # arrays cannot delete
                for k in sorted(set(have) - set(want)):
                    ops.append((name, "delete", k, None))
        return ops

    def apply_map_ops(self, version, ops):
        if not ops:
            return
        lines = []
        for name, op, k, v in ops:
            hk = " ".join("%02x" % b for b in k)
            if op == "update":
                hv = " ".join("%02x" % b for b in v)
                lines.append("map update pinned %s key hex %s value hex %s" %
                             (self.map_pin(version, name), hk, hv))
            else:
                lines.append("map delete pinned %s key hex %s" % (self.map_pin(version, name), hk))
        self.r.run(["bpftool", "batch", "file", "/dev/stdin"], stdin="\n".join(lines) + "\n")

    def stats(self, version=None):
        version = version or (self.versions() or [None])[-1]
        if not version:
            return {}
        p = self.r.read(["bpftool", "-j", "map", "dump", "pinned", self.map_pin(version, "mn_stats")],
                        check=False)
        if p.returncode != 0:
            return {}
        out = {}
        for e in json.loads(p.stdout):
            idx = struct.unpack("<I", bytes(int(x, 16) for x in e["key"]))[0]
            total = 0
            for c in e.get("values", []):
                total += struct.unpack("<Q", bytes(int(x, 16) for x in c["value"]))[0]
            if idx < len(STATS):
                out[STATS[idx]] = total
        return out

    def egress_load(self, version=None):
        """{NIC index: active flows} as the least_loaded placement counts them (mn_eload)."""
        version = version or (self.versions() or [None])[-1]
        if not version or not self.has_map(version, "mn_eload"):
            return {}
        p = self.r.read(["bpftool", "-j", "map", "dump", "pinned", self.map_pin(version, "mn_eload")],
                        check=False)
        if p.returncode != 0:
            return {}
        out = {}
        for e in json.loads(p.stdout or "[]"):
            idx = struct.unpack("<I", bytes(int(x, 16) for x in e["key"]))[0]
            if idx < MAX_NICS:
                out[idx] = struct.unpack("<qQ", bytes(int(x, 16) for x in e["value"]))[0]
        return out

    def spoof_counts(self, version=None):
        """{slot number: spoofed packets dropped} (mn_spoof; a slot without drops has no entry)."""
        version = version or (self.versions() or [None])[-1]
        if not version:
            return {}
        p = self.r.read(["bpftool", "-j", "map", "dump", "pinned", self.map_pin(version, "mn_spoof")],
                        check=False)
        if p.returncode != 0:
            return {}
        return antispoof.spoof_counts_from_dump(json.loads(p.stdout or "[]"))

    # --- tc ---------------------------------------------------------------------------------
    def has_clsact(self, dev):
        p = self.r.read(["tc", "-j", "qdisc", "show", "dev", dev], check=False)
        if p.returncode != 0:
            return False
        return any(q.get("kind") == "clsact" for q in json.loads(p.stdout or "[]"))

    def filters(self, dev, direction="ingress"):
        p = self.r.read(["tc", "-j", "filter", "show", "dev", dev, direction], check=False)
        if p.returncode != 0 or not p.stdout.strip():
            return []
        return json.loads(p.stdout)

    def attached(self, dev):
        """(prog id, tag) of our filter on dev's ingress, or None."""
        for f in self.filters(dev):
            opts = f.get("options") or {}
            if f.get("pref") == TC_PREF and opts.get("handle") == TC_HANDLE:
                prog = opts.get("prog") or {}
                return (prog.get("id"), prog.get("tag"))
        return None

    def add_clsact(self, dev):
        self.r.run(["tc", "qdisc", "add", "dev", dev, "clsact"])

    def attach(self, dev, prog_path):
        self.r.run(["tc", "filter", "replace", "dev", dev, "ingress", "pref", str(TC_PREF), "handle",
                    TC_HANDLE, "bpf", "direct-action", "object-pinned", prog_path])

    def detach(self, dev):
        self.r.run(["tc", "filter", "del", "dev", dev, "ingress", "pref", str(TC_PREF), "handle",
                    TC_HANDLE, "bpf"], check=False)

    def others_on(self, dev):
        """Filters on dev that are not ours (both directions)."""
        n = 0
        for direction in ("ingress", "egress"):
            for f in self.filters(dev, direction):
                if "options" not in f:
                    continue
                if direction == "ingress" and f.get("pref") == TC_PREF and \
                        (f.get("options") or {}).get("handle") == TC_HANDLE:
                    continue
                n += 1
        return n

    def del_clsact(self, dev):
        self.r.run(["tc", "qdisc", "del", "dev", dev, "clsact"], check=False)


def bpf_capable(bpffs_root="/sys/fs/bpf"):
    """(ok, reason): BPF syscall usable and the tools present."""
    for tool in ("bpftool", "tc"):
        if not shutil.which(tool):
            return False, "%s not installed" % tool
    if not os.path.exists("/sys/kernel/btf/vmlinux") and not os.path.exists("/proc/sys/kernel/bpf_stats_enabled"):
        return False, "kernel without BPF support"
    p = subprocess.run(["bpftool", "-j", "prog", "show"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if p.returncode != 0:
        return False, "BPF syscall unavailable: %s" % p.stderr.decode(errors="replace").strip()
    return True, "ok"
