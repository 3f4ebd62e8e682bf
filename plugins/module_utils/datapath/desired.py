# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel objects a datapath spec asks for, computed from the spec alone (no I/O).

A route is ``(family, table, dst, nexthops[(gateway, dev, onlink)], src, metric)``; a policy rule
``(family, pref, iif, table, suppress_prefixlength)``; a proxy entry ``(dev, address)``.
"""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as datapath_spec


def host_prefix_length(addr):
    return 128 if ":" in addr else 32


def _family_number(family_name):
    return 4 if family_name == "ipv4" else 6


def host_routes(spec):
    """Routes on the host: to each container address and task IP over the veths, the IPv4
    gateway on lo, and per NIC its own default route table (plus the fallback over all NICs)."""
    out = []
    fams = spec["families"]
    for slot in spec["slots"]:
        for sn in slot["nics"]:
            for fam in fams:
                if sn.get(fam):
                    out.append((_family_number(fam), "main", "%s/%d" % (sn[fam], host_prefix_length(sn[fam])),
                                [(None, sn["veth"], False)], None, None))
        for fam in fams:
            tip = slot.get("task_" + fam)
            if tip:
                nhs = [(sn[fam], sn["veth"], True) for sn in slot["nics"] if sn.get(fam)]
                out.append((_family_number(fam), "main", "%s/%d" % (tip, host_prefix_length(tip)), nhs, None, None))
    if "ipv4" in fams and spec["slots"]:
        out.append((4, "main", "%s/32" % spec["gw4"], [(None, "lo", False)], None, None))
    for nic in spec["nics"]:
        table = spec["table_base"] + nic["index"]
        for fam in fams:
            f = _family_number(fam)
            if fam in nic:
                out.append((f, table, "default", [(nic[fam]["gateway"], nic["name"], False)], None,
                            datapath_spec.METRIC_OWN))
            nhs = [(n[fam]["gateway"], n["name"], False) for n in spec["nics"] if fam in n]
            if len(nhs) > 1:
                out.append((f, table, "default", nhs, None, datapath_spec.METRIC_FALLBACK))
    return out


def namespace_routes(spec, slot):
    """Routes inside a slot's namespace: the default over every NIC's veth (source: the task IP),
    and each NIC's gateway over its own veth (source: the container address on that NIC)."""
    out = []
    for fam in spec["families"]:
        f = _family_number(fam)
        gw = spec["gw4"] if f == 4 else spec["gw6"]
        onlink = f == 4
        nhs = [(gw, sn["ifname"], onlink) for sn in slot["nics"] if sn.get(fam)]
        if nhs:
            out.append((f, "main", "default", nhs, slot.get("task_" + fam), None))
        for sn, nic in zip(slot["nics"], spec["nics"]):
            if sn.get(fam) and fam in nic:
                g = nic[fam]["gateway"]
                out.append((f, "main", "%s/%d" % (g, host_prefix_length(g)), [(gw, sn["ifname"], onlink)], sn[fam], None))
    return out


def policy_rules(spec):
    """Per veth: main table without its default routes first, then the veth's NIC table."""
    out = []
    for slot in spec["slots"]:
        for sn in slot["nics"]:
            for f in (4, 6):
                out.append((f, spec["rule_pref"], sn["veth"], "main", 0))
                out.append((f, spec["rule_pref"] + 1, sn["veth"], str(spec["table_base"] + sn["index"]), None))
    return out


def proxy_entries(spec):
    """Proxy ND/ARP: each container address on its NIC, each task IP on the first NIC."""
    out = []
    nic0 = spec["nics"][0]["name"]
    names = dict((n["index"], n["name"]) for n in spec["nics"])
    for slot in spec["slots"]:
        for sn in slot["nics"]:
            for fam in ("ipv4", "ipv6"):
                if sn.get(fam):
                    out.append((names[sn["index"]], sn[fam]))
        for fam in ("ipv4", "ipv6"):
            if slot.get("task_" + fam):
                out.append((nic0, slot["task_" + fam]))
    return out


def route_command(route, op="replace"):
    """``ip`` arguments that add (replace) or delete ``route``."""
    f, table, dst, nhs, src, metric = route
    argv = ["-%d" % f, "route", op, dst, "table", str(table)]
    if metric is not None:
        argv += ["metric", str(metric)]
    if src:
        argv += ["src", src]
    if op == "del":
        return argv
    if len(nhs) == 1:
        gw, dev, onlink = nhs[0]
        argv += (["via", gw] if gw else []) + ["dev", dev] + (["onlink"] if onlink else [])
    else:
        for gw, dev, onlink in nhs:
            argv += ["nexthop"] + (["via", gw] if gw else []) + ["dev", dev] + (["onlink"] if onlink else [])
    return argv


def route_description(route, where):
    """The change description of a route (check-mode output and tests read it)."""
    f, table, dst, nhs, src, metric = route
    via = ", ".join("%s%s" % (("via %s " % gw) if gw else "", "dev " + dev) for gw, dev, dummy in nhs)
    where_text = "" if where == "host" else " in " + where
    src_text = (" src %s" % src) if src else ""
    metric_text = (" metric %d" % metric) if metric is not None else ""
    return "route%s %s table %s %s%s%s" % (where_text, dst, table, via, src_text, metric_text)


def nic_names(spec):
    return [n["name"] for n in spec["nics"]]


def veth_names(spec):
    return [sn["veth"] for s in spec["slots"] for sn in s["nics"]]


def detect_block(spec, detection):
    """The runtime file's ``detect`` entry: what the watcher's gray-failure detection needs per NIC
    (see :mod:`.health`); ``detection`` are the checked parameters (health.check_params)."""
    nics = []
    for nic in spec["nics"]:
        entry = {"name": nic["name"], "index": nic["index"], "table": spec["table_base"] + nic["index"]}
        for fam, key in (("ipv4", "4"), ("ipv6", "6")):
            if fam in nic:
                entry["gw" + key] = nic[fam]["gateway"]
                entry["addr" + key] = nic[fam]["address"]
        nics.append(entry)
    return {"ebpf": bool(spec["ebpf"]), "metric_own": datapath_spec.METRIC_OWN,
            "metric_fallback": datapath_spec.METRIC_FALLBACK, "nics": nics, "params": detection}


def runtime_commands(spec, bpf_base, detection=None):
    """The watcher's runtime file: idempotent ``ip`` commands per device, re-run when the device
    comes back up, where the host-local maps are pinned, and the NICs' gateways for the
    gray-failure detection (``detection``: checked parameters, None = detection off)."""
    per_dev = {}
    names = dict((n["index"], n["name"]) for n in spec["nics"])
    routes = host_routes(spec)
    for dev, addr in proxy_entries(spec):
        per_dev.setdefault(dev, []).append(["neigh", "replace", "proxy", addr, "dev", dev])
    for route in routes:
        if route[1] != "main":
            dev = names[route[1] - spec["table_base"]]
            per_dev.setdefault(dev, []).append(route_command(route))
    for nic in spec["nics"]:
        for tmpl, val in datapath_spec.NIC_SYSCTLS:
            per_dev.setdefault(nic["name"], []).append(["sysctl", tmpl.format(nic=nic["name"]), val])
    for slot in spec["slots"]:
        for sn in slot["nics"]:
            if "ipv6" in spec["families"]:
                per_dev.setdefault(sn["veth"], []).append(["-6", "addr", "replace", spec["gw6"] + "/64",
                                                           "dev", sn["veth"], "nodad"])
            for route in routes:
                if route[1] == "main" and any(nh[1] == sn["veth"] for nh in route[3]):
                    per_dev.setdefault(sn["veth"], []).append(route_command(route))
    out = {"host": spec["host"], "devices": per_dev,
           "bpf": {"base": bpf_base, "nics": nic_names(spec), "veths": veth_names(spec)}}
    if detection is not None:
        out["detect"] = detect_block(spec, detection)
    return out
