# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: the plan stage runs on the controller (documentation in plugins/modules/fabric_plan.py)."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError, PlanChangedError
from ansible_collections.netscale.multinic.plugins.module_utils.gcpause import gc_paused
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import run_plan
from ansible_collections.netscale.multinic.plugins.modules.fabric_plan import ARGUMENT_SPEC


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    # ActionBase.run rejects any other argument.
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        topology = args.get("topology")
        if not topology:
            raise AnsibleActionFail("fabric_plan: option 'topology' (path of the fabric topology file) is required")
        topology = self._loader.path_dwim(topology)
        dest = self._loader.path_dwim(args.get("dest") or "intended")
        allow = bool(self._templar.template(args.get("allow_renumber", False)))
        consent = {}
        for key in ("decommission", "release"):
            value = self._templar.template(args.get(key) or [])
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise AnsibleActionFail("fabric_plan: option '%s' must be a list of host or rack names (got %r)"
                                        % (key, value))
            consent[key] = value
        try:
            with gc_paused():  # a region's plan is millions of objects built at once (module_utils/gcpause.py)
                outcome = run_plan(topology, dest, allow_renumber=allow, check_mode=self._task.check_mode,
                                   per_fabric=True, decommission=consent["decommission"], release=consent["release"])
        except PlanChangedError as exc:
            result.update(failed=True, msg=to_native(exc), renumbered=exc.changes)
            return result
        except MultinicError as exc:
            problems = [p.as_dict() for p in getattr(exc, "problems", [])]
            result.update(failed=True, msg=to_native(exc), problems=problems)
            return result
        result.update(
            changed=outcome["changed"],
            summary=outcome["summary"],
            written=outcome["written"],
            removed=outcome["removed"],
            added=outcome["added"],
            renumbered=outcome["renumbered"],
            retired=outcome["retired"],
            released=outcome["released"],
            dest=dest,
            plan_dir=outcome["plan_dir"],
            topology=topology,
        )
        if self._task.diff and outcome["diff"]:
            result["diff"] = outcome["diff"]
        if not os.path.isdir(dest) and self._task.check_mode:
            result["msg"] = "check mode: nothing written"
        return result
