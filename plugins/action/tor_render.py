# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: render ToR and spine BGP configs on the controller (docs in plugins/modules/tor_render.py)."""

from __future__ import annotations

import hashlib
import json
import os

import yaml

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.gcpause import gc_paused
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy import build_fabric_configs
from ansible_collections.netscale.multinic.plugins.module_utils.frr.key_placeholders import with_placeholders
from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact, write_if_changed
from ansible_collections.netscale.multinic.plugins.modules.tor_render import ARGUMENT_SPEC


SAFE_DUMPER = getattr(yaml, "CSafeDumper", None) or yaml.SafeDumper


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    # ActionBase.run rejects any other argument.
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        topology = args.get("topology") or task_vars.get("multinic_topology_file")
        if not topology:
            raise AnsibleActionFail("tor_render: option 'topology' is required (or host var multinic_topology_file)")
        topology = self._loader.path_dwim(topology)
        dest = self._loader.path_dwim(args.get("dest") or "intended")
        devices = args.get("devices") or None
        if isinstance(devices, str):
            devices = [devices]
        # plain dicts and lists: the options feed the rendered YAML, and Ansible 2.19's templated values are
        # tagged container types that yaml.safe_dump cannot represent
        options = json.loads(json.dumps(args.get("options") or {}))
        # The keys are read from a variable by name so that they never appear in the task's arguments.
        var = args.get("md5_keys_var", "tor_bgp_md5_keys")
        md5_keys = {}
        if var and var in task_vars:
            md5_keys = self._templar.template(task_vars[var]) or {}
            if not isinstance(md5_keys, dict):
                raise AnsibleActionFail("tor_render: variable %s must be a mapping host name -> key (got %s)"
                                        % (var, type(md5_keys).__name__))
            md5_keys = {str(k): (None if v is None else str(v)) for k, v in md5_keys.items()}
        with gc_paused():
            return self._render(result, topology, dest, devices, options, md5_keys)

    def _render(self, result, topology, dest, devices, options, md5_keys):
        try:
            plan = load_plan(topology)
            configs = build_fabric_configs(plan, options, md5_keys, devices=devices)
        except MultinicError as exc:
            problems = [p.as_dict() for p in getattr(exc, "problems", [])]
            result.update(failed=True, msg=to_native(exc), problems=problems)
            return result
        check = bool(self._task.check_mode)
        written, out = [], {}
        for name, cfg in sorted(configs.items()):
            cfg_path = os.path.join(dest, "configs", name + ".cfg")
            sc_path = os.path.join(dest, "structured_configs", name + ".yml")
            # libyaml's emitter when built in: the same bytes as yaml.safe_dump, ~3x faster on a region
            sc_text = yaml.dump(redact(cfg["structured"]), Dumper=SAFE_DUMPER, sort_keys=True, default_flow_style=False)
            # the file on disk names each key (<md5:host>), the device gets the key (frr_config secrets)
            on_disk, md5_names = with_placeholders(cfg["text"], md5_keys)
            changed_cfg = write_if_changed(cfg_path, on_disk, mode=0o600, check_mode=check)
            changed_sc = write_if_changed(sc_path, sc_text, mode=0o644, check_mode=check)
            if changed_cfg:
                written.append(cfg_path)
            if changed_sc:
                written.append(sc_path)
            sc = cfg["structured"]
            out[name] = {"kind": cfg["kind"], "platform": sc["platform"], "config": cfg_path,
                         "structured_config": sc_path, "counts": sc["counts"],
                         # of the redacted text: a hash of a keyed config would be an offline
                         # guessing oracle for a weak key
                         "sha256": hashlib.sha256(redact(cfg["text"]).encode()).hexdigest(),
                         "sysctls": (sc.get("ecmp_hash") or {}).get("sysctls", {}),
                         "live": bool(sc["capabilities"].get("live")),
                         "md5_names": md5_names}
        result.update(changed=bool(written), written=written, devices=out, dest=dest)
        return result
