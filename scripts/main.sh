#!/usr/bin/env bash
# The main job on the embedded default target (this machine's fabric lab), from a fresh Debian 12
# machine: set-up, plan, build the lab, and print where everything is. Later stages (ToR policy,
# host datapath, sidecars, canary-then-fleet rollout and its report) are added here as they land.
#   bash scripts/main.sh            # run it
#   bash scripts/main.sh --down     # tear the lab down
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
export PATH="$here/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$here/ansible.cfg"
inventory=inventories/lab/fabric.yml

if [ "${1:-}" = "--down" ]; then
  ansible-playbook -i "$inventory" playbooks/lab.yml -e lab_state=absent
  exit 0
fi

echo "=== plan: validate the topology, write intended/plan/"
ansible-playbook -i "$inventory" playbooks/plan.yml
echo "=== lab: spine, ToRs, systemd GPU hosts, storage node"
ansible-playbook -i "$inventory" playbooks/lab.yml
echo
echo "plan:      $here/intended/plan/summary.yml"
echo "inventory: ansible-inventory -i $inventory --graph"
echo "lab down:  bash scripts/main.sh --down"
