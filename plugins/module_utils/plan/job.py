# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load and plan a fabric, and the whole ``plan`` stage as one call.

:func:`load_plan` (a topology file) and :func:`plan_topology` (its parsed content) are the one way to
get from a topology to its plan: the action plugins, the inventory plugin, the lab, the command
line and the benchmarks use them.
"""

from __future__ import annotations

import os

try:
    import yaml
    HAS_YAML = True
    SAFE_LOADER = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core on every controller
    HAS_YAML = False

from ansible_collections.netscale.multinic.plugins.module_utils.plan.store import write_plan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology


def read_topology_file(path):
    """The parsed YAML of a topology file (plain dict/list/str/int/bool/None).

    PyYAML's C loader (libyaml, ``CSafeLoader``) when it is built in, else the pure-Python one: the
    same safe YAML 1.1 schema, ~10x faster on a region's topology file (docs/performance.md, "Fleet
    scale")."""
    with open(path, "rb") as handle:
        return yaml.load(handle, Loader=SAFE_LOADER)  # nosec B506 - a safe loader  # noqa: S506


def read_topology_or(path, fallback):
    """:func:`read_topology_file`, or ``plain(fallback(path))`` for a file the safe loader cannot read as a
    mapping: a vault-encrypted one or one with Ansible's YAML tags (``!vault``, ``!unsafe``) goes through Ansible's
    loader (``fallback``, e.g. ``lambda p: loader.load_from_file(p, cache="none")``), which reports its
    own errors. The inventory plugin and the fabric_hosts lookup read a topology this one way."""
    if not HAS_YAML:
        return plain(fallback(path))
    try:
        data = read_topology_file(path)
    except (yaml.YAMLError, IOError, OSError, UnicodeDecodeError):
        return plain(fallback(path))
    # a whole-file vault (``$ANSIBLE_VAULT;1.1;AES256`` + hex lines) is one plain scalar to YAML: a topology
    # is a mapping, anything else is Ansible's loader's to decrypt or to reject
    return data if isinstance(data, dict) else plain(fallback(path))


def plain(value):
    """``value`` with every str/dict/list subclass (Ansible's tagged YAML types) made a plain one."""
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def plan_topology(data, source=None):
    """Validate topology ``data`` and compute every allocation. Returns the :class:`FabricPlan`
    (its topology is ``plan.topo``). Raises TopologyError listing every problem."""
    return FabricPlan(load_topology(data, source=source)).allocate()


def load_plan(path):
    """:func:`plan_topology` of the topology file at ``path``."""
    return plan_topology(read_topology_file(path), source=path)


def run_plan(topology_path, dest, allow_renumber=False, check_mode=False, per_fabric=False, decommission=(),
             release=()):
    """Returns the write result plus the plan summary. Raises MultinicError subclasses.

    ``decommission`` / ``release``: consent to retire hosts and racks that left the topology, and to
    reuse retired allocations (see plan_store).

    ``per_fabric``: write under ``dest/<fabric name>/`` so several fabrics (the lab, a region, an
    example) can share one intended/ without their plans being compared with each other.
    """
    plan = load_plan(topology_path)
    base = os.path.join(dest, plan.topo.name) if per_fabric else dest
    result = write_plan(plan, base, allow_renumber=allow_renumber, check_mode=check_mode,
                        decommission=decommission, release=release)
    result["summary"] = plan.summary()
    result["plan_dir"] = os.path.join(base, "plan")
    return result
