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
)
