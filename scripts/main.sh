#!/usr/bin/env bash
# The main job on the embedded default target (this machine's fabric lab), from a fresh Debian 12
# machine: set-up, build the lab, plan, render the ToR policy, roll out canary-then-fleet with health
# gates (automatic rollback of a failed wave), and print the report.
#   bash scripts/main.sh            # run it
#   bash scripts/main.sh --down     # tear the lab down
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
export PATH="$here/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$here/ansible.cfg"
# the lab inventories' vault password (written by setup.sh; lab keys only, docs/security.md)
export ANSIBLE_VAULT_PASSWORD_FILE="$here/.cache/lab-vault-password"
inventory=inventories/lab/fabric.yml

if [ "${1:-}" = "--down" ]; then
  ansible-playbook -i "$inventory" playbooks/lab.yml -e lab_state=absent
  exit 0
fi

echo "=== lab: FRR spine and ToRs, systemd GPU hosts (2 and 4 NICs), storage node"
ansible-playbook -i "$inventory" playbooks/lab.yml
echo "=== plan: validate the topology, write intended/lab/plan/"
ansible-playbook -i "$inventory" playbooks/plan.yml
echo "=== rollout: ToR policy rack by rack, hosts canary then fleet, health gates after each wave"
rc=0
ansible-playbook -i "$inventory" playbooks/rollout.yml || rc=$?
echo "=== monitoring: the fabric_monitor agent on every GPU host (the lab's Prometheus scrapes them)"
ansible-playbook -i "$inventory" playbooks/monitor.yml || rc=$?
report=$(ls -1dt reports/2*/ 2>/dev/null | head -1)
echo
if [ -n "$report" ] && [ -f "$report/report.md" ]; then
  sed -n '1,60p' "$report/report.md"
  echo
  echo "report:    $here/${report%/}/report.md (JSON: report.json, plot: per-NIC shares SVG)"
fi
echo "plan:      $here/intended/lab/plan/summary.yml"
echo "configs:   $here/intended/configs/"
url_file=/run/netscale-multinic/lab/lab/monitoring/url
if [ -f "$url_file" ]; then
  echo "prometheus: $(cat "$url_file") (targets: /targets, SLI recording rules: /rules; docs/monitoring.md)"
fi
eda_state=/run/netscale-multinic/lab/lab/monitoring/eda
if [ -f "$eda_state/status.json" ]; then
  echo "remediation rulebook: mode $(cat "$eda_state/mode" 2>/dev/null || python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mode"])' "$eda_state/status.json"), journal $eda_state/journal.jsonl (docs/remediation-eda.md; switch: echo auto > $eda_state/mode)"
fi
echo "lab down:  bash scripts/main.sh --down"
exit $rc
