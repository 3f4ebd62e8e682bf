# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_plan
short_description: Validate a fabric topology, plan its addresses and write them under intended/
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the controller. Validates the topology file (every problem reported with its path in the
    file, the value and a fix), computes the hierarchical dual-stack plan (region > building > AI zone
    > rack > host > NIC subnet > task IP) and writes it as reviewable YAML under O(dest)/<fabric name>/plan/ (one folder per fabric, so
    several fabrics can share one intended/ directory).
  - Addresses are a pure function of pools, capacities and ids, so adding, removing or reordering
    entities changes no existing allocation.
  - A re-plan is compared with the files on disk. If any existing allocation would change or move,
    the task fails with the list of changes and writes nothing unless O(allow_renumber=true).
  - A host or rack that left the topology since the last plan is retired only with consent
    (O(decommission)); without it the task fails, lists what would be retired and writes nothing.
    A retired allocation moves to O(dest)/<fabric name>/plan/retired.yml and stays reserved; a new
    host or rack that would get its prefix, ASN, ToR loopback or name is refused until O(release)
    names it.
  - Files are written atomically (temporary file and rename); only files whose content changes are
    rewritten, so a second run reports no change.
options:
  topology:
    description: Path of the fabric topology file (the same file serves as the inventory).
    type: path
    required: true
  dest:
    description: The intended/ directory; the plan goes to O(dest)/<fabric name>/plan/.
    type: path
    default: intended
  allow_renumber:
    description:
      - Consent to changes of existing allocations (moves live task IPs and BGP sessions).
    type: bool
    default: false
  decommission:
    description:
      - Names of hosts and racks removed from the topology that may be retired (consent, like
        O(allow_renumber) for moves). Drain them first (playbooks/decommission.yml).
      - Their ToR neighbours and prefix-lists go with the next ToR render; their allocations stay
        reserved in retired.yml. Naming an already retired entity is a no-op.
    type: list
    elements: str
    default: []
  release:
    description:
      - Names of retired hosts and racks whose allocations (prefix, ASN, ToR loopback, name) new
        capacity may reuse. Release only once the old host is wiped or gone for good.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Computes and compares, writes nothing.
  diff_mode:
    support: full
    description: Shows the before and after text of changed plan files (first 20).
  platform:
    support: full
    platforms: posix
    description: Runs on the controller (action plugin); targets are not contacted.
notes:
  - Needs the python library netaddr on the controller.
"""

EXAMPLES = r"""
- name: Plan the fabric
  netscale.multinic.fabric_plan:
    topology: inventories/example/fabric.yml
    dest: intended
  delegate_to: localhost
  run_once: true

- name: Retire a host removed from the topology (after draining it)
  netscale.multinic.fabric_plan:
    topology: inventories/example/fabric.yml
    decommission: [gpu-b1-az1-r1-h3]

- name: Let new capacity reuse the addresses of a retired host that is gone for good
  netscale.multinic.fabric_plan:
    topology: inventories/example/fabric.yml
    release: [gpu-b1-az1-r1-h3]

- name: Accept a deliberate renumbering (after reviewing the list of changes)
  netscale.multinic.fabric_plan:
    topology: inventories/example/fabric.yml
    allow_renumber: true
"""

RETURN = r"""
summary:
  description: Counts per level, prefix lengths and pool utilisation.
  returned: success
  type: dict
written:
  description: Plan files written (relative to O(dest)).
  returned: success
  type: list
  elements: str
removed:
  description: Plan files removed because their rack or spine left the topology.
  returned: success
  type: list
  elements: str
added:
  description: Plan files of new racks or spines.
  returned: success
  type: list
  elements: str
plan_dir:
  description: Where the plan was (or, in check mode, would be) written.
  returned: success
  type: str
renumbered:
  description: Existing allocations that change or move (empty unless O(allow_renumber=true), else the task fails).
  returned: always
  type: list
  elements: str
retired:
  description: Hosts and racks retired by this run (their allocations moved to retired.yml).
  returned: success
  type: list
  elements: str
released:
  description: Retired hosts and racks released by this run (their allocations may be reused).
  returned: success
  type: list
  elements: str
problems:
  description: On invalid input, every problem with its path, value, message and fix.
  returned: failure
  type: list
  elements: dict
"""

# The options of the action plugin (plugins/action/fabric_plan.py takes its valid arguments from here).
ARGUMENT_SPEC = dict(
    topology=dict(type="path", required=True),
    dest=dict(type="path", default="intended"),
    allow_renumber=dict(type="bool", default=False),
    decommission=dict(type="list", elements="str", default=[]),
    release=dict(type="list", elements="str", default=[]),
)
