# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: drain_budget
short_description: Blast-radius budget of a drain or undrain, and the drain journal
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the controller. With O(step=decide) it checks one drain or undrain against the blast-radius budget
    (never a host's last NIC; at most C(policy.max_rack_nic_share) of a rack's NICs, C(policy.max_zone_tor_share) of
    a zone's racks and C(policy.max_zone_spine_share) of a zone's spines out at once, never its last spine; at most
    C(policy.max_auto_drains_per_zone) automatic drains per zone per C(policy.rate_window) seconds; nothing while
    another job holds the fabric lease) and journals the decision, allowed or refused, with its reasons and
    numbers (C(plugins/module_utils/remediate/budget.py), docs/remediation.md).
  - With O(step=outcome) it journals the result of applying an allowed decision.
  - With O(step=view) (scope V(spine)) it journals nothing and returns C(spine_view), what each ToR of the spine's
    zone must see (the other racks' aggregates, its neighbor address on each spine of the zone), for
    C(netscale.multinic.spine_paths).
  - A spine drain (O(scope=spine), O(action=drain)) needs O(spine_paths), the ToRs' observed BGP state. The rule
    C(spine_coverage) refuses it unless every ToR of the zone has each other rack's aggregate from at least one
    other spine that is up and not drained (C(plugins/module_utils/remediate/spine_drain.py)).
  - The journal (C(<journal_dir>/<fabric>/drain-journal.jsonl), JSON lines, mode 0600) is the record of what is
    drained; decide reads it under an exclusive lock, so concurrent drain jobs see each other.
  - A refused decision fails the task only with O(fail_on_refusal) (the default), after it is journaled.
  - Bad input (a host, NIC, rack or spine not in the fabric, an unknown scope, a budget setting out of range) fails
    naming the field, the value and the fix, and journals nothing.
options:
  step:
    description: V(decide) - budget and journal the decision; V(outcome) - journal the result of an allowed one;
      V(view) - the spine's zone view only (scope V(spine)), nothing journaled.
    type: str
    choices: [decide, outcome, view]
    default: decide
  topology:
    description: The fabric's topology file (the inventory's source, C(multinic_topology_file)).
    type: path
    required: true
  journal_dir:
    description: Directory of the drain journals on the controller (absolute); one sub-directory per fabric.
    type: path
    required: true
  action:
    description: Take the element out, or give it back.
    type: str
    choices: [drain, undrain]
    required: true
  scope:
    description: What to drain.
    type: str
    choices: [nic, host, tor, spine]
    default: nic
  host:
    description: The GPU host (scopes V(nic) and V(host)).
    type: str
  nic:
    description: The NIC's plan index on O(host) (scope V(nic)).
    type: int
  rack:
    description: The rack (scope V(tor)).
    type: str
  tor:
    description: The rack's ToR, instead of O(rack) (scope V(tor); the remediation's cases name the ToR).
    type: str
  spine:
    description: The spine (scope V(spine)).
    type: str
  automatic:
    description: Started by the remediation (Event-Driven Ansible) rather than a person; only automatic drains count
      against the per-zone rate.
    type: bool
    default: false
  policy:
    description: Budget settings; keys left out take the defaults C(max_rack_nic_share=0.25),
      C(max_zone_tor_share=0.25), C(max_zone_spine_share=0.25), C(max_auto_drains_per_zone=3), C(rate_window=3600).
    type: dict
    default: {}
  lease:
    description:
      - The holder of the fabric's lease (design section 9) as the lease module reports it, at least C(job), and
        C(kind), C(since) when known; null when nobody holds it. A holder other than O(job) refuses the decision.
      - The view of the lease module (C(netscale.multinic.fabric_lease), its C(holder)) is read too; with
        C(refused=true) added (the lease module refused this job, C(drain.yml) passes it so that the refusal is
        journaled) it refuses whatever its id.
    type: dict
  job:
    description: This job's id (journaled; a lease held by this job does not refuse it).
    type: str
  reason:
    description: Why (an operator's words, or the case that triggered it); journaled.
    type: str
  case:
    description: The monitoring case id when the drain comes from one (hook for the remediation); journaled.
    type: str
  ok:
    description: O(step=outcome) - whether the change was applied and confirmed.
    type: bool
    default: true
  detail:
    description: O(step=outcome) - what happened (journaled).
    type: str
  clean_window:
    description:
      - O(action=undrain) - the clean-window verdict of the element's probes (the C(window) that
        C(netscale.multinic.drain_clean_window) returns). Journaled with the decision; a verdict that does not allow
        the undrain (not clean, no evidence) refuses it (rule C(clean_window)). Unset - not checked (C(undrain.yml)
        always sets it for scopes nic and host).
    type: dict
  spine_paths:
    description:
      - Scope V(spine), O(action=drain) (required there) - a mapping of each ToR of the spine's zone to the
        C(observation) that C(netscale.multinic.spine_paths) returned on it. A ToR of the zone left out counts
        as not covered (missing evidence refuses).
    type: dict
  fail_on_refusal:
    description: Fail the task when the budget refuses (after journaling the refusal).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: The decision is computed from the journal as it is, and nothing is written.
  diff_mode:
    support: none
    description: The journal is a controller-side record; the decision is returned.
  platform:
    support: full
    description: The controller.
    platforms: posix
"""

EXAMPLES = r"""
- name: Blast-radius budget (journaled)
  netscale.multinic.drain_budget:
    topology: "{{ multinic_topology_file }}"
    journal_dir: /var/lib/netscale-multinic-controller/drain
    action: drain
    scope: nic
    host: lab-r1-h2
    nic: 1
    job: "drain-{{ awx_job_id | default('manual') }}"
    reason: 2 % loss on eth1 (case 42)
  delegate_to: localhost
  register: drain_decision
"""

RETURN = r"""
decision:
  description: >-
    The journaled decision C(allowed), C(noop) (already drained / not drained), C(action), C(element), C(scope),
    C(host), C(nic), C(rack), C(zone), C(spine), C(automatic), C(reasons) (why it was refused), C(numbers) (every
    rule's figures), C(checks) (each rule with C(ok)), C(summary) (one line), C(seq) (its line in the journal, absent
    in check mode), C(drained_before) (elements out before it).
  returned: step=decide
  type: dict
allowed:
  description: Whether the budget allows the change.
  returned: step=decide
  type: bool
drained:
  description: Elements out after this step, from the journal.
  returned: always
  type: list
  elements: str
journal:
  description: The journal file.
  returned: always
  type: str
hosts:
  description: The GPU hosts the element takes out of service (scope nic and host - the host; tor - the rack's hosts).
  returned: step=decide
  type: list
  elements: str
tor:
  description: The ToR of the element's rack (scopes nic, host, tor).
  returned: step=decide
  type: str
spine_view:
  description: >-
    Scope spine - C({spine, zone, spines, tors: {<tor>: {rack, prefixes: {<aggregate>: <rack>}, uplinks:
    {<spine>: [<address>]}}}}): every ToR of the spine's zone, the other racks' aggregates it must carry and its
    BGP neighbor addresses on each spine of the zone.
  returned: scope=spine
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import read_topology_file
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import journal
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import spine_drain


def main():
    module = AnsibleModule(
        argument_spec=dict(
            step=dict(type="str", choices=["decide", "outcome", "view"], default="decide"),
            topology=dict(type="path", required=True),
            journal_dir=dict(type="path", required=True),
            action=dict(type="str", choices=list(budget.ACTIONS), required=True),
            scope=dict(type="str", choices=list(budget.SCOPES), default="nic"),
            host=dict(type="str"),
            nic=dict(type="int"),
            rack=dict(type="str"),
            tor=dict(type="str"),
            spine=dict(type="str"),
            automatic=dict(type="bool", default=False),
            policy=dict(type="dict", default={}),
            lease=dict(type="dict"),
            job=dict(type="str"),
            reason=dict(type="str"),
            case=dict(type="str"),
            ok=dict(type="bool", default=True),
            detail=dict(type="str"),
            clean_window=dict(type="dict"),
            spine_paths=dict(type="dict"),
            fail_on_refusal=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        topo = load_topology(read_topology_file(p["topology"]), source=p["topology"])
        fabric = budget.FabricView.from_topology(topo)
        request = budget.resolve(fabric, p["scope"], host=p["host"], nic=p["nic"], rack=p["rack"], spine=p["spine"],
                                 tor=p["tor"])
        request.update(action=p["action"], automatic=p["automatic"])
        budget.check_policy(p["policy"], prefix="policy")
        view = spine_drain.zone_view(FabricPlan(topo), request["spine"]) if request["scope"] == "spine" else None
        if p["step"] == "view":
            if view is None:
                raise budget.BudgetError("step=view: scope=%r has no spine view. Fix: use it with scope=spine."
                                         % p["scope"])
            module.exit_json(changed=False, spine_view=view, drained=[], journal="")
        spine_check = None
        if view is not None and p["action"] == "drain" and p["step"] == "decide":
            if not isinstance(p["spine_paths"], dict):
                raise budget.BudgetError("spine_paths=%r: a spine drain needs the observed BGP state of the zone's "
                                         "ToRs ({<tor>: observation of netscale.multinic.spine_paths}). Fix: pass "
                                         "it (drain.yml does); nothing was journaled." % (p["spine_paths"],))
            spine_check = (view, p["spine_paths"])
        jr = journal.DrainJournal(p["journal_dir"], topo.name)
        if p["step"] == "outcome":
            if module.check_mode:
                module.exit_json(changed=False, drained=sorted(jr.state()), journal=jr.path)
            jr.outcome(p["action"], request["element"], p["ok"], job=p["job"], detail=p["detail"])
            module.exit_json(changed=False, drained=sorted(jr.state()), journal=jr.path)
        rec = jr.decide(fabric, request, lease=p["lease"], policy=p["policy"], job=p["job"], reason=p["reason"],
                        case=p["case"], write=not module.check_mode,
                        window=p["clean_window"] if p["action"] == "undrain" else None, spine_check=spine_check)
    except (MultinicError, OSError) as exc:
        module.fail_json(msg="drain_budget: %s" % exc)
    drained = set(rec["drained_before"])
    if rec["allowed"] and not rec["noop"] and p["action"] == "drain":
        drained.add(rec["element"])
    if request["scope"] in ("nic", "host"):
        hosts = [request["host"]]
    elif request["scope"] == "tor":
        hosts = list(fabric.rack_hosts.get(request["rack"], []))
    else:
        hosts = []
    result = dict(changed=False, decision=rec, allowed=rec["allowed"], drained=sorted(drained), journal=jr.path,
                  hosts=hosts, tor=fabric.racks[request["rack"]]["tor"] if request["rack"] else None)
    if view is not None:
        result["spine_view"] = view
    if not rec["allowed"] and p["fail_on_refusal"]:
        module.fail_json(msg="%s. Nothing was changed%s." % (
            rec["summary"], "" if module.check_mode else "; the refusal is journaled in %s" % jr.path), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
