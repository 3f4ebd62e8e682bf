#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: lab_monitoring
short_description: Run Prometheus, the FRR exporters and the agents' scrape relay beside the lab
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Starts Debian's C(prometheus) (bound to O(listen), its own config and data directory under the lab's state
    directory) scraping the fabric_monitor agent of every GPU host of the lab, Debian's C(prometheus-frr-exporter)
    for every spine and ToR (BGP and BFD state), and the agent program in responder-only mode on the storage node.
  - The agents listen inside the GPU hosts' network namespaces; a relay process on O(listen) connects to each
    from inside that namespace, so a fault on a data NIC is never read as the agent being down.
  - Starts the live correlator, which reads every GPU host's detection events and writes the case file and the
    current cases (returned as RV(case_file) and RV(cases)).
  - With O(rulebook), also the collection's remediation rulebook (C(ansible-rulebook -r netscale.multinic.remediate))
    reading that case file, as a systemd unit would run it in production (docs/remediation-eda.md).
  - Every process is recorded in the lab's state file by PID; the lab's teardown (or O(state=absent)) stops them.
    A second run with the same settings changes nothing.
  - The recording rules give the SLIs (good and bad minutes per NIC, host, rack and zone); see docs/monitoring.md.
options:
  state:
    description: C(present) starts (or keeps) the processes, C(absent) stops them.
    type: str
    choices: [present, absent]
    default: present
  listen:
    description: Loopback or lab address every process binds to.
    type: str
    default: 127.0.0.1
  port:
    description:
      - Prometheus web port (UI and API). The relay and exporter ports follow it unless given, so two labs on one
        machine need only different values here.
      - Every port is checked free before anything starts; a port in use fails the task naming it, and nothing
        is started.
    type: int
    default: 19090
  relay_port:
    description: First relay port (one per GPU host, in the lab's host order); default O(port) + 10.
    type: int
  frr_port:
    description: First FRR exporter port (spines, then ToRs); default O(port) + 110.
    type: int
  agent_port:
    description: Metrics port of the agents inside the hosts (fabric_monitor_metrics_port).
    type: int
    default: 9581
  probe_port:
    description: UDP port of the responders (fabric_monitor_port).
    type: int
    default: 31874
  agent_program:
    description: The bundled agent program (the fabric_monitor role's C(files/netscale-fabric-monitor.py)), run in
      responder-only mode on the storage node.
    type: path
  correlator_program:
    description:
      - The bundled live correlator (the fabric_monitor role's C(files/netscale-case-correlator.py)); default the file
        of that name beside O(agent_program).
      - It tails every GPU host's events file, correlates, and writes the case file (C(cases.jsonl), one case event
        per line, what the EDA source C(netscale.multinic.case_file) reads) and the current cases (C(cases.json))
        in the monitoring directory; see docs/operations.md.
    type: path
  events_file:
    description: The agents' events file inside the hosts (fabric_monitor_events_file); read from the controller.
    type: str
    default: /var/log/netscale-multinic/fabric-monitor-events.jsonl
  scrape_interval:
    description: Scrape and rule evaluation interval of Prometheus.
    type: str
    default: 5s
  loss_threshold:
    description: A minute of a scope is bad when its probe loss is above this ratio.
    type: float
    default: 0.01
  min_probes:
    description: A minute counts (good or bad) only when the scope resolved at least this many probes in it.
    type: int
    default: 10
  rulebook:
    description:
      - The remediation rulebook beside Prometheus, reading the live correlator's case file (unset or empty - none).
      - Its state (journal, C(mode) file, pending approvals) is C(<dir>/eda); its log C(<dir>/rulebook.log). It waits
        for the rulebook's event source to start (the JVM takes up to 120 s).
      - Keys C(mode) (C(report), C(approve) or C(auto)), C(program) (the checkout's C(.venv/bin/ansible-rulebook)),
        C(ansible_config) (the checkout's C(ansible.cfg)), C(inventory) (the lab's inventory directory, copied with its
        group_vars for every drain), C(report_root) (the reports directory the fabric's rollouts use - drain journal
        and lease), all absolute; optional C(budget) (netscale_eda_budget), C(clean_window) (seconds),
        C(snapshot) (bool).
      - The drains need the lab vault's password as every lab playbook does (ANSIBLE_VAULT_PASSWORD_FILE in the
        environment of the play that starts it).
    type: dict
attributes:
  check_mode:
    support: full
    description: Reports whether anything would be started or stopped.
extends_documentation_fragment:
  - netscale.multinic.lab_node
"""

EXAMPLES = r"""
- name: Prometheus beside the lab
  netscale.multinic.lab_monitoring:
    topology: inventories/lab/fabric.yml
    agent_program: "{{ playbook_dir }}/../roles/fabric_monitor/files/netscale-fabric-monitor.py"
  register: mon

- name: Where the UI is
  ansible.builtin.debug:
    msg: "Prometheus: {{ mon.url }}"
"""

RETURN = r"""
url:
  description: Prometheus's UI and API.
  returned: state=present
  type: str
  sample: http://127.0.0.1:19090
dir:
  description: Config, rules, data and logs.
  returned: state=present
  type: str
targets:
  description: Agents scraped (GPU hosts).
  returned: state=present
  type: int
frr_exporters:
  description: FRR exporters started (spines and ToRs).
  returned: state=present
  type: int
storage_target:
  description: The storage node as a fabric_monitor target (name, ipv4, ipv6), for fabric_monitor_targets.
  returned: state=present
  type: dict
case_file:
  description: The live correlator's case file (JSON lines, one case event per open, update or close).
  returned: state=present
  type: str
  sample: /run/netscale-multinic/lab/lab/monitoring/cases.jsonl
cases:
  description: The current cases (open and recently closed, the correlator's counters), rewritten atomically.
  returned: state=present
  type: str
  sample: /run/netscale-multinic/lab/lab/monitoring/cases.json
rulebook:
  description: The remediation rulebook (with O(rulebook)) - mode, state_dir, report_root, log.
  returned: state=present and O(rulebook) set
  type: dict
events_files:
  description: GPU hosts' events files the correlator reads.
  returned: state=present
  type: int
stopped:
  description: Processes stopped.
  returned: state=absent
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.lab import monitoring
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import NODE_ARGUMENT_SPEC, open_lab


def main():
    module = AnsibleModule(
        argument_spec=dict(
            NODE_ARGUMENT_SPEC,
            state=dict(type="str", choices=["present", "absent"], default="present"),
            listen=dict(type="str", default="127.0.0.1"),
            port=dict(type="int", default=19090),
            relay_port=dict(type="int"),
            frr_port=dict(type="int"),
            agent_port=dict(type="int", default=9581),
            probe_port=dict(type="int", default=31874),
            agent_program=dict(type="path"),
            correlator_program=dict(type="path"),
            events_file=dict(type="str", default="/var/log/netscale-multinic/fabric-monitor-events.jsonl"),
            scrape_interval=dict(type="str", default="5s"),
            loss_threshold=dict(type="float", default=0.01),
            min_probes=dict(type="int", default=10),
            rulebook=dict(type="dict"),
        ),
        required_if=[("state", "present", ("agent_program",))],
        supports_check_mode=True,
    )
    p = module.params
    try:
        lab = open_lab(p["topology"], state_root=p["state_root"])
        if p["state"] == "absent":
            result = monitoring.stop(lab, check=module.check_mode)
        else:
            result = monitoring.start(
                lab, check=module.check_mode, listen=p["listen"], port=p["port"], relay_port=p["relay_port"],
                frr_port=p["frr_port"], agent_port=p["agent_port"], probe_port=p["probe_port"],
                agent_program=p["agent_program"], scrape_interval=p["scrape_interval"],
                threshold=p["loss_threshold"], min_probes=p["min_probes"],
                correlator_program=p["correlator_program"], events_file=p["events_file"], rulebook=p["rulebook"])
    except Exception as e:  # pylint: disable=broad-except
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
