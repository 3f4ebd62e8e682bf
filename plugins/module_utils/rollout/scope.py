# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change scope of a rollout (``rollout_scope: changed``): what the new topology adds, removes and
changes against the plan on disk, and which ToRs' rendered configs differ. No Ansible imports.

Inputs are plain data so the decision is unit-testable:

* ``old_racks`` / ``new_racks``: ``{rack name: rack plan data}`` - the rack files of the plan on disk
  (``intended/<fabric>/plan/racks/*.yml``, read *before* the preflight writes the new plan) and the
  racks of the plan computed from the topology (``plan_store.plan_artifacts``). A rack's data holds its
  ToR and every host's allocation (prefixes, NICs, slots, ASNs), so a host whose allocation or spec
  (NIC count, task slots) changed differs there.
* ``tors_rendered_changed``: ToRs whose rendered config text differs from the last rendered copy under
  ``intended/configs/`` (``tor_render`` in check mode: the ``written`` list), i.e. the rendered text is
  compared, not the plan data.

:func:`compute` returns the scope::

    {mode, hosts: {added, removed, changed, unchanged}, racks: {added, removed, changed, unchanged},
     tors: {changed, unchanged, removed}, deploy: [hosts to deploy, inventory order], nothing: bool,
     message: str}
"""

from __future__ import annotations

import os

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError

MODES = ("all", "changed")


class ScopeError(MultinicError):
    """The scope cannot be computed (names the field, the value and the fix)."""


def check_mode_value(mode):
    if mode not in MODES:
        raise ScopeError("rollout_scope=%r: use 'all' (every host and ToR, the default) or 'changed' (only what "
                         "the plan diff and the rendered ToR configs say changed)" % (mode,))
    return mode


def _hosts_of(racks):
    """{host name: (rack name, host data)} of rack plan data."""
    out = {}
    for rname, rdata in (racks or {}).items():
        for h in (rdata or {}).get("hosts") or []:
            out[h["name"]] = (rname, h)
    return out


def _rack_own(rdata):
    """A rack's data without its hosts (its prefix, ToR, uplinks)."""
    return dict((k, v) for k, v in (rdata or {}).items() if k != "hosts")


def plan_diff(old_racks, new_racks):
    """Hosts and racks added, removed, changed, unchanged between two sets of rack plan data.
    Lists are sorted by name."""
    old_racks = old_racks or {}
    new_racks = new_racks or {}
    old_h, new_h = _hosts_of(old_racks), _hosts_of(new_racks)
    hosts = {"added": sorted(set(new_h) - set(old_h)), "removed": sorted(set(old_h) - set(new_h)),
             "changed": sorted(h for h in set(new_h) & set(old_h) if new_h[h] != old_h[h]),
             "unchanged": sorted(h for h in set(new_h) & set(old_h) if new_h[h] == old_h[h])}
    racks = {"added": sorted(set(new_racks) - set(old_racks)), "removed": sorted(set(old_racks) - set(new_racks)),
             "changed": sorted(r for r in set(new_racks) & set(old_racks)
                               if _rack_own(new_racks[r]) != _rack_own(old_racks[r])),
             "unchanged": sorted(r for r in set(new_racks) & set(old_racks)
                                 if _rack_own(new_racks[r]) == _rack_own(old_racks[r]))}
    return hosts, racks


def compute(old_racks, new_racks, tors_rendered_changed, inventory_hosts, rack_tors, mode="changed"):
    """The change scope.

    ``inventory_hosts``: GPU hosts of the inventory in order (names); ``rack_tors``: ``{rack: tor}`` of the
    inventory (the new topology). With ``mode='all'`` everything of the inventory is in scope (today's
    behaviour) and the diff is still reported."""
    check_mode_value(mode)
    hosts, racks = plan_diff(old_racks, new_racks)
    rack_tors = dict(rack_tors or {})
    inventory_hosts = list(inventory_hosts or [])
    all_tors = sorted(set(rack_tors.values()))
    rendered = set(tors_rendered_changed or [])
    unknown = sorted(rendered - set(all_tors))
    if unknown:
        raise ScopeError("tors_changed: %s are not ToRs of the inventory (group tors: %s); pass the ToR names "
                         "tor_render reported" % (", ".join(unknown), ", ".join(all_tors) or "none"))
    old_tors = dict((r, (d or {}).get("tor", {}).get("name")) for r, d in (old_racks or {}).items())
    removed_tors = sorted(t for r, t in old_tors.items() if r in racks["removed"] and t)
    if mode == "all":
        deploy = list(inventory_hosts)
        tors_changed = list(all_tors)
    else:
        wanted = set(hosts["added"]) | set(hosts["changed"])
        deploy = [h for h in inventory_hosts if h in wanted]
        tors_changed = sorted(rendered)
    tors_unchanged = sorted(set(all_tors) - set(tors_changed))
    untouched_hosts = [h for h in inventory_hosts if h not in deploy]
    scope = {"mode": mode, "hosts": dict(hosts, unchanged=[h for h in hosts["unchanged"] if h in untouched_hosts]),
             "racks": racks, "tors": {"changed": tors_changed, "unchanged": tors_unchanged, "removed": removed_tors},
             "deploy": deploy, "untouched": {"hosts": untouched_hosts, "tors": tors_unchanged},
             "nothing": not deploy and not tors_changed}
    scope["message"] = message(scope)
    return scope


def message(scope):
    """One line for the report and the play output."""
    if scope["mode"] == "all":
        return "scope all: %d hosts and %d ToRs of the inventory" % (len(scope["deploy"]), len(scope["tors"]["changed"]))
    if scope["nothing"]:
        return ("scope changed: nothing to deploy - no host added or changed, no ToR whose rendered config changed "
                "(%d hosts, %d ToRs unchanged, not touched)"
                % (len(scope["untouched"]["hosts"]), len(scope["untouched"]["tors"])))
    h = scope["hosts"]
    parts = ["scope changed: deploy %d host(s) (%s)" % (len(scope["deploy"]), ", ".join(scope["deploy"]) or "none")]
    parts.append("hosts added %s, changed %s, removed %s" % (
        ", ".join(h["added"]) or "none", ", ".join(h["changed"]) or "none", ", ".join(h["removed"]) or "none"))
    parts.append("racks added %s, removed %s" % (", ".join(scope["racks"]["added"]) or "none",
                                                 ", ".join(scope["racks"]["removed"]) or "none"))
    parts.append("ToR policy on %s" % (", ".join(scope["tors"]["changed"]) or "no ToR"))
    parts.append("unchanged, not touched: %d host(s), %d ToR(s)"
                 % (len(scope["untouched"]["hosts"]), len(scope["untouched"]["tors"])))
    if h["removed"] or scope["racks"]["removed"]:
        parts.append("removed hosts/racks are not undeployed here: playbooks/decommission.yml drains them and "
                     "removes their state")
    return "; ".join(parts)


def tors_from_written(written, tors):
    """ToR names whose rendered config file is in ``written`` (``tor_render`` in check mode lists the files
    that differ from the last rendered copy, ``<dest>/configs/<device>.cfg``)."""
    names = set()
    for path in written or []:
        base = os.path.basename(str(path))
        if base.endswith(".cfg") and os.path.basename(os.path.dirname(str(path))) == "configs":
            names.add(base[:-len(".cfg")])
    return sorted(names & set(tors or []))


def read_racks(plan_dir, loader):
    """{rack name: data} of ``<plan_dir>/racks/*.yml`` (empty when there is no plan yet: everything is added).
    ``loader``: text -> data (``plan_store.load_yaml``)."""
    folder = os.path.join(plan_dir, "racks")
    out = {}
    if not os.path.isdir(folder):
        return out
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".yml"):
            continue
        with open(os.path.join(folder, name)) as f:
            data = loader(f.read()) or {}
        out[data.get("name") or name[:-len(".yml")]] = data
    return out
