#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: vipinjector_instance
short_description: Render, validate and install the configuration of one VipInjector (ExaBGP sidecar) instance
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Renders the ExaBGP configuration, its environment file and the process-API helper's JSON
    configuration for one task slot from the planner's host data (inventory variable C(multinic_host)).
    One BGP session per NIC (local address = the container's NIC-k address, peer = the ToR gateway of
    NIC k), the slot's task IP as /32 and /128, announced by the helper with that NIC's address as
    next hop.
  - Checks the result with the VipInjector guard (nothing outside the slot's allocation) and with
    ExaBGP's own validator (C(exabgp validate)) B(before) it replaces the installed files; a config
    that fails either check changes nothing.
  - The ExaBGP configuration holds the TCP-MD5 key and is written mode 0600, owned by root (the
    systemd unit hands it to the unprivileged service as a credential).
  - O(state=absent) removes the instance's configuration directory.
options:
  host:
    description: Planner host data of this host (C(multinic_host) from the netscale.multinic.fabric inventory).
    type: dict
    required: true
  slot:
    description: Task slot number (C(host.slots[].slot)).
    type: int
    required: true
  options:
    description:
      - Renderer options, see C(plugins/module_utils/vipinjector/render.py) C(DEFAULTS) and docs/vipinjector.md
        (C(install_dir), C(config_dir), C(runtime_dir), C(session_family), C(hold_time), C(outgoing_ttl),
        C(incoming_ttl), C(health), C(path_check), C(drain_poll), C(watchdog), C(egress_state), C(require_local_task_ip),
        C(metrics_file), C(log_level)).
      - The MD5 key is not an option here; use O(md5_password).
    type: dict
    default: {}
  md5_password:
    description: TCP-MD5 key for the sessions (from vault). Empty = no MD5.
    type: str
    default: ""
  validate:
    description: Run C(exabgp validate) on the new configuration before installing it.
    type: bool
    default: true
  exabgp:
    description: ExaBGP executable used for validation. Default C(<install_dir>/venv/bin/exabgp).
    type: path
  state:
    description: C(present) installs the configuration, C(absent) removes the instance's directory.
    type: str
    choices: [present, absent]
    default: present
attributes:
  check_mode:
    support: full
    description: Renders and validates, reports what would change, writes nothing.
  diff_mode:
    support: full
    description: Shows the file changes; the MD5 key is replaced by C(<redacted>).
  platform:
    support: full
    platforms: posix
    description: Linux hosts with systemd.
notes:
  - Runs on the GPU host. Install the helper (C(<install_dir>/bin/vipinjector-helper)) first, because
    C(exabgp validate) checks that the configured process exists and is executable.
seealso:
  - module: netscale.multinic.vipinjector_status
"""

EXAMPLES = r"""
- name: Configure the sidecar of task slot 1
  netscale.multinic.vipinjector_instance:
    host: "{{ multinic_host }}"
    slot: 1
    md5_password: "{{ vault_vipinjector_md5 }}"
    options:
      health:
        type: tcp
        host: 127.0.0.1
        port: 8080
  no_log: true
  register: cfg

- name: Remove it
  netscale.multinic.vipinjector_instance:
    host: "{{ multinic_host }}"
    slot: 1
    state: absent
"""

RETURN = r"""
files:
  description: Files of the instance and whether each changed.
  returned: always
  type: dict
  sample: {"/etc/netscale-vipinjector/slot1/exabgp.conf": true}
config_dir:
  description: The instance's configuration directory.
  returned: always
  type: str
  sample: /etc/netscale-vipinjector/slot1
unit:
  description: The systemd unit of the instance.
  returned: always
  type: str
  sample: netscale-vipinjector@1.service
sessions:
  description: One entry per NIC (nic, peer, local address, next hops).
  returned: when state=present
  type: list
  elements: dict
prefixes:
  description: The prefixes the instance may announce (its task IPs).
  returned: when state=present
  type: list
  elements: str
  sample: ["198.18.0.136/32", "fd00:10:0:8::8/128"]
validation:
  description: Output of C(exabgp validate) (without the key).
  returned: when validated
  type: str
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector.render import (
    RenderError, exabgp_validate, render_instance)
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector.guard import GuardError
from ansible_collections.netscale.multinic.plugins.module_utils.writing import FileInstall, read_text, redact, remove_dir

MODES = {"exabgp.conf": 0o600, "exabgp.env": 0o644, "helper.json": 0o644}
# helper.json and exabgp.env first, the ExaBGP config (which a restart loads) last
WRITE_ORDER = ("helper.json", "exabgp.env", "exabgp.conf")


# The key as the rendered exabgp.conf carries it (render.render_exabgp_conf quotes it).
_MD5_LINE_RE = re.compile(r'^\s*md5-password "([^"]*)";', re.MULTILINE)


def _installed_key(conf_text):
    """The MD5 key of the installed configuration: on a rotation the diff must hide the old key too."""
    match = _MD5_LINE_RE.search(conf_text or "")
    return match.group(1) if match else None


def _owner():
    """Root-owned files when running as root (the unit copies the config as root); as is otherwise."""
    return (0, 0) if os.geteuid() == 0 else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="dict", required=True),
            slot=dict(type="int", required=True),
            options=dict(type="dict", default={}),
            md5_password=dict(type="str", default="", no_log=True),
            validate=dict(type="bool", default=True),
            exabgp=dict(type="path"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    key = p["md5_password"] or None
    opts = dict(p["options"] or {})
    if "md5_password" in opts:
        module.fail_json(msg="options.md5_password: pass the key as md5_password (no_log), not inside "
                             "options. Fix: move it")
    opts["md5_password"] = key
    try:
        r = render_instance(p["host"], p["slot"], opts)
    except (RenderError, GuardError) as exc:
        module.fail_json(msg=str(exc))
    m = r["model"]
    paths = m["paths"]
    cdir = paths["config_dir"]
    unit = "netscale-vipinjector@%d.service" % m["slot"]
    result = dict(changed=False, config_dir=cdir, unit=unit, files={})

    if p["state"] == "absent":
        changed, files, diff = remove_dir(cdir, check_mode=module.check_mode)
        if changed:
            result.update(changed=True, files=files)
            if module._diff:
                result["diff"] = diff
        module.exit_json(**result)

    result["sessions"] = m["sessions"]
    result["prefixes"] = m["prefixes"]
    secrets = [k for k in (key, _installed_key(read_text(os.path.join(cdir, "exabgp.conf")))) if k]
    owner = _owner()
    # an installed file must be root's (uid) when running as root; its group is not checked
    install = FileInstall(cdir, dict((name, (text, MODES[name])) for name, text in r["files"].items()),
                          owner=owner, check_owner=owner and (owner[0], None), secrets=secrets)
    result["files"] = install.changed
    if p["validate"]:
        exe = p["exabgp"] or paths["exabgp"]
        if not os.access(exe, os.X_OK):
            module.fail_json(msg="exabgp: %s is not executable. Fix: install ExaBGP first (role "
                                 "netscale.multinic.vipinjector does) or set exabgp=" % exe, **result)
        try:
            ok, out = exabgp_validate(r["files"]["exabgp.conf"], exe)
        except Exception as exc:  # noqa: BLE001 - report any failure to run the validator
            module.fail_json(msg="exabgp validate could not run: %s" % exc, **result)
        result["validation"] = redact(out, secrets)
        if not ok:
            module.fail_json(msg="exabgp validate refused the rendered configuration for slot %d; "
                                 "nothing was installed" % m["slot"], **result)
    if install.any_changed:
        result["changed"] = True
        if module._diff:
            result["diff"] = install.diff
        install.install(order=WRITE_ORDER, check_mode=module.check_mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
