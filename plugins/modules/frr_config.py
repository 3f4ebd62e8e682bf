#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: frr_config
short_description: Validate, diff and apply an intended FRR config with frr-reload.py (no daemon restart)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Writes the candidate config (mode 0600), checks it with C(vtysh -C -f), computes the delta against
    the running config with C(frr-reload.py --test) and applies it with C(frr-reload.py --reload).
    bgpd is never restarted; sessions not touched by the delta stay up.
  - Success means the running config matches the candidate afterwards (a second C(--test) shows no
    delta), so a second run reports no change.
  - A spine drained by C(netscale.multinic.spine_drain) (its marker C(<confdir>/netscale-drain.json) is there) stays
    drained - C(bgp graceful-shutdown) is added to the candidate's C(router bgp) and C(drain_kept) is returned, with a
    warning - until C(spine_drain) undrains it (docs/remediation.md).
  - TCP-MD5 keys and other passwords are redacted in the diff, warnings and errors; frr-reload.py is
    run with C(--stdout --log-level error) so it does not log the applied lines (with the keys) to
    /var/log/frr/frr-reload.log.
options:
  content:
    description: The intended config text (integrated frr.conf format).
    type: str
    required: true
  secrets:
    description:
      - Keys for the C(<md5:NAME>) placeholders of O(content), a mapping of NAME to key, filled in on the device just
        before validation; a placeholder without a key fails, changing nothing. C(tor_render) writes its configs
        with these placeholders so that no key is kept on the controller's disk.
    type: dict
    default: {}
  candidate_path:
    description: Where the candidate is kept on the device (mode 0600). Default C(<confdir>/netscale-intended.conf).
    type: path
  confdir:
    description: FRR config directory (frr-reload.py C(--confdir)); C(vtysh write) persists to C(<confdir>/frr.conf).
    type: path
    default: /etc/frr
attributes:
  check_mode:
    support: full
    description: Validates and computes the delta with a scratch candidate that is removed afterwards; nothing changes.
  diff_mode:
    support: full
    description: The exact delta frr-reload.py applies, as C(-) and C(+) lines (secrets redacted).
  platform:
    support: full
    description: Runs on the FRR box (POSIX), where vtysh and frr-reload.py are.
    platforms: posix
requirements:
  - FRR with vtysh and frr-reload.py (Debian/Ubuntu package frr-pythontools)
extends_documentation_fragment:
  - netscale.multinic.frr_target
  - netscale.multinic.frr_target.reload
"""

EXAMPLES = r"""
- name: Apply the rendered ToR config
  netscale.multinic.frr_config:
    content: "{{ lookup('ansible.builtin.file', 'intended/configs/' ~ inventory_hostname ~ '.cfg') }}"
"""

RETURN = r"""
added:
  description: Number of command blocks added by the delta.
  returned: always
  type: int
deleted:
  description: Number of command blocks removed by the delta.
  returned: always
  type: int
delta:
  description: The delta as text (secrets redacted).
  returned: always
  type: str
candidate:
  description: Path of the kept candidate (absent in check mode).
  returned: when not in check mode
  type: str
drain_kept:
  description: The spine is drained (its marker is in O(confdir)) and the candidate kept C(bgp graceful-shutdown).
  returned: always
  type: bool
modes_tightened:
  description:
    - Saved configs (C(frr.conf), C(frr.conf.sav) in O(confdir)) that were readable beyond their owner and were
      made owner-only (they hold the TCP-MD5 keys; Debian's FRR writes them 0640). Counted as a change.
  returned: always
  type: list
  elements: str
"""

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.netscale.multinic.plugins.module_utils.frr import apply as frr_apply  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.frr.key_placeholders import fill_placeholders  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate.spine_drain import honour_marker  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec=dict(
            frr_apply.RELOAD_ARGUMENT_SPEC,
            content=dict(type="str", required=True, no_log=True),
            secrets=dict(type="dict", default={}, no_log=True),
            candidate_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    target, problem = frr_apply.reload_target(p)
    if problem:
        module.fail_json(msg=problem)

    def run(argv):
        return module.run_command(argv, umask=0o077)

    content, missing = fill_placeholders(p["content"], p["secrets"])
    if missing:
        module.fail_json(msg="content: placeholders without a key in secrets: %s; pass each key under its name "
                             "in secrets (the tor_bgp role passes tor_bgp_md5_keys); nothing was changed"
                         % ", ".join("<md5:%s>" % n for n in missing))
    content, drain_kept = honour_marker(content, p["confdir"])
    if drain_kept:
        module.warn("%s is drained (marker %s/netscale-drain.json): the deploy keeps bgp graceful-shutdown; undrain it "
                    "with playbooks/undrain.yml -e drain_scope=spine" % (p["confdir"], p["confdir"]))
    candidate = p["candidate_path"] or os.path.join(p["confdir"], "netscale-intended.conf")
    try:
        res = frr_apply.converge(run, target, content, check_mode=module.check_mode,
                                 candidate_path=candidate, scratch_dir=target.rundir or None)
    except frr_apply.FrrApplyError as exc:
        module.fail_json(msg=str(exc), output=exc.output)
    for w in res["warnings"][:20]:
        module.warn("frr-reload.py: %s" % w)
    tightened = [] if module.check_mode else frr_apply.tighten_config_modes(p["confdir"])
    out = dict(changed=res["changed"] or bool(tightened), added=res["added"], deleted=res["deleted"],
               delta=res["diff"], modes_tightened=tightened, drain_kept=drain_kept)
    if res["candidate"]:
        out["candidate"] = res["candidate"]
    if module._diff and res["changed"]:
        out["diff"] = {"prepared": res["diff"]}
    module.exit_json(**out)


if __name__ == "__main__":
    main()
