#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: vipinjector_bfd
short_description: Render and install the BFD responder configuration of one task slot (zebra + bfdd)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - ExaBGP has no BFD. The ToR runs BFD on every sidecar BGP session (one per slot and NIC); this
    module writes the configuration of the host-side responder of one task slot, FRR's zebra and
    bfdd, which the role runs in the slot's network namespace
    (C(netscale-vipinjector-zebra@<slot>.service), C(netscale-vipinjector-bfd@<slot>.service)).
  - One BFD peer per BGP session, with the session's two addresses (local = the container's NIC-k
    address, peer = the ToR gateway of NIC k) and the ToR profile's timers.
  - Files C(<config_dir>/slot<s>/bfd/zebra.conf) and C(bfdd.conf), mode 0640, group C(frr) (the
    daemons read them after dropping to user C(frr)).
  - O(state=absent) removes the slot's C(bfd) directory.
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
      - BFD options, see C(plugins/module_utils/vipinjector/bfd.py) C(DEFAULTS) and docs/vipinjector.md
        (C(enabled), C(profile), C(interval_ms), C(multiplier), C(multihop), C(passive), C(config_dir),
        C(runtime_dir)).
    type: dict
    default: {}
  session_family:
    description: Transport family of the BGP sessions (C(auto) = IPv6 when planned), as the sidecar's.
    type: str
    choices: [auto, ipv6, ipv4]
    default: auto
  group:
    description: Group owning the files (the FRR daemons' group).
    type: str
    default: frr
  state:
    description: C(present) installs the configuration, C(absent) removes the slot's C(bfd) directory.
    type: str
    choices: [present, absent]
    default: present
attributes:
  check_mode:
    support: full
    description: Renders, reports what would change, writes nothing.
  diff_mode:
    support: full
    description: Shows the file changes.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with systemd and FRR installed.
seealso:
  - module: netscale.multinic.vipinjector_instance
"""

EXAMPLES = r"""
- name: BFD responder of task slot 1
  netscale.multinic.vipinjector_bfd:
    host: "{{ multinic_host }}"
    slot: 1
    options:
      enabled: true
      interval_ms: 100
      multiplier: 3
"""

RETURN = r"""
files:
  description: Files of the responder and whether each changed.
  returned: always
  type: dict
  sample: {"/etc/netscale-vipinjector/slot1/bfd/bfdd.conf": true}
config_dir:
  description: The responder's configuration directory.
  returned: always
  type: str
  sample: /etc/netscale-vipinjector/slot1/bfd
peers:
  description: One BFD peer per BGP session (nic, interface, peer, local).
  returned: when state=present
  type: list
  elements: dict
units:
  description: The systemd units of the responder.
  returned: always
  type: list
  elements: str
  sample: ["netscale-vipinjector-zebra@1.service", "netscale-vipinjector-bfd@1.service"]
"""

import grp
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector.bfd import BfdRenderError, render_bfd
from ansible_collections.netscale.multinic.plugins.module_utils.writing import FileInstall, remove_dir

MODE = 0o640
WRITE_ORDER = ("zebra.conf", "bfdd.conf")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="dict", required=True),
            slot=dict(type="int", required=True),
            options=dict(type="dict", default={}),
            session_family=dict(type="str", choices=["auto", "ipv6", "ipv4"], default="auto"),
            group=dict(type="str", default="frr"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        r = render_bfd(p["host"], p["slot"], p["options"], p["session_family"])
    except BfdRenderError as exc:
        module.fail_json(msg=str(exc))
    cdir = r["model"]["paths"]["config_dir"]
    slot = r["model"]["slot"]
    units = ["netscale-vipinjector-zebra@%d.service" % slot, "netscale-vipinjector-bfd@%d.service" % slot]
    result = dict(changed=False, config_dir=cdir, units=units, files={})
    if p["state"] == "absent":
        changed, files, diff = remove_dir(cdir, check_mode=module.check_mode)
        if changed:
            result.update(changed=True, files=files)
            if module._diff:
                result["diff"] = diff
        module.exit_json(**result)
    try:
        gid = grp.getgrnam(p["group"]).gr_gid
    except KeyError:
        module.fail_json(msg="group: %r does not exist on this host (value: %r). Fix: install FRR (apt-get install "
                             "frr creates user and group frr) or set group" % (p["group"], p["group"]), **result)
    owner = (0, gid) if os.geteuid() == 0 else None
    result["peers"] = r["model"]["peers"]
    install = FileInstall(cdir, dict((name, (text, MODE)) for name, text in r["files"].items()), owner=owner)
    result["files"] = install.changed
    if install.any_changed:
        result["changed"] = True
        if module._diff:
            result["diff"] = install.diff
        install.install(order=WRITE_ORDER, check_mode=module.check_mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
