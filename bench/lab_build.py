# -*- coding: utf-8 -*-
"""Lab build (warm image cache) and teardown times. Prints figures; asserts nothing.

    sudo .venv/bin/python bench/lab_build.py [--runs 3] [--topology inventories/lab/fabric.yml]

Targets (issue 3): build < 60 s with a warm image cache, teardown < 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.image import ensure_image  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--topology", default=os.path.join(REPO, "inventories", "lab", "fabric.yml"))
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args()
    t = time.monotonic()
    dummy, info, built = ensure_image()
    warm = round(time.monotonic() - t, 2)
    lab = open_lab(args.topology)
    if lab.status()[2] is not None:
        lab.teardown()
    rows = []
    for i in range(args.runs):
        lab = open_lab(args.topology)
        t = time.monotonic()
        res = lab.build()
        b = time.monotonic() - t
        lab = open_lab(args.topology)
        t = time.monotonic()
        lab.teardown()
        d = time.monotonic() - t
        rows.append({"run": i + 1, "build_s": round(b, 2), "teardown_s": round(d, 2), "steps": res.get("timings", {})})
    out = {
        "image": {"key": info["key"][:12], "built_now": built, "first_build_s": info.get("build_seconds"),
                  "cache_check_s": warm},
        "runs": rows,
        "build_s_median": statistics.median(r["build_s"] for r in rows),
        "teardown_s_median": statistics.median(r["teardown_s"] for r in rows),
        "targets": {"build_s": 60, "teardown_s": 10},
    }
    if args.json:
        print(json.dumps(out))
        return
    print("image %s: %s (debootstrap took %ss when built), cache check %ss"
          % (out["image"]["key"], "built now" if built else "cached", info.get("build_seconds"), warm))
    print("%-4s %9s %11s  %s" % ("run", "build[s]", "teardown[s]", "build steps [s]"))
    for r in rows:
        print("%-4d %9.2f %11.2f  %s" % (r["run"], r["build_s"], r["teardown_s"],
                                         " ".join("%s=%s" % kv for kv in r["steps"].items())))
    print("median: build %.2f s (target < 60), teardown %.2f s (target < 10)"
          % (out["build_s_median"], out["teardown_s_median"]))


if __name__ == "__main__":
    main()
