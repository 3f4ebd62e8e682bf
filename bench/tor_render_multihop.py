# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cost of deriving the multihop-BFD hosts in tor_render (``bfd_multihop_hosts`` unset: every gpu_hosts member's
``host_datapath_ebpf`` read through Ansible's per-host variable pass), what the tor_bgp role and the rollout's
change-scope check (``rollout_scope: changed``) pay once per run. One play renders the lab's ToRs in check mode with
the list given, derived, and given again, over an inventory of N GPU hosts (every tenth on the kernel datapath);
the difference is the derivation. Prints figures (ansible.posix.profile_tasks), asserts nothing.

  .venv/bin/python bench/tor_render_multihop.py [--hosts 1000 10000]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPOLOGY = os.path.join(REPO, "inventories", "lab", "fabric.yml")
TASK = """    - name: %s
      netscale.multinic.tor_render: {topology: %s, dest: %s%s}
      check_mode: true
"""


def seconds_per_task(count, work):
    inventory = os.path.join(work, "hosts.yml")
    with open(inventory, "w") as f:
        f.write("all:\n  children:\n    gpu_hosts:\n      hosts:\n")
        for i in range(count):
            f.write("        h%06d: %s\n" % (i, "{host_datapath_ebpf: false}" if i % 10 == 0 else "{}"))
        f.write("    local:\n      hosts:\n        localhost: {ansible_connection: local}\n")
    dest = os.path.join(work, "intended")
    play = os.path.join(work, "play.yml")
    with open(play, "w") as f:
        f.write("- hosts: localhost\n  gather_facts: false\n  tasks:\n")
        given = ", bfd_multihop_hosts: []"
        for name, extra in (("given", given), ("derived", ""), ("given again", given)):
            f.write(TASK % (name, TOPOLOGY, dest, extra))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks",
               PATH=os.path.join(REPO, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    out = subprocess.run(["ansible-playbook", "-i", inventory, play], cwd=REPO, env=env, capture_output=True,
                         text=True, check=True).stdout
    timing = re.compile(r"^(given again|given|derived) -+ ([\d.]+)s$", re.M)
    return dict((m.group(1), float(m.group(2))) for m in timing.finditer(out))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args(argv)
    for count in args.hosts:
        with tempfile.TemporaryDirectory(prefix="netscale-multihop-bench.") as work:
            t = seconds_per_task(count, work)
        given = min(t["given"], t["given again"])
        print("%6d GPU hosts: given %.2f s, derived %.2f s: %.3f ms per host" % (
            count, given, t["derived"], (t["derived"] - given) * 1000.0 / count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
