"""Re-render the ToR/spine golden files: `PYTHONPATH=.build .venv/bin/python tests/golden/tor/regenerate.py`.

Review the git diff afterwards: every change in a golden file is a change in what devices get.
"""

from __future__ import annotations

import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.section import lab_section, storage_spine_networks  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan  # noqa: E402

# Fake keys (test fixtures, not secrets): they show where the per-host key lands.
CASES = {
    # as the lab runs: the lab inventory's own tor_bgp_options (MD5 on every host and spine session, BFD on
    # every host session at the lab's timers); the example fabric shows the defaults
    "lab": {"fabric": "inventories/lab/fabric.yml",
            "options": "inventories/lab/group_vars/all/lab.yml",
            "md5": {"lab-r1-h1": "golden-key-r1h1", "lab-r1-h2": "golden-key-r1h2",
                    "lab-r2-h1": "golden-key-r2h1", "lab-r2-h2": "golden-key-r2h2",
                    "lab-spine1": "golden-key-spine1"}},
    "example": {"fabric": "inventories/example/fabric.yml",
                "options": {"bfd": {"enabled": True}, "hop_limit": {"mode": "multihop", "hops": 2}},
                "md5": {"gpu-b1-az1-r1-h2": "golden-key-h2"}},
}


def render_case(name):
    case = CASES[name]
    plan = load_plan(os.path.join(REPO, case["fabric"]))
    options = case["options"]
    if isinstance(options, str):
        with open(os.path.join(REPO, options)) as f:
            options = yaml.safe_load(f)["tor_bgp_options"]
    options = dict(options)
    # As the tor_bgp role renders a lab fabric: the lab inventory's storage prefixes are what the
    # spines originate (tor_bgp_spine_networks -> spine_networks).
    storage = lab_section(plan.topo).get("storage") or {}
    if storage:
        options.setdefault("spine_networks", storage_spine_networks(storage))
    return tor_policy.build_fabric_configs(plan, options, case["md5"])


def main():
    for name in CASES:
        out_dir = os.path.join(HERE, name)
        os.makedirs(out_dir, exist_ok=True)
        for f in os.listdir(out_dir):
            if f.endswith(".cfg"):
                os.unlink(os.path.join(out_dir, f))
        for device, cfg in sorted(render_case(name).items()):
            with open(os.path.join(out_dir, device + ".cfg"), "w") as fh:
                fh.write(cfg["text"])
            print("wrote %s/%s.cfg" % (name, device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
