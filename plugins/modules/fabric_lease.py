# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_lease
short_description: One mutating job per fabric at a time - take, share, release or inspect the fabric's lease
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the controller (C(connection=local)). The lease is one JSON file per fabric,
    C(<dir>/<fabric>.json), rewritten atomically under an exclusive POSIX lock on C(<dir>/.<fabric>.lock), so of
    two jobs that take it at once exactly one wins. Every take, share, break and release is appended to
    C(<dir>/<fabric>.history.jsonl). docs/rollout.md "One change at a time - the lease".
  - O(state=acquired) takes the lease, or joins it when the holder is a job of the same AWX workflow (the
    slices of one sliced job share C(awx_workflow_job_id)). Any other holder makes the task FAIL before the
    job changes anything, naming the holder (rollout id, playbook, controller host, pid or AWX job id, since
    when) and what to do.
  - A holder is stale when its controller is this host and its pid is gone (a controller killed with SIGKILL),
    or, seen from another host, when its heartbeat is older than O(ttl). A stale lease is still refused unless
    O(break_stale=true) (the playbooks' C(-e rollout_break_lease=true)); a live holder is never broken.
  - O(state=released) gives this job's share back (the last member out removes the file); releasing a lease
    this job does not hold changes nothing. O(state=inspected) only reads.
  - The C(netscale.multinic.fabric_lease) callback renews the heartbeat while the job runs and releases at the
    end of the playbook, also when it failed.
options:
  state:
    description: V(acquired) take or join; V(released) give back; V(inspected) read only.
    type: str
    default: acquired
    choices: [acquired, released, inspected]
  dir:
    description: Lease directory (the playbooks use C(<rollout journal dir>/leases)). Every controller or AWX
      execution node that may run a job on this fabric must see the same directory.
    type: path
    required: true
  fabric:
    description: Fabric name (C(multinic_fabric_name) of the inventory).
    type: str
    required: true
  rollout_id:
    description: Name of the job for the holder record (the rollout journal id, e.g. C(awx-wf-104)). Required
      for O(state=acquired).
    type: str
  playbook:
    description: The playbook that takes the lease (C(rollout.yml), C(rollback.yml), ...). Required for
      O(state=acquired).
    type: str
  awx_job_id:
    description: AWX job id (AWX injects C(awx_job_id)); identifies the holder instead of the pid.
    type: str
  awx_workflow_job_id:
    description: AWX workflow job id (C(awx_workflow_job_id)); jobs with the same one share the lease.
    type: str
  pid:
    description: Pid of the holding process; default the C(ansible-playbook) this module runs under.
    type: int
  break_stale:
    description: Consent to break a STALE lease (never a live one). The break is in the result (C(previous)) for
      the journal, and in the history file.
    type: bool
    default: false
  ttl:
    description: Seconds without a heartbeat after which a holder on another host is stale.
    type: int
    default: 300
  journal_dir:
    description: Rollout journal directory, named in the refusal message (where to read what a stale holder did).
    type: path
attributes:
  check_mode:
    support: full
    description: Reports what it would do (C(action) acquired, joined, held, broken, refused; C(would_refuse)
      as a warning rather than a failure) and never takes, breaks or releases a lease.
  diff_mode:
    support: full
    description: Holder before and after.
  platform:
    support: full
    description: The controller.
    platforms: posix
"""

EXAMPLES = r"""
- name: Take the fabric's lease before any change
  netscale.multinic.fabric_lease:
    state: acquired
    dir: "{{ rollout_journal_root }}/leases"
    fabric: lab
    rollout_id: "{{ rollout_journal_id }}"
    playbook: rollout.yml
    awx_job_id: "{{ awx_job_id | default(omit) }}"
    awx_workflow_job_id: "{{ awx_workflow_job_id | default(omit) }}"
    break_stale: "{{ rollout_break_lease | default(false) | bool }}"

- name: Who holds it
  netscale.multinic.fabric_lease:
    state: inspected
    dir: reports/journal/leases
    fabric: lab
"""

RETURN = r"""
action:
  description: acquired, joined, held, broken, refused (acquired); released, left, not_held (released); inspected.
  returned: always
  type: str
member:
  description: This job's key in the lease (C(awx-job-<id>) or C(<controller>:<pid>)); the release uses it.
  returned: state is acquired or released
  type: str
lease_file:
  description: The lease file.
  returned: always
  type: str
holder:
  description: The lease as found (held, stale, rollout_id, members with why each is live or stale, description).
  returned: always
  type: dict
previous:
  description: What a broken stale lease said (only when O(break_stale) broke one).
  returned: when action is broken
  type: dict
message:
  description: What happened, or the refusal with the fix.
  returned: always
  type: str
taken:
  description: This job holds the lease now (false in check mode); the callback renews and releases it.
  returned: state is acquired
  type: bool
would_refuse:
  description: Check mode only - a real run would be refused (the refusal is a warning).
  returned: when check mode found another holder
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.rollout import lease as ls


def _diff(before, after):
    def holders(doc):
        return "".join("%s: %s\n" % (k, ls.describe_member(m)) for k, m in sorted(((doc or {}).get("members") or {}).items()))
    return {"before": holders(before), "after": holders(after)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="acquired", choices=["acquired", "released", "inspected"]),
            dir=dict(type="path", required=True),
            fabric=dict(type="str", required=True),
            rollout_id=dict(type="str"),
            playbook=dict(type="str"),
            awx_job_id=dict(type="str"),
            awx_workflow_job_id=dict(type="str"),
            pid=dict(type="int"),
            break_stale=dict(type="bool", default=False),
            ttl=dict(type="int", default=ls.DEFAULT_TTL),
            journal_dir=dict(type="path"),
        ),
        required_if=[("state", "acquired", ["rollout_id", "playbook"])],
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["ttl"] < 10:
            raise ls.LeaseError("ttl=%s: a holder's heartbeat is renewed about every ttl/4 s; use 10 s or more"
                                % p["ttl"])
        ls.check_name(p["fabric"], "fabric")
        before = ls.inspect(p["dir"], p["fabric"], ttl=p["ttl"])
        if p["state"] == "inspected":
            module.exit_json(changed=False, action="inspected", lease_file=before["path"], holder=before,
                             message="fabric %s: %s" % (p["fabric"], before["description"]))
        pid = p["pid"] or (None if p["awx_job_id"] else (ls.controller_pid() or os.getppid()))
        member = ls.make_member(p["rollout_id"] or "x", p["playbook"] or "x", pid=pid, awx_job_id=p["awx_job_id"],
                                awx_workflow_job_id=p["awx_workflow_job_id"])
        key = ls.member_key(member)
        if p["state"] == "released":
            res = ls.release(p["dir"], p["fabric"], key, check=module.check_mode)
            after = ls.inspect(p["dir"], p["fabric"], ttl=p["ttl"]) if not module.check_mode else before
            module.exit_json(changed=res["changed"], action=res["action"], member=key, lease_file=res["path"],
                             lease_dir=p["dir"], fabric=p["fabric"],
                             holder=after, remaining=res["remaining"],
                             message="fabric %s: %s (%s)" % (p["fabric"], res["action"], key),
                             diff=_diff(before.get("lease"), after.get("lease")) if res["changed"] else None)
        res = ls.acquire(p["dir"], p["fabric"], member, break_stale=p["break_stale"], ttl=p["ttl"],
                         check=module.check_mode, journal_dir=p["journal_dir"])
        out = dict(changed=res["changed"], action=res["action"], member=key, lease_file=res["path"], group=res["group"],
                   holder=before, previous=res["previous"], message=res["message"], pid=pid,
                   # read by the fabric_lease callback (heartbeat while the job runs, release at its end)
                   taken=not module.check_mode and res["action"] in ("acquired", "joined", "held", "broken"),
                   lease_dir=p["dir"], fabric=p["fabric"], ttl=p["ttl"])
        if res["action"] == "refused":
            if module.check_mode:
                module.warn("check mode: a real run would be refused: " + res["message"])
                module.exit_json(would_refuse=True, **out)   # refused: changed is false
            module.fail_json(**dict(out, msg=res["message"]))
        if res["changed"]:
            out["diff"] = _diff(before.get("lease"), res["lease"])
        module.exit_json(**out)
    except ls.LeaseError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
