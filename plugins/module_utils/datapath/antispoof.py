# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Anti-spoofing: what a workload slot may send from, in both datapath modes (pure parts).

A slot may send from its task IPs, its container addresses (one per NIC and family) and link-local
addresses; every other IPv4/IPv6 source is dropped on the host side of the slot's veths and counted
per slot.

* eBPF mode: ``mn_veth_ingress`` looks the source up in ``mn_src`` (key: slot number, family,
  address) and counts drops per slot number in ``mn_spoof`` (per-CPU hash).
* kernel mode: one nftables ``netdev`` table, per slot a base chain on the ingress hook of the slot's
  host-side veths (runs before routing; nothing redirects in this mode), a set per family of the
  slot's addresses and a named counter ``spoof_slot<N>``.

Link-scope sources: IPv6 ``fe80::/10`` always (the kernel never forwards it; the eBPF program
hands it to the host stack instead of redirecting it), IPv6 ``::`` only to multicast (DAD, MLD),
IPv4 ``169.254.0.0/16`` only to link-local, multicast or broadcast destinations.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import struct

NFT_FAMILY = "netdev"
NFT_TABLE = "netscale_multinic"
NFT_COMMENT = "netscale.multinic anti-spoofing"
NFT_PRIORITY = -500
AF_INET = 2
AF_INET6 = 10
# mn_src's size in the C program: slots x (2 task IPs + 2 x NICs) with slots x NICs <= 1024 (mn_veth)
SRC_ENTRIES = 4096


def allowed_sources(spec):
    """{slot number: sorted [address]}: task IPs and container addresses of every slot."""
    out = {}
    for slot in spec["slots"]:
        addrs = set()
        for fam in ("ipv4", "ipv6"):
            if slot.get("task_" + fam):
                addrs.add(str(ipaddress.ip_address(slot["task_" + fam])))
            for sn in slot["nics"]:
                if sn.get(fam):
                    addrs.add(str(ipaddress.ip_address(sn[fam])))
        out[int(slot["slot"])] = sorted(addrs, key=lambda a: (":" in a, ipaddress.ip_address(a)))
    return out


def src_key(slot, addr):
    """mn_src key: struct src_key {u32 slot; u32 family; u8 addr[16]} (IPv4 in the first 4 bytes)."""
    ip = ipaddress.ip_address(addr)
    fam = AF_INET6 if ip.version == 6 else AF_INET
    return struct.pack("<II16s", int(slot), fam, ip.packed + b"\0" * (16 - len(ip.packed)))


def src_map(spec):
    """mn_src contents: {key bytes: value bytes (u32 1)}."""
    one = struct.pack("<I", 1)
    return dict((src_key(slot, a), one) for slot, addrs in allowed_sources(spec).items() for a in addrs)


def spoof_counts_from_dump(entries):
    """{slot: packets} from ``bpftool -j map dump`` of mn_spoof (per-CPU values summed)."""
    out = {}
    for e in entries:
        slot = struct.unpack("<I", bytes(int(x, 16) for x in e["key"]))[0]
        total = 0
        for c in e.get("values", []):
            total += struct.unpack("<Q", bytes(int(x, 16) for x in c["value"]))[0]
        out[slot] = total
    return out


# ---- kernel mode: nftables ----------------------------------------------------------------------
def counter_name(slot):
    return "spoof_slot%d" % int(slot)


def _chain_name(slot):
    return "slot%d" % int(slot)


def render_ruleset(spec, counters=None):
    """(body, digest): the table's definition for ``nft -f``. counters: {slot: (packets, bytes)}
    carried over when the table is rebuilt. The digest (in the table comment) covers everything but
    the counter values, so a live table can be compared without parsing nft's listing."""
    allowed = allowed_sources(spec)
    counters = counters or {}
    lines = []
    for slot in spec["slots"]:
        num = int(slot["slot"])
        pk, by = counters.get(num, (0, 0))
        v4 = [a for a in allowed[num] if ":" not in a]
        v6 = [a for a in allowed[num] if ":" in a]
        devs = ", ".join('"%s"' % sn["veth"] for sn in slot["nics"])
        lines += ["\tcounter %s {" % counter_name(num), "\t\tpackets %d bytes %d" % (pk, by), "\t}"]
        for name, typ, addrs in (("src4_slot%d" % num, "ipv4_addr", v4), ("src6_slot%d" % num, "ipv6_addr", v6)):
            lines += ["\tset %s {" % name, "\t\ttype %s" % typ]
            if addrs:
                lines.append("\t\telements = { %s }" % ", ".join(addrs))
            lines.append("\t}")
        lines += [
            "\tchain %s {" % _chain_name(num),
            "\t\ttype filter hook ingress devices = { %s } priority %d; policy accept;" % (devs, NFT_PRIORITY),
            "\t\tip saddr @src4_slot%d accept" % num,
            "\t\tip6 saddr @src6_slot%d accept" % num,
            "\t\tip6 saddr fe80::/10 accept",
            "\t\tip6 saddr :: ip6 daddr ff00::/8 accept",
            "\t\tip saddr 169.254.0.0/16 ip daddr { 169.254.0.0/16, 224.0.0.0/4, 255.255.255.255 } accept",
            '\t\tmeta protocol { ip, ip6 } counter name "%s" drop' % counter_name(num),
            "\t}",
        ]
    zeroed = re.sub(r"packets \d+ bytes \d+", "packets 0 bytes 0", "\n".join(lines))
    digest = hashlib.sha256(zeroed.encode()).hexdigest()[:16]
    return "\n".join(lines), digest


def nft_script(spec, counters=None):
    """One atomic transaction: (re)create the table with the digest in its comment."""
    body, digest = render_ruleset(spec, counters)
    return ("table %s %s\ndelete table %s %s\ntable %s %s {\n\tcomment \"%s %s\"\n%s\n}\n"
            % (NFT_FAMILY, NFT_TABLE, NFT_FAMILY, NFT_TABLE, NFT_FAMILY, NFT_TABLE, NFT_COMMENT, digest, body))


def desired_sets(spec):
    """{set name: sorted [address]} the table must hold."""
    out = {}
    for num, addrs in allowed_sources(spec).items():
        out["src4_slot%d" % num] = sorted(a for a in addrs if ":" not in a)
        out["src6_slot%d" % num] = sorted(a for a in addrs if ":" in a)
    return out


def parse_live(text, json_text):
    """What the live table holds: {"digest", "chains", "sets": {name: [addr]}, "counters": {slot:
    (packets, bytes)}} from ``nft list table`` (comment: nft 1.0 JSON omits it) and ``nft -j list
    table``. None when the table is absent."""
    if not text or not json_text:
        return None
    m = re.search(r'comment "%s ([0-9a-f]+)"' % re.escape(NFT_COMMENT), text)
    out = {"digest": m.group(1) if m else None, "chains": set(), "sets": {}, "counters": {}}
    for obj in json.loads(json_text).get("nftables", []):
        if "chain" in obj:
            out["chains"].add(obj["chain"]["name"])
        elif "set" in obj:
            elems = []
            for e in obj["set"].get("elem", []):
                elems.append(str(ipaddress.ip_address(e)) if isinstance(e, str) else json.dumps(e, sort_keys=True))
            out["sets"][obj["set"]["name"]] = sorted(elems)
        elif "counter" in obj:
            m = re.match(r"spoof_slot(\d+)$", obj["counter"]["name"])
            if m:
                out["counters"][int(m.group(1))] = (obj["counter"].get("packets", 0), obj["counter"].get("bytes", 0))
    return out


def live_matches(spec, live):
    """Whether the live table (parse_live) is the one render_ruleset describes."""
    if live is None:
        return False
    dummy, digest = render_ruleset(spec)
    return (live["digest"] == digest and live["chains"] == set(_chain_name(s["slot"]) for s in spec["slots"])
            and live["sets"] == desired_sets(spec))
