# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshots of a node at detection time (triage) and comparable state dumps (before/after a
rollback). Read-only commands only; ``run(argv) -> (rc, out, err)`` is the caller's.

- ``triage`` (host or FRR box): routes, addresses, rules, neighbours, link counters, tc qdiscs and
  filters, BPF programs, sysctls, units and their logs (hosts), BGP state (FRR).
- ``state`` (host): a normalised dump meant to be compared: addresses, routes, rules, net sysctls,
  tc filters per device, netkit/veth links, workload namespaces (their addresses and routes),
  netscale units. Counters, timers, ids and lifetimes are dropped.
- ``state`` (FRR box, a ToR or spine): running config (redacted), addresses, kernel routes of all
  tables except BGP-learned ones, net sysctls and the netscale sysctl.d files: what a ToR
  restore must bring back.
"""

from __future__ import annotations

import json
import re

from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact

HOST_TRIAGE = [
    ("addresses", ["ip", "-j", "address", "show"]),
    ("links", ["ip", "-j", "-s", "-d", "link", "show"]),
    ("routes_v4", ["ip", "-j", "-4", "route", "show", "table", "all"]),
    ("routes_v6", ["ip", "-j", "-6", "route", "show", "table", "all"]),
    ("rules_v4", ["ip", "-j", "-4", "rule", "show"]),
    ("rules_v6", ["ip", "-j", "-6", "rule", "show"]),
    ("neighbours", ["ip", "-j", "neigh", "show"]),
    ("neighbour_proxies", ["ip", "-j", "neigh", "show", "proxy"]),
    ("qdiscs", ["tc", "-j", "-s", "qdisc", "show"]),
    ("bpf_programs", ["bpftool", "-j", "prog", "show"]),
    ("netns", ["ip", "-j", "netns", "list"]),
    ("nstat", ["nstat", "-a", "-z", "-j"]),
    ("units", ["systemctl", "list-units", "--all", "--no-pager", "--plain", "--no-legend", "netscale*"]),
    ("unit_logs", ["journalctl", "--no-pager", "-o", "short-iso", "-n", "300", "-u", "netscale*"]),
]

FRR_TRIAGE = [
    ("bgp", ["vtysh", "-c", "show bgp summary json", "-c", "show bgp neighbors json"]),
    ("routes", ["vtysh", "-c", "show ip route json", "-c", "show ipv6 route json"]),
    ("running_config", ["vtysh", "-c", "show running-config"]),
    ("links", ["ip", "-j", "-s", "link", "show"]),
    ("kernel_routes_v4", ["ip", "-j", "-4", "route", "show"]),
    ("kernel_routes_v6", ["ip", "-j", "-6", "route", "show"]),
    ("nstat", ["nstat", "-a", "-z", "-j"]),
]

SYSCTL_KEEP = re.compile(r"^net\.(ipv4|ipv6)\.(conf|neigh)\.(all|default|eth\d+|mn[^.]*|lo)\.|"
                         r"^net\.(ipv4|ipv6)\.(fib_multipath|ip_forward|route\.)|^net\.ipv4\.(ip_forward|fib_)|"
                         r"^net\.core\.bpf")
SYSCTL_DROP = re.compile(r"(stable_secret|base_reachable_time|\.mc_forwarding|route\.gc_|flush)")
ADDR_DROP = ("valid_life_time", "preferred_life_time", "dynamic", "stats64", "txqlen")
ROUTE_DROP = ("expires", "cacheinfo")
LINK_KEEP = ("ifname", "link_type", "mtu", "operstate", "flags", "address", "link", "master", "linkinfo", "xdp")


def triage_commands(kind):
    return HOST_TRIAGE if kind == "host" else FRR_TRIAGE


def capture(run, kind, prefix=()):
    """Run the triage commands; ``prefix`` e.g. ``["nsenter", "--net=/run/netns/x", "--"]``.
    Returns {name: {"argv", "rc", "stdout", "stderr"}} (JSON parsed where the command printed JSON)."""
    out = {}
    for name, argv in triage_commands(kind):
        full = list(prefix) + argv
        try:
            rc, so, se = run(full)
        except OSError as exc:
            rc, so, se = 127, "", str(exc)
        # A ToR's running config (and any tool output) can carry MD5 keys: redacted before it leaves.
        out[name] = {"argv": full, "rc": rc, "stdout": redact(_maybe_json(so)), "stderr": redact((se or "")[-2000:])}
    return out


def _maybe_json(text):
    t = (text or "").strip()
    if t[:1] in ("[", "{"):
        try:
            return json.loads(t)
        except ValueError:
            pass
    return text


def _jl(run, argv):
    rc, out, err = run(argv)
    if rc != 0:
        return {"rc": rc, "error": (err or "").strip()[:300]}
    try:
        return json.loads(out or "[]")
    except ValueError:
        return out


def norm_addresses(data):
    out = []
    for link in data if isinstance(data, list) else []:
        addrs = []
        for a in link.get("addr_info") or []:
            a = dict((k, v) for k, v in a.items() if k not in ADDR_DROP)
            addrs.append(a)
        out.append({"ifname": link.get("ifname"), "mtu": link.get("mtu"), "operstate": link.get("operstate"),
                    "flags": sorted(link.get("flags") or []), "address": link.get("address"),
                    "addr_info": sorted(addrs, key=lambda a: (a.get("family", ""), a.get("local", "")))})
    return sorted(out, key=lambda x: x["ifname"] or "")


def norm_routes(data):
    out = []
    for r in data if isinstance(data, list) else []:
        r = dict((k, v) for k, v in r.items() if k not in ROUTE_DROP)
        out.append(r)
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


def norm_sysctls(text):
    out = {}
    for line in (text or "").splitlines():
        if " = " not in line:
            continue
        k, v = line.split(" = ", 1)
        if SYSCTL_KEEP.search(k) and not SYSCTL_DROP.search(k):
            out[k] = v.strip()
    return out


def norm_tc(data):
    out = []
    for f in data if isinstance(data, list) else []:
        f = dict(f)
        opts = dict(f.get("options") or {})
        if "prog" in opts and isinstance(opts["prog"], dict):
            # program ids change on every load; the name and tag identify the program
            opts["prog"] = dict((k, v) for k, v in opts["prog"].items() if k in ("name", "tag", "jited"))
        f["options"] = opts
        out.append(f)
    return sorted(out, key=lambda x: json.dumps(x, sort_keys=True))


def norm_units(text):
    units = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 4:
            units.append({"unit": parts[0], "load": parts[1], "active": parts[2], "sub": parts[3]})
    return sorted(units, key=lambda u: u["unit"])


def state_dump(run, workload_netns=None):
    """Normalised, comparable state of a host (see module docstring)."""
    dump = {
        "addresses": norm_addresses(_jl(run, ["ip", "-j", "address", "show"])),
        "routes_v4": norm_routes(_jl(run, ["ip", "-j", "-4", "route", "show", "table", "all"])),
        "routes_v6": norm_routes(_jl(run, ["ip", "-j", "-6", "route", "show", "table", "all"])),
        "rules_v4": _jl(run, ["ip", "-j", "-4", "rule", "show"]),
        "rules_v6": _jl(run, ["ip", "-j", "-6", "rule", "show"]),
        "neighbour_proxies": norm_routes(_jl(run, ["ip", "-j", "neigh", "show", "proxy"])),
    }
    rc, out, err = run(["sysctl", "-a"])
    dump["sysctls"] = norm_sysctls(out)
    tc = {}
    for link in dump["addresses"]:
        dev = link["ifname"]
        for hook in ("ingress", "egress"):
            data = _jl(run, ["tc", "-j", "filter", "show", "dev", dev, hook])
            if data:
                tc["%s/%s" % (dev, hook)] = norm_tc(data)
        q = _jl(run, ["tc", "-j", "qdisc", "show", "dev", dev])
        tc["%s/qdiscs" % dev] = sorted((x.get("kind"), x.get("handle"), x.get("parent", "root"))
                                       for x in (q if isinstance(q, list) else []))
    dump["tc"] = tc
    rc, out, err = run(["systemctl", "list-units", "--all", "--no-pager", "--plain", "--no-legend", "netscale*"])
    dump["units"] = norm_units(out) if rc == 0 else {"rc": rc}
    rc, out, err = run(["systemctl", "list-unit-files", "--no-pager", "--plain", "--no-legend", "netscale*"])
    dump["unit_files"] = sorted(line.split()[0] for line in (out or "").splitlines() if line.strip()) if rc == 0 else []
    ns = _jl(run, ["ip", "-j", "netns", "list"])
    names = sorted(n.get("name") for n in ns) if isinstance(ns, list) else []
    dump["netns"] = names
    for n in names if workload_netns is None else [x for x in names if x in workload_netns]:
        pre = ["nsenter", "--net=/run/netns/%s" % n, "--"]
        dump["netns_%s" % n] = {
            "addresses": norm_addresses(_jl(run, pre + ["ip", "-j", "address", "show"])),
            "routes_v4": norm_routes(_jl(run, pre + ["ip", "-j", "-4", "route", "show", "table", "all"])),
            "routes_v6": norm_routes(_jl(run, pre + ["ip", "-j", "-6", "route", "show", "table", "all"])),
        }
    return dump


def diff_dumps(before, after, path=""):
    """Paths where two dumps differ (empty = identical)."""
    out = []
    if isinstance(before, dict) and isinstance(after, dict):
        for k in sorted(set(before) | set(after)):
            p = "%s.%s" % (path, k) if path else str(k)
            if k not in before:
                out.append("%s: added" % p)
            elif k not in after:
                out.append("%s: removed" % p)
            else:
                out += diff_dumps(before[k], after[k], p)
    elif before != after:
        out.append("%s: %s -> %s" % (path, json.dumps(before, sort_keys=True)[:200],
                                     json.dumps(after, sort_keys=True)[:200]))
    return out


_RUNNING_HEADER = re.compile(r"^(Building configuration\.\.\.|Current configuration:|!$)")


def frr_state_dump(run):
    """Normalised, comparable state of an FRR box (see module docstring). Keys are redacted."""
    rc, out, err = run(["vtysh", "-c", "show running-config"])
    config = [line.rstrip() for line in (out or "").splitlines()
              if line.strip() and not _RUNNING_HEADER.match(line.strip())] if rc == 0 else {"rc": rc, "error": err}
    dump = {
        "running_config": redact(config),
        "addresses": norm_addresses(_jl(run, ["ip", "-j", "address", "show"])),
        # Learned routes follow the config and the peers (a reload may reset a session for a few
        # seconds); the config itself is compared above. Kernel, static and connected routes stay.
        "routes_v4": _not_learned(norm_routes(_jl(run, ["ip", "-j", "-4", "route", "show", "table", "all"]))),
        "routes_v6": _not_learned(norm_routes(_jl(run, ["ip", "-j", "-6", "route", "show", "table", "all"]))),
    }
    rc, out, err = run(["sysctl", "-a"])
    dump["sysctls"] = norm_sysctls(out)
    rc, out, err = run(["sh", "-c", 'for f in /etc/sysctl.d/*netscale*; do [ -f "$f" ] && echo "== $f" && cat "$f"; done; true'])
    dump["sysctl_d"] = (out or "").splitlines()
    return dump


def _not_learned(routes):
    return [r for r in routes if r.get("protocol") != "bgp"]
