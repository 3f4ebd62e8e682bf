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

if [ $run_e2e = 1 ]; then
  # Two lanes (CI time; docs/performance.md "CI"):
  #   background: the Molecule scenarios and the scoped-rollout lab test, two processes side by side, each on
  #     its own lab fabric (own node names, namespaces, cgroups, work dir);
  #   foreground: static checks, unit tests and the ToR policy lab tests (own namespaces, no traffic measured),
  #     then, once the background lane has finished, the other lab tests, alone on the machine: the
  #     timing-sensitive ones (datapath, stack, sidecars, gates) and tests/e2e/lab, whose "the lab left
  #     nothing behind" checks look at every lab fabric's namespaces, links and cgroups.
  step "lab image and sidecar wheel (shared caches, filled once before the lanes start)"
  python -c 'import sys; sys.path.insert(0, ".build")
from ansible_collections.netscale.multinic.plugins.module_utils.lab import image
print("lab image:", image.ensure_image()[0])'
  exabgp=$(sed -n 's/^vipinjector_exabgp_version: *"\(.*\)"/\1/p' roles/vipinjector/defaults/main.yml)
  python -m pip download -q --disable-pip-version-check --only-binary=:all: --dest .cache/vipinjector-wheels "exabgp==$exabgp"

  lanes=$(mktemp -d "${TMPDIR:-/tmp}/netscale-test-lanes.XXXXXX")
  molecule_tests=tests/e2e/rollout/test_molecule_rollout.py
  scoped_test=tests/e2e/rollout/test_scoped_rollout.py
  step "background lane started: Molecule scenarios + scoped rollout (logs under $lanes)"
  # background jobs start with SIGINT ignored; pytest gets its handler back so that a SIGINT runs the
  # tests' finalizers (labs torn down, processes killed by PID)
  bg_pytest() { python -c 'import signal, sys, pytest
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(pytest.main(sys.argv[1:]))' "$@"; }
  bg_pytest --durations=5 "$molecule_tests::test_molecule_canary_failure" "$scoped_test" > "$lanes/b1.log" 2>&1 &
  b1=$!
  bg_pytest --durations=5 "$molecule_tests::test_molecule_default_rollout" "$molecule_tests::test_molecule_nic_failure" \
    > "$lanes/b2.log" 2>&1 &
  b2=$!
  # a cancelled job (SIGINT/SIGTERM) or an error in the foreground stops the background lane, with its clean-up
  trap 'kill -INT "$b1" "$b2" 2>/dev/null || true; wait "$b1" "$b2" 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
fi

rc_static=0
if [ $run_static = 1 ]; then
  bash scripts/check-static.sh || rc_static=$?
fi

step "pytest: unit tests and the ToR policy lab tests (beside the background lane)"
targets=(tests/unit tests/integration)
[ $run_e2e = 1 ] && targets+=(tests/e2e/tor tests/e2e/rollout/test_ee_awx.py)
rc_a1=0
python -m pytest --durations=10 "${targets[@]}" || rc_a1=$?

rc_b1=0 rc_b2=0 rc_a2=0
if [ $run_e2e = 1 ]; then
  step "waiting for the background lane"
  wait "$b1" || rc_b1=$?
  wait "$b2" || rc_b2=$?
  trap - EXIT
  step "background lane: canary_failure + scoped rollout (rc $rc_b1)"
  cat "$lanes/b1.log"
  step "background lane: default + nic_failure (rc $rc_b2)"
  cat "$lanes/b2.log"
  step "pytest: the timing-sensitive and the lab-wide lab tests (alone on the machine)"
  python -m pytest --durations=15 tests/e2e --ignore=tests/e2e/tor \
    --ignore=tests/e2e/rollout/test_ee_awx.py --ignore="$molecule_tests" --ignore="$scoped_test" || rc_a2=$?
fi
step "summary: static $rc_static, unit+untimed e2e $rc_a1, background $rc_b1/$rc_b2, timed e2e $rc_a2"
for rc in $rc_static $rc_a1 $rc_b1 $rc_b2 $rc_a2; do
  [ "$rc" = 0 ] || exit 1
done
