# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: rollout_report
short_description: Record a rollout event in the run's report (JSON, Markdown, SVG plot of per-NIC shares)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Merges one event (V(start), V(preflight), V(tor), V(wave), V(snapshot) or V(finish)) into
    C(<dir>/report.json) and re-renders C(report.md) and C(nic_shares.svg) (per-NIC byte share per host and
    direction, with the 1/N line and the tolerance band) from it, so an interrupted run still leaves a report.
  - For V(snapshot) events, O(snapshot) (the result of C(netscale.multinic.rollout_snapshot)) is written to
    C(<dir>/snapshots/<wave>/<node>.json) and listed in the report.
  - "Runs on the controller (C(delegate_to: localhost), C(run_once)). The report is a controller-side artifact; it
    is written in check mode too (marked as such), like the rendered configs under C(intended/)."

options:
  dir:
    description: Report directory of this run (C(reports/<timestamp>)).
    type: path
    required: true
  event:
    description: Event to record.
    type: str
    required: true
    choices: [start, preflight, tor, wave, snapshot, finish]
  data:
    description: Event data (for V(wave) - name, hosts, status, gates, failed_hosts, rollback, started, ended).
    type: dict
    default: {}
  snapshot:
    description: Snapshot to store (V(snapshot) event; the C(rollout_snapshot) result).
    type: dict
  share_tolerance:
    description: Tolerance band drawn around 1/N in the plot.
    type: float
attributes:
  check_mode:
    support: full
    description: Writes the report in check mode too (a controller-side artifact, not a device change).
  diff_mode:
    support: none
    description: No diff.
  platform:
    support: full
    description: The controller.
    platforms: posix
"""

EXAMPLES = r"""
- name: Record the canary wave
  netscale.multinic.rollout_report:
    dir: "{{ rollout_report_dir }}"
    event: wave
    data:
      name: canary
      hosts: "{{ ansible_play_batch }}"
      status: passed
      gates: "{{ gate_results }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
paths:
  description: Files written.
  returned: always
  type: dict
  sample: {json: reports/20250101T000000Z/report.json, markdown: reports/20250101T000000Z/report.md}
status:
  description: Run status in the report after this event.
  returned: always
  type: str
event:
  description: The event recorded.
  returned: always
  type: str
summary:
  description: A few fields of the event for progress output (the rollout_progress callback prints them).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.report import model


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dir=dict(type="path", required=True),
            event=dict(type="str", required=True, choices=list(model.EVENTS)),
            data=dict(type="dict", default={}),
            snapshot=dict(type="dict"),
            share_tolerance=dict(type="float"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    out = model.record(p["dir"], p["event"], p["data"], snapshot=p["snapshot"], share_tolerance=p["share_tolerance"],
                       check_mode=module.check_mode)
    module.exit_json(changed=False, paths=out["paths"], status=out["status"], event=p["event"], summary=out["summary"])


if __name__ == "__main__":
    main()
