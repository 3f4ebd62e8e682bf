# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Built-in gates of the rollout: pure functions from recorded inputs to gate values, plus the
default definition (condition, parameters, interval, count, limits) of each.

Inputs are what the fabric already reports:

- FRR: ``show bgp neighbors json`` and ``show ip[v6] route json`` (raw, or the compact facts of
  ``frr_state.collect``/``frr_facts``: ``{"neighbors": {addr: {"state": ...}}, "routes": {fam: {prefix:
  {"nexthops": n}}}}``);
- the planner's ``host_data`` of the hosts under test (NIC count, slots, per-NIC container
  addresses, task IPs) and the spine's ``spine_data`` (rack aggregates);
- ``lab_probe`` results (per-NIC byte shares per direction);
- ``ping`` output (loss);
- VipInjector status JSON per slot;
- the host datapath's own state (``datapath.json`` of the host_datapath role, ``ip -j link``, the
  per-NIC route tables in kernel mode, the pinned ``mn_nics`` map in eBPF mode) and the ToR's
  ``show bfd peers json`` (``nics_in_service``).

Each ``values_*`` function returns a flat dict of numbers (the names the conditions use) plus
``detail`` lists naming the offending host/NIC/prefix, which the report prints.
"""

from __future__ import annotations

import copy
import ipaddress
import re
import struct

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health as datapath_health
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as datapath_spec
from ansible_collections.netscale.multinic.plugins.module_utils.gates.engine import MeasurementError

# Default definitions. ``params`` are the thresholds (variables of the health_gates role).
DEFAULTS = {
    "bgp_sessions": {
        "description": "every host NIC's BGP session (one per task slot and NIC) is Established on its ToR",
        "success_condition": "established == expected and expected > 0",
        "params": {},
        "interval": 1.0, "count": 30, "failure_limit": 29, "success_threshold": 2,
    },
    "ecmp_width": {
        "description": "ToR FIB: every task IP (/32, /128) has one next hop per host NIC",
        "success_condition": "at_width == task_routes and task_routes > 0",
        "params": {},
        "interval": 1.0, "count": 30, "failure_limit": 29, "success_threshold": 2,
    },
    "spine_task_routes": {
        "description": "spines carry no route more specific than a rack aggregate (zero task routes beyond the ToR)",
        "success_condition": "task_routes <= max_task_routes and aggregates_missing == 0",
        "params": {"max_task_routes": 0},
        # a ToR config reload may reset its uplink session: the aggregate comes back within seconds
        "interval": 1.0, "count": 30, "failure_limit": 29, "success_threshold": 2,
    },
    "nic_shares": {
        "description": "traffic probe: each NIC's byte share within share_tolerance of 1/N, both directions",
        "success_condition": "directions >= min_directions and max_deviation <= share_tolerance",
        "params": {"share_tolerance": 0.10, "min_directions": 2},
        "interval": 0.0, "count": 1, "failure_limit": 0, "success_threshold": None,
    },
    "probe_loss": {
        "description": "zero loss on a probe (ping from the workload namespace)",
        "success_condition": "transmitted > 0 and loss_percent <= max_loss_percent",
        "params": {"max_loss_percent": 0.0},
        "interval": 0.0, "count": 1, "failure_limit": 0, "success_threshold": None,
    },
    "nics_in_service": {
        "description": "every NIC of the host in service: admin up with carrier, in the host's egress set "
                       "(kernel: its own default route in its table and a member of the fallback multipath routes; "
                       "eBPF: its mn_nics entry without NIC_OUT), and, measured on the ToR, the BFD session of every "
                       "slot on it up; evidence that cannot be read counts as out of service",
        "success_condition": "in_service == nics and nics > 0",
        "params": {},
        "interval": 1.0, "count": 30, "failure_limit": 29, "success_threshold": 2,
    },
    "sidecars": {
        "description": "every VipInjector sidecar is healthy: sessions up, full allocation announced, guard clean, "
                       "processes running (not stopped)",
        "success_condition": "healthy == slots and slots > 0",
        "params": {},
        "interval": 1.0, "count": 30, "failure_limit": 29, "success_threshold": 2,
    },
}

GATES = tuple(sorted(DEFAULTS))


def definition(gate, **overrides):
    """Default definition of a built-in gate with ``overrides`` (None values ignored; ``params``
    merged)."""
    if gate not in DEFAULTS:
        raise MeasurementError("gate %r: unknown built-in gate; use one of %s or a custom gate with a "
                               "success_condition" % (gate, ", ".join(GATES)))
    d = copy.deepcopy(DEFAULTS[gate])
    for k, v in overrides.items():
        if v is None:
            continue
        if k == "params":
            d["params"].update(v)
        else:
            d[k] = v
    return d


# --- FRR input normalisation -------------------------------------------------------------------

def neighbor_states(data):
    """{address: state} from raw ``show bgp neighbors json`` or compact facts."""
    if isinstance(data, dict) and isinstance(data.get("neighbors"), dict):
        data = data["neighbors"]
    out = {}
    for addr, n in (data or {}).items():
        if not isinstance(n, dict):
            continue
        state = n.get("bgpState", n.get("state"))
        if state is not None:
            out[_norm_addr(addr)] = state
    return out


def route_widths(data):
    """{prefix: next hops active in the FIB} from raw ``show ip[v6] route json`` documents (a dict or
    a list of them) or compact facts (``{"routes": {fam: {prefix: {"nexthops": n}}}}``)."""
    out = {}
    if isinstance(data, dict) and isinstance(data.get("routes"), dict):
        for fam_routes in data["routes"].values():
            for prefix, r in (fam_routes or {}).items():
                out[_norm_prefix(prefix)] = int(r.get("nexthops", 0)) if isinstance(r, dict) else int(r)
        return out
    docs = data if isinstance(data, list) else [data]
    for doc in docs:
        for prefix, entries in (doc or {}).items():
            if not isinstance(entries, list):
                continue
            best = 0
            for e in entries:
                if not e.get("selected") and not e.get("installed"):
                    continue
                hops = [h for h in e.get("nexthops") or [] if h.get("active") and h.get("fib")]
                best = max(best, len(hops))
            if prefix not in out or best:
                out[_norm_prefix(prefix)] = best
    return out


def _norm_addr(a):
    try:
        return str(ipaddress.ip_address(str(a).split("%", maxsplit=1)[0]))
    except ValueError:
        return str(a)


def _norm_prefix(p):
    try:
        return str(ipaddress.ip_network(p, strict=False))
    except ValueError:
        return str(p)


def _families(host, session_family="auto"):
    fams = [f for f in ("ipv6", "ipv4") if f in (host.get("prefix") or {})]
    if session_family != "auto":
        return [session_family] if session_family in fams else []
    return fams[:1]


# --- values per gate ---------------------------------------------------------------------------

def values_bgp_sessions(neighbors, hosts, session_family="auto"):
    """One session per (slot, NIC) of each host: the container's NIC-k address as ToR neighbor.
    ``session_family``: the transport of the sidecar sessions (auto = IPv6 when planned)."""
    states = neighbor_states(neighbors)
    expected = 0
    established = 0
    bad = []
    for h in hosts:
        for fam in _families(h, session_family):
            for slot in h.get("slots") or []:
                for nic in slot.get("nics") or []:
                    addr = _norm_addr(nic["address"][fam])
                    expected += 1
                    st = states.get(addr)
                    if st == "Established":
                        established += 1
                    else:
                        bad.append({"host": h["name"], "slot": slot["slot"], "nic": _nic_name(h, nic["index"]),
                                    "neighbor": addr, "state": st or "not configured"})
    return {"expected": expected, "established": established, "not_established": len(bad), "detail": bad}


def values_ecmp_width(routes, hosts, families=None):
    """Each task IP host route on the ToR has ``nic_count`` next hops."""
    widths = route_widths(routes)
    task_routes = 0
    at_width = 0
    present = 0   # task routes with any next hop (a drained host has none: playbooks/decommission.yml)
    min_ratio = None
    bad = []
    for h in hosts:
        want = int(h["nic_count"])
        for fam in families or [f for f in ("ipv6", "ipv4") if f in (h.get("prefix") or {})]:
            for slot in h.get("slots") or []:
                ip = slot["task_ip"].get(fam)
                if not ip:
                    continue
                prefix = "%s/%d" % (ip, 128 if ":" in ip else 32)
                prefix = _norm_prefix(prefix)
                got = widths.get(prefix, 0)
                task_routes += 1
                present += 1 if got else 0
                ratio = float(got) / want if want else 0.0
                min_ratio = ratio if min_ratio is None else min(min_ratio, ratio)
                if got == want:
                    at_width += 1
                else:
                    bad.append({"host": h["name"], "slot": slot["slot"], "prefix": prefix, "width": got,
                                "expected": want})
    return {"task_routes": task_routes, "at_width": at_width, "present": present,
            "min_width_ratio": round(min_ratio or 0.0, 4), "detail": bad}


def values_spine_task_routes(routes, rack_prefixes):
    """Routes on a spine strictly inside a rack aggregate (host routes, NIC subnets): must be 0.
    Also counts rack aggregates the spine does not have (a ToR that stopped announcing)."""
    widths = route_widths(routes)
    aggs = []
    for p in rack_prefixes or []:
        aggs.append(ipaddress.ip_network(p, strict=False))
    leaked = []
    for prefix in widths:
        try:
            net = ipaddress.ip_network(prefix, strict=False)
        except ValueError:
            continue
        for agg in aggs:
            if net.version == agg.version and net.prefixlen > agg.prefixlen and net.subnet_of(agg):
                leaked.append(prefix)
                break
    missing = [str(a) for a in aggs if widths.get(str(a), 0) == 0]
    return {"task_routes": len(leaked), "aggregates": len(aggs), "aggregates_missing": len(missing),
            "detail": sorted(leaked)[:50] + ["missing aggregate %s" % m for m in missing]}


def values_nic_shares(probe, nic_count=None):
    """Per-NIC byte shares of a lab_probe result, per direction (``up``: host tx, ``down``: host rx).
    ``max_deviation``: largest |share - 1/N| over NICs and directions."""
    if not isinstance(probe, dict):
        raise MeasurementError("probe result is %s, not a dict" % type(probe).__name__)
    if not nic_count:
        # Without the host's NIC count a probe that saw one NIC would judge itself balanced.
        raise MeasurementError("nic_shares needs the host's NIC count (pass hosts with exactly one host)")
    per = {}
    worst = 0.0
    min_share = None
    idle = []
    worst_nic = None
    for direction in ("up", "down"):
        d = probe.get(direction)
        if not isinstance(d, dict) or not d.get("nic_shares"):
            continue
        shares = dict(d["nic_shares"])
        n = int(nic_count)
        ideal = 1.0 / n
        # A NIC the probe did not report carried nothing that was measured: share 0, never "balanced".
        for k in range(max(0, n - len(shares))):
            shares["(missing %d)" % (k + 1)] = 0.0
        total = sum((d.get("nic_bytes") or {}).values()) if d.get("nic_bytes") else None
        dev = {}
        for nic, s in sorted(shares.items()):
            dev[nic] = round(abs(float(s) - ideal), 4)
            if dev[nic] > worst:
                worst, worst_nic = dev[nic], "%s %s" % (direction, nic)
            min_share = float(s) if min_share is None else min(min_share, float(s))
            if float(s) == 0.0:
                idle.append("%s %s" % (direction, nic))
        if total == 0:
            idle.append("%s (no bytes at all)" % direction)
        per[direction] = {"shares": dict(shares), "ideal": round(ideal, 4), "deviation": dev,
                          "jain_index": d.get("jain_index"), "mbit_per_second": d.get("mbit_per_second")}
    if not per:
        raise MeasurementError("probe result has no per-NIC shares (keys: %s)" % ", ".join(sorted(probe)))
    return {"directions": len(per), "max_deviation": round(worst, 4), "min_share": round(min_share or 0.0, 4),
            "idle_nics": len(idle), "worst": worst_nic, "per_direction": per,
            "detail": idle}


_PING_RE = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")


def values_probe_loss(ping_output=None, transmitted=None, received=None):
    """Loss of a ping probe, from ping's summary line or given counters."""
    if ping_output is not None:
        m = _PING_RE.search(ping_output)
        if not m:
            raise MeasurementError("no ping summary line in output: %r" % ping_output[-200:])
        transmitted, received = int(m.group(1)), int(m.group(2))
    if transmitted is None or received is None:
        raise MeasurementError("probe_loss needs ping output or transmitted/received counts")
    loss = 100.0 * (transmitted - received) / transmitted if transmitted else 100.0
    return {"transmitted": transmitted, "received": received, "lost": transmitted - received,
            "loss_percent": round(loss, 3), "detail": []}


def values_sidecars(instances, slots=None):
    """VipInjector status per slot (``vipinjector_status`` ``instances`` or the raw status JSON per
    slot): healthy = present, every session up, full allocation announced on each, guard clean, and the helper
    and its ExaBGP running (``processes`` from the measurement: not stopped, not gone)."""
    instances = instances or {}
    want = [str(s) for s in (slots or sorted(instances, key=int))]
    healthy = 0
    bad = []
    for s in want:
        st = instances.get(s) or instances.get(int(s)) if isinstance(instances, dict) else None
        reasons = []
        if not st or st.get("present") is False:
            reasons.append("no status file")
        else:
            sessions = st.get("sessions") or []
            alloc = sorted(st.get("allocation") or [])
            down = [x.get("nic") for x in sessions if x.get("state") != "up"]
            if not sessions:
                reasons.append("no sessions")
            if down:
                reasons.append("sessions down on NIC %s" % ", ".join(str(d) for d in down))
            partial = [x.get("nic") for x in sessions
                       if x.get("state") == "up" and sorted(x.get("announced") or []) != alloc]
            if partial:
                reasons.append("allocation not fully announced on NIC %s" % ", ".join(str(p) for p in partial))
            if (st.get("guard") or {}).get("refused"):
                reasons.append("guard refused the config")
            if st.get("drained"):
                reasons.append("drained")
            if (st.get("health") or {}).get("up") is False:
                reasons.append("workload health down")
            for proc in st.get("processes") or []:
                if proc.get("state") == "gone":
                    reasons.append("process %s that wrote the status is gone (stale status file)" % proc.get("pid"))
                elif proc.get("state") in ("T", "t"):
                    reasons.append("process %s (%s) stopped (SIGSTOP or traced): its sessions stay Established "
                                   "until the hold timer, nothing is announced or withdrawn"
                                   % (proc.get("pid"), proc.get("name")))
                elif proc.get("state") in ("Z", "X"):
                    reasons.append("process %s (%s) is dead (state %s)"
                                   % (proc.get("pid"), proc.get("name"), proc.get("state")))
        if reasons:
            bad.append({"slot": int(s), "reasons": reasons})
        else:
            healthy += 1
    return {"slots": len(want), "healthy": healthy, "unhealthy": len(bad), "detail": bad}


# mn_nics value (struct nic_val: ifindex, flags, gw4, gw6) and its NIC_OUT flag bit, set by the host's NIC
# watcher when it takes a NIC out of the egress set (defined once, in datapath/health.py).
MN_NICS_VALUE = datapath_health.NIC_VAL
NIC_OUT = datapath_health.NIC_OUT


def _hex_bytes(items):
    return bytes(int(x, 16) for x in items)


def _mn_nics(dump):
    """{index: (ifindex, flags)} from ``bpftool -j map dump`` of mn_nics (raw hex bytes or BTF-formatted)."""
    out = {}
    for e in dump or []:
        if "formatted" in e and isinstance(e["formatted"], dict):
            f = e["formatted"]
            val = f.get("value") or {}
            out[int(f.get("key"))] = (int(val.get("ifindex", 0)), int(val.get("flags", 0)))
            continue
        key = _hex_bytes(e["key"])
        val = _hex_bytes(e.get("value") or [])
        if len(key) != 4 or len(val) < 8:
            continue
        ifindex, flags = struct.unpack("<II", val[:8])
        out[struct.unpack("<I", key)[0]] = (ifindex, flags)
    return out


def _route_devs(route):
    """[(dev, flags)] of a route of ``ip -j route show`` (one entry per next hop)."""
    if route.get("nexthops"):
        return [(n.get("dev"), list(n.get("flags") or []) + list(route.get("flags") or []))
                for n in route["nexthops"]]
    return [(route.get("dev"), list(route.get("flags") or []))]


_DEAD_FLAGS = ("linkdown", "dead")


def _datapath_reasons(dp, nic):
    """Reasons NIC ``nic`` (planner host data entry) of the host is out of service by the host's own state
    (``dp``: the ``datapath`` record of measure.datapath_input); empty = in service."""
    if not dp or not dp.get("configured"):
        return ["no datapath state on the host (%s): cannot tell the NIC is in service"
                % ((dp or {}).get("error") or "not configured")]
    reasons = []
    name, index = nic.get("name"), int(nic["index"])
    spec_nic = next((n for n in dp.get("nics") or [] if n.get("name") == name), None)
    if spec_nic is None:
        return ["not a NIC of the deployed datapath (datapath.json lists %s)"
                % ", ".join(str(n.get("name")) for n in dp.get("nics") or [])]
    if dp.get("links_error"):
        return ["links not readable: %s" % dp["links_error"]]
    link = next((ln for ln in dp.get("links") or [] if ln.get("ifname") == name), None)
    if link is None:
        return ["link %s not found on the host" % name]
    flags = link.get("flags") or []
    if "UP" not in flags:
        reasons.append("admin down")
    elif "LOWER_UP" not in flags or "NO-CARRIER" in flags:
        reasons.append("carrier down (operstate %s)" % link.get("operstate", "?"))
    if dp.get("ebpf"):
        if dp.get("mn_nics_error"):
            reasons.append("mn_nics not readable: %s" % dp["mn_nics_error"])
            return reasons
        entry = _mn_nics(dp.get("mn_nics")).get(index)
        if not entry or not entry[0]:
            reasons.append("no mn_nics entry %d: not in the egress set" % index)
        elif entry[0] != link.get("ifindex"):
            reasons.append("mn_nics entry %d points at ifindex %d, %s is %s" % (index, entry[0], name, link.get("ifindex")))
        elif entry[1] & NIC_OUT:
            reasons.append("taken out of the egress set (NIC_OUT set in mn_nics)")
        return reasons
    base = int(dp.get("table_base", 0))
    own_metric = int(dp.get("metric_own", datapath_spec.METRIC_OWN))
    fb_metric = int(dp.get("metric_fallback", datapath_spec.METRIC_FALLBACK))
    nic_count = len(dp.get("nics") or [])
    for fam in spec_nic.get("families") or []:
        tables = (dp.get("routes") or {}).get(fam) or {}
        table = str(base + index)
        if table not in tables:
            reasons.append("%s routes of table %s not readable: %s" % (fam, table, (dp.get("routes_error") or {}).get(
                "%s/%s" % (fam, table), "not measured")))
            continue
        own = [r for r in tables[table] if r.get("dst") == "default" and int(r.get("metric", 0) or 0) == own_metric]
        devs = [d for r in own for d in _route_devs(r)]
        if not any(d == name for d, dummy in devs):
            reasons.append("no own %s default route in table %s (metric %d): not in the egress set" % (fam, table, own_metric))
        elif any(d == name and any(f in _DEAD_FLAGS for f in fl) for d, fl in devs):
            reasons.append("own %s default route in table %s is linkdown" % (fam, table))
        if nic_count < 2:
            continue
        # a member of the fallback multipath default route of every NIC's table (where that table was read)
        for other in sorted(tables):
            fb = [r for r in tables[other] if r.get("dst") == "default" and int(r.get("metric", 0) or 0) == fb_metric]
            members = [d for r in fb for d, dummy in _route_devs(r)]
            if fb and name not in members:
                reasons.append("left out of the %s fallback multipath default route of table %s" % (fam, other))
    return reasons


def _bfd_status(peers):
    """{peer address: status} from ``show bfd peers json`` (a list of peers)."""
    out = {}
    for p in peers or []:
        if isinstance(p, dict) and p.get("peer"):
            out[_norm_addr(p["peer"])] = p.get("status", "unknown")
    return out


def values_nics_in_service(data, hosts, session_family="auto"):
    """Every NIC of ``hosts`` in service, by the evidence ``data`` holds: ``datapath`` (the host's own record,
    measure.datapath_input: link, egress set) and/or ``bfd_peers`` (the ToR's ``show bfd peers json``: the BFD
    session of each (slot, NIC) BGP neighbor). A NIC with any reason is out of service; evidence that cannot
    be read is a reason (never a pass)."""
    if isinstance(data, list):
        data = {"bfd_peers": data}
    if not isinstance(data, dict) or not ("datapath" in data or "bfd_peers" in data):
        raise MeasurementError("nics_in_service needs a datapath record (source datapath, on the host) or the "
                               "ToR's show bfd peers json (source frr)")
    evidence = [k for k in ("datapath", "bfd_peers") if k in data]
    bfd = _bfd_status(data["bfd_peers"]) if "bfd_peers" in data else None
    dp = data.get("datapath")
    if dp is not None and len(hosts) != 1:
        raise MeasurementError("nics_in_service with a host's datapath record needs hosts with exactly that host")
    nics = in_service = bfd_sessions = bfd_up = 0
    bad = []
    for h in hosts:
        for nic in sorted(h.get("nics") or [], key=lambda n: int(n["index"])):
            nics += 1
            reasons = []
            if dp is not None:
                if dp.get("host") and dp["host"] != h["name"]:
                    reasons.append("datapath state is of host %s" % dp["host"])
                else:
                    reasons.extend(_datapath_reasons(dp, nic))
            if bfd is not None:
                for slot in h.get("slots") or []:
                    for sn in slot.get("nics") or []:
                        if int(sn["index"]) != int(nic["index"]):
                            continue
                        for fam in _families(h, session_family):
                            addr = _norm_addr(sn["address"][fam])
                            bfd_sessions += 1
                            st = bfd.get(addr)
                            if st == "up":
                                bfd_up += 1
                            else:
                                reasons.append("BFD session of slot %s (ToR peer %s) %s"
                                               % (slot["slot"], addr, st or "not on the ToR"))
            if reasons:
                bad.append({"host": h["name"], "nic": nic.get("name", "nic%d" % nic["index"]),
                            "index": int(nic["index"]), "reasons": reasons})
            else:
                in_service += 1
    out = {"nics": nics, "in_service": in_service, "out_of_service": len(bad), "evidence": "+".join(evidence),
           "detail": bad}
    if dp is not None:
        out["mode"] = ("ebpf" if dp.get("ebpf") else "kernel") if dp.get("configured") else "unknown"
    if bfd is not None:
        out.update({"bfd_sessions": bfd_sessions, "bfd_up": bfd_up})
    return out


def _nic_name(host, index):
    for n in host.get("nics") or []:
        if n.get("index") == index:
            return n.get("name", "nic%d" % index)
    return "nic%d" % index


def values_for(gate, data, hosts=None, rack_prefixes=None, session_family="auto", slots=None):
    """Dispatch: values of built-in ``gate`` from its recorded input ``data``."""
    hosts = hosts or []
    if gate == "bgp_sessions":
        return values_bgp_sessions(data, hosts, session_family)
    if gate == "ecmp_width":
        return values_ecmp_width(data, hosts)
    if gate == "spine_task_routes":
        return values_spine_task_routes(data, rack_prefixes)
    if gate == "nic_shares":
        return values_nic_shares(data, hosts[0]["nic_count"] if len(hosts) == 1 else None)
    if gate == "probe_loss":
        if isinstance(data, str):
            return values_probe_loss(ping_output=data)
        return values_probe_loss(transmitted=(data or {}).get("transmitted"), received=(data or {}).get("received"))
    if gate == "nics_in_service":
        return values_nics_in_service(data, hosts, session_family)
    if gate == "sidecars":
        if isinstance(data, dict) and isinstance(data.get("instances"), dict):
            data = data["instances"]
        return values_sidecars(data, slots)
    raise MeasurementError("gate %r: unknown built-in gate; use one of %s" % (gate, ", ".join(GATES)))
