"""CI smoke of bench/fleet_scale.py --quick (94 GPU hosts): every phase runs through Ansible and the
figures are printed. Asserts nothing about time (docs/performance.md, "Fleet scale", has the figures)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROW = r"\s+[\d.]+ s wall,\s+[\d.]+ s CPU \([\d.]+x planner core CPU\), peak RSS \d+ MiB, cgroup peak (\d+ MiB|n/a)"


def test_fleet_scale_quick_runs_every_phase_and_prints_figures():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "fleet_scale.py"), "--quick"], cwd=ROOT,
                       capture_output=True, text=True, check=False, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert re.search(r"== quick \(quick\): 94 GPU hosts, 32 ToRs, 16 spines", out), out
    assert re.search(r"planner core \(read \+ validate \+ plan, one process\): [\d.]+ s wall", out), out
    for title in ("inventory, no-op play", "ansible-inventory --graph", "ansible-inventory --host",
                  r"plan.yml \(writes intended/\)", r"render every ToR \+ spine", r"rollout.yml preflight"):
        assert re.search(title + ROW, out), (title, out)
    assert re.search(r"inventory, no-op play.*first task at [\d.]+ s", out), out
    assert "49 files" in out and "48 configs" in out, out
    # the preflight ran through its first play (a failed task there never reaches the device plays)
    assert re.search(r"rollout.yml preflight.*stopped where the first device is contacted", out), out
