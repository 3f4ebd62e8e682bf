#!/usr/bin/env bash
# Every test of netscale.multinic, from a fresh Debian 12 machine (runs scripts/setup.sh first):
#   1. static checks: ansible-lint (production profile), ansible-test sanity, ansible-doc of every
#      plugin, collection build, Galaxy's import check (galaxy-importer) and install;
#   2. pytest: unit tests (planner, renderers, state machines) and the end-to-end lab tests (real
#      FRR, ExaBGP, kernel datapath in network namespaces; needs root), including Molecule scenarios.
# Options: --unit (unit tests and static checks only, no lab), --no-static.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
run_static=1
run_e2e=1
for arg in "$@"; do
  case "$arg" in
    --unit) run_e2e=0 ;;
    --no-static) run_static=0 ;;
    *) echo "usage: $0 [--unit] [--no-static]" >&2; exit 2 ;;
  esac
done

bash scripts/setup.sh
export PATH="$here/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$here/ansible.cfg"
# the lab inventories' vault password (written by setup.sh; lab keys only, docs/security.md)
export ANSIBLE_VAULT_PASSWORD_FILE="$here/.cache/lab-vault-password"
export PYTHONDONTWRITEBYTECODE=1

step() { printf '\n=== %s\n' "$*"; }

if [ $run_static = 1 ]; then
  step "ansible-doc for every plugin"
  bash scripts/check-docs.sh

  step "ansible-lint (production profile)"
  ansible-lint --profile production --offline -q

  step "ansible-test sanity"
  tree=$(bash scripts/collection-tree.sh "${TMPDIR:-/tmp}/netscale-multinic-sanity")
  (cd "$tree" && PATH="$here/.cache/sanity-venv/bin:$PATH" ansible-test sanity --python 3.11 --requirements --color no \
     2>&1 | grep -v '^WARNING: Location' | grep -Ev '^(Looking in|Collecting|Downloading|Installing|Successfully|Processing|  Attempting|    Found|    Uninstalling|      Successfully|     ━)')
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { echo "ansible-test sanity failed ($rc)"; exit "$rc"; }

  step "collection build, galaxy-importer and install"
  bash scripts/check-build.sh
fi

step "pytest"
targets=(tests/unit tests/integration)
molecule_tests=tests/e2e/rollout/test_molecule_rollout.py
[ $run_e2e = 1 ] && targets+=(tests/e2e --deselect "$molecule_tests")
# the slowest tests are listed at the end (where CI time goes)
python -m pytest --durations=15 "${targets[@]}"
if [ $run_e2e = 1 ]; then
  step "pytest: the Molecule scenarios, two at a time"
  # Each scenario builds its own lab fabric (own node names, namespaces, cgroups, work dir), so two run side
  # by side; they run after everything else, when the lab image and the sidecar wheels are already cached.
  # (Timing-sensitive datapath tests never run beside them.)
  python -m pytest -p xdist -n 2 --dist load --durations=5 "$molecule_tests"
fi
