# -*- coding: utf-8 -*-
"""NIC failure matrix: every fault kind x datapath mode, repeated (needs root; the datapath lab, prefix mnd).

The test suite runs one representative case per fault kind (tests/e2e/datapath/test_datapath_traffic.py::
test_nic_failure); this runs all of them (admin-down and carrier loss, eBPF and kernel mode) --repeat times with
MULTINIC_FAULT_MATRIX=1 and prints, per case, the worst receiver-side stream stall of each run (32 flows each
way, eth1 down at 3.5 s, back at 6.5 s) and how many runs passed the test's assertions (stall <= 1 s, eth1's
share back after recovery). Prints figures; asserts nothing.
usage: bench/nic_failure_matrix.py [--repeat 3]
"""
import argparse
import ast
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"(ebpf|kernel) (admin|carrier): worst stream stall at the receiver (\{[^}]*\})")
# pytest -rA short summary: "PASSED tests/...::test_nic_failure[admin-ebpf]"
RESULT = re.compile(r"^(PASSED|FAILED|ERROR) \S+::test_nic_failure\[(\w+)-(\w+)\]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    stalls, verdicts = {}, {}
    env = dict(os.environ, MULTINIC_FAULT_MATRIX="1")
    for run in range(args.repeat):
        p = subprocess.run([sys.executable, "-m", "pytest", "-s", "-rA", "-p", "no:cacheprovider",
                            "tests/e2e/datapath/test_datapath_traffic.py", "-k", "test_nic_failure"],
                           cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        for line in p.stdout.splitlines():
            m = LINE.search(line)
            if m:
                worst = max(ast.literal_eval(m.group(3)).values())
                stalls.setdefault((m.group(2), m.group(1)), []).append(worst)
            m = RESULT.match(line)
            if m:
                verdicts.setdefault((m.group(2), m.group(3)), []).append(m.group(1))
        print("run %d/%d: pytest rc %d" % (run + 1, args.repeat, p.returncode), flush=True)
    print("\n%-16s %-6s %-28s %s" % ("case", "runs", "worst receiver stall s (each)", "passed"))
    for case in sorted(set(stalls) | set(verdicts)):
        s = stalls.get(case, [])
        v = verdicts.get(case, [])
        print("%-16s %-6d %-28s %d/%d%s" % (
            "%s-%s" % case, len(v), " ".join("%.2f" % x for x in s), v.count("PASSED"), len(v),
            ("  median %.2f" % statistics.median(s)) if s else ""))


if __name__ == "__main__":
    main()
