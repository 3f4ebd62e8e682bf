# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: render ToR and spine BGP configs on the controller (docs in plugins/modules/tor_render.py)."""

from __future__ import annotations

import json

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.gcpause import gc_paused
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.options import compose, multihop_hosts
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.output import render_fabric
from ansible_collections.netscale.multinic.plugins.modules.tor_render import ARGUMENT_SPEC


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
        multihop = args.get("bfd_multihop_hosts")
        if multihop is None:
            multihop = self._kernel_datapath_hosts(task_vars)
        options = json.loads(json.dumps(compose(args.get("options") or {}, args.get("spine_networks") or {},
                                                multihop)))
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

    def _kernel_datapath_hosts(self, task_vars):
        """O(bfd_multihop_hosts) unset: the members of group gpu_hosts whose host_datapath_ebpf is false (each
        host's own variable, read untemplated and templated alone; unset is the eBPF datapath)."""
        hostvars = task_vars.get("hostvars") or {}
        raw_get = getattr(hostvars, "raw_get", hostvars.get)   # HostVars: untemplated, one variable pass
        pairs = []
        for host in (task_vars.get("groups") or {}).get("gpu_hosts") or []:
            raw = raw_get(host) if host in hostvars else {}
            value = raw.get("host_datapath_ebpf") if isinstance(raw, dict) else None
            if value is not None:
                try:
                    value = boolean(self._templar.template(value), strict=False)
                except AnsibleError as exc:
                    raise AnsibleActionFail("tor_render: host_datapath_ebpf of %s: %s; nothing was written. Fix: "
                                            "give the host a boolean there, or set bfd_multihop_hosts (the tor_bgp "
                                            "role: tor_bgp_bfd_multihop_hosts)" % (host, to_native(exc)))
            pairs.append((host, value))
        return multihop_hosts(pairs)

    def _render(self, result, topology, dest, devices, options, md5_keys):
        try:
            plan = load_plan(topology)
            # device by device (in worker processes on a big fabric), nothing written on bad input
            written, out = render_fabric(plan, dest, options, md5_keys, devices=devices,
                                         check_mode=bool(self._task.check_mode))
        except MultinicError as exc:
            problems = [p.as_dict() for p in getattr(exc, "problems", [])]
            result.update(failed=True, msg=to_native(exc), problems=problems)
            return result
        except (OSError, RuntimeError) as exc:
            raise AnsibleActionFail("tor_render: rendering into %s failed: %s"
                                    % (dest, to_native(exc)))
        result.update(changed=bool(written), written=written, devices=out, dest=dest)
        return result
