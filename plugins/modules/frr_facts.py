#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: frr_facts
short_description: BGP sessions, routes and ECMP width from FRR's vtysh JSON
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Reads C(show bgp neighbors json), C(show ip route json), C(show ipv6 route json) and
    C(show bgp ipv4/ipv6 unicast json) in one vtysh call and returns compact facts - per neighbor
    its state, peer group, accepted routes per family and maximum-prefix; per route its protocol and
    installed next-hop count.
  - With O(received=true) it also counts the routes each neighbor sent before policy (needs
    soft-reconfiguration inbound) and the rejected ones (received - accepted).
  - O(prefixes) reports the ECMP width of those prefixes; O(aggregates) lists BGP routes more
    specific than them (host routes leaking to a spine). Health gates use these numbers.
options:
  confdir:
    description: FRR config directory.
    type: path
    default: /etc/frr
  families:
    description: Address families to read.
    type: list
    elements: str
    choices: [ipv4, ipv6]
    default: [ipv4, ipv6]
  received:
    description: Count routes received before policy per neighbor (one extra vtysh call).
    type: bool
    default: false
  neighbors:
    description: Restrict the received-route counts to these neighbor addresses.
    type: list
    elements: str
  prefixes:
    description: Prefixes whose ECMP width (installed next hops) to report.
    type: list
    elements: str
    default: []
  aggregates:
    description: Aggregates (rack prefixes); BGP routes more specific than them are reported as leaks.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Read-only.
  diff_mode:
    support: none
    description: Read-only; nothing to diff.
  platform:
    support: full
    description: Runs on the FRR box (POSIX), where vtysh is.
    platforms: posix
extends_documentation_fragment:
  - netscale.multinic.frr_target
"""

EXAMPLES = r"""
- name: ECMP width of every task IP of the rack, and sessions per host
  netscale.multinic.frr_facts:
    prefixes: "{{ multinic_rack.hosts | map(attribute='slots') | flatten | map(attribute='task_ip.ipv4') | map('regex_replace', '$', '/32') | list }}"
  register: tor

- name: Zero host routes on a spine
  netscale.multinic.frr_facts:
    aggregates: "{{ multinic_spine.downlinks | map(attribute='rack_prefix.ipv4') | list }}"
  register: spine
  failed_when: spine.leaks | length > 0
"""

RETURN = r"""
frr:
  description: Facts - C(neighbors) (per address), C(routes) and C(bgp) (per family and prefix), C(summary).
  returned: always
  type: dict
ecmp:
  description: Installed next hops per requested prefix (0 when absent).
  returned: always
  type: dict
  sample: {"198.18.0.8/32": 2}
leaks:
  description: BGP routes more specific than the given aggregates.
  returned: always
  type: list
  elements: str
sessions:
  description: Per peer group (one per task slot, C(HOST-<host>-S<slot>)) the number of sessions and how many are Established.
  returned: always
  type: dict
hosts:
  description: Per host the number of sessions and how many are Established, in total and per task slot.
  returned: always
  type: dict
  sample: {"lab-r1-h1": {"total": 4, "established": 4, "slots": {"1": {"total": 2, "established": 2}}}}
max_prefix_tripped:
  description:
    - Neighbors that are down because their last NOTIFICATION was Cease / Maximum Number of Prefixes Reached.
    - On FRR this happens at the (limit + 2)th accepted route of a family; see docs/tor-policy.md.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.netscale.multinic.plugins.module_utils.frr import state as frr_state  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.frr.apply import FrrTarget  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec=dict(
            vty_socket=dict(type="path"),
            confdir=dict(type="path", default="/etc/frr"),
            bindir=dict(type="path", default="/usr/bin"),
            families=dict(type="list", elements="str", choices=["ipv4", "ipv6"], default=["ipv4", "ipv6"]),
            received=dict(type="bool", default=False),
            neighbors=dict(type="list", elements="str"),
            prefixes=dict(type="list", elements="str", default=[]),
            aggregates=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    target = FrrTarget(bindir=p["bindir"], confdir=p["confdir"], vty_socket=p["vty_socket"])
    try:
        facts = frr_state.collect(module.run_command, target, families=tuple(p["families"]),
                                  received=p["received"], neighbors=p["neighbors"])
        leaks = []
        for fam in p["families"]:
            bgp = [pfx for pfx, r in facts["routes"][fam].items() if r["protocol"] == "bgp"]
            leaks += frr_state.more_specifics(sorted(set(bgp) | set(facts["bgp"][fam])), p["aggregates"])
    except (RuntimeError, ValueError) as exc:
        module.fail_json(msg="reading FRR state failed: %s" % exc)
    module.exit_json(changed=False, frr=facts, leaks=sorted(set(leaks)),
                     ecmp={pfx: frr_state.ecmp_width(facts, pfx) for pfx in p["prefixes"]},
                     sessions=frr_state.sessions_by_group(facts), hosts=frr_state.sessions_by_host(facts),
                     max_prefix_tripped=facts["summary"]["max_prefix_tripped"])


if __name__ == "__main__":
    main()
