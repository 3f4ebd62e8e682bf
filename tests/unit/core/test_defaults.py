# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One source for each default: a role variable's default and its list of choices are the same in every
place they are written, and the NIC-detection defaults are those of ``datapath/health.py``.

Places compared, per role and variable:

- ``meta/argument_specs.yml`` (every entry point; a variable in two entry points has one default);
- ``defaults/main.yml`` (what a run uses) when both it and the argument spec hold a literal;
- the role README's variable table (``| `var` | type (choices) | `default` | ... |``; a default cell
  ``(none)`` is no default; a cell that is not one backticked value, e.g. "from `vipinjector_bfd.enabled`",
  is computed and then the argument spec has no literal default either; `` `key` (value`` in a
  description is the default of a suboption and is checked too);
- the option of the module the role passes the variable to (``MAPPING``), read from the module's
  argument spec (the module imported, its ``main()`` run up to ``AnsibleModule``; an action plugin's
  ``ARGUMENT_SPEC``), and for dict options that the module hands to the core unchecked, the core's
  defaults (``DICT_SOURCES``); the module's DOCUMENTATION (with its doc fragments) for the same options.

Variables without a module option are listed in ``ROLE_ONLY``; every variable of every entry point is in
one of the two, so a new variable has to be placed. A role default that differs from the module's on
purpose is in ``OVERRIDES`` with its reason, and stays there only while it differs. Every failure names
the role, the variable, the places and the values.
"""

from __future__ import annotations

import glob
import importlib
import os
import re
import sys

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health
from ansible_collections.netscale.multinic.plugins.module_utils.gates import builtin as gates_builtin
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import bfd as vip_bfd
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import agent as monitor_agent
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render as vip_render

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COLLECTION = "ansible_collections.netscale.multinic"
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))

# role -> {variable: "module:option[.suboption]"}: the module option the role's tasks pass the variable to.
MAPPING = {
    "health_gates": {
        "health_gates_session_family": "health_gate:session_family",
        "health_gates_tor_vtysh": "health_gate:vtysh",
        "health_gates_vipinjector_runtime_dir": "health_gate:runtime_dir",
        "health_gates_datapath_state_dir": "health_gate:state_dir",
        "health_gates_success_streak": "health_gate:success_threshold",
        "health_gates_max_loss_percent": "health_gate:params.max_loss_percent",
        "health_gates_share_tolerance": "health_gate:params.share_tolerance",
        "health_gates_ping_count": "health_gate:ping.count",
        "health_gates_probe_netns": "health_gate:ping.netns",
        "health_gates_probe_flows": "lab_probe:flows",
        "health_gates_probe_duration": "lab_probe:duration",
        "health_gates_probe_family": "lab_probe:family",
        "health_gates_lab_line_rate": "lab_link:speed",
    },
    "host_datapath": {
        "host_datapath_ebpf": "multinic_datapath:ebpf",
        "host_datapath_egress_policy": "multinic_datapath:egress_policy",
        "host_datapath_detection": "multinic_datapath:detection",
        "host_datapath_mptcp": "multinic_datapath:mptcp",
        "host_datapath_mptcp_families": "multinic_datapath:mptcp_families",
        "host_datapath_slot_numa": "multinic_datapath:slot_numa",
        "host_datapath_nic_numa": "multinic_datapath:nic_numa",
        "host_datapath_numa_spill_flows": "multinic_datapath:numa_spill_flows",
        "host_datapath_plan": "multinic_datapath:host",
        "host_datapath_nic_pattern": "multinic_datapath:nic_pattern",
        "host_datapath_manage_nic_addresses": "multinic_datapath:manage_nic_addresses",
        "host_datapath_state_dir": "multinic_datapath:state_dir",
        "host_datapath_sysctl_file": "multinic_datapath:sysctl_file",
        "host_datapath_bpffs_root": "multinic_datapath:bpffs_root",
    },
    "lab": {
        "lab_topology": "lab_fabric:topology",
        "lab_state": "lab_fabric:state",
        "lab_state_root": "lab_fabric:state_root",
        "lab_tor_config_dir": "lab_fabric:tor_config_dir",
        "lab_host_default_route": "lab_fabric:host_default_route",
        "lab_bgp_timeout": "lab_fabric:bgp_timeout",
        "lab_rebuild": "lab_fabric:rebuild",
        "lab_fail_at": "lab_fabric:fail_at",
        "lab_monitoring_listen": "lab_monitoring:listen",
        "lab_monitoring_port": "lab_monitoring:port",
        "lab_monitoring_loss_threshold": "lab_monitoring:loss_threshold",
    },
    "fabric_monitor": {
        "fabric_monitor_topology": "fabric_monitor_config:topology",
        "fabric_monitor_targets": "fabric_monitor_config:targets",
        "fabric_monitor_family": "fabric_monitor_config:family",
        "fabric_monitor_rotate_rounds": "fabric_monitor_config:rotate_rounds",
        "fabric_monitor_interval": "fabric_monitor_config:settings.interval",
        "fabric_monitor_timeout": "fabric_monitor_config:settings.timeout",
        "fabric_monitor_max_pps": "fabric_monitor_config:settings.max_pps",
        "fabric_monitor_port": "fabric_monitor_config:settings.port",
        "fabric_monitor_metrics_address": "fabric_monitor_config:settings.metrics_address",
        "fabric_monitor_metrics_port": "fabric_monitor_config:settings.metrics_port",
        "fabric_monitor_textfile": "fabric_monitor_config:settings.textfile",
        "fabric_monitor_events_file": "fabric_monitor_config:settings.events_file",
        "fabric_monitor_event_interval": "fabric_monitor_config:settings.event_interval",
        "fabric_monitor_loss_event_ratio": "fabric_monitor_config:settings.loss_event_ratio",
        "fabric_monitor_passive_interval": "fabric_monitor_config:settings.passive_interval",
    },
    "tor_bgp": {
        "tor_bgp_topology": "tor_render:topology",
        "tor_bgp_intended_dir": "tor_render:dest",
        "tor_bgp_options": "tor_render:options",
        "tor_bgp_spine_networks": "tor_render:spine_networks",
        "tor_bgp_bfd_multihop_hosts": "tor_render:bfd_multihop_hosts",
        "tor_bgp_frr_confdir": "frr_config:confdir",
        "tor_bgp_frr_vty_socket": "frr_config:vty_socket",
        "tor_bgp_frr_bindir": "frr_config:bindir",
        "tor_bgp_frr_rundir": "frr_config:rundir",
    },
    "vipinjector": {
        "vipinjector_host": "vipinjector_instance:host",
        "vipinjector_md5_password": "vipinjector_instance:md5_password",
        "vipinjector_install_dir": "vipinjector_instance:options.install_dir",
        "vipinjector_config_dir": "vipinjector_instance:options.config_dir",
        "vipinjector_runtime_dir": "vipinjector_instance:options.runtime_dir",
        "vipinjector_session_family": "vipinjector_instance:options.session_family",
        "vipinjector_hold_time": "vipinjector_instance:options.hold_time",
        "vipinjector_outgoing_ttl": "vipinjector_instance:options.outgoing_ttl",
        "vipinjector_incoming_ttl": "vipinjector_instance:options.incoming_ttl",
        "vipinjector_health": "vipinjector_instance:options.health",
        "vipinjector_path_check": "vipinjector_instance:options.path_check",
        "vipinjector_drain_poll": "vipinjector_instance:options.drain_poll",
        "vipinjector_watchdog": "vipinjector_instance:options.watchdog",
        "vipinjector_egress_state": "vipinjector_instance:options.egress_state",
        "vipinjector_admin_drain": "vipinjector_instance:options.admin_drain",
        "vipinjector_require_local_task_ip": "vipinjector_instance:options.require_local_task_ip",
        "vipinjector_metrics_file": "vipinjector_instance:options.metrics_file",
        "vipinjector_log_level": "vipinjector_instance:options.log_level",
        "vipinjector_bfd": "vipinjector_bfd:options",
    },
}
# Variables passed to a second module as well (the same default and choices must hold there too).
ALSO = {
    ("vipinjector", "vipinjector_session_family"): "vipinjector_bfd:session_family",
    ("vipinjector", "vipinjector_config_dir"): "vipinjector_bfd:options.config_dir",
}
# Variables the role passes with ``| default(omit, true)`` / ``or omit`` / ``if ... else omit``: the role's
# empty default ("") means the module's default, and "" is one more choice on the role's side.
OMIT_EMPTY = {
    ("host_datapath", "host_datapath_nic_pattern"),
    ("lab", "lab_state_root"),
    ("lab", "lab_tor_config_dir"),
    ("lab", "lab_fail_at"),
    ("tor_bgp", "tor_bgp_frr_vty_socket"),
}
# Variables that reach no module option as they are (role logic, controller paths, unit files, gating).
ROLE_ONLY = {
    "health_gates": {"health_gates_enabled", "health_gates_bfd", "health_gates_host", "health_gates_tor",
                     "health_gates_convergence_seconds", "health_gates_probe_target", "health_gates_lab_topology",
                     "health_gates_share_retries"},
    "host_datapath": {"host_datapath_state", "host_datapath_watcher", "host_datapath_build_dir",
                      "host_datapath_lib_dir"},
    "lab": {"lab_monitoring", "lab_monitoring_rulebook_mode", "lab_monitoring_rulebook_report_root",
            "lab_monitoring_rulebook_budget", "lab_monitoring_rulebook_clean_window"},   # one dict option: rulebook
    "fabric_monitor": {"fabric_monitor_state", "fabric_monitor_lib_dir", "fabric_monitor_config_file"},
    "tor_bgp": {"tor_bgp_md5_keys", "tor_bgp_frr_user",
                "tor_bgp_manage_sysctl", "tor_bgp_sysctl_file", "tor_bgp_backup_dir", "tor_bgp_device_name"},
    "vipinjector": {"vipinjector_state", "vipinjector_slots", "vipinjector_exabgp_version", "vipinjector_pip_version",
                    "vipinjector_wheel_cache",
                    "vipinjector_controller_python", "vipinjector_require_netns", "vipinjector_wait",
                    "vipinjector_wait_timeout", "vipinjector_restart_sec", "vipinjector_frr_dir"},
}
# Role defaults that differ from the module's on purpose, with the reason (the test fails when they agree
# again, so the entry cannot outlive its reason).
OVERRIDES = {
    ("health_gates", "health_gates_ping_count"): "the gate's loss probe sends 50 echo requests 20 ms apart (1 s), "
                                                 "the module's ad-hoc default is 20",
    ("health_gates", "health_gates_probe_netns"): "the probe starts in the first slot's workload namespace; the "
                                                  "module has no namespace default (the host's own)",
    ("health_gates", "health_gates_probe_flows"): "32 flows over 4 NICs leave a NIC idle in ~0.04% of probes, "
                                                  "16 (lab_probe's default) in ~4% (roles/health_gates/README.md)",
    ("health_gates", "health_gates_probe_duration"): "4-5 s let a NIC with few flows lag below line rate; the role "
                                                     "probes 6 s (roles/health_gates/README.md)",
    ("health_gates", "health_gates_lab_line_rate"): "the share probe needs a line rate on the lab's veths; lab_link "
                                                    "sets none unless asked",
}
# Dict options a module hands to the core, which merges them over its own defaults: (module, option) -> them.
DICT_SOURCES = {
    ("vipinjector_instance", "options"): vip_render.DEFAULTS,
    ("vipinjector_bfd", "options"): vip_bfd.DEFAULTS,
    ("fabric_monitor_config", "settings"): monitor_agent.DEFAULTS,
    ("health_gate", "params"): dict(
        (key, value) for gate in gates_builtin.DEFAULTS.values() for key, value in gate["params"].items()),
}
# Options whose default the module leaves to the core: (module, option) -> the core's default.
CORE_DEFAULTS = {
    # the convergence gates (sidecars, bgp_sessions, ecmp_width, nics_in_service) the role runs
    ("health_gate", "success_threshold"): gates_builtin.DEFAULTS["sidecars"]["success_threshold"],
}
# Choices the core checks for options of DICT_SOURCES: (module, option path) -> them.
CORE_CHOICES = {
    ("vipinjector_instance", "options.session_family"): ("auto",) + vip_render._FAMILIES,  # pylint: disable=protected-access
    ("vipinjector_instance", "options.log_level"): vip_render._LOG_LEVELS,  # pylint: disable=protected-access
}

# Ansible's role argument check validates the role's defaults too, and a null value fails a list of
# choices ("must be one of: ipv4, ipv6, got: None"): a variable whose default is null declares no choices in
# meta/argument_specs.yml (nor in the README's type column) and leaves them to the module it reaches.
NULL_WITH_CHOICES = "a null default fails the role's own argument check when the variable declares choices"

NONE = object()       # no default
COMPUTED = object()   # README: a default in words, computed from other variables


# ---------------------------------------------------------------------------------------------- reading


def _load_yaml(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def _templated(value):
    return isinstance(value, str) and "{{" in value


class _Captured(Exception):
    pass


def _fake_module(*args, **kwargs):
    raise _Captured(kwargs.get("argument_spec", args[0] if args else None))


_SPECS = {}


def module_spec(name):
    """The argument spec of module ``name``: its action plugin's ARGUMENT_SPEC, or what its main() passes
    to AnsibleModule (the module imported, AnsibleModule replaced for the call), or, for an action plugin
    that validates nothing itself, its documented options."""
    if name in _SPECS:
        return _SPECS[name]
    spec = None
    if os.path.exists(os.path.join(ROOT, "plugins", "action", name + ".py")):
        spec = getattr(importlib.import_module("%s.plugins.action.%s" % (COLLECTION, name)), "ARGUMENT_SPEC", None)
    if spec is None:
        mod = importlib.import_module("%s.plugins.modules.%s" % (COLLECTION, name))
        if hasattr(mod, "main"):
            real = mod.AnsibleModule
            mod.AnsibleModule = _fake_module
            try:
                mod.main()
            except _Captured as captured:
                spec = captured.args[0]
            finally:
                mod.AnsibleModule = real
        else:
            spec = module_doc(name)
    _SPECS[name] = spec
    return spec


def module_doc(name):
    """The documented options of module ``name``, its doc fragments' merged in."""
    mod = importlib.import_module("%s.plugins.modules.%s" % (COLLECTION, name))
    doc = yaml.safe_load(mod.DOCUMENTATION)
    options = dict(doc.get("options") or {})
    for fragment in doc.get("extends_documentation_fragment") or []:
        # netscale.multinic.NAME (its DOCUMENTATION) or netscale.multinic.NAME.SECTION (its SECTION upper-cased)
        parts = fragment.split(".")
        name, section = (parts[2], "DOCUMENTATION") if len(parts) == 3 else (parts[2], parts[3].upper())
        frag = importlib.import_module("%s.plugins.doc_fragments.%s" % (COLLECTION, name))
        text = getattr(frag.ModuleDocFragment, section)
        for key, value in (yaml.safe_load(text).get("options") or {}).items():
            options.setdefault(key, value)
    return options


def _cells(line):
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _yaml_value(text):
    if _templated(text):
        return text
    return yaml.safe_load(text)


def readme_table(role):
    """{variable: {"choices", "default", "description"}} from the README's variable table."""
    rows = {}
    with open(os.path.join(ROOT, "roles", role, "README.md")) as handle:
        for line in handle:
            if not line.startswith("| `"):
                continue
            cells = _cells(line)
            if len(cells) < 4:
                continue
            var = cells[0].strip("`")
            match = re.match(r"^(?:list of )?\w+ \((.*)\)$", cells[1])
            choices = [_yaml_value(c.strip()) for c in match.group(1).split(",")] if match else None
            cell = cells[2]
            literal = re.match(r"^`([^`]*)`(\s*\(.*\))?$", cell)
            if cell == "(none)":
                default = NONE
            elif literal:
                default = _yaml_value(literal.group(1))
            else:
                default = COMPUTED
            rows[var] = {"choices": choices, "default": default, "description": cells[3]}
    return rows


def readme_sub_defaults(description):
    """{key: value} of the suboption defaults a README description names as `` `key` (value``."""
    return dict((key, _yaml_value(value)) for key, value in re.findall(r"`(\w+)` \(`?([^`,)\s]+)", description))


def argument_specs(role):
    """{variable: [(entry point, its spec)]}."""
    out = {}
    for entry, spec in (_load_yaml("roles", role, "meta", "argument_specs.yml")["argument_specs"] or {}).items():
        for var, opt in (spec.get("options") or {}).items():
            out.setdefault(var, []).append((entry, opt or {}))
    return out


def role_defaults(role):
    return _load_yaml("roles", role, "defaults", "main.yml") or {}


def role_tasks(role):
    """Every task of the role (blocks flattened)."""
    found = []

    def walk(tasks):
        for task in tasks or []:
            if not isinstance(task, dict):
                continue
            found.append(task)
            for key in ("block", "rescue", "always"):
                walk(task.get(key))
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml"))):
        with open(path) as handle:
            walk(yaml.safe_load(handle))
    return found


# ---------------------------------------------------------------------------------------------- comparing


def same(a, b):
    """Equal as YAML values: a boolean equals only a boolean; 0.10 == 0.1; 60 == 60.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def same_choices(a, b):
    if a is None or b is None:
        return a is None and b is None
    return sorted(map(str, a)) == sorted(map(str, b))


def _show(value):
    return {id(NONE): "(no default)", id(COMPUTED): "(computed, in words)"}.get(id(value), repr(value))


def target(module_option):
    """``"module:a.b"`` -> (default, choices, suboptions or None) of that option, where the default of an
    option under a DICT_SOURCES dict is the core's."""
    module, path = module_option.split(":")
    spec = module_spec(module)
    parts = path.split(".")
    opt = spec[parts[0]]
    for depth, part in enumerate(parts[1:], 1):
        if opt.get("options"):
            opt = opt["options"][part]
            continue
        source = DICT_SOURCES[(module, ".".join(parts[:depth]))]
        for key in parts[depth:]:
            source = source[key]
        return source, CORE_CHOICES.get((module, path)), None
    if (module, path) in DICT_SOURCES:
        return DICT_SOURCES[(module, path)], opt.get("choices"), None
    default = opt.get("default", NONE)
    if default is NONE and (module, path) in CORE_DEFAULTS:
        default = CORE_DEFAULTS[(module, path)]
    return default, opt.get("choices"), opt.get("options")


def compare_with_module(role, var, opt, module_option, problems):
    """The role's argument spec ``opt`` of ``var`` against ``module_option``."""
    where = "%s: %s: meta/argument_specs.yml" % (role, var)
    mod_default, mod_choices, mod_sub = target(module_option)
    role_default = opt.get("default", NONE)
    role_choices = opt.get("choices")
    if (role, var) in OMIT_EMPTY and role_choices is not None:
        role_choices = [c for c in role_choices if c != ""]
    if role_choices is None and opt.get("default") is None and mod_choices is not None:
        pass  # a null default cannot carry choices in a role's argument spec (see NULL_WITH_CHOICES); the module checks
    elif not same_choices(role_choices, mod_choices):
        problems.append("%s choices %r != %s choices %r" % (where, role_choices, module_option, mod_choices))
    if mod_sub or opt.get("options"):
        subs = opt.get("options") or {}
        if sorted(subs) != sorted(mod_sub or {}):
            problems.append("%s suboptions %s != %s suboptions %s" % (
                where, sorted(subs), module_option, sorted(mod_sub or {})))
        for key in sorted(set(subs) & set(mod_sub or {})):
            a, b = subs[key].get("default", NONE), mod_sub[key].get("default", NONE)
            if not same(a, b):
                problems.append("%s %s.%s default %s != %s.%s default %s" % (
                    where, var, key, _show(a), module_option, key, _show(b)))
            if not same_choices(subs[key].get("choices"), mod_sub[key].get("choices")):
                problems.append("%s %s.%s choices %r != %s.%s choices %r" % (
                    where, var, key, subs[key].get("choices"), module_option, key, mod_sub[key].get("choices")))
        if role_default not in (NONE, {}) and not (isinstance(role_default, dict) and all(
                same(v, mod_sub.get(k, {}).get("default", NONE)) for k, v in role_default.items())):
            problems.append("%s default %r sets other values than %s's suboption defaults" % (
                where, role_default, module_option))
        return
    if _templated(role_default) or _templated(role_defaults(role).get(var)):
        return  # computed from the inventory or other roles' variables: compared between the role's own places
    if (role, var) in OMIT_EMPTY and role_default in ("", None):
        return  # omitted when empty: the module's default applies
    if isinstance(role_default, dict) and isinstance(mod_default, dict):
        # the module (core) merges the role's dict over its own: the role's keys must carry its values
        differ = sorted(k for k in role_default if k not in mod_default or not same(role_default[k], mod_default[k]))
        if differ:
            problems.append("%s default %r != %s default %r (keys %s)" % (
                where, role_default, module_option, mod_default, ", ".join(differ)))
        return
    agree = same(None if role_default is NONE else role_default, None if mod_default is NONE else mod_default)
    override = OVERRIDES.get((role, var))
    if override and agree:
        problems.append("%s default %s equals %s's again: drop it from OVERRIDES (%s)" % (
            where, _show(role_default), module_option, override))
    elif not override and not agree:
        problems.append("%s default %s != %s default %s" % (where, _show(role_default), module_option,
                                                            _show(mod_default)))


def passes(tasks, var, module_option):
    """Whether some task calls the module with the option (or its parent dict) templated from ``var``."""
    module, path = module_option.split(":")
    for task in tasks:
        args = task.get("netscale.multinic." + module)
        if not isinstance(args, dict):
            continue
        value = args
        for part in path.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            else:
                break
        if re.search(r"\b%s\b" % re.escape(var), str(value)):
            return True
    return False


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("role", ROLES)
def test_every_variable_is_placed(role):
    """Every variable either maps to a module option or is role-only, and every mapping is real: the role's
    tasks pass the variable to that option."""
    variables = set(argument_specs(role))
    mapped = set(MAPPING.get(role, {}))
    only = ROLE_ONLY.get(role, set())
    problems = ["%s: %s: in no MAPPING nor ROLE_ONLY of tests/unit/core/test_defaults.py" % (role, v)
                for v in sorted(variables - mapped - only)]
    problems += ["%s: %s: in MAPPING or ROLE_ONLY but not in meta/argument_specs.yml" % (role, v)
                 for v in sorted((mapped | only) - variables)]
    problems += ["%s: %s: in both MAPPING and ROLE_ONLY" % (role, v) for v in sorted(mapped & only)]
    tasks = role_tasks(role)
    for var, module_option in sorted(list(MAPPING.get(role, {}).items()) + [
            (v, mo) for (r, v), mo in ALSO.items() if r == role]):
        if not passes(tasks, var, module_option):
            problems.append("%s: %s: no task of roles/%s/tasks passes it to %s" % (role, var, role, module_option))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ROLES)
def test_role_places_agree(role):
    """argument_specs (every entry point), defaults/main.yml and the README table: one default, one list
    of choices per variable."""
    problems = []
    readme = readme_table(role)
    defaults = role_defaults(role)
    for var, entries in sorted(argument_specs(role).items()):
        # the entry point that is not required first (a required variable has no default)
        entries = sorted(entries, key=lambda e: bool(e[1].get("required")))
        entry0, opt = entries[0]
        default, choices = opt.get("default"), opt.get("choices")
        where = "%s: %s: meta/argument_specs.yml (%s)" % (role, var, entry0)
        for entry, other in entries[1:]:
            if other.get("required"):
                if "default" in other:
                    problems.append("%s: %s: entry point %s requires it and gives a default %r" % (
                        role, var, entry, other["default"]))
                if not same_choices(other.get("choices"), choices):
                    problems.append("%s choices %r != entry point %s choices %r" % (
                        where, choices, entry, other.get("choices")))
            elif not same(other.get("default"), default) or not same_choices(other.get("choices"), choices):
                problems.append("%s default %s choices %r != entry point %s default %s choices %r" % (
                    where, _show(default), choices, entry, _show(other.get("default", NONE)), other.get("choices")))
        if var in defaults:
            value = defaults[var]
            if _templated(value):
                if default is not None and not _templated(default):
                    problems.append("%s default %s is a literal, defaults/main.yml computes it (%r)" % (
                        where, _show(default), value))
            elif not same(value, default):
                problems.append("%s default %s != defaults/main.yml %r" % (where, _show(default), value))
        row = readme.get(var)
        if row is None:
            problems.append("%s: %s: no row in README.md's variable table" % (role, var))
            continue
        if _templated(defaults.get(var)) and not (row["default"] is COMPUTED or _templated(row["default"])):
            problems.append("%s: %s: README.md default %s, defaults/main.yml computes it (%r): say how" % (
                role, var, _show(row["default"]), defaults[var]))
        elif row["default"] is COMPUTED:
            if default is not None and not _templated(default):
                problems.append("%s default %s != README.md %s" % (where, _show(default), _show(COMPUTED)))
            if not _templated(defaults.get(var)):
                problems.append("%s: README.md gives a computed default, defaults/main.yml a literal %r" % (
                    where, defaults.get(var)))
        elif not same(None if row["default"] is NONE else row["default"], default):
            problems.append("%s default %s != README.md default %s" % (where, _show(default), _show(row["default"])))
        if not same_choices(row["choices"], choices):
            problems.append("%s choices %r != README.md choices %r" % (where, choices, row["choices"]))
        if choices is not None and default is None and not opt.get("required"):
            problems.append("%s choices %r with a null default: %s. Fix: drop the choices (the module checks them)"
                            % (where, choices, NULL_WITH_CHOICES))
        # suboption defaults named in the description: `key` (value
        subs = dict((k, v.get("default", NONE)) for k, v in (opt.get("options") or {}).items())
        if not subs and var in MAPPING.get(role, {}):
            core = target(MAPPING[role][var])[0]
            subs = core if isinstance(core, dict) else {}
        for key, value in sorted(readme_sub_defaults(row["description"]).items()):
            if key in subs and not same(value, subs[key]):
                problems.append("%s: %s: README.md says `%s` (%r), its default is %s" % (
                    role, var, key, value, _show(subs[key])))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", sorted(MAPPING))
def test_role_and_module_agree(role):
    """A mapped variable's default and choices (and suboptions') are the module option's."""
    problems = []
    specs = argument_specs(role)
    for var, module_option in sorted(list(MAPPING[role].items()) + [
            (v, mo) for (r, v), mo in ALSO.items() if r == role]):
        for _entry, opt in specs[var]:
            compare_with_module(role, var, opt, module_option, problems)
    assert not problems, "\n".join(problems)


def _doc_vs_spec(name, doc, spec, prefix=""):
    problems = []
    for key, opt in sorted(spec.items()):
        documented = doc.get(key)
        if documented is None:
            problems.append("%s: option %s%s: not in DOCUMENTATION" % (name, prefix, key))
            continue
        if not same(documented.get("default"), opt.get("default")):
            problems.append("%s: option %s%s: DOCUMENTATION default %r != argument spec default %r" % (
                name, prefix, key, documented.get("default"), opt.get("default")))
        if not same_choices(documented.get("choices"), opt.get("choices")):
            problems.append("%s: option %s%s: DOCUMENTATION choices %r != argument spec choices %r" % (
                name, prefix, key, documented.get("choices"), opt.get("choices")))
        if opt.get("options"):
            problems += _doc_vs_spec(name, documented.get("suboptions") or {}, opt["options"], prefix + key + ".")
    return problems


@pytest.mark.parametrize("module", sorted(set(mo.split(":")[0] for m in MAPPING.values() for mo in m.values())))
def test_module_docs_match_its_spec(module):
    """The documented default and choices of every option (doc fragments included) are the argument spec's
    (sanity's validate-modules checks modules; this also covers action plugins' ARGUMENT_SPEC)."""
    problems = _doc_vs_spec(module, module_doc(module), module_spec(module))
    assert not problems, "\n".join(problems)


def test_detection_defaults_come_from_health():
    """datapath/health.py is the one source of the NIC-detection defaults: the module's spec is built from
    it, the module's DOCUMENTATION and the role's argument spec say the same."""
    assert sorted(health.TYPES) == sorted(health.DEFAULTS)
    spec = module_spec("multinic_datapath")["detection"]["options"]
    assert spec == health.option_spec()
    assert all(spec[k]["default"] is health.DEFAULTS[k] or spec[k]["default"] == health.DEFAULTS[k] for k in spec)
    documented = module_doc("multinic_datapath")["detection"]["suboptions"]
    problems = ["multinic_datapath DOCUMENTATION detection.%s: default %r type %r, health.py %r %r" % (
        k, (documented.get(k) or {}).get("default"), (documented.get(k) or {}).get("type"), v, health.TYPES[k])
        for k, v in sorted(health.DEFAULTS.items())
        if not same((documented.get(k) or {}).get("default"), v) or (documented.get(k) or {}).get("type") != health.TYPES[k]]
    problems += ["multinic_datapath DOCUMENTATION detection.%s: not in health.DEFAULTS" % k
                 for k in sorted(set(documented) - set(health.DEFAULTS))]
    role = dict(argument_specs("host_datapath")["host_datapath_detection"][0][1]["options"])
    problems += ["host_datapath argument_specs host_datapath_detection.%s: default %r, health.py %r" % (
        k, (role.get(k) or {}).get("default"), v) for k, v in sorted(health.DEFAULTS.items())
        if not same((role.get(k) or {}).get("default"), v)]
    assert not problems, "\n".join(problems)


def test_bfd_runtime_dir_is_one_place():
    """The BFD responders' runtime directory: the watcher's default (health.py), the responder renderer's
    (vipinjector/bfd.py) and the role's unit templates (systemd %t = /run) name the same directory."""
    assert health.DEFAULTS["bfd_dir"] == vip_bfd.DEFAULTS["runtime_dir"]
    assert health.DEFAULTS["bfd_dir"].startswith("/run/")
    unit_dir = "%t/" + health.DEFAULTS["bfd_dir"][len("/run/"):] + "/slot%i"
    for unit in ("netscale-vipinjector-bfd@.service.j2", "netscale-vipinjector-zebra@.service.j2"):
        with open(os.path.join(ROOT, "roles", "vipinjector", "templates", unit)) as handle:
            text = handle.read()
        assert unit_dir in text and not re.search(r"%t/netscale-vipinjector-bfd\b(?!/slot%i)", text), unit


# ---------------------------------------------------------------------------------------------- the checker


def test_checker_finds_a_drifted_default_and_choices():
    """The comparisons fail where they should: a changed default, a missing list of choices, a changed
    suboption default, an override that agrees again."""
    problems = []
    compare_with_module("host_datapath", "host_datapath_ebpf", {"type": "bool", "default": False},
                        "multinic_datapath:ebpf", problems)
    narrowed = {"type": "str", "default": "hash", "choices": ["hash"]}
    compare_with_module("host_datapath", "host_datapath_egress_policy", narrowed, "multinic_datapath:egress_policy",
                        problems)
    sub = dict((k, {"default": v}) for k, v in health.DEFAULTS.items())
    sub["interval_ms"] = {"default": 50}
    compare_with_module("host_datapath", "host_datapath_detection", {"type": "dict", "default": {}, "options": sub},
                        "multinic_datapath:detection", problems)
    compare_with_module("health_gates", "health_gates_probe_flows", {"type": "int", "default": 16},
                        "lab_probe:flows", problems)
    compare_with_module("vipinjector", "vipinjector_path_check", {"type": "dict", "default": {"fall": 3}},
                        "vipinjector_instance:options.path_check", problems)
    assert len(problems) == 5, problems
    assert "host_datapath_ebpf" in problems[0] and "False" in problems[0] and "True" in problems[0]
    assert "choices ['hash']" in problems[1] and "least_loaded" in problems[1]
    assert "host_datapath_detection.interval_ms default 50" in problems[2] and "100" in problems[2]
    assert "OVERRIDES" in problems[3]
    assert "fall" in problems[4]


def test_readme_parser(tmp_path, monkeypatch):
    """The README table reader: choices, literal, (none) and computed defaults, escaped pipes."""
    role = tmp_path / "roles" / "r"
    role.mkdir(parents=True)
    (role / "README.md").write_text(
        "| variable | type | default | description |\n|---|---|---|---|\n"
        "| `r_a` | str (present, absent) | `present` | x |\n"
        "| `r_b` | list of str | `{{ a \\| default(b) }}` | y |\n"
        "| `r_c` | dict | `{}` (defaults below) | `k` (1.5 s) |\n"
        "| `r_d` | path | (none) | z |\n"
        "| `r_e` | bool | from `other_var` | w |\n"
        "| `r_f` | str (\"\", x) | `\"\"` | v |\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    rows = readme_table("r")
    assert rows["r_a"]["choices"] == ["present", "absent"] and rows["r_a"]["default"] == "present"
    assert rows["r_b"]["default"] == "{{ a | default(b) }}" and rows["r_b"]["choices"] is None
    assert rows["r_c"]["default"] == {}
    assert rows["r_d"]["default"] is NONE and rows["r_e"]["default"] is COMPUTED
    assert rows["r_f"]["choices"] == ["", "x"] and rows["r_f"]["default"] == ""
    assert readme_sub_defaults("every `interval_ms` (100), `hold_down` (1.0 s), `bfd` (true), `bfd_dir` "
                               "(`/run/x`, where), `enabled: false` off") == {
        "interval_ms": 100, "hold_down": 1.0, "bfd": True, "bfd_dir": "/run/x"}
