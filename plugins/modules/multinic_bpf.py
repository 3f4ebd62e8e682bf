#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: multinic_bpf
short_description: Build the host datapath eBPF object with clang, only when its source changed
description:
  - Compiles the collection's tc programs (C) with C(clang -O2 -g -target bpf).
  - Freshness is checked by source hash, stored next to the object in C(<dest>.src.sha256);
    an up-to-date object is left alone (changed=false).
  - Usually run on the controller (C(delegate_to=localhost), C(run_once)); the object is then
    copied to the hosts, which need no compiler.
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
options:
  src:
    description: C source file.
    type: path
    required: true
  dest:
    description: Object file to write.
    type: path
    required: true
  clang:
    description: clang executable.
    type: str
    default: clang
  include:
    description: Extra include directory (for C(asm/types.h)).
    type: path
    default: /usr/include/x86_64-linux-gnu
attributes:
  check_mode:
    support: full
    description: Compares the source hash with the built object and reports whether it would rebuild.
  diff_mode:
    support: none
    description: Nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Linux hosts.
"""

EXAMPLES = r"""
- name: Build the datapath object on the controller
  netscale.multinic.multinic_bpf:
    src: "{{ role_path }}/files/bpf/multinic_datapath.c"
    dest: /tmp/netscale-multinic/bpf/multinic_datapath.o
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
path:
  description: Object file.
  returned: always
  type: str
source_sha256:
  description: SHA-256 of the C source the object was built from.
  returned: always
  type: str
object_sha256:
  description: SHA-256 of the object (its first 12 characters name the pinned version in bpffs).
  returned: when the object exists
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bpf


def main():
    module = AnsibleModule(
        argument_spec=dict(src=dict(type="path", required=True), dest=dict(type="path", required=True),
                           clang=dict(type="str", default="clang"),
                           include=dict(type="path", default="/usr/include/x86_64-linux-gnu")),
        supports_check_mode=True)
    p = module.params
    if not os.path.exists(p["src"]):
        module.fail_json(msg="src: %s does not exist. Fix: point src at roles/host_datapath/files/bpf/"
                             "multinic_datapath.c of the collection." % p["src"])
    want = bpf.sha256_file(p["src"])
    stamp = p["dest"] + ".src.sha256"
    have = open(stamp).read().strip() if os.path.exists(stamp) else None
    fresh = have == want and os.path.exists(p["dest"])
    if module.check_mode:
        module.exit_json(changed=not fresh, path=p["dest"], source_sha256=want)
    try:
        changed, want = bpf.build_object(p["src"], p["dest"], p["clang"], p["include"])
    except bpf.BpfError as e:
        module.fail_json(msg=str(e))
    module.exit_json(changed=changed, path=p["dest"], source_sha256=want, object_sha256=bpf.sha256_file(p["dest"]))


if __name__ == "__main__":
    main()
