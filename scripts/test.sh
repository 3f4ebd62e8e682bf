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
  bash scripts/check-static.sh
fi

step "pytest: unit and integration tests, two processes (no lab)"
python -m pytest -q -n 2 tests/unit tests/integration

molecule_tests=tests/e2e/rollout/test_molecule_rollout.py
scoped_test=tests/e2e/rollout/test_scoped_rollout.py
slices_test=tests/e2e/rollout/test_awx_slices.py   # own fabric (mnas): in the default + nic_failure lane
if [ $run_e2e = 1 ]; then
  step "pytest: the lab tests, one at a time"
  # the slowest tests are listed at the end (where CI time goes)
  python -m pytest --durations=15 tests/e2e --ignore="$molecule_tests" --ignore="$scoped_test" --ignore="$slices_test"
fi

if [ $run_e2e = 1 ]; then
  # The Molecule scenarios and the scoped-rollout lab test last, as two pytest processes side by side (each on
  # its own lab fabric: own node names, namespaces, cgroups, work dir), when the lab image and the sidecar wheel
  # are cached. Never beside the other lab tests: the timing-sensitive ones measure traffic, and tests/e2e/lab
  # checks that no lab of any fabric is left. (Running them beside the static checks and the unit tests was
  # tried: on 2 cores every lane slowed down and the canary_failure scenario passed 15 minutes.)
  lanes=$(mktemp -d "${TMPDIR:-/tmp}/netscale-test-lanes.XXXXXX")
  step "pytest: the Molecule scenarios and the scoped rollout, two processes at a time (logs under $lanes)"
  # background jobs start with SIGINT ignored; pytest gets its handler back so that a SIGINT runs the
  # tests' finalizers (labs torn down, processes killed by PID)
  bg_pytest() { python -c 'import signal, sys, pytest
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(pytest.main(sys.argv[1:]))' "$@"; }
  bg_pytest --durations=5 "$molecule_tests::test_molecule_canary_failure" "$scoped_test" > "$lanes/b1.log" 2>&1 &
  b1=$!
  bg_pytest --durations=5 "$molecule_tests::test_molecule_default_rollout" "$molecule_tests::test_molecule_nic_failure" \
    "$slices_test" > "$lanes/b2.log" 2>&1 &
  b2=$!
  # a cancelled job (SIGINT/SIGTERM) stops both, with their clean-up
  trap 'kill -INT "$b1" "$b2" 2>/dev/null || true; wait "$b1" "$b2" 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
  rc_b1=0 rc_b2=0
  wait "$b1" || rc_b1=$?
  wait "$b2" || rc_b2=$?
  trap - EXIT
  step "canary_failure + scoped rollout (rc $rc_b1)"
  cat "$lanes/b1.log"
  step "default + nic_failure + AWX slices (rc $rc_b2)"
  cat "$lanes/b2.log"
  [ "$rc_b1" = 0 ] && [ "$rc_b2" = 0 ] || exit 1
fi
