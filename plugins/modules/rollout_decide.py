# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: rollout_decide
short_description: The staged rollout's decisions (unreachable budget, lost hosts, wave verdict, inventory checks)
version_added: 0.2.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the controller and decides; it changes nothing on any host (C(changed=false) always, the same in
    check mode). With O(record_to) it records its decision in the run's journal and report on the controller.
    The logic is C(plugins/module_utils/rollout/decide.py) (pure functions, unit and property tested);
    C(playbooks/rollout.yml) and C(playbooks/rollout_hosts.yml) only order the steps and call this.
  - V(names) - this run's id (UTC time, C(-job<awx_job_id>) under AWX), the rollout's journal id (O(rollout_id)
    resumes it; AWX workflow jobs share C(awx-wf-<awx_workflow_job_id>); else the run id), this job's key, the
    report directory C(<report_root>/<run id>) and the journal root (O(journal_dir), default C(<report_root>/journal)).
    C(awx_job_id) and C(awx_workflow_job_id) are read from the job's variables (AWX sets them). Sets them as facts
    (RV(ansible_facts)) for the later plays.
  - V(inventory) - the preflight's inventory sanity and TCP-MD5 key checks in one pass over the inventory data
    (no Jinja loop over hostvars). Whether TCP-MD5 is required is read from the first ToR's C(tor_bgp_options),
    as the C(tor_bgp) role renders every ToR (run_once); each host's and ToR's own C(tor_bgp_md5_keys) must hold
    the host's key. Fails naming the problems, before anything is changed. A job whose inventory
    holds no GPU host while the topology has some (an AWX fleet slice given only infrastructure) is not an error
    - it returns C(slice_empty=true) and the job has nothing to deploy. Also checks O(max_unreachable) as V(budget)
    does, and sets the fabric, the ToR of each rack and the budget as facts.
  - V(budget) - parses O(max_unreachable) (a host count, or a percentage of the wave from 0% to 100%); fails
    with the fix on anything else.
  - V(account) - lost-host accounting of a wave at a O(step) (V(start), V(deploy), V(gates)) - the hosts
    counted unreachable (marked lost - their registered reachability check failed or found them unreachable, or
    a C(lost) fact - or dropped by Ansible), whether the wave is over its budget, and the journal records of this
    step; at V(start) also the report's wave start event (RV(events)).
  - V(verdict) - the wave verdict of the hosts in O(batch) from their gate verdicts, deploy errors and the
    budget; with O(hosts) (the wave's) it first counts the hosts Ansible dropped during the gates (as V(account)
    V(step=gates)). Also returns what a failed wave records before its rollback (RV(failed_journal)) and the
    ToRs of the failed hosts (RV(failed_tors)). V(approve) settles an inconclusive verdict; V(restore_tors) - the
    ToRs a failed wave restores; V(wave_end) - the wave's report event (O(netscale.multinic.rollout_report#module:data))
    and journal records (passed hosts, every gate verdict with its values, the wave); for a failed wave, first
    its hosts rolled back and the ToRs restored, and also the report's finish and the message the run stops with.
  - V(frr) - the devices of O(hosts) whose FRR did not answer (their registered C(vtysh) result, read by name).
  - V(finish) - a job that reached its end - its status (V(check) in check mode, else V(passed)), the journal's
    C(finished) event and the report's C(finish) (with the journal's summary; its message - O(scope_message), else
    none when O(hosts) holds the hosts it deployed, else why it had nothing to deploy), and with O(record_to)
    where the report and the journal are (RV(where)).
  - V(approve) settling on fail records O(failed_journal) (the wave's hosts failed, before the rollback); a record
    that cannot be written there is a warning, never a failure, so it never blocks the rollback.
  - With O(record_to), a decision that returns RV(journal) records or RV(events) writes them itself - the journal
    records first (not in check mode), then the report events, as M(netscale.multinic.rollout_journal) V(record)
    does - and a decision that returns RV(stop) (V(frr) with devices down, V(tor_failed), V(wave_end) of a failed
    wave) then fails with that message, so the run stops there. A record that cannot be written fails the task,
    naming the journal.
  - Per-host facts (marked lost, error, deploy failed, gate verdict) are read by name from each host's
    variables (O(facts)), so they never need a Jinja loop to be collected.
options:
  decision:
    description: What to decide.
    type: str
    required: true
    choices: [names, inventory, budget, account, verdict, approve, restore_tors, wave_end, frr, tor_configured, tor_failed,
              finish]
  record_to:
    description: >-
      The run's journal and report - C(dir) (the journal root), C(rollout_id), C(job), C(report_dir) - where the
      decision records RV(journal) and RV(events) (the fact C(rollout_record_to) V(names) sets). Empty - returned
      only, nothing written.
    type: dict
    default: {}
  rollout_id:
    description: >-
      V(names) - the rollout to resume (empty - a new one). V(frr), V(tor_failed) - the rollout named in the stop
      message (how to resume or roll back); empty - the O(record_to) one.
    type: str
    default: ""
  scope:
    description: V(names) - C(rollout_scope), checked first - V(all) or V(changed).
    type: str
    default: all
  tor:
    description: V(tor_configured), V(tor_failed) - the ToR of the phase.
    type: str
  rack:
    description: V(tor_configured) - the ToR's rack (C(multinic_rack.name)).
    type: str
  changed:
    description: V(tor_configured) - the ToR's running config differs from the one before the policy.
    type: bool
    default: false
  results:
    description: V(tor_configured) - the registered results of the spine_task_routes gates, one per spine.
    type: list
    elements: raw
    default: []
  backup_dir:
    description: V(tor_configured), V(tor_failed) - where the ToRs' pre-change copies are (C(rollout_tor_backup_dir)).
    type: path
  failed_task:
    description: V(tor_failed) - the name of the task that failed (C(ansible_failed_task.name)).
    type: str
    default: "?"
  failed_msg:
    description: V(tor_failed) - its message (C(ansible_failed_result.msg)).
    type: str
    default: ""
  report_root:
    description: V(names) - where run reports go (C(rollout_report_root)).
    type: path
  journal_dir:
    description: V(names) - journal root (C(rollout_journal_dir)); empty - C(<report_root>/journal).
    type: path
  topology:
    description: >-
      V(inventory) - the fabric topology file, read only when this job's inventory holds no GPU host. V(names) - the
      topology file given (C(rollout_topology)); empty - C(multinic_topology_file) of the first host of the first of
      the groups gpu_hosts, tors, spines, all that has one, else the first inventory source.
    type: path
  max_unreachable:
    description: The unreachable budget per wave (C(rollout_max_unreachable)) - a host count or a percentage.
    type: raw
    default: 0
  wave:
    description: Name of the wave (V(account), V(verdict), V(restore_tors), V(wave_end)).
    type: str
  hosts:
    description: Hosts of the wave, in wave order (V(account), V(verdict), V(wave_end)); V(frr) - the devices.
    type: list
    elements: str
    default: []
  batch:
    description: Hosts still in Ansible's play batch (C(ansible_play_batch)).
    type: list
    elements: str
    default: []
  known:
    description: V(account) - hosts already counted unreachable at an earlier step of the wave.
    type: list
    elements: str
    default: []
  step:
    description: V(account) - V(start) (wave start), V(deploy) (after the deploy), V(gates) (after the gates).
    type: str
    choices: [start, deploy, gates]
    default: start
  deploy_ran:
    description: V(account) with V(step=deploy) - the deploy ran (the wave was within its budget at the start).
    type: bool
    default: true
  over_budget_before:
    description: V(verdict) - the wave was over its budget before the gates (they did not run).
    type: bool
    default: false
  over_budget:
    description: V(verdict) - the wave is over its budget after the gates.
    type: bool
    default: false
  wave_verdict:
    description: V(approve) - the verdict to settle.
    type: str
  approved:
    description: V(approve) - consent to an inconclusive verdict (C(health_gates_inconclusive_approved)).
    type: bool
    default: false
  user_input:
    description: V(approve) - the operator's answer (V(yes) accepts).
    type: str
    default: ""
  failed_journal:
    description: V(approve) - what a failed wave records before its rollback (the V(verdict) result's RV(failed_journal)).
    type: list
    elements: dict
    default: []
  scope_message:
    description: V(finish) - the change scope's message (C(rollout_scope=changed)); omitted - a whole rollout.
    type: str
  run_id:
    description: V(finish) - this run's id (C(rollout_run_id)), named in RV(where).
    type: str
    default: ""
  all_waves:
    description: >-
      V(restore_tors), V(verdict) - every wave of the rollout (C(name), C(racks)), in order; with it a V(verdict)
      other than pass also names the ToRs to restore (C(restore)).
    type: list
    elements: dict
    default: []
  rack_tors:
    description: V(restore_tors), V(verdict) - ToR of each rack.
    type: dict
    default: {}
  tors:
    description: V(restore_tors), V(verdict) - the ToRs this rollout configures.
    type: list
    elements: str
    default: []
  skip_tors:
    description: V(restore_tors), V(verdict) - this job skips the ToRs (restores none).
    type: bool
    default: false
  deploy:
    description: V(wave_end) - the V(account) result after the deploy.
    type: dict
    default: {}
  gates:
    description: V(wave_end) - the V(account) result after the gates.
    type: dict
    default: {}
  failed_hosts:
    description: V(wave_end) - the V(verdict) result's failed hosts.
    type: list
    elements: str
    default: []
  restored_tors:
    description: V(wave_end) - the ToRs a failed wave restored; default - those the O(gates) verdict named (its
      C(restore)) when O(wave_verdict) is V(fail), else none.
    type: list
    elements: str
  started:
    description: V(wave_end) - when the wave started (seconds since the epoch); default the O(start) result's.
    type: float
  start:
    description: V(wave_end) - the V(account) result at the wave's start (hosts marked lost then, start time).
    type: dict
    default: {}
  share_tolerance:
    description: V(wave_end) - the tolerance band of the report's plot (C(health_gates_share_tolerance)).
    type: float
  run:
    description: V(wave_end) - C(journal) (this job's journal file), C(report_dir), C(rollout_id), named in a failed
      wave's messages; empty - those of O(record_to).
    type: dict
    default: {}
  facts:
    description: >-
      Names of the per-host facts and registered results read for V(account), V(verdict), V(wave_end) and V(frr)
      (C(reach) - the reachability check, C(state_after) - the state compare after a rollback, C(host) - the
      host's C(multinic_host), C(frr) - the device's C(vtysh) answer). Keys left out keep their default.
    type: dict
    default: {lost: __rollout_lost, error: __rollout_host_error, failed: __rollout_host_failed,
              gates: health_gates_verdict, gates_results: health_gates_results, warnings: vipinjector_warnings,
              restored: __rollout_restored_exactly, reach: __rollout_reach, state_after: __rollout_state_after,
              host: multinic_host, frr: __rollout_frr_reach}
attributes:
  check_mode:
    support: full
    description: Decides the same way; changes nothing in any mode.
  diff_mode:
    support: none
    description: No diff.
  platform:
    support: full
    description: The controller.
    platforms: posix
"""

EXAMPLES = r"""
- name: Inventory sane, a TCP-MD5 key for every host whose ToR requires one
  netscale.multinic.rollout_decide:
    decision: inventory
    topology: "{{ rollout_topology }}"
  register: inventory_check

- name: Unreachable budget at the start of a wave
  netscale.multinic.rollout_decide:
    decision: account
    step: start
    wave: canary
    hosts: "{{ ansible_play_batch }}"
    batch: "{{ ansible_play_batch }}"
    max_unreachable: "10%"
  run_once: true
  register: wave_start
"""

RETURN = r"""
run_id:
  description: V(names) - this run's id.
  returned: decision=names
  type: str
journal_id:
  description: V(names) - the rollout's id (its journal).
  returned: decision=names
  type: str
job:
  description: V(names) - this job's key in the journal.
  returned: decision=names
  type: str
report_dir:
  description: V(names) - this run's report directory.
  returned: decision=names
  type: str
journal_root:
  description: V(names) - the journal root.
  returned: decision=names
  type: str
problems:
  description: V(inventory) - what is wrong with the inventory (the task fails when any).
  returned: decision=inventory
  type: list
  elements: str
slice_empty:
  description: V(inventory) - this job's inventory holds no GPU host of the topology (nothing to deploy).
  returned: decision=inventory
  type: bool
hosts:
  description: V(inventory) - every GPU host of this job's inventory that has C(multinic_host), in inventory order, as
    C(name) and C(rack) (what M(netscale.multinic.rollout_journal) plans the waves from).
  returned: decision=inventory
  type: list
  elements: dict
rack_tors:
  description: V(inventory) - ToR of each rack (group tors, C(multinic_rack.name)).
  returned: decision=inventory
  type: dict
fabric:
  description: V(inventory) - the fabric name (C(multinic_fabric_name)).
  returned: decision=inventory
  type: str
budget:
  description: V(budget), V(account) - hosts of the wave that may be unreachable.
  returned: decision=budget or decision=account or decision=verdict
  type: int
lost:
  description: V(account) - every host of the wave counted unreachable (marked lost or dropped by Ansible).
  returned: decision=account
  type: list
  elements: str
over_budget:
  description: V(account) - more hosts lost than the budget allows.
  returned: decision=account
  type: bool
journal:
  description: >-
    V(account), V(wave_end) - the journal records of this step (O(netscale.multinic.rollout_journal#module:items));
    V(approve) settling on fail - O(failed_journal); V(finish) - the finished event;
    V(frr) with devices down - the preflight_failed event; V(tor_configured) - the ToR's configured record;
    V(tor_failed) - its restored record.
  returned: >-
    decision=account, wave_end, tor_configured, tor_failed, finish; decision=frr with devices down; decision=approve
    settling on fail
  type: list
  elements: dict
verdict:
  description: V(verdict), V(approve) - pass, fail, inconclusive or check.
  returned: decision=verdict or decision=approve
  type: str
status:
  description: V(finish) - V(passed), or V(check) in check mode.
  returned: decision=finish
  type: str
where:
  description: "V(finish) with O(record_to) - C(rollout <id> (run <run id>) <status>: <report.md>; journal <file>)."
  returned: decision=finish and record_to given
  type: str
failed_hosts:
  description: V(verdict) - hosts whose verdict is neither pass nor skipped.
  returned: decision=verdict
  type: list
  elements: str
report:
  description: V(wave_end) - the wave's report event data.
  returned: decision=wave_end
  type: dict
restore:
  description: V(restore_tors), V(verdict) given O(all_waves) and not passing - the ToRs to restore.
  returned: decision=restore_tors, or decision=verdict with all_waves and a verdict other than pass
  type: list
  elements: str
ansible_facts:
  description: >-
    V(names) - C(rollout_run_id), C(rollout_started), C(rollout_journal_id), C(rollout_journal_job),
    C(rollout_report_dir), C(rollout_journal_root), C(rollout_topology), C(rollout_record_to) (for O(record_to));
    V(inventory) - C(rollout_fabric), C(rollout_rack_tors),
    C(rollout_max_unreachable).
  returned: decision=names or decision=inventory
  type: dict
marks:
  description: V(account) - hosts marked lost by their reachability check at this step, with why.
  returned: decision=account
  type: dict
started:
  description: V(names) - when this run started; V(account) at V(start) - when the wave started (seconds since the epoch).
  returned: decision=names or decision=account
  type: float
events:
  description: >-
    V(account) at V(start) - the report's wave start; V(wave_end) - the wave's report event, and a failed wave's
    finish (M(netscale.multinic.rollout_journal)'s O(netscale.multinic.rollout_journal#module:report)); V(frr) with
    devices down, V(tor_failed), V(finish) - the report's finish; V(tor_configured) - the report's ToR event.
  returned: decision=account, wave_end, frr, tor_configured, tor_failed, finish
  type: list
  elements: dict
stop:
  description: >-
    The message the run stops with - V(wave_end) of a failed wave, V(frr) with devices down, V(tor_failed).
  returned: decision=wave_end and the wave failed, decision=frr with devices down, decision=tor_failed
  type: str
failed_journal:
  description: V(verdict) - the journal records of the wave's hosts if it fails (with their errors).
  returned: decision=verdict
  type: list
  elements: dict
failed_tors:
  description: V(verdict) - the ToRs of the failed hosts, once each.
  returned: decision=verdict
  type: list
  elements: str
recorded:
  description: >-
    With O(record_to) - C(path) (this job's journal file) when something was recorded, and C(report) (the
    report's C(status), C(paths) and each event's C(event) and C(summary), which the rollout_progress callback
    prints) when report events were; C(error) when V(approve)'s record failed (a warning, the rollback goes on).
  returned: when record_to is given
  type: dict
down:
  description: "V(frr) - C(<device>: <what its FRR answered>) for each device whose FRR did not answer."
  returned: decision=frr
  type: list
  elements: str
gates:
  description: V(tor_configured) - the spine_task_routes gates that ran (C(target) - V(spines)), for the report.
  returned: decision=tor_configured
  type: list
  elements: dict
error:
  description: "V(tor_failed) - C(<tor>: '<task>' failed: <message>)."
  returned: decision=tor_failed
  type: str
msg:
  description: V(tor_configured) - why the ToR phase fails (a spine carries task routes; the task fails), else empty.
  returned: decision=tor_configured
  type: str
"""

ARGUMENT_SPEC = dict(
    decision=dict(type="str", required=True,
                  choices=["names", "inventory", "budget", "account", "verdict", "approve", "restore_tors",
                           "wave_end", "frr", "tor_configured", "tor_failed", "finish"]),
    record_to=dict(type="dict", default={}),
    rollout_id=dict(type="str", default=""),
    scope=dict(type="str", default="all"),
    tor=dict(type="str"),
    rack=dict(type="str"),
    changed=dict(type="bool", default=False),
    results=dict(type="list", elements="raw", default=[]),
    backup_dir=dict(type="path"),
    failed_task=dict(type="str", default="?"),
    failed_msg=dict(type="str", default=""),
    report_root=dict(type="path"),
    journal_dir=dict(type="path"),
    topology=dict(type="path"),
    max_unreachable=dict(type="raw", default=0),
    wave=dict(type="str"),
    hosts=dict(type="list", elements="str", default=[]),
    batch=dict(type="list", elements="str", default=[]),
    known=dict(type="list", elements="str", default=[]),
    step=dict(type="str", choices=["start", "deploy", "gates"], default="start"),
    deploy_ran=dict(type="bool", default=True),
    over_budget_before=dict(type="bool", default=False),
    over_budget=dict(type="bool", default=False),
    wave_verdict=dict(type="str"),
    approved=dict(type="bool", default=False),
    user_input=dict(type="str", default=""),
    failed_journal=dict(type="list", elements="dict", default=[]),
    scope_message=dict(type="str"),
    run_id=dict(type="str", default=""),
    all_waves=dict(type="list", elements="dict", default=[]),
    rack_tors=dict(type="dict", default={}),
    tors=dict(type="list", elements="str", default=[]),
    skip_tors=dict(type="bool", default=False),
    deploy=dict(type="dict", default={}),
    gates=dict(type="dict", default={}),
    failed_hosts=dict(type="list", elements="str", default=[]),
    restored_tors=dict(type="list", elements="str"),
    started=dict(type="float"),
    start=dict(type="dict", default={}),
    share_tolerance=dict(type="float"),
    run=dict(type="dict", default={}),
    facts=dict(type="dict", default={"lost": "__rollout_lost", "error": "__rollout_host_error",
                                     "failed": "__rollout_host_failed", "gates": "health_gates_verdict",
                                     "gates_results": "health_gates_results", "warnings": "vipinjector_warnings",
                                     "restored": "__rollout_restored_exactly", "reach": "__rollout_reach",
                                     "state_after": "__rollout_state_after", "host": "multinic_host",
                                     "frr": "__rollout_frr_reach"}),
)


def main():
    from ansible.module_utils.basic import AnsibleModule
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="netscale.multinic.rollout_decide runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
