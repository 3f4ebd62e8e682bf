#!/usr/bin/env bash
# `ansible-galaxy collection build` works, Galaxy's own import check (galaxy-importer) passes on the
# built tarball, and the tarball installs and runs (inventory + plan).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/netscale-multinic-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$(bash "$here/scripts/collection-tree.sh" "$work/src")
ansible-galaxy collection build "$tree" --output-path "$work" >/dev/null
tarball=$(ls "$work"/netscale-multinic-*.tar.gz)
cd "$work"
# galaxy-importer (requirements-test.txt) as Galaxy runs it before publishing; settings in
# scripts/galaxy-importer.cfg. Any error or warning fails the build check.
importer_log="$work/galaxy-importer.log"
if ! GALAXY_IMPORTER_CONFIG="$here/scripts/galaxy-importer.cfg" python -m galaxy_importer.main "$tarball" \
     >"$importer_log" 2>&1 || grep -Eq '^(WARNING|ERROR)' "$importer_log"; then
  grep -v '^Loading ' "$importer_log" >&2
  echo "galaxy-importer: the import check of $(basename "$tarball") failed (see above)" >&2
  exit 1
fi
# A plain project using the installed collection, not this checkout.
printf '[defaults]\ncollections_path = %s\n[inventory]\nenable_plugins = netscale.multinic.fabric\n' "$work/installed" > ansible.cfg
export ANSIBLE_CONFIG="$work/ansible.cfg"
# The dependencies in galaxy.yml (ansible.posix) come from the `ansible` bundle: nothing is downloaded.
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
echo "collection build: $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB) built, galaxy-importer passed, installed, inventory and plan ran"
