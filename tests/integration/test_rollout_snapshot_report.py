# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""netscale.multinic.rollout_snapshot with ``report`` through Ansible itself: the snapshot is recorded in the run's
report on the controller - captured, and for a node that cannot be reached recorded as not captured (the task is
ignored, the play goes on: triage never blocks a rollback); parallel snapshots are listed in the play's host order."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: snapshot
      netscale.multinic.rollout_snapshot:
        kind: host
        node: "{{ inventory_hostname }}"
        report: {dir: "%s", wave: canary}
      when: inventory_hostname != 'n2'
      ignore_errors: true
      ignore_unreachable: true
    - name: after
      ansible.builtin.debug: {msg: went on}
"""


def test_snapshots_recorded_in_the_report_also_when_unreachable(tmp_path):
    report = tmp_path / "report"
    inv = tmp_path / "inv.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inv.write_text(json.dumps({"all": {"hosts": {
        "n3": dict(local), "n1": dict(local), "n2": dict(local),
        "gone": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                 "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes"}}}}))
    pb = tmp_path / "play.yml"
    pb.write_text(PLAY % report)
    p = subprocess.run(["ansible-playbook", "-i", str(inv), str(pb)], cwd=ROOT, env=ENV, capture_output=True, text=True,
                       check=False, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert p.stdout.count("went on") == 4   # the play went on, also on the unreachable node
    rep = json.loads((report / "report.json").read_text())
    snaps = rep["snapshots"]
    assert [s["node"] for s in snaps] == ["n3", "n1", "gone"]   # the play's host order
    assert [s["captured"] for s in snaps] == [True, True, False] and all(s["kind"] == "host" for s in snaps)
    assert snaps[2]["path"] == "snapshots/canary/gone.json" and snaps[2]["error"]
    stored = json.loads((report / "snapshots" / "canary" / "n1.json").read_text())
    assert stored["node"] == "n1" and stored["commands"] and "report" not in stored["invocation"]["module_args"]
    assert os.stat(str(report / "snapshots" / "canary" / "n1.json")).st_mode & 0o777 == 0o600
