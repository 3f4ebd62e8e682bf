#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: spine_drain
short_description: Drain or undrain a spine with BGP graceful shutdown (FRR)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the spine. O(state=drained) adds C(bgp graceful-shutdown) to the default VRF's C(router bgp) of the
    running config; FRR then re-announces every path to its eBGP peers (the ToRs) with the GRACEFUL_SHUTDOWN
    community and the ToRs' FRR gives those paths local-preference 0, so they move the traffic to the other spines
    (the drained spine's paths stay as a last resort). O(state=undrained) removes it.
  - The change goes through the project's FRR apply helpers (validated with C(vtysh -C), the delta of
    C(frr-reload.py --test), applied with C(frr-reload.py --reload), which saves the running config to
    C(frr.conf)) - a restart of FRR keeps the drain.
  - A marker, C(<confdir>/netscale-drain.json) (job, reason, case), is written with the drain and removed with the
    undrain; C(netscale.multinic.frr_config) honours it, so a re-deploy of the spine's rendered config keeps
    C(bgp graceful-shutdown) until the spine is undrained (docs/remediation.md).
  - Use it through C(playbooks/drain.yml) with C(drain_scope=spine) - the blast-radius budget and the check that the
    other spines carry the rack aggregates come first, the ToRs are checked afterwards (C(netscale.multinic.spine_paths)).
options:
  state:
    description: V(drained) - graceful shutdown on; V(undrained) - off.
    type: str
    choices: [drained, undrained]
    required: true
  confdir:
    description: FRR config directory (frr-reload.py C(--confdir); the marker lives here).
    type: path
    default: /etc/frr
  job:
    description: The drain job's id (kept in the marker).
    type: str
  reason:
    description: Why (kept in the marker).
    type: str
  case:
    description: The monitoring case id, when the drain comes from one (kept in the marker).
    type: str
attributes:
  check_mode:
    support: full
    description: The delta is computed with a scratch candidate; nothing is applied, no marker written.
  diff_mode:
    support: full
    description: The config delta (C(+ bgp graceful-shutdown)) and the marker.
  platform:
    support: full
    description: The spine (FRR with vtysh and frr-reload.py).
    platforms: posix
requirements:
  - FRR with vtysh and frr-reload.py (Debian/Ubuntu package frr-pythontools)
extends_documentation_fragment:
  - netscale.multinic.frr_target
  - netscale.multinic.frr_target.reload
"""

EXAMPLES = r"""
- name: Graceful shutdown of this spine
  netscale.multinic.spine_drain:
    state: drained
    job: drain-20261128T010000Z
    reason: optics errors on down-r3
"""

RETURN = r"""
config_changed:
  description: Whether the running config changed.
  returned: always
  type: bool
marker_changed:
  description: Whether the marker was written or removed.
  returned: always
  type: bool
was_drained:
  description: Whether the running config had C(bgp graceful-shutdown) before.
  returned: always
  type: bool
marker:
  description: The marker's path.
  returned: always
  type: str
modes_tightened:
  description: >-
    Saved configs (C(frr.conf), C(frr.conf.sav)) made owner-only after frr-reload.py saved them (they
    hold the TCP-MD5 keys); not counted as a change of the drain.
  returned: always
  type: list
  elements: str
"""

import os  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.frr.apply import RELOAD_ARGUMENT_SPEC, reload_target, tighten_config_modes  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import spine_drain  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec=dict(
            RELOAD_ARGUMENT_SPEC,
            state=dict(type="str", choices=["drained", "undrained"], required=True),
            job=dict(type="str"),
            reason=dict(type="str"),
            case=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    target, problem = reload_target(p)
    if problem:
        module.fail_json(msg=problem)
    marker = os.path.join(p["confdir"], spine_drain.MARKER)

    def run(argv):
        return module.run_command(argv, umask=0o077)

    try:
        res = spine_drain.converge(
            run, target, p["state"], marker, check_mode=module.check_mode,
            candidate_path=os.path.join(p["confdir"], "netscale-spine-drain.conf"),
            marker={"job": p["job"], "reason": p["reason"], "case": p["case"], "time": time.time()})
    except MultinicError as exc:
        module.fail_json(msg="spine_drain: %s" % exc)
    # frr-reload.py saved the running config (it holds the TCP-MD5 keys) to frr.conf: owner-only, as frr_config does
    tightened = [] if module.check_mode else tighten_config_modes(p["confdir"])
    out = dict(changed=res["changed"], config_changed=res["config_changed"], marker_changed=res["marker_changed"],
               was_drained=res["was_drained"], marker=marker, modes_tightened=tightened)
    if module._diff and res["changed"]:
        out["diff"] = {"prepared": res["diff"]}
    module.exit_json(**out)


if __name__ == "__main__":
    main()
