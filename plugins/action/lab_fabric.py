# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: build or tear down the fabric lab on the controller (docs in plugins/modules/lab_fabric.py).

It runs here rather than as a module because the lab renders its spine and ToR configs with the ToR
policy's Jinja templates, which live beside the collection's code on the controller.
"""

from __future__ import annotations

import traceback

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab
from ansible_collections.netscale.multinic.plugins.module_utils.lab.state import STATE_ROOT

# The options documented in plugins/modules/lab_fabric.py (a docs-only file: ansible-test wants no
# code there); tests/unit/plan/test_action_specs.py checks that both agree.
ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    topology=dict(type="path", required=True),
    state_root=dict(type="path", default=STATE_ROOT),
    tor_config_dir=dict(type="path"),
    host_default_route=dict(type="bool", default=True),
    bgp_timeout=dict(type="float", default=60.0),
    fail_at=dict(type="str", choices=["image", "nodes", "hosts", "links", "frr", "bgp", "ready"]),
    rebuild=dict(type="bool", default=False),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    # ActionBase.run rejects any other argument.
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            # The spines' TCP-MD5 keys (ToR<->spine sessions) from the inventory's tor_bgp_md5_keys, read
            # by name like tor_render does: never a task argument, never in the result.
            keys = (task_vars or {}).get("tor_bgp_md5_keys") or {}
            keys = self._templar.template(keys) if keys else {}
            keys = dict((str(k), str(v)) for k, v in (keys.items() if isinstance(keys, dict) else []) if v)
            lab = open_lab(params["topology"], state_root=params["state_root"], tor_config_dir=params["tor_config_dir"],
                           fail_at=params["fail_at"], host_default_route=params["host_default_route"],
                           bgp_timeout=params["bgp_timeout"], md5_keys=keys, rebuild=params["rebuild"])
        except Exception as exc:  # pylint: disable=broad-exception-caught
            result.update(failed=True, msg=to_native(exc))
            return result
        healthy, reasons, data = lab.status()
        before = "absent\n" if data is None else ("healthy\n" if healthy else "unhealthy: %s\n" % "; ".join(reasons))
        result.update(changed=False, state_file=lab.state_file, log=lab.log_lines)
        if params["state"] == "present":
            return self._present(result, lab, healthy, reasons, data, before)
        return self._absent(result, lab, data, before)

    def _present(self, result, lab, healthy, reasons, data, before):
        if healthy and not lab.rebuild:
            result.update(nodes=data["nodes"])
            return result
        result.update(changed=True, reasons=reasons if not healthy else ["rebuild requested"],
                      change=lab.change_summary(data, reasons))
        if self._task.check_mode:
            result["diff"] = dict(before=before, after="healthy\n")
            return result
        return self._run_step(result, lab, lab.build, before, "healthy\n")

    def _absent(self, result, lab, data, before):
        if data is None and not lab.leftovers():
            return result
        result["changed"] = True
        if self._task.check_mode:
            result["diff"] = dict(before=before, after="absent\n")
            return result
        result = self._run_step(result, lab, lab.teardown, before, "absent\n")
        if not result.get("failed"):
            result["changed"] = True
        return result

    @staticmethod
    def _run_step(result, lab, step, before, after):
        try:
            out = step()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            result.update(failed=True, msg=to_native(exc), log=lab.log_lines, exception=traceback.format_exc())
            return result
        result.update(out)
        result["diff"] = dict(before=before, after=after)
        result["log"] = lab.log_lines
        return result
