# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every device of a plan at once, plus what is derived from a structured config (redacted copy,
FIB size)."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.error import TorPolicyError
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.render import render
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.spine import spine_structured_config
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.tor import tor_structured_config
from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact as redact_secrets


def build_fabric_configs(plan, options=None, md5_keys=None, devices=None, spine_options=None):
    """Structured and rendered configs for every ToR and spine of a plan (or the named ones).

    ``spine_options`` defaults to ``options`` (its ``spine_networks`` are what spines originate).
    Returns {device name: {"structured": dict, "text": str, "kind": "tor"|"spine"}}. Errors of every
    device are collected and raised together.
    """
    topo = plan.topo
    want = set(devices) if devices else None
    out = {}
    problems = []
    for rack in topo.racks:
        name = rack.pins["tor_name"]
        if want is not None and name not in want:
            continue
        try:
            sc = tor_structured_config(plan.rack_data(rack), options, md5_keys)
        except TorPolicyError as exc:
            problems.extend(exc.problems)
            continue
        out[name] = {"kind": "tor", "structured": sc, "text": render(sc)}
    spine_opts = dict(options or {}) if spine_options is None else spine_options
    for spine in topo.spines:
        if want is not None and spine.name not in want:
            continue
        try:
            sc = spine_structured_config(plan.spine_data(spine), spine_opts, md5_keys=md5_keys)
        except TorPolicyError as exc:
            problems.extend(exc.problems)
            continue
        out[spine.name] = {"kind": "spine", "structured": sc, "text": render(sc)}
    if problems:
        raise TorPolicyError(problems)
    if want is not None:
        missing = sorted(want - set(out))
        if missing:
            raise TorPolicyError([InputProblem("devices", missing, "no ToR or spine of that name in the fabric",
                                               "use names from the topology (ToR: <rack>-tor or racks[].tor.name)")])
    return out


def redact(structured):
    """Copy of a structured config without secrets (for intended/structured_configs and logs)."""
    return redact_secrets(structured)


def fib_size(structured):
    """Routes a ToR holds for its rack at full occupancy (computed, per family).

    host routes: one per task IP; connected: one per host NIC subnet plus uplinks and loopback;
    aggregate: the rack's own blackhole; remote: other racks' aggregates learned from spines.
    """
    out = {}
    for f in structured["families"]:
        host_routes = sum(len(g["task_ips"][f]) for g in structured["host_groups"])
        ports = sum(1 for i in structured["interfaces"] if i.get("host_port")) or \
            sum(g["nic_count"] for g in structured["host_groups"])
        ups = len([u for u in structured["uplinks"] if u["family"] == f])
        out[f] = {"host_routes": host_routes, "host_route_next_hops": sum(
            len(g["task_ips"][f]) * g["nic_count"] for g in structured["host_groups"]),
            "connected": ports + ups + 1, "aggregate": 1}
    return out
