# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWX workflow "multinic rollout" on a lab fabric of the lab's shape for every fleet slice count (default
1..8): prints, per count, the workflow verdict, each fleet slice's status and what it deployed (or "nothing to
deploy"), and the wall time. Each count is a real change: the previous workflow's rollout is rolled back from its
journal first. Builds and tears down its own lab (fabric mnas); run under the lab lock:

  flock /work/lab.lock python bench/awx_slices.py [--counts 1,2,...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from labkit import awx_slices  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--counts", default="1,2,3,4,5,6,7,8")
    a = ap.parse_args(argv)
    counts = [int(c) for c in a.counts.split(",")]
    work = tempfile.mkdtemp(prefix="awx-slices-")
    topology = awx_slices.prepare(work)
    rows, failures = [], 0
    t0 = time.monotonic()
    try:
        built = awx_slices.lab(topology, "present")
        if built.returncode != 0:
            print(built.stdout[-4000:], built.stderr[-2000:])
            return 2
        previous = None
        for n in counts:
            if previous is not None:
                rb = awx_slices.rollback(topology, work, previous)
                if rb.returncode != 0:
                    print("rollback of awx-wf-%s failed:\n%s" % (previous, rb.stdout[-3000:]))
                    return 2
            out, wall, rc = awx_slices.workflow(topology, work, n)
            previous = out.get("workflow_job_id")
            problems = awx_slices.check(out, n)
            failures += bool(problems or rc)
            row = {"slices": n, "workflow": "passed" if not problems and rc == 0 else "FAILED", "rc": rc,
                   "wall_s": round(wall, 1), "fleet": [
                       "%s %s %s" % (r["slice"], r["status"], ",".join(r["waves"]) or "nothing to deploy")
                       for r in awx_slices.fleet_slices(out)], "problems": problems}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        awx_slices.lab(topology, "absent")
    print("| slices | workflow | wall (s) | fleet slices (status, waves run) |")
    print("|---|---|---|---|")
    for r in rows:
        print("| %d | %s | %.1f | %s |" % (r["slices"], r["workflow"], r["wall_s"], "; ".join(r["fleet"])))
    print("total %.0f s, %d of %d counts failed" % (time.monotonic() - t0, failures, len(rows)))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
