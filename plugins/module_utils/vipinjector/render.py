# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render one VipInjector instance (one task slot) from the planner's host data.

Pure Python, no Ansible imports. ``render_instance(host_data, slot, options)`` returns the three
files of an instance — the ExaBGP configuration, its environment file and the helper's JSON
configuration — after checking them with the same guard the helper runs at start
(``runtime.scan_exabgp_config``). ``exabgp_validate()`` runs ExaBGP's own validator.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os
import subprocess
import tempfile

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector.guard import (
    Allocation, GuardError, scan_exabgp_config)
from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact

DEFAULTS = {
    "install_dir": "/opt/netscale-vipinjector",
    "config_dir": "/etc/netscale-vipinjector",
    "runtime_dir": "/run/netscale-vipinjector",
    "session_family": "auto",  # auto (ipv6 when planned), ipv6, ipv4
    "announce_families": ["ipv4", "ipv6"],
    "hold_time": 9,
    "outgoing_ttl": 255,  # GTSM ('ttl-security hops N' on the ToR) wants 255; null = OS default
    "incoming_ttl": None,  # minimum TTL accepted from the ToR (GTSM on our side); null = off
    "md5_password": None,
    # no default type: a slot is deployed with an explicit health check, or with type none as consent
    "health": {"type": None, "interval": 1.0, "rise": 2, "fall": 3, "timeout": 1.0},
    "path_check": {"type": "route", "interval": 1.0, "rise": 2, "fall": 2, "timeout": 1.0},
    "drain_poll": 0.1,
    # hung-ExaBGP watchdog: a command unacknowledged for `timeout` s gets ExaBGP SIGKILLed (the kernel
    # closes its sessions, systemd restarts it); idle, a no-op probe every `interval` s. Worst-case
    # detection interval + timeout (1.25 s).
    "watchdog": {"enabled": True, "interval": 0.25, "timeout": 1.0, "start_timeout": 10.0},
    # the host NIC watcher's published egress set (host_datapath role): the helper withdraws the task IP
    # on the session of every NIC the watcher took out, so the ToR stops sending on it too; file null = off
    "egress_state": {"file": "/run/netscale-multinic/egress-state.json", "poll": 0.05, "stale_after": 5.0},
    # the host's admin-drain marker (module_utils/drain_marker.py, written by fabric_drain): the helper withdraws on
    # the sessions of the drained NICs, or everything when the host is drained; file null = off
    "admin_drain": {"file": "/var/lib/netscale-multinic/admin-drain.json"},
    "require_local_task_ip": True,
    "metrics_file": None,  # default: <runtime_dir>/slot<s>/vipinjector.prom
    "log_level": "INFO",
}
_FAMILIES = ("ipv4", "ipv6")
_HEALTH_TYPES = ("none", "command", "tcp", "http")
_PATH_TYPES = ("none", "route", "command", "tcp")
_LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "NOTICE", "INFO")  # never DEBUG: it logs the MD5 key


class RenderError(MultinicError, ValueError):
    """Bad input: names the field, the value and the fix."""


def _fail(field, value, message, fix):
    raise RenderError("%s: %s (value: %r). Fix: %s" % (field, message, value, fix))


def merge_options(options):
    opts = copy.deepcopy(DEFAULTS)
    for k, v in (options or {}).items():
        if k not in DEFAULTS:
            _fail("vipinjector option %s" % k, v, "unknown option",
                  "use one of: %s" % ", ".join(sorted(DEFAULTS)))
        if isinstance(DEFAULTS[k], dict) and isinstance(v, dict):
            merged = copy.deepcopy(DEFAULTS[k])
            if k in ("health", "path_check") and v.get("type") not in (None, merged["type"]):
                merged = dict((kk, vv) for kk, vv in merged.items()
                              if kk in ("interval", "rise", "fall", "timeout"))
            merged.update(v)
            opts[k] = merged
        elif v is not None or k in ("outgoing_ttl", "incoming_ttl", "md5_password", "metrics_file"):
            opts[k] = v
    return opts


def _check_options(o):
    if o["session_family"] not in ("auto",) + _FAMILIES:
        _fail("session_family", o["session_family"], "unknown family", "use auto, ipv6 or ipv4")
    fams = o["announce_families"]
    if not fams or any(f not in _FAMILIES for f in fams):
        _fail("announce_families", fams, "must be a non-empty subset of [ipv4, ipv6]",
              "list the families whose task IP to announce")
    ht = o["hold_time"]
    if not isinstance(ht, int) or isinstance(ht, bool) or not (ht == 0 or 3 <= ht <= 65535):
        _fail("hold_time", ht, "BGP hold time must be 0 or 3..65535 seconds",
              "match the ToR's timers (3/9: hold_time 9)")
    for f in ("outgoing_ttl", "incoming_ttl"):
        v = o[f]
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 255):
            _fail(f, v, "TTL must be 1..255 or null", "255 for GTSM, null for the OS default")
    h = o["health"]
    if h.get("type") is None:
        _fail("health.type", None, "no health check is set: a slot deployed without one keeps announcing its "
              "task IP (and attracting traffic) while its workload is dead",
              "set health (role: vipinjector_health) to {type: command, command: [...]}, {type: tcp, host: H, "
              "port: P} or {type: http, url: U}; or set type: none explicitly to deploy without a health check "
              "(consent, reported as a warning)")
    if h.get("type") not in _HEALTH_TYPES:
        _fail("health.type", h.get("type"), "unknown health check type",
              "use one of %s" % ", ".join(_HEALTH_TYPES))
    need = {"command": ("command",), "tcp": ("host", "port"), "http": ("url",)}.get(h["type"], ())
    for k in need:
        if not h.get(k):
            _fail("health.%s" % k, h.get(k), "required for health.type %s" % h["type"], "set it")
    p = o["path_check"]
    if p.get("type") not in _PATH_TYPES:
        _fail("path_check.type", p.get("type"), "unknown path check type",
              "use one of %s" % ", ".join(_PATH_TYPES))
    if p["type"] == "command" and not p.get("command"):
        _fail("path_check.command", None, "required for path_check.type command", "set it")
    for sect, spec in (("health", h), ("path_check", p)):
        for k in ("rise", "fall"):
            if not isinstance(spec.get(k), int) or spec[k] < 1:
                _fail("%s.%s" % (sect, k), spec.get(k), "must be an integer >= 1", "e.g. 2")
        for k in ("interval", "timeout"):
            try:
                val = float(spec.get(k))
            except (TypeError, ValueError):
                val = -1
            if val <= 0:
                _fail("%s.%s" % (sect, k), spec.get(k), "must be a positive number of seconds", "e.g. 1")
    w = o["watchdog"]
    if not isinstance(w, dict) or set(w) - {"enabled", "interval", "timeout", "start_timeout"}:
        _fail("watchdog", w, "must be a mapping of enabled, interval, timeout, start_timeout",
              "e.g. {enabled: true, interval: 0.25, timeout: 1.0}")
    if not isinstance(w.get("enabled"), bool):
        _fail("watchdog.enabled", w.get("enabled"), "must be true or false",
              "true (a hung ExaBGP keeps its routes until the BGP hold timer otherwise)")
    for k, lo, hi in (("interval", 0.05, 60.0), ("timeout", 0.2, 60.0), ("start_timeout", 1.0, 300.0)):
        _check_seconds("watchdog", w, k, lo, hi,
                       "defaults: interval 0.25, timeout 1.0, start_timeout 10; interval + timeout bounds the "
                       "time a hung ExaBGP keeps its routes")
    e = o["egress_state"]
    if not isinstance(e, dict) or set(e) - {"file", "poll", "stale_after"}:
        _fail("egress_state", e, "must be a mapping of file, poll, stale_after",
              "e.g. {file: /run/netscale-multinic/egress-state.json, poll: 0.05, stale_after: 5.0}")
    f = e.get("file")
    if f is not None and (not isinstance(f, str) or not f.startswith("/") or "\n" in f):
        _fail("egress_state.file", f, "must be an absolute path or null",
              "the NIC watcher's /run/netscale-multinic/egress-state.json, or null to ignore the egress set")
    for k, lo, hi in (("poll", 0.01, 10.0), ("stale_after", 1.5, 3600.0)):
        _check_seconds("egress_state", e, k, lo, hi,
                       "defaults: poll 0.05, stale_after 5.0 (above the watcher's 1 s rewrite while a NIC is out)")
    a = o["admin_drain"]
    if not isinstance(a, dict) or set(a) - {"file"}:
        _fail("admin_drain", a, "must be a mapping with file",
              "e.g. {file: /var/lib/netscale-multinic/admin-drain.json}")
    f = a.get("file")
    if f is not None and (not isinstance(f, str) or not f.startswith("/") or "\n" in f):
        _fail("admin_drain.file", f, "must be an absolute path or null",
              "the host's /var/lib/netscale-multinic/admin-drain.json (fabric_drain), or null to ignore it")
    if o["log_level"] not in _LOG_LEVELS:
        _fail("log_level", o["log_level"], "unsupported log level (DEBUG would log the MD5 key)",
              "use one of %s" % ", ".join(_LOG_LEVELS))
    pw = o["md5_password"]
    if pw is not None:
        # no whitespace either: redaction (writing.redact) takes a key up to the first blank, and
        # the ToR policy refuses blanks in its keys
        if (not isinstance(pw, str) or not pw or len(pw) > 80 or any(c in pw for c in "\"'\\;{}")
                or any(c.isspace() or not c.isprintable() for c in pw)):
            _fail("md5_password", "<hidden>", "must be 1..80 printable characters without blanks, quotes, "
                  "backslash, ';' or braces", "choose another key in the vault")


def _check_seconds(section, spec, key, lo, hi, fix):
    """``spec[key]`` must be a number of seconds in lo..hi (not a boolean)."""
    try:
        val = float(spec.get(key))
    except (TypeError, ValueError):
        val = -1
    if isinstance(spec.get(key), bool) or not lo <= val <= hi:
        _fail("%s.%s" % (section, key), spec.get(key), "must be a number of seconds in %g..%g" % (lo, hi), fix)


def _find_slot(host, slot):
    for s in host.get("slots") or []:
        if int(s["slot"]) == int(slot):
            return s
    _fail("slot", slot, "host %s has no such task slot" % host.get("name"),
          "use one of %s" % [s["slot"] for s in host.get("slots") or []])


def _router_id(slot_data):
    v4 = (slot_data.get("task_ip") or {}).get("ipv4")
    if v4:
        return v4
    v6 = ipaddress.IPv6Address(slot_data["task_ip"]["ipv6"])
    return str(ipaddress.IPv4Address(int(v6) & 0xFFFFFFFF or 1))


def instance_name(slot):
    return "slot%d" % int(slot)


def paths_for(options, slot):
    name = instance_name(slot)
    cdir = os.path.join(options["config_dir"], name)
    rdir = os.path.join(options["runtime_dir"], name)
    return {
        "config_dir": cdir,
        "exabgp_conf": os.path.join(cdir, "exabgp.conf"),
        "exabgp_env": os.path.join(cdir, "exabgp.env"),
        "helper_json": os.path.join(cdir, "helper.json"),
        "runtime_dir": rdir,
        "status_file": os.path.join(rdir, "status.json"),
        "metrics_file": options["metrics_file"] or os.path.join(rdir, "vipinjector.prom"),
        "drain_files": [os.path.join(options["runtime_dir"], "drain"),
                        os.path.join(options["runtime_dir"], "%s.drain" % name)],
        "python": os.path.join(options["install_dir"], "venv", "bin", "python3"),
        "helper": os.path.join(options["install_dir"], "bin", "vipinjector-helper"),
        "exabgp": os.path.join(options["install_dir"], "venv", "bin", "exabgp"),
    }


def build_model(host, slot, options=None):
    """The structured model of one instance (reviewable; the files are rendered from it)."""
    o = merge_options(options)
    _check_options(o)
    for k in ("name", "asn", "tor_asn", "nics", "slots"):
        if k not in host:
            _fail("multinic_host.%s" % k, None, "missing from the host data",
                  "pass the planner's host_data (inventory variable multinic_host)")
    sd = _find_slot(host, slot)
    fam = o["session_family"]
    if fam == "auto":
        fam = "ipv6" if host["nics"][0].get("gateway", {}).get("ipv6") else "ipv4"
    task = sd.get("task_ip") or {}
    announce = [f for f in o["announce_families"] if task.get(f)]
    if not announce:
        _fail("announce_families", o["announce_families"],
              "slot %s of %s has no task IP in these families" % (slot, host["name"]),
              "announce the families the plan allocates (%s)" % sorted(task))
    prefixes = []
    for f in announce:
        a = ipaddress.ip_address(task[f])
        prefixes.append("%s/%d" % (a, a.max_prefixlen))
    nic_addr = dict((int(n["index"]), n["address"]) for n in sd["nics"])
    sessions = []
    for nic in host["nics"]:
        k = int(nic["index"])
        gw = (nic.get("gateway") or {}).get(fam)
        local = (nic_addr.get(k) or {}).get(fam)
        if not gw or not local:
            _fail("session_family", fam, "NIC %d of %s has no %s gateway/address in the plan"
                  % (k, host["name"], fam), "use the family the fabric plans (ipv6 or ipv4)")
        subnet = ipaddress.ip_network(nic["subnet"][fam])
        for what, val in (("gateway", gw), ("container address", local)):
            if ipaddress.ip_address(val) not in subnet:
                _fail("multinic_host.nics[%d]" % k, val, "%s outside NIC subnet %s" % (what, subnet),
                      "re-plan: the plan is inconsistent")
        nh = {}
        for f in announce:
            v = (nic_addr.get(k) or {}).get(f)
            if not v:
                _fail("announce_families", f, "NIC %d of slot %s has no %s address for the next hop"
                      % (k, slot, f), "announce only planned families")
            nh[f] = v
        sessions.append({"nic": k, "name": nic.get("name", "eth%d" % k), "peer": gw, "local": local,
                         "next_hop": nh})
    # The task IP must sit in NIC 0's subnet (graceful degradation through the subnet route).
    for f in announce:
        s0 = ipaddress.ip_network(host["nics"][0]["subnet"][f])
        if ipaddress.ip_address(task[f]) not in s0:
            _fail("slots[%s].task_ip.%s" % (slot, f), task[f], "task IP outside NIC 0's subnet %s" % s0,
                  "re-plan: task IPs are carved from NIC 0's subnet")
    p = paths_for(o, slot)
    return {
        "instance": "%s/%s" % (host["name"], instance_name(slot)),
        "host": host["name"],
        "slot": int(slot),
        "netns": sd.get("netns", "mn-slot%d" % int(slot)),
        "local_as": int(host["asn"]),
        "peer_as": int(host["tor_asn"]),
        "router_id": _router_id(sd),
        "session_family": fam,
        "prefixes": prefixes,
        "sessions": sessions,
        "options": o,
        "paths": p,
    }


def _q(s):
    return '"%s"' % s


def render_exabgp_conf(m):
    o = m["options"]
    p = m["paths"]
    run = "%s %s --config %s" % (p["python"], p["helper"], p["helper_json"])
    lines = [
        "# netscale.multinic VipInjector %s -- rendered by Ansible from the fabric plan; do not edit." % m["instance"],
        "# Announces nothing by itself: the helper announces %s while healthy." % ", ".join(m["prefixes"]),
        "",
        "process vipinjector {",
        "    run %s;" % run,
        "    encoder text;",
        "}",
        "",
        "template {",
        "    neighbor vipinjector {",
        "        local-as %d;" % m["local_as"],
        "        peer-as %d;" % m["peer_as"],
        "        router-id %s;" % m["router_id"],
        "        hold-time %d;" % o["hold_time"],
        "        group-updates false;",
    ]
    if o["outgoing_ttl"] is not None:
        lines.append("        outgoing-ttl %d;" % o["outgoing_ttl"])
    if o["incoming_ttl"] is not None:
        lines.append("        incoming-ttl %d;" % o["incoming_ttl"])
    lines += ["        family {"]
    for f in sorted(set(s for s in m["options"]["announce_families"]
                        if any(pp for pp in m["prefixes"] if (":" in pp) == (s == "ipv6")))):
        lines.append("            %s unicast;" % f)
    lines += [
        "        }",
        "        capability {",
        "            route-refresh;",
        "        }",
        "        api {",
        "            processes [ vipinjector ];",
        "            neighbor-changes;",
        "        }",
        "    }",
        "}",
        "",
    ]
    for s in m["sessions"]:
        lines += [
            "neighbor %s {" % s["peer"],
            "    inherit vipinjector;",
            "    description %s;" % _q("%s nic%d %s" % (m["instance"], s["nic"], s["name"])),
            "    local-address %s;" % s["local"],
        ]
        if o["md5_password"]:
            lines.append("    md5-password %s;" % _q(o["md5_password"]))
        lines += ["}", ""]
    return "\n".join(lines)


def render_env(m):
    o = m["options"]
    env = [
        ("exabgp_api_cli", "false"),
        ("exabgp_api_ack", "true"),
        ("exabgp_api_encoder", "text"),
        ("exabgp_api_respawn", "true"),
        # a helper that keeps dying takes ExaBGP down with it: sessions close, routes go,
        # systemd restarts the whole instance
        ("exabgp_api_terminate", "true"),
        ("exabgp_daemon_daemonize", "false"),
        ("exabgp_log_destination", "stdout"),
        ("exabgp_log_level", o["log_level"]),
        ("exabgp_log_packets", "false"),
        ("exabgp_log_message", "false"),
        ("exabgp_log_network", "true"),
        # ExaBGP's reactor sleeps a hundredth of this between idle loops: 10 ms by default, 100 wake-ups a second
        # per sidecar, 1.6-2.2 % of a core each while nothing happens (bench/sidecar_idle_cpu.py). The helper's commands
        # and the peers' messages wake it at once (their descriptors are polled), so only its own timers
        # (keepalives every 3 s, connection retries) move by up to 50 ms.
        ("exabgp_reactor_speed", "5.0"),
    ]
    head = "# netscale.multinic VipInjector %s -- ExaBGP environment (systemd EnvironmentFile)\n" % m["instance"]
    return head + "".join("%s=%s\n" % kv for kv in env)


def helper_config(m):
    o = m["options"]
    p = m["paths"]
    return {
        "instance": m["instance"],
        "allocation": list(m["prefixes"]),
        "sessions": [{"nic": s["nic"], "peer": s["peer"], "local": s["local"], "next_hop": s["next_hop"]}
                     for s in m["sessions"]],
        "health": o["health"],
        "path_check": o["path_check"],
        "drain_files": p["drain_files"],
        "drain_poll": o["drain_poll"],
        "watchdog": dict(o["watchdog"]),
        "egress_state": dict(o["egress_state"]),
        "admin_drain": dict(o["admin_drain"]),
        "status_file": p["status_file"],
        "metrics_file": p["metrics_file"],
        "require_local_task_ip": bool(o["require_local_task_ip"]),
        "guard_config": True,
    }


def render_instance(host, slot, options=None):
    """Return ``{"model": ..., "files": {"exabgp.conf": str, "exabgp.env": str, "helper.json": str}}``.

    Raises RenderError on bad input and GuardError if the rendered configuration would announce
    anything outside the slot's allocation (cannot happen unless this code is broken; checked
    anyway — the same check the helper runs at start)."""
    m = build_model(host, slot, options)
    conf = render_exabgp_conf(m)
    hc = helper_config(m)
    findings = check_config_text(conf, hc)
    if findings:
        raise GuardError("; ".join(f["message"] for f in findings))
    # The helper runs only this configuration: it compares the live file with it, line by line
    # (redacted on both sides, so no key is stored here).
    hc["exabgp_config_rendered"] = redact(conf)
    return {
        "model": m,
        "files": {
            "exabgp.conf": conf,
            "exabgp.env": render_env(m),
            "helper.json": json.dumps(hc, indent=2, sort_keys=True) + "\n",
        },
    }


def check_config_text(conf_text, helper_cfg):
    """The guard over a configuration text (rendered or hand-edited)."""
    alloc = Allocation(helper_cfg["allocation"], helper_cfg["sessions"])
    return scan_exabgp_config(conf_text, alloc)


def exabgp_validate(conf_text, exabgp_bin="exabgp", env=None, timeout=60):
    """Run ``exabgp validate`` on a configuration text. Returns (ok, output)."""
    fd, path = tempfile.mkstemp(prefix="vipinjector-", suffix=".conf")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(conf_text)
        e = dict(os.environ)
        e.update({"exabgp_api_cli": "false"})
        e.update(env or {})
        r = subprocess.run([exabgp_bin, "validate", path], capture_output=True, text=True,
                           timeout=timeout, env=e, check=False)
        out = (r.stdout + r.stderr).replace(path, "<config>")
        return r.returncode == 0, out
    finally:
        os.unlink(path)
