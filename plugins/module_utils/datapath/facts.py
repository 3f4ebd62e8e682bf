# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host facts for the datapath: NICs (pyroute2 netlink + sysfs), kernel capabilities, multinic state."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import antispoof

try:
    from pyroute2 import IPRoute
    HAS_PYROUTE2 = True
except ImportError:  # hosts without python3-pyroute2: sysfs only
    HAS_PYROUTE2 = False

SYS_NET = "/sys/class/net"


def _read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except (IOError, OSError):
        return default


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _links_netlink():
    out = []
    with IPRoute() as ipr:
        for msg in ipr.get_links():
            out.append({
                "name": msg.get_attr("IFLA_IFNAME"),
                "ifindex": msg["index"],
                "mac": msg.get_attr("IFLA_ADDRESS"),
                "mtu": msg.get_attr("IFLA_MTU"),
                "operstate": (msg.get_attr("IFLA_OPERSTATE") or "").lower() or None,
                "carrier": bool(msg.get_attr("IFLA_CARRIER")),
                "admin_up": bool(msg["flags"] & 1),
                "kind": ((msg.get_attr("IFLA_LINKINFO") or {}).get_attr("IFLA_INFO_KIND")
                         if msg.get_attr("IFLA_LINKINFO") else None),
            })
    return out


def _links_sysfs():
    out = []
    for name in sorted(os.listdir(SYS_NET)):
        base = os.path.join(SYS_NET, name)
        flags = int(_read(base + "/flags", "0x0"), 16)
        out.append({"name": name, "ifindex": _int(_read(base + "/ifindex")), "mac": _read(base + "/address"),
                    "mtu": _int(_read(base + "/mtu")), "operstate": _read(base + "/operstate"),
                    "carrier": _read(base + "/carrier") == "1", "admin_up": bool(flags & 1), "kind": None})
    return out


def nic_facts(include_virtual=True):
    links = _links_netlink() if HAS_PYROUTE2 else _links_sysfs()
    nics = []
    for l in links:
        if l["name"] == "lo":
            continue
        base = os.path.join(SYS_NET, l["name"])
        dev = os.path.join(base, "device")
        driver = None
        if os.path.islink(os.path.join(dev, "driver")):
            driver = os.path.basename(os.readlink(os.path.join(dev, "driver")))
        pci = None
        if os.path.islink(dev):
            target = os.path.basename(os.readlink(dev))
            if ":" in target and "." in target:
                pci = target
        numa = _int(_read(os.path.join(dev, "numa_node")))
        speed = _int(_read(base + "/speed")) if l["carrier"] else None
        if speed is not None and speed < 0:
            speed = None
        if not include_virtual and pci is None:
            continue
        nics.append({"name": l["name"], "ifindex": l["ifindex"], "mac": l["mac"], "mtu": l["mtu"],
                     "link": "up" if l["carrier"] and l["admin_up"] else "down", "admin_up": l["admin_up"],
                     "operstate": l["operstate"], "speed_mbps": speed, "driver": driver or l["kind"],
                     "pci_address": pci, "numa_node": numa if numa is not None and numa >= 0 else None,
                     "sysfs": os.path.isdir(base)})
    return nics


def nic_numa_nodes(names, sys_net=SYS_NET):
    """{NIC name: NUMA node} from /sys/class/net/<nic>/device/numa_node; -1 when the kernel reports
    none (single-node machines, virtual NICs: no device/ directory)."""
    out = {}
    for name in names:
        node = _int(_read(os.path.join(sys_net, name, "device", "numa_node")))
        out[name] = node if node is not None and node >= 0 else -1
    return out


def capabilities(bpffs_root="/sys/fs/bpf"):
    bpffs = False
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                p = line.split()
                if p[4] == bpffs_root and p[p.index("-") + 1] == "bpf":
                    bpffs = True
    except (IOError, OSError):
        pass
    import shutil
    return {
        "bpf_syscall": _read("/proc/sys/kernel/unprivileged_bpf_disabled") is not None,
        "btf": os.path.exists("/sys/kernel/btf/vmlinux"),
        "bpffs_mounted": bpffs,
        "bpftool": shutil.which("bpftool") is not None,
        "tc": shutil.which("tc") is not None,
        "multipath": os.path.exists("/proc/sys/net/ipv4/fib_multipath_hash_policy"),
        "mptcp": _read("/proc/sys/net/mptcp/enabled") == "1",
        "netkit": _netkit(),
        "pyroute2": HAS_PYROUTE2,
    }


def _netkit():
    # netkit registers rtnl link kind "netkit"; probe via the module list and kallsyms symbol names.
    try:
        with open("/proc/kallsyms") as f:
            for line in f:
                if line.rstrip().endswith(" netkit_link_ops") or "\tnetkit_" in line or " netkit_xmit" in line:
                    return True
    except (IOError, OSError):
        pass
    return False


def _output(argv):
    if not shutil.which(argv[0]):
        return None
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return p.stdout if p.returncode == 0 else None


def spoof_counts(spec, bpf_version, bpffs_root="/sys/fs/bpf"):
    """(source, {slot number: spoofed packets dropped}) of the mode the host runs; source None when
    the counters cannot be read (datapath not deployed, tool missing)."""
    if spec.get("ebpf"):
        if not bpf_version:
            return None, {}
        pin = os.path.join(bpffs_root, "netscale-multinic", "v-" + bpf_version, "maps", "mn_spoof")
        out = _output(["bpftool", "-j", "map", "dump", "pinned", pin])
        if out is None:
            return None, {}
        return "ebpf:mn_spoof", antispoof.spoof_counts_from_dump(json.loads(out or "[]"))
    out = _output(["nft", "-j", "list", "counters", "table", antispoof.NFT_FAMILY, antispoof.NFT_TABLE])
    if out is None:
        return None, {}
    live = antispoof.parse_live("-", out)
    return "nftables:%s %s" % (antispoof.NFT_FAMILY, antispoof.NFT_TABLE), \
        dict((slot, v[0]) for slot, v in live["counters"].items())


def multinic_state(state_dir="/var/lib/netscale-multinic", bpffs_root="/sys/fs/bpf"):
    try:
        with open(os.path.join(state_dir, "datapath.json")) as f:
            st = json.load(f)
    except (IOError, OSError, ValueError):
        return {"configured": False}
    spec = st.get("spec") or {}
    source, counts = spoof_counts(spec, st.get("bpf_version"), bpffs_root)
    return {"configured": True, "host": spec.get("host"), "ebpf": spec.get("ebpf"),
            "bpf_version": st.get("bpf_version"),
            "slots": [s["netns"] for s in spec.get("slots", [])],
            "nics": [n["name"] for n in spec.get("nics", [])],
            "spoof_counter": source,
            "spoofed_drops": dict((s["netns"], counts.get(int(s["slot"]), 0) if source else None)
                                  for s in spec.get("slots", []))}


def gather(state_dir="/var/lib/netscale-multinic", bpffs_root="/sys/fs/bpf"):
    return {"nics": nic_facts(), "capabilities": capabilities(bpffs_root),
            "state": multinic_state(state_dir, bpffs_root)}
