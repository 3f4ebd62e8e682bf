# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: runs the rollout_snapshot module on the node, then (option ``report``) records the result in the
run's report on the controller - also a failed capture or an unreachable node, so triage never blocks a rollback
(docs in plugins/modules/rollout_snapshot.py; the report in module_utils/report/model.py)."""

from __future__ import annotations

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.netscale.multinic.plugins.module_utils.report import model


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        report = args.pop("report", None)
        try:
            result.update(self._execute_module(module_name="netscale.multinic.rollout_snapshot", module_args=args,
                                               task_vars=task_vars))
        except AnsibleConnectionFailure as exc:
            if report:
                self._record(report, args, {"unreachable": True, "msg": to_native(exc)}, task_vars)
            raise
        if report:
            result["report"] = self._record(report, args, result, task_vars)
        return result

    def _record(self, report, args, snap, task_vars):
        node = args.get("node") or task_vars.get("inventory_hostname")
        data = {"node": node, "wave": report.get("wave"), "kind": args.get("kind") or "host"}
        with model.locked(report["dir"]):
            snap = dict((k, v) for k, v in snap.items() if not k.startswith("_ansible"))   # as registered
            invocation = dict(snap.get("invocation") or {})
            if isinstance(invocation.get("module_args"), dict) and "report" in invocation["module_args"]:
                snap["invocation"] = dict(invocation, module_args=dict(
                    (k, v) for k, v in invocation["module_args"].items() if k != "report"))
            out = model.record(report["dir"], "snapshot", data, snapshot=dict(snap, failed=bool(snap.get("failed"))),
                               order=task_vars.get("ansible_play_batch"))
        return {"status": out["status"], "paths": out["paths"], "event": "snapshot", "summary": out["summary"]}
