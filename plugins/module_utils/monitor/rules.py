# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus side of the monitoring agent: scrape configuration and the SLI recording rules (pure).

SLI (docs/monitoring.md): per scope (NIC, host, rack, zone) and minute, the probe loss of the scope =
lost / (answered + lost) over the minute, from every probe the scope's hosts sent (``increase`` of the
agents' counters). A minute *counts* when the scope resolved at least ``min_probes`` probes in it; it is
*bad* when its loss is above ``threshold`` (default 1 %), else good. Probes to an unreachable target
(its agent, host or every NIC down: ``fabric_monitor_probes_unreachable_total``) are not loss; a scope
whose agent is down has no data, so its minutes are neither good nor bad: ``up == 0`` is its own signal
(``fabric_monitor:agent_down``).

Recorded series (evaluated every ``interval`` for the ratios, every minute for the minutes):
``fabric_monitor:loss_ratio:<scope>_1m``, ``fabric_monitor:minute:<scope>`` (1 a minute that counts),
``fabric_monitor:bad_minute:<scope>`` (1 a bad minute, 0 a good one). Bad minutes of a rack over a day:
``sum_over_time(fabric_monitor:bad_minute:rack[1d])``; good ones: ``sum_over_time(
fabric_monitor:minute:rack[1d]) - sum_over_time(fabric_monitor:bad_minute:rack[1d])``.

The files are JSON (a subset of YAML, which Prometheus reads).
"""

from __future__ import annotations

import json

SCOPES = (("nic", "host, nic, rack, zone"), ("host", "host, rack, zone"), ("rack", "rack, zone"), ("zone", "zone"))
JOB = "fabric_monitor"


def check(threshold, min_probes):
    if not 0.0 < float(threshold) < 1.0:
        raise ValueError("fabric_monitor_sli_loss_threshold: %r; fix: use a ratio between 0 and 1, e.g. 0.01"
                         % (threshold,))
    if int(min_probes) < 1:
        raise ValueError("fabric_monitor_sli_min_probes: %r; fix: use an integer >= 1" % (min_probes,))


def recording_rules(threshold=0.01, min_probes=10, interval="15s"):
    """The rule groups (a dict for ``rule_files``)."""
    check(threshold, min_probes)
    ratios = []
    minutes = []
    for scope, by in SCOPES:
        lost = 'sum by (%s) (increase(fabric_monitor_probes_lost_total{job="%s"}[1m]))' % (by, JOB)
        done = ('sum by (%s) (increase(fabric_monitor_probes_answered_total{job="%s"}[1m]) + '
                'increase(fabric_monitor_probes_lost_total{job="%s"}[1m]))' % (by, JOB, JOB))
        ratios.append({"record": "fabric_monitor:probes_resolved:%s_1m" % scope, "expr": done})
        ratios.append({"record": "fabric_monitor:loss_ratio:%s_1m" % scope,
                       "expr": "%s / (fabric_monitor:probes_resolved:%s_1m >= %d)" % (lost, scope, int(min_probes))})
        minutes.append({"record": "fabric_monitor:minute:%s" % scope,
                        "expr": "fabric_monitor:loss_ratio:%s_1m >= bool 0" % scope})
        minutes.append({"record": "fabric_monitor:bad_minute:%s" % scope,
                        "expr": "fabric_monitor:loss_ratio:%s_1m > bool %s" % (scope, repr(float(threshold)))})
    ratios.append({"record": "fabric_monitor:agent_down", "expr": 'up{job="%s"} == 0' % JOB})
    return {"groups": [{"name": "fabric_monitor_loss", "interval": interval, "rules": ratios},
                       {"name": "fabric_monitor_sli_minutes", "interval": "1m", "rules": minutes}]}


def scrape_config(agents, frr=(), scrape_interval="5s", rule_file="rules.json"):
    """Prometheus configuration. ``agents``: [{"address": "host:port", "host", "rack", "zone"}];
    ``frr``: [{"address", "host" (the device), "rack"?, "zone"?}] of FRR exporters (ToRs, spines)."""
    def static(items):
        out = []
        for a in items:
            labels = dict((k, a[k]) for k in ("host", "rack", "zone") if a.get(k))
            out.append({"targets": [a["address"]], "labels": labels})
        return out
    jobs = [{"job_name": JOB, "honor_labels": True, "scrape_interval": scrape_interval,
             "scrape_timeout": scrape_interval, "static_configs": static(agents)}]
    if frr:
        jobs.append({"job_name": "frr", "scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                     "static_configs": static(frr)})
    return {"global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "rule_files": [rule_file], "scrape_configs": jobs}


def dump(data):
    return json.dumps(data, indent=1, sort_keys=True) + "\n"
