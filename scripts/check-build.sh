#!/usr/bin/env bash
# `ansible-galaxy collection build` works and the built tarball installs and runs (inventory + plan).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/netscale-multinic-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$(bash "$here/scripts/collection-tree.sh" "$work/src")
ansible-galaxy collection build "$tree" --output-path "$work" >/dev/null
tarball=$(ls "$work"/netscale-multinic-*.tar.gz)
cd "$work"
# A plain project using the installed collection, not this checkout.
printf '[defaults]\ncollections_path = %s\n[inventory]\nenable_plugins = netscale.multinic.fabric\n' "$work/installed" > ansible.cfg
export ANSIBLE_CONFIG="$work/ansible.cfg"
ansible-galaxy collection install --force "$tarball" -p "$work/installed" >/dev/null
cp "$here/inventories/example/fabric.yml" fabric.yml
ansible-inventory -i fabric.yml --graph | grep -q rack_b1_az1_r1
cat > plan.yml <<'PLAY'
- name: Plan with the installed collection
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Plan
      netscale.multinic.fabric_plan:
        topology: fabric.yml
        dest: intended
PLAY
ansible-playbook -i fabric.yml plan.yml >/dev/null
test -s intended/example/plan/racks/b1-az1-r1.yml
echo "collection build: $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB) built, installed, inventory and plan ran"
