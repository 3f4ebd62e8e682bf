# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which lab tests scripts/test.sh runs alone on the machine and which side by side (docs/performance.md, "CI time").

- ``alone``: tests that time traffic, BFD or the datapath against a bound (receiver stalls, shares, detection
  times) or check that no lab of any fabric is left; one pytest process, nothing else running.
- ``lane1``, ``lane2``, ``lane3``: the Molecule scenarios and the other long rollouts, each lane on lab fabrics of
  its own (own node names, namespaces, cgroups, monitoring ports), started at nice 10. The scoped rollout has a lane
  of its own: after ``canary_failure`` it ran alone on a half-idle machine for its last ~200 s. Lane 3 ends ~700 s
  before the others, so the live ToR policy tests run there after it (their own ``mnt-<id>`` namespaces; they check
  what FRR accepts and installs, with waits of 10-30 s, not times): in ``alone`` they kept the machine ~75 % idle for
  ~55 s.
- ``beside``: lab tests that check decisions (monitoring cases, drains, rulebooks, the lease, the execution
  environment), on fabrics and ports no lane uses, at normal priority beside the lanes: they mostly wait.

``python scripts/ci_groups.py GROUP`` prints a group's paths; tests/unit/harness/test_ci_groups.py checks that every lab
test file is in exactly one group."""

from __future__ import annotations

import sys

MOLECULE = "tests/e2e/rollout/test_molecule_rollout.py"

GROUPS = {
    "alone": ["tests/e2e/lab", "tests/e2e/datapath", "tests/e2e/stack", "tests/e2e/vipinjector",
              "tests/e2e/rollout/test_gates_live.py"],
    "lane1": [MOLECULE + "::test_molecule_canary_failure"],
    "lane2": [MOLECULE + "::test_molecule_default_rollout", MOLECULE + "::test_molecule_nic_failure",
              "tests/e2e/rollout/test_awx_slices.py"],
    "lane3": ["tests/e2e/rollout/test_scoped_rollout.py", "tests/e2e/tor"],
    "beside": ["tests/e2e/monitor", "tests/e2e/remediate", "tests/e2e/eda", "tests/e2e/rollout/test_fabric_lease.py",
               "tests/e2e/rollout/test_ee_awx.py"],
}


def main(argv):
    if len(argv) != 2 or argv[1] not in GROUPS:
        sys.stderr.write("usage: %s {%s}\n" % (argv[0], "|".join(GROUPS)))
        return 2
    print(" ".join(GROUPS[argv[1]]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
