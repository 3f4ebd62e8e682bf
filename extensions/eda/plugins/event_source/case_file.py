# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""netscale.multinic.case_file: monitoring cases from the correlation's JSON-lines file, decided and journaled.

A thin plugin: the decisions (case -> action, modes, one action per case, the pre-queue budget) and the
journal are the core's (plugins/module_utils/remediate/actions.py and eda_journal.py)."""

import asyncio
import os
import sys
from typing import Any

DOCUMENTATION = r"""
---
short_description: Monitoring cases of netscale.multinic, decided (auto, approve, report) and journaled.
description:
  - Tails the JSON-lines file the correlation writes (one C({"case": {...}}) object per line), across
    rotation and truncation; a restart resumes at the saved offset (no old case is replayed).
  - Maps each case to its action (nic, host, tor, uplink/spine -> drain; zone, agent -> report only),
    applies the mode and the pre-queue budget, journals every decision in C(state_dir/journal.jsonl) and
    puts one event C({"netscale": {"dispatch": "drain" | "report", ...}}) per decision on the queue.
    Repeated events of a case put nothing (one action per case).
  - A closed case whose drain was queued puts an C(undrain) event in mode C(auto) (the undrain playbook then
    waits for the element's clean probe window); in C(approve) and C(report) it is reported with the command.
  - In mode C(approve) a drain waits in C(state_dir/pending/) until C(playbooks/eda_approve.yml) approves it.
  - The C(open) event of a case also puts one C(snapshot) event (before its drain or report), in every mode, once
    per case (C(updated) and C(closed) events never do): the rulebook runs C(playbooks/case_snapshot.yml), which
    changes nothing on a device. O(snapshot=false) turns it off.
  - A file C(state_dir/mode) (auto, approve or report) overrides O(mode) while present, without a restart.
options:
  path:
    description: The case file (JSON lines).
    type: str
    required: true
  state_dir:
    description: Journal, offset, pending and approved requests.
    type: str
    required: true
  report_root:
    description:
      - The reports directory the fabric's rollouts and drains share, absolute (the drain journal is
        C(<report_root>/drain), the fabric lease C(<report_root>/journal/leases)). The rulebook passes it to every
        drain and undrain, because ansible-rulebook runs a playbook from a temporary copy of its directory; the
        source refuses to start without it. Shown in C(state_dir/status.json).
    type: str
    required: true
  mode:
    description: C(auto), C(approve) or C(report).
    type: str
    default: report
  budget:
    description: Pre-queue budget, C(max_auto_drains_per_zone) (default 3) and C(rate_window) seconds (3600).
    type: dict
    default: {}
  undrain_retry:
    description: A closed case's undrain that failed (its clean window refused it) is queued again after
      C(interval) seconds (300), at most C(attempts) times (12; 0 never).
    type: dict
    default: {}
  snapshot:
    description: Queue a snapshot of the devices of each case on its C(open) event.
    type: bool
    default: true
  start_at:
    description: Where to start without a saved offset, C(end) (skip old cases) or C(beginning).
    type: str
    default: end
  poll_interval:
    description: Seconds between two reads of the case file and the approvals.
    type: float
    default: 0.5
"""

EXAMPLES = r"""
- netscale.multinic.case_file:
    path: /var/lib/netscale-monitor/cases.jsonl
    state_dir: /var/lib/netscale-eda
    report_root: /opt/netscale-multinic/reports
    mode: approve
    budget:
      max_auto_drains_per_zone: 3
      rate_window: 3600
"""


def _core():
    # ansible-rulebook runs this file with runpy: make the collection importable as
    # ansible_collections.netscale.multinic from the tree this file is in (.../ansible_collections/netscale/
    # multinic/extensions/eda/plugins/event_source/case_file.py).
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *([os.pardir] * 7)))
    if os.path.isdir(os.path.join(root, "ansible_collections")) and root not in sys.path:
        sys.path.insert(0, root)
    from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal
    return eda_journal


def _flag(value):
    """A boolean option as a rulebook variable may give it (true, "true", "false", "no", 0...)."""
    if isinstance(value, str):
        if value.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if value.strip().lower() in ("0", "false", "no", "off", ""):
            return False
        raise ValueError("netscale.multinic.case_file: snapshot=%r is not a boolean. Fix: true or false "
                         "(netscale_eda_snapshot)." % value)
    return bool(value)


async def main(queue: asyncio.Queue, args: dict[str, Any]) -> None:
    """Tail the case file; put one event per decision (await queue.put: an event storm waits, never drops)."""
    eda_journal = _core()
    for key in ("path", "state_dir"):
        if not args.get(key):
            raise ValueError("netscale.multinic.case_file: %s is required. Fix: set it in the rulebook's source "
                             "(netscale_eda_case_file / netscale_eda_state_dir)." % key)
    report_root = eda_journal.check_report_root(args.get("report_root"))
    state_dir = args["state_dir"]
    os.makedirs(state_dir, exist_ok=True)
    dispatcher = eda_journal.Dispatcher(state_dir, args.get("mode") or "report", args.get("budget") or {},
                                        undrain_retry=args.get("undrain_retry") or {},
                                        snapshot=_flag(args.get("snapshot", True)))
    tail = eda_journal.CaseTail(args["path"], os.path.join(state_dir, eda_journal.OFFSET),
                                args.get("start_at") or "end")
    interval = float(args.get("poll_interval", 0.5))
    dispatcher.write_status(args["path"], os.getpid(), report_root)
    try:
        while True:
            dispatcher.refresh_mode()
            for line, position in tail.poll():
                for event in dispatcher.handle_line(line):
                    await queue.put(event)
                tail.commit(position)
            for event in dispatcher.poll_approvals():
                await queue.put(event)
            for event in dispatcher.poll_undrain_retries():
                await queue.put(event)
            await asyncio.sleep(interval)
    finally:
        tail.close()


if __name__ == "__main__":
    # python case_file.py CASES STATE_DIR REPORT_ROOT [MODE]: print the events instead of queueing them

    class _PrintQueue(asyncio.Queue):
        async def put(self, item):
            print(item)

    asyncio.run(main(_PrintQueue(), {"path": sys.argv[1], "state_dir": sys.argv[2], "report_root": sys.argv[3],
                                     "mode": sys.argv[4] if len(sys.argv) > 4 else "report"}))
