#!/usr/bin/env bash
# The collection's remediation rulebook as ONE long-running process where there is no systemd (the lab, a
# container), started and stopped by PID (docs/remediation-eda.md; with systemd use the unit shown there).
#   eda-rulebook.sh start  --cases FILE --state DIR --inventory INV [--mode report|approve|auto]
#                          [--drain-playbook PATH] [--budget '{"max_auto_drains_per_zone": 3}']
#                          [--reports DIR]   the reports directory the fabric's rollouts and drains share (drain
#                                            journal DIR/drain, fabric lease DIR/journal/leases): <checkout>/reports
#                          [--set '{"netscale_eda_clean_window": 60}']   more rulebook variables (a JSON object of
#                                            netscale_eda_* names, docs/remediation-eda.md), merged over the above
#   eda-rulebook.sh stop   --state DIR        (SIGTERM to the process group it started, by its PID file)
#   eda-rulebook.sh status --state DIR        (running or not, and the journal summary as JSON)
# Switch modes without a restart: echo approve > DIR/mode. Approve a request: playbooks/eda_approve.yml.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}; shift || true
cases= state= mode=report inventory= drain="$here/playbooks/drain.yml" budget='{}' reports="$here/reports" more='{}'
while [ $# -gt 0 ]; do
  case "$1" in
    --cases) cases=$2; shift 2 ;;
    --state) state=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --inventory) inventory=$2; shift 2 ;;
    --drain-playbook) drain=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --reports) reports=$2; shift 2 ;;
    --set) more=$2; shift 2 ;;
    *) echo "eda-rulebook.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$state" ] || { echo "eda-rulebook.sh: --state DIR is required" >&2; exit 2; }
state=$(realpath -m "$state")
pidfile="$state/rulebook.pid"
py="$here/.venv/bin/python"
running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case "$cmd" in
  start)
    [ -n "$cases" ] || { echo "eda-rulebook.sh start: --cases FILE is required" >&2; exit 2; }
    # ansible-rulebook refuses a run_playbook rulebook without one; it copies it for every run: give the
    # inventory DIRECTORY (e.g. inventories/lab) so that its group_vars come along
    [ -n "$inventory" ] || { echo "eda-rulebook.sh start: --inventory INV is required (the drain playbook's inventory, e.g. inventories/lab)" >&2; exit 2; }
    case "$mode" in auto|approve|report) ;; *) echo "eda-rulebook.sh: --mode $mode: use auto, approve or report" >&2; exit 2 ;; esac
    if running; then echo "eda-rulebook.sh: already running (pid $(cat "$pidfile"))" >&2; exit 1; fi
    mkdir -p "$state"
    rm -f "$state/status.json"
    CASES=$(realpath -m "$cases") STATE="$state" MODE="$mode" DRAIN=$(realpath -m "$drain") BUDGET="$budget" REPORTS=$(realpath -m "$reports") MORE="$more" "$py" -c '
import json, os, sys
v = {"netscale_eda_case_file": os.environ["CASES"], "netscale_eda_state_dir": os.environ["STATE"],
     "netscale_eda_mode": os.environ["MODE"], "netscale_eda_drain_playbook": os.environ["DRAIN"],
     "netscale_eda_budget": json.loads(os.environ["BUDGET"]), "netscale_eda_report_root": os.environ["REPORTS"]}
try:
    more = json.loads(os.environ["MORE"])
except ValueError as e:
    sys.exit("eda-rulebook.sh: --set %s is not JSON (%s). Fix: a JSON object, e.g. {\"netscale_eda_clean_window\": 60}"
             % (os.environ["MORE"], e))
bad = [k for k in (more if isinstance(more, dict) else [None]) if not str(k).startswith("netscale_eda_")]
if bad:
    sys.exit("eda-rulebook.sh: --set %s: %s is not a rulebook variable. Fix: a JSON object of netscale_eda_* "
             "variables (docs/remediation-eda.md)" % (os.environ["MORE"], bad))
v.update(more)
json.dump(v, open(os.path.join(os.environ["STATE"], "vars.yml"), "w"), indent=1)'
    args=(-r netscale.multinic.remediate --vars "$state/vars.yml")
    args+=(-i "$(realpath -m "$inventory")")
    # the checkout's ansible.cfg finds the collection and enables the callbacks: eda_journal records each playbook's
    # outcome, fabric_lease gives the lease back when a drain fails (ANSIBLE_CALLBACKS_ENABLED would replace that list)
    cd "$here"
    PATH="$here/.venv/bin:$PATH" ANSIBLE_CONFIG="$here/ansible.cfg" PYTHONUNBUFFERED=1 \
      setsid "$here/.venv/bin/ansible-rulebook" "${args[@]}" >"$state/rulebook.log" 2>&1 </dev/null &
    echo $! > "$pidfile"
    t0=$(date +%s.%N)
    for _ in $(seq 1 240); do
      [ -f "$state/status.json" ] && break
      running || { echo "eda-rulebook.sh: ansible-rulebook exited; see $state/rulebook.log" >&2; tail -20 "$state/rulebook.log" >&2; rm -f "$pidfile"; exit 1; }
      sleep 0.5
    done
    [ -f "$state/status.json" ] || { echo "eda-rulebook.sh: the source did not start in 120 s; see $state/rulebook.log" >&2; exit 1; }
    printf 'eda-rulebook: pid %s, mode %s, tailing %s (%.1f s to start)\n' "$(cat "$pidfile")" "$mode" "$cases" \
      "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{print a-b}')"
    ;;
  stop)
    if ! running; then echo "eda-rulebook.sh: not running"; rm -f "$pidfile"; exit 0; fi
    pid=$(cat "$pidfile")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"; fi
    rm -f "$pidfile"
    echo "eda-rulebook: stopped pid $pid"
    ;;
  status)
    if running; then echo "eda-rulebook: running (pid $(cat "$pidfile"))"; else echo "eda-rulebook: not running"; fi
    PYTHONPATH="$here/.build" STATE="$state" "$py" -c '
import json, os
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal as ej
print(json.dumps(ej.summary(ej.read(os.path.join(os.environ["STATE"], ej.JOURNAL))), indent=1, sort_keys=True))'
    ;;
  *) echo "usage: eda-rulebook.sh start|stop|status --state DIR [...]" >&2; exit 2 ;;
esac
