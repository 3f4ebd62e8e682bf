# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: drain_clean_window
short_description: Before an undrain, check that the drained element's probes were clean for a window
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the controller, before the blast-radius budget of an undrain (C(playbooks/undrain.yml)). Reads the
    monitoring agents' probe counters of the element's NICs (C(fabric_monitor_probes_answered_total) and
    C(_lost_total) per NIC and target) from Prometheus over the last O(window) seconds and judges them
    (C(plugins/module_utils/remediate/clean_window.py), docs/remediation.md) - V(clean), V(not_clean) (loss seen)
    or V(no_evidence) (Prometheus unreachable, no series, too few probes, a gap, the window not yet elapsed since
    the drain).
  - Only V(clean) allows the undrain. The verdict (also V(skipped) with O(skip), an operator's consent to undrain
    without the window, and V(not_drained), nothing to judge) goes to C(netscale.multinic.drain_budget)'s
    O(netscale.multinic.drain_budget#module:clean_window), which journals it with the undrain's decision in the drain
    journal and refuses the undrain unless it allows it. With O(fail_on_refusal) this module fails itself on a verdict
    that does not allow the undrain, naming the element, the window, what was seen and the fix.
  - Reads the drain journal (when the element was drained - the window must lie after it); writes nothing.
  - A drained NIC still carries the agent's probes (they are bound to the NIC, whatever the egress set), so its
    paths are judged while it is out.
options:
  topology:
    description: The fabric's topology file (the inventory's source, C(multinic_topology_file)).
    type: path
    required: true
  journal_dir:
    description: Directory of the drain journals on the controller (absolute); one sub-directory per fabric.
    type: path
    required: true
  scope:
    description: What is to be undrained.
    type: str
    choices: [nic, host, tor]
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
    description: The rack's ToR, instead of O(rack) (scope V(tor)).
    type: str
  prometheus_url:
    description: Base URL of the Prometheus that scrapes the monitoring agents (the lab's is
      C(http://127.0.0.1:19090)). Required unless O(skip).
    type: str
  window:
    description: Seconds of clean probes needed, after the drain and up to now.
    type: float
    default: 300
  settings:
    description: The judgement's other settings over their defaults - C(step) (query resolution, 15 s), C(max_gap)
      (longest stretch without a resolved probe on a NIC, 60 s), C(min_probes) (resolved probes per NIC in the
      window, 10), C(max_loss) (an interval above this loss is lossy, 0.01).
    type: dict
    default: {}
  skip:
    description: An operator's consent to undrain without the clean window (journaled as V(skipped), with
      O(reason)). Refused with O(automatic).
    type: bool
    default: false
  automatic:
    description: The undrain comes from the remediation (a case); it can never skip the window.
    type: bool
    default: false
  job:
    description: This job's id (journaled).
    type: str
  case:
    description: The monitoring case, when the undrain comes from one (journaled).
    type: str
  reason:
    description: Why (journaled).
    type: str
  timeout:
    description: Seconds to wait for each Prometheus answer.
    type: float
    default: 10
  fail_on_refusal:
    description: Fail the task when the verdict does not allow the undrain (C(undrain.yml) sets it false and lets
      the budget journal and refuse).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads only (Prometheus and the journal), in check mode too.
  diff_mode:
    support: none
    description: Nothing changes; the verdict is returned.
  platform:
    support: full
    description: The controller.
    platforms: posix
"""

EXAMPLES = r"""
- name: Clean probe window before the undrain (journaled; refuses on loss or missing evidence)
  netscale.multinic.drain_clean_window:
    topology: "{{ multinic_topology_file }}"
    journal_dir: /var/lib/netscale-multinic-controller/drain
    scope: nic
    host: lab-r1-h2
    nic: 1
    prometheus_url: http://127.0.0.1:19090
    window: 300
  delegate_to: localhost
"""

RETURN = r"""
window:
  description: >-
    The verdict - C(element), C(verdict) (clean, not_clean, no_evidence, skipped, not_drained), C(clean), C(allowed),
    C(reasons), C(window), C(start), C(end), C(since) (when the element was drained), C(nics) (per NIC - series,
    answered, lost, resolved, intervals, lossy_intervals, gaps), C(summary), C(fix).
  returned: always
  type: dict
allowed:
  description: Whether the undrain may go on.
  returned: always
  type: bool
journal:
  description: The drain journal read.
  returned: always
  type: str
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.parse import urlencode
from ansible.module_utils.urls import open_url

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import clean_window
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import journal


def _nic_names(plan, host):
    h = [x for x in plan.topo.hosts if x.name == host][0]
    return [n["name"] for n in sorted(plan.host_data(h)["nics"], key=lambda n: int(n["index"]))]


def _fetch(url, expr, start, end, step, timeout):
    q = urlencode({"query": expr, "start": "%.3f" % start, "end": "%.3f" % end, "step": "%g" % step})
    resp = open_url("%s/api/v1/query_range?%s" % (url.rstrip("/"), q), method="GET", timeout=timeout)
    return json.loads(resp.read().decode("utf-8"))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topology=dict(type="path", required=True),
            journal_dir=dict(type="path", required=True),
            scope=dict(type="str", choices=["nic", "host", "tor"], default="nic"),
            host=dict(type="str"),
            nic=dict(type="int"),
            rack=dict(type="str"),
            tor=dict(type="str"),
            prometheus_url=dict(type="str"),
            window=dict(type="float", default=300.0),
            settings=dict(type="dict", default={}),
            skip=dict(type="bool", default=False),
            automatic=dict(type="bool", default=False),
            job=dict(type="str"),
            case=dict(type="str"),
            reason=dict(type="str"),
            timeout=dict(type="float", default=10.0),
            fail_on_refusal=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    now = time.time()
    try:
        plan = load_plan(p["topology"])
        fabric = budget.FabricView.from_topology(plan.topo)
        request = budget.resolve(fabric, p["scope"], host=p["host"], nic=p["nic"], rack=p["rack"], tor=p["tor"])
        element = request["element"]
        cfg = dict(p["settings"] or {})
        cfg["window"] = p["window"]
        cfg = clean_window.check_settings(cfg, prefix="drain_clean_window_settings")
        if p["skip"] and p["automatic"]:
            module.fail_json(msg="drain_clean_window: skip=true with automatic=true (an undrain for case %s): the "
                                 "remediation never undrains without a clean window. Fix: leave "
                                 "drain_undrain_without_clean_window unset for automatic undrains; nothing was "
                                 "changed." % (p["case"] or "-"))
        jr = journal.DrainJournal(p["journal_dir"], plan.topo.name)
        drained = jr.state()
        base = {"element": element, "job": p["job"], "case": p["case"], "reason": p["reason"], "window": cfg["window"],
                "nics": {}, "since": None}
        if element not in drained:
            res = dict(base, verdict="not_drained", clean=False, allowed=True,
                       reasons=["%s is not drained in the journal: nothing to judge" % element])
            res["summary"] = "clean window of %s: NOT DRAINED (nothing to judge; the undrain changes nothing)" % element
        elif p["skip"]:
            res = dict(base, verdict="skipped", clean=False, allowed=True, since=drained[element].get("time"),
                       reasons=["an operator undrains without the clean window (drain_undrain_without_clean_window"
                                "=true): %s" % (p["reason"] or "no reason given")])
            res["summary"] = "clean window of %s: SKIPPED with the operator's consent (%s)" % (
                element, p["reason"] or "no reason given")
        else:
            if not p["prometheus_url"]:
                module.fail_json(msg="drain_clean_window: prometheus_url is not set. Fix: set drain_prometheus_url "
                                     "(the Prometheus that scrapes the monitoring agents, e.g. http://127.0.0.1:19090), "
                                     "or undrain without the window with drain_undrain_without_clean_window=true; "
                                     "nothing was changed.")
            since = drained[element].get("time")
            if request["scope"] == "nic":
                hosts = {request["host"]: [_nic_names(plan, request["host"])[request["nic"]]]}
            elif request["scope"] == "host":
                hosts = {request["host"]: _nic_names(plan, request["host"])}
            else:
                hosts = dict((h, _nic_names(plan, h)) for h in fabric.rack_hosts.get(request["rack"], []))
            prefix = len(hosts) > 1
            answered, lost, wanted, error = [], [], [], None
            start, end = now - cfg["window"] - cfg["step"], now
            for h, names in sorted(hosts.items()):
                wanted += [("%s/%s" % (h, n)) if prefix else n for n in names]
                exprs = clean_window.queries(h, names)
                for kind, out in (("answered", answered), ("lost", lost)):
                    try:
                        rows = clean_window.series_from_matrix(
                            _fetch(p["prometheus_url"], exprs[kind], start, end, cfg["step"], p["timeout"]),
                            what="%s counters of %s" % (kind, h))
                    except clean_window.CleanWindowError as exc:
                        error = str(exc)
                        rows = []
                    except Exception as exc:  # pylint: disable=broad-except  # any failure to read is missing evidence
                        error = "%s: %s (%s)" % (p["prometheus_url"], type(exc).__name__, exc)
                        rows = []
                    for r in rows:
                        if prefix:
                            r["nic"] = "%s/%s" % (h, r["nic"])
                    out.extend(rows)
            res = clean_window.judge(element, wanted, answered, lost, now, since=since, settings=cfg, error=error)
            res["summary"] = clean_window.summary(res)
            res["allowed"] = res["clean"]
            res.update(job=p["job"], case=p["case"], reason=p["reason"])
        res["fix"] = clean_window.fix(res) if not res["allowed"] else ""
        res["element"] = element
    except (MultinicError, OSError) as exc:
        module.fail_json(msg="drain_clean_window: %s" % exc)
    result = dict(changed=False, window=res, allowed=res["allowed"], journal=jr.path)
    if not res["allowed"] and p["fail_on_refusal"]:
        module.fail_json(msg=clean_window.refusal(res), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
