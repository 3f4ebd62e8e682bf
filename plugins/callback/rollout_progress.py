# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_progress
type: notification
short_description: Wave progress and health-gate verdicts of a netscale.multinic rollout
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Prints one line per rollout event next to the normal output - run start with the wave plan, each wave's
    start and end (status, hosts, seconds), every health gate's verdict with its key numbers and the offending
    host/NIC/prefix, snapshots and rollbacks, and where the report is.
  - It reads the results of M(netscale.multinic.health_gate) and M(netscale.multinic.rollout_report) tasks, and the
    report events of M(netscale.multinic.rollout_journal) tasks (its O(netscale.multinic.rollout_journal#module:report))
    and of M(netscale.multinic.rollout_decide) tasks that record them (its
    O(netscale.multinic.rollout_decide#module:record_to)); other tasks are ignored.
  - Enable it with C(callbacks_enabled = netscale.multinic.rollout_progress) in ansible.cfg or
    C(ANSIBLE_CALLBACKS_ENABLED=netscale.multinic.rollout_progress).
  - Wave groups in one step - when a M(netscale.multinic.rollout_journal) C(op=open) returns the wave plan, it adds
    the plan's hosts to group C(rollout_targets) (in wave order) and its ToRs to C(rollout_tors) in Ansible's
    inventory with one reconciliation. An C(ansible.builtin.add_host) loop reconciles the whole inventory after
    every host it adds, quadratic in a region's hosts (minutes at 30K). C(playbooks/rollout.yml) keeps that loop
    as the fallback when this callback is not enabled; it then finds the groups filled and loops over nothing.
  - Cancel (SIGTERM from AWX, Ctrl-C) - once a M(netscale.multinic.rollout_journal) task has named this job's
    journal file, a SIGTERM/SIGINT first records a C(cancelled) event (best effort, in C(<job>.cancel.json) beside
    the job's file, so the job's own file is never written by two processes), then hands the signal on to
    Ansible's own handler. The journal itself is written before every step, so it is truthful without this.
requirements:
  - enable in configuration
options:
  show_passed_gates:
    description: Also print gates that passed (failed and inconclusive ones are always printed).
    type: bool
    default: true
    env:
      - name: ROLLOUT_PROGRESS_SHOW_PASSED
    ini:
      - section: rollout_progress
        key: show_passed_gates
"""

import os
import signal
import time

from ansible.plugins.callback import CallbackBase

try:
    from ansible_collections.netscale.multinic.plugins.module_utils.rollout import journal as _journal
except ImportError:  # pragma: no cover - the collection is always importable where its callback runs
    _journal = None

_GATE_ACTIONS = ("netscale.multinic.health_gate", "health_gate")
_REPORT_ACTIONS = ("netscale.multinic.rollout_report", "rollout_report")
_JOURNAL_ACTIONS = ("netscale.multinic.rollout_journal", "rollout_journal")
_DECIDE_ACTIONS = ("netscale.multinic.rollout_decide", "rollout_decide")
_KEYS = {
    "bgp_sessions": ("established", "expected"),
    "ecmp_width": ("at_width", "task_routes", "min_width_ratio"),
    "spine_task_routes": ("task_routes", "aggregates_missing"),
    "nic_shares": ("max_deviation", "worst", "directions"),
    "probe_loss": ("loss_percent", "transmitted"),
    "sidecars": ("healthy", "slots"),
    "nics_in_service": ("in_service", "nics", "bfd_up"),
}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "netscale.multinic.rollout_progress"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super(CallbackModule, self).__init__(display=display, options=options)
        self.t0 = time.time()
        self.lines = []
        self.journal_path = None
        self._previous = {}
        self._inventory = None

    def _say(self, text, color=None):
        line = "[rollout %7.1fs] %s" % (time.time() - self.t0, text)
        self.lines.append(line)
        self._display.display(line, color=color)

    def v2_playbook_on_play_start(self, play):
        # Ansible has no public handle on the running inventory for a plugin; the play's variable manager holds
        # it. Without it (another Ansible) the playbook's add_host fallback fills the groups.
        self._inventory = getattr(play.get_variable_manager(), "_inventory", None)

    def v2_runner_on_ok(self, result):
        self._handle(result, failed=False)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._handle(result, failed=True)

    def _handle(self, result, failed):
        action = getattr(result._task, "action", "")
        res = result._result or {}
        if action in _JOURNAL_ACTIONS and not failed and res.get("path", "").endswith(".json"):
            self._watch_journal(res["path"])
            plan = res.get("plan")
            if isinstance(plan, dict) and self._inventory is not None:
                members = (("rollout_targets", plan.get("order")), ("rollout_tors", plan.get("tors")))
                filled = fill_groups(self._inventory, members)
                if filled:
                    self._say("groups %s filled in one step (%s)" % (", ".join(filled), ", ".join(
                        "%d in %s" % (len(names), group) for group, names in members if group in filled)))
            # report events the journal task recorded after its records
            for ev in (res.get("report") or {}).get("events") or []:
                self._report(ev)
        if action in _DECIDE_ACTIONS:   # a decision that recorded its report events (a stop fails the task)
            for ev in ((res.get("recorded") or {}).get("report") or {}).get("events") or []:
                self._report(ev)
        if action in _GATE_ACTIONS and "verdict" in res:
            self._gate(result, res)
        elif action in _REPORT_ACTIONS and not failed and "event" in res:
            self._report(res)

    def _gate(self, result, res):
        verdict = res.get("verdict")
        try:
            show_passed = self.get_option("show_passed_gates")
        except KeyError:
            show_passed = True
        if verdict == "pass" and not show_passed:
            return
        values = res.get("values") or {}
        keys = _KEYS.get(res.get("gate", "").split("@")[0], ())
        nums = ", ".join("%s=%s" % (k, values[k]) for k in keys if k in values)
        det = values.get("detail") or []
        offender = ""
        if det and verdict != "pass":
            d = det[0]
            offender = " first: %s" % (" ".join("%s=%s" % (k, d[k]) for k in sorted(d))
                                       if isinstance(d, dict) else d)
        color = {"pass": "green", "fail": "red"}.get(verdict, "yellow")
        self._say("gate %-28s on %-12s %-12s %s (%ss)%s" % (
            res.get("gate"), result._host.get_name(), verdict.upper(), nums, res.get("seconds"), offender), color)

    def _report(self, res):
        ev, s = res.get("event"), res.get("summary") or {}
        if ev == "start":
            self._say("run %s: waves %s -> report %s%s" % (
                s.get("id"), s.get("waves"), s.get("dir"),
                "; rollout %s, journal %s" % (s["rollout_id"], s.get("journal")) if s.get("rollout_id") else ""), "cyan")
        elif ev == "tor":
            self._say("ToR %s (rack %s): changed=%s gates=%s"
                      % (s.get("name"), s.get("rack"), s.get("changed"), s.get("gates")), "cyan")
        elif ev == "wave":
            color = {"passed": "green", "running": "cyan"}.get(s.get("status"), "red")
            verb = "start" if s.get("status") == "running" else "end"
            self._say("wave %s %s: %s, hosts %s%s" % (s.get("name"), verb, s.get("status"), s.get("hosts"),
                                                      " (%ss)" % s["seconds"] if s.get("seconds") is not None
                                                      else ""), color)
        elif ev == "snapshot":
            self._say("snapshot of %s saved to %s" % (s.get("node"), s.get("path")), "yellow")
        elif ev == "finish":
            color = "green" if s.get("status") in ("passed", "check") else "red"
            self._say("run %s %s: report %s" % (s.get("id"), s.get("status"), s.get("markdown")), color)

    def _watch_journal(self, path):
        if self.journal_path == path or _journal is None:
            return
        first = self.journal_path is None
        self.journal_path = path
        if first:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    self._previous[sig] = signal.signal(sig, self._on_signal)
                except (ValueError, OSError):  # not the main thread
                    pass

    def _on_signal(self, signum, frame):
        try:
            record_cancel(self.journal_path, signal.Signals(signum).name)
            self._display.display("rollout: %s - cancel recorded in the journal (%s); next: resume with the same "
                                  "-e rollout_id, or playbooks/rollback.yml -e rollout_id=..."
                                  % (signal.Signals(signum).name, os.path.dirname(self.journal_path)), color="red")
        except Exception:  # best effort: the journal is already truthful (written before every step)
            pass
        prev = self._previous.get(signum)
        signal.signal(signum, prev if prev is not None else signal.SIG_DFL)
        if callable(prev):
            prev(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt()
        else:
            os.kill(os.getpid(), signum)

    def v2_playbook_on_stats(self, stats):
        if self.lines:
            self._display.display("rollout: %d progress events, %.1fs" % (len(self.lines), time.time() - self.t0))


def fill_groups(inventory, members):
    """Add existing hosts to groups, ``members``: ``((group, [host names in order]), ...)``, and reconcile the
    inventory once. A group is filled only when every one of its hosts is in the inventory and the group is
    empty (otherwise the playbook's add_host fallback does it, as it always did). Returns the groups filled."""
    filled = []
    for group, names in members:
        names = list(names or [])
        if not names or any(n not in inventory.hosts for n in names):
            continue
        if group in inventory.groups and inventory.groups[group].hosts:
            continue
        inventory.add_group(group)
        for name in names:
            inventory.add_host(name, group=group)
        filled.append(group)
    if filled:
        inventory.reconcile_inventory()
    return filled


def record_cancel(job_file, signame, now=None):
    """Write ``<job>.cancel.json`` beside the job's journal file: its own job document, ordered right after
    the job (same start time, key ``<job>.cancel``), holding one ``cancelled`` event."""
    doc = _journal.load_job(job_file)
    cancel = _journal.new_job(doc["rollout_id"], doc["job"] + ".cancel", now=doc["started"])
    _journal.append(cancel, "event", {"kind": "cancelled", "signal": signame}, now=now)
    path = os.path.join(os.path.dirname(job_file), doc["job"] + ".cancel.json")
    _journal.save(path, cancel)
    return path
