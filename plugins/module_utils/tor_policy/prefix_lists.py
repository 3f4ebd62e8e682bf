# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prefix-lists: per task slot (exactly its task IP), the rack aggregate, and per rack on spines."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.names import host_bits, slot_name, strict_net


def host_route_entries(prefixes, bits):
    """Prefix-list entries permitting exactly the host routes inside ``prefixes``."""
    out = []
    seq = 10
    for p in prefixes:
        n = strict_net(p)
        entry = {"seq": seq, "action": "permit", "prefix": str(n)}
        if n.prefixlen < bits:
            entry["ge"] = bits
        out.append(entry)
        seq += 10
    return out


def slot_prefix_lists(host, slot, families):
    """{family: prefix-list} permitting the slot's own task IP (/32, /128) and nothing else."""
    out = {}
    for fam in families:
        bits = host_bits(fam)
        out[fam] = {"name": "PL-TASK-%s-%s" % (slot_name(host["name"], slot["slot"]), fam.upper()),
                    "entries": host_route_entries(["%s/%d" % (slot["task_ip"][fam], bits)], bits)}
    return out


def rack_prefix_lists(rack_prefix, families):
    """The ToR's rack aggregate per family (upstream: the only route it sends to spines)."""
    return {f: {"name": "PL-RACK-%s" % f.upper(), "prefix": rack_prefix[f], "bits": host_bits(f)}
            for f in families}


def spine_rack_prefix_lists(rack_name, rack_prefix, families):
    """On a spine: the one aggregate accepted from the ToR of ``rack_name``, per family."""
    return {f: {"name": "PL-RACK-%s-%s" % (rack_name, f.upper()), "prefix": rack_prefix[f]} for f in families}
