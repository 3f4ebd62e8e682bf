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

# The static checks, then the unit and integration tests (two pytest processes, no lab).
checks() {
  if [ $run_static = 1 ]; then
    bash scripts/check-static.sh
  fi
  step "pytest: unit and integration tests, two processes (no lab)"
  python -m pytest -q -n 2 tests/unit tests/integration
}

if [ $run_e2e = 0 ]; then
  checks
else
  # The checks run beside the first lab group, in a session of their own at idle priority (SCHED_IDLE: they get a
  # core only when the lab tests leave it idle, and those leave about one of the two idle); the lab tests run
  # whatever the checks find, and the job fails at the end if either failed.
  # The logs of this run, replacing the last run's (one lab per machine, so one run at a time): before, every run
  # left a checks log and a lanes directory under /tmp for good.
  logs="$here/.cache/test-logs"
  rm -rf "$logs"
  mkdir -p "$logs/lanes"
  checks_log="$logs/checks.log"
  step "static checks and unit tests at idle priority, beside the first lab group (log: $checks_log, shown below)"
  export -f checks step
  export run_static
  setsid -w chrt --idle 0 bash -c 'set -euo pipefail; checks' > "$checks_log" 2>&1 &
  checks_pid=$!
  # a cancelled job stops the checks too (their session, so ansible-test's and pytest's children go as well)
  trap 'kill -TERM -- "-$checks_pid" 2>/dev/null || true; wait "$checks_pid" 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
  # The lab tests in groups (scripts/ci_groups.py says which test is where, and why); assignments, so that set -e
  # stops here if the script fails (an empty list would make pytest collect everything)
  alone=$(python scripts/ci_groups.py alone)
  side_by_side="lane1 lane2 lane3 beside"
  declare -A paths
  for group in $side_by_side; do
    paths[$group]=$(python scripts/ci_groups.py "$group")
    [ -n "${paths[$group]}" ] || { echo "scripts/ci_groups.py: group $group is empty" >&2; exit 2; }
  done
  step "pytest: the lab tests that time traffic, BFD or the datapath, alone on the machine (but for the idle checks)"
  # the slowest tests are listed at the end (where CI time goes)
  rc_alone=0
  # shellcheck disable=SC2086   # a group's paths, one word each
  python -m pytest --durations=15 $alone || rc_alone=$?
  rc_checks=0
  wait "$checks_pid" || rc_checks=$?
  trap - EXIT
  step "static checks and unit tests (rc $rc_checks)"
  cat "$checks_log"
  [ "$rc_checks" = 0 ] && [ "$rc_alone" = 0 ] || { echo "failed: checks rc $rc_checks, first lab group rc $rc_alone"; exit 1; }

  # Then four pytest processes side by side, each on lab fabrics and monitoring ports of its own: the Molecule
  # lanes and the scoped rollout at nice 10 (they saturate both cores with Ansible; the scoped rollout in a lane of
  # its own, so that no lane ends with it running alone on a half-idle machine; the live ToR policy tests after it,
  # where they wait without holding up the first group), and beside them, at normal
  # priority, the lab tests that check decisions (monitoring cases, drains, rulebooks, the lease); those mostly
  # wait, and the niceness keeps their agents' probes and timers from queueing behind the lanes' Ansible. The
  # lanes' labs are built from the lab image and the sidecar wheel cached by the first group.
  lanes="$logs/lanes"
  step "pytest: the Molecule lanes and the scoped rollout (nice 10) beside the lab tests that check decisions (logs under $lanes)"
  # background jobs start with SIGINT ignored; pytest gets its handler back so that a SIGINT runs the
  # tests' finalizers (labs torn down, processes killed by PID)
  bg_pytest() { local niceness=$1; shift; nice -n "$niceness" python -c 'import signal, sys, pytest
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(pytest.main(sys.argv[1:]))' "$@"; }
  declare -A pids rcs
  for group in $side_by_side; do
    niceness=10 durations=5
    [ "$group" = beside ] && niceness=0 durations=10
    # shellcheck disable=SC2086   # a group's paths, one word each
    bg_pytest "$niceness" --durations="$durations" ${paths[$group]} > "$lanes/$group.log" 2>&1 &
    pids[$group]=$!
  done
  # a cancelled job (SIGINT/SIGTERM) stops all four, with their clean-up
  trap 'kill -INT "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
  for group in $side_by_side; do
    rcs[$group]=0
    wait "${pids[$group]}" || rcs[$group]=$?
  done
  trap - EXIT
  failed=0
  for group in $side_by_side; do
    step "$group: ${paths[$group]} (rc ${rcs[$group]})"
    cat "$lanes/$group.log"
    [ "${rcs[$group]}" = 0 ] || failed=1
  done
  [ "$failed" = 0 ] || exit 1
fi
