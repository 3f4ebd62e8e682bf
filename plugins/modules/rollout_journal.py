# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: rollout_journal
short_description: Open, record into and read the journal of a staged rollout (resume, rollback, AWX workflows)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - One journal per rollout under C(<dir>/<rollout_id>/), one file per job (C(<job>.json), 0600, written
    atomically after every record, secrets redacted), so the parallel slices of an AWX job never share a file.
    A reader merges the files in order (job start, job key, sequence).
  - V(open) creates the journal (freezing the waves and their hosts) or loads it and decides what this job runs
    - resume point, waves from the journal (never recomputed from the inventory), refusals when a wave before the
    start has no recorded pass, when the plan hash changed without O(allow_plan_change), or when O(skip_tors) is
    set and the ToRs are not recorded configured. With O(action=rollback) it returns the hosts and ToRs a
    rollback must undo.
  - V(record) appends host, ToR, wave, gate or free events to this job's file. V(status) returns the merged record.
  - "Runs on the controller (C(delegate_to: localhost), C(run_once)). In check mode nothing is written (the
    decisions are still made and returned), so a dry run never records deployed hosts."
options:
  op:
    description: Operation.
    type: str
    required: true
    choices: [open, record, status]
  dir:
    description: Journal root (C(rollout_journal_dir)); multi-job AWX workflows need it on storage every job sees.
    type: path
    required: true
  rollout_id:
    description: The rollout (C(awx-wf-<workflow job id>) under AWX workflows, else the first run's timestamp).
    type: str
    required: true
  job:
    description: This job's key (its file name); required for V(open) and V(record).
    type: str
  action:
    description: V(open) for a rollout run or for a rollback.
    type: str
    default: rollout
    choices: [rollout, rollback]
  plan_paths:
    description: Plan files or directories whose sha256 is the plan hash (the planner's output, never anything keyed).
    type: list
    elements: path
    default: []
  hosts:
    description: >-
      GPU hosts of the inventory in order (C(name), C(rack)); the waves are computed from them only when
      the journal is new, then frozen.
    type: list
    elements: dict
    default: []
  canary:
    description: Canary spec (C(rollout_canary)); used only when the journal is new.
    type: dict
    default: {}
  waves:
    description: Cumulative fleet waves (C(rollout_waves)); used only when the journal is new.
    type: list
    elements: raw
    default: ["5%", "25%", "100%"]
  rack_tors:
    description: ToR of each rack (a dict rack -> ToR); the plan returns the ToRs of every rack of the rollout.
    type: dict
    default: {}
  start_wave:
    description: Wave to start at (name or V(fleet)); empty = the first wave without a recorded pass.
    type: str
    default: ""
  end_wave:
    description: Stop after this wave.
    type: str
    default: ""
  allow_plan_change:
    description: Consent to a plan hash that differs from the journal's.
    type: bool
    default: false
  skip_tors:
    description: This job does not touch ToRs; refuse unless the ToR of every rack of the rollout is recorded configured.
    type: bool
    default: false
  present:
    description: GPU hosts in this job's inventory (an AWX slice); waves are restricted to them. Omit for all.
    type: list
    elements: str
  scope:
    description: >-
      Change scope (the C(scope) of M(netscale.multinic.rollout_scope), C(rollout_scope=changed)); omit for every
      host. A new journal freezes waves of the scope's C(deploy) hosts only (none - no wave, nothing to deploy) and
      the plan's C(tors) are the scope's C(tors.changed); a resume keeps the scope the first job recorded.
    type: dict
  meta:
    description: >-
      Job facts kept in the journal (AWX job id, user); C(check_mode) defaults to this task's check mode and
      C(report_dir) to O(report_dir) when given.
    type: dict
    default: {}
  record:
    description: Kind of record for V(record) (or C(_record) in each of O(items)).
    type: str
    choices: [host, tor, wave, gate, event]
  data:
    description: >-
      The record (V(host) - hosts, state, wave, errors; V(tor) - name, state, backup; V(wave) - name,
      verdict, hosts, unreachable; V(event) - kind, message).
    type: dict
    default: {}
  items:
    description: >-
      Several records, in order (for example every gate result of a wave); an item's C(_record) key
      overrides O(record) for that item.
    type: list
    elements: dict
    default: []
  report_dir:
    description: >-
      The run's report directory (M(netscale.multinic.rollout_report)'s O(netscale.multinic.rollout_report#module:dir)).
      With it, O(report) events are recorded in the report after the journal's records, so the journal is never
      behind the report; the report is written in check mode too (a controller-side artifact).
    type: path
  report:
    description: >-
      V(record) - report events recorded after the journal's records, in order - each C(event) (V(start),
      V(preflight), V(tor), V(wave), V(snapshot), V(finish)), C(data), optionally C(share_tolerance) and
      C(journal_summary) (V(true) - the journal's summary after this operation goes into the event's data as
      C(journal_summary)). Needs O(report_dir).
    type: list
    elements: dict
    default: []
  run:
    description: >-
      V(open) of a rollout with O(report_dir) - the run (C(id), C(started), C(fabric), C(inventory), C(plan) - the
      M(netscale.multinic.fabric_plan) result, C(renumber_consent)): the report's V(start) and V(preflight) events
      (and with O(scope) a V(tor) event per ToR out of scope) are recorded from it and from the plan this returns.
      Also makes the report's C(snapshots/) and the rollout's ToR backup directory C(<dir>/<rollout_id>/tor_backup)
      (0700, in check mode too).
    type: dict
attributes:
  check_mode:
    support: full
    description: Decides and returns, writes nothing.
  diff_mode:
    support: none
    description: No diff.
  platform:
    support: full
    description: The controller.
    platforms: posix
"""

EXAMPLES = r"""
- name: Open the journal (new or resumed)
  netscale.multinic.rollout_journal:
    op: open
    dir: "{{ rollout_journal_dir }}"
    rollout_id: "{{ rollout_id }}"
    job: "{{ rollout_run_id }}"
    plan_paths: ["{{ rollout_intended_dir }}/{{ fabric_name }}/plan"]
    hosts: "{{ groups['gpu_hosts'] | map('extract', hostvars, 'multinic_host') | list }}"
    canary: "{{ rollout_canary }}"
    waves: "{{ rollout_waves }}"
  delegate_to: localhost
  run_once: true
  register: journal

- name: Open a rollout's journal, start its report (facts rollout_plan, rollout_journal_path, rollout_tor_backup_dir)
  netscale.multinic.rollout_journal:
    op: open
    dir: "{{ rollout_journal_root }}"
    rollout_id: "{{ rollout_journal_id }}"
    job: "{{ rollout_journal_job }}"
    hosts: "{{ inventory_check.hosts }}"
    rack_tors: "{{ inventory_check.rack_tors }}"
    present: "{{ inventory_check.gpu_hosts }}"
    report_dir: "{{ rollout_report_dir }}"
    run: {id: "{{ rollout_run_id }}", started: "{{ rollout_started }}", fabric: lab, inventory: fabric.yml}

- name: A ToR configured, journaled then reported
  netscale.multinic.rollout_journal:
    op: record
    dir: "{{ rollout_journal_root }}"
    rollout_id: "{{ rollout_journal_id }}"
    job: "{{ rollout_journal_job }}"
    record: tor
    data: {name: lab-r1-tor, state: configured}
    report_dir: "{{ rollout_report_dir }}"
    report:
      - event: tor
        data: {name: lab-r1-tor, rack: lab-r1, changed: true}
  delegate_to: localhost

- name: Hosts of the wave are deploying
  netscale.multinic.rollout_journal:
    op: record
    dir: "{{ rollout_journal_dir }}"
    rollout_id: "{{ rollout_id }}"
    job: "{{ rollout_run_id }}"
    record: host
    data: {hosts: "{{ ansible_play_batch }}", state: deploying, wave: canary}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
plan:
  description: V(open) with V(action=rollout) - the waves this job runs (same shape as the rollout_wave_plan filter).
  returned: op=open, action=rollout
  type: dict
rollback:
  description: V(open) with V(action=rollback) - hosts and ToRs (with their original backup) to undo.
  returned: op=open, action=rollback
  type: dict
record:
  description: The merged journal record after this operation.
  returned: always
  type: dict
summary:
  description: Wave statuses, hosts by state, ToR states.
  returned: always
  type: dict
notes:
  description: Warnings of V(open) (plan change consented, hosts of another slice).
  returned: op=open
  type: list
  elements: str
path:
  description: This job's journal file.
  returned: always
  type: str
new:
  description: Whether V(open) created the journal.
  returned: op=open
  type: bool
plan_hash:
  description: V(open) - the plan hash now (none in check mode before the plan is written).
  returned: op=open, action=rollout
  type: str
ansible_facts:
  description: >-
    V(open) of a rollout - C(rollout_plan) (the plan), C(rollout_journal_path) (this job's journal file) and
    C(rollout_tor_backup_dir) (C(<dir>/<rollout_id>/tor_backup)), what the later plays of C(playbooks/rollout.yml) read.
  returned: op=open, action=rollout
  type: dict
report:
  description: >-
    With O(report) or O(run) - the report after its events (C(status), C(paths)) and each event's C(event) and
    C(summary) (the M(netscale.multinic.rollout_report) result's; the rollout_progress callback prints them).
  returned: when report events were recorded
  type: dict
"""

import copy
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.report import model
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import waves
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import journal as jr
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import records


def _private_dir(path):
    """Make ``path`` and its missing parents 0700 (as the file module's state=directory, mode=0700 does)."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for folder in reversed(missing):
        os.mkdir(folder)
        os.chmod(folder, 0o700)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            op=dict(type="str", required=True, choices=["open", "record", "status"]),
            dir=dict(type="path", required=True),
            rollout_id=dict(type="str", required=True),
            job=dict(type="str"),
            action=dict(type="str", default="rollout", choices=["rollout", "rollback"]),
            plan_paths=dict(type="list", elements="path", default=[]),
            hosts=dict(type="list", elements="dict", default=[]),
            canary=dict(type="dict", default={}),
            waves=dict(type="list", elements="raw", default=["5%", "25%", "100%"]),
            rack_tors=dict(type="dict", default={}),
            start_wave=dict(type="str", default=""),
            end_wave=dict(type="str", default=""),
            allow_plan_change=dict(type="bool", default=False),
            skip_tors=dict(type="bool", default=False),
            present=dict(type="list", elements="str"),
            scope=dict(type="dict"),
            meta=dict(type="dict", default={}),
            record=dict(type="str", choices=["host", "tor", "wave", "gate", "event"]),
            data=dict(type="dict", default={}),
            items=dict(type="list", elements="dict", default=[]),
            report_dir=dict(type="path"),
            report=dict(type="list", elements="dict", default=[]),
            run=dict(type="dict"),
        ),
        required_if=[("op", "open", ["job"]), ("op", "record", ["job"])],
        supports_check_mode=True,
    )
    p = module.params
    if (p["report"] or p["run"]) and not p["report_dir"]:
        module.fail_json(msg="report and run need report_dir (the run's report directory)")
    events = []
    meta = dict(p["meta"])   # what the job records of itself, unless given: its check mode, its report
    meta.setdefault("check_mode", module.check_mode)
    if p["report_dir"]:
        meta.setdefault("report_dir", p["report_dir"])
    p["meta"] = meta
    try:
        job = records.JobJournal(p["dir"], p["rollout_id"], p["job"], meta=p["meta"])
        rid, path = job.rollout_id, job.path
        if p["op"] == "status":
            rec = jr.replay(jr.merge(job.docs))
            module.exit_json(changed=False, record=rec, summary=jr.summary(rec), path=path)
        rec = job.merged()
        rec["id"] = rec["id"] or rid
        result = dict(changed=False, path=path)
        if p["op"] == "open":
            if p["action"] == "rollback":
                result["rollback"] = jr.rollback_plan(rec)
                jr.append(job.doc, "open", {"rollout_id": rid, "action": "rollback", "meta": p["meta"]})
            else:
                try:
                    phash = jr.plan_hash(p["plan_paths"]) if p["plan_paths"] else None
                except jr.JournalError:
                    if not module.check_mode:
                        raise
                    phash = None   # check mode did not write the plan
                scope = copy.deepcopy(p["scope"])
                plan, ev, notes = jr.open_plan(
                    rec, phash, hosts=p["hosts"], canary=p["canary"], waves_spec=p["waves"],
                    start_wave=p["start_wave"] or None, end_wave=p["end_wave"] or None,
                    allow_plan_change=p["allow_plan_change"], skip_tors=p["skip_tors"], present=p["present"],
                    rack_tors=p["rack_tors"], scope=p["scope"])
                ev["meta"] = p["meta"]
                ev["action"] = "rollout"
                jr.append(job.doc, "open", ev)
                backup = os.path.join(os.path.dirname(path), "tor_backup")
                result.update(plan=plan, notes=notes, new=ev["new"], plan_hash=phash, ansible_facts=dict(
                    rollout_plan=plan, rollout_journal_path=path, rollout_tor_backup_dir=backup))
                if p["run"] is not None:
                    # controller-side artifacts, also in check mode (the ToR role keeps its pre-change copies here)
                    for folder in (os.path.join(p["report_dir"], "snapshots"), backup):
                        _private_dir(folder)
                    run = dict(p["run"], rollout_id=rid, check_mode=module.check_mode, canary=p["canary"],
                               waves_spec=p["waves"], start_wave=p["start_wave"], gpu_hosts=len(p["present"] or []))
                    opened = dict(path=path, new=ev["new"], notes=notes, plan_hash=phash)
                    events = [(e, d, {}) for e, d in model.start_events(run, plan, opened, p["rack_tors"], scope)]
        else:
            job.append(list(p["items"]) or [p["data"]], p["record"])
            events = [(r.get("event"), r.get("data"), r) for r in p["report"]]
        result.update(job.save(module.check_mode), dir=os.path.dirname(path))
        if events:
            # after the journal: a report never records what the journal does not
            result["report"] = records.report_events(p["report_dir"], events, result["summary"], module.check_mode)
        module.exit_json(**result)
    except (jr.JournalError, waves.WaveError, ValueError) as exc:
        module.fail_json(msg=str(exc), journal_dir=jr.rollout_dir(p["dir"], p["rollout_id"])
                         if jr._ID_RE.match(str(p["rollout_id"])) else p["dir"])


if __name__ == "__main__":
    main()
