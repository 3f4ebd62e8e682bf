# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: eda_journal
type: notification
short_description: Records the outcome of a playbook that the netscale.multinic rulebook started
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - A playbook started by the C(netscale.multinic.remediate) rulebook (C(run_playbook)) gets the extra vars
    C(netscale_eda_request) and C(netscale_eda_journal). This callback appends to that journal a C(run) record
    C(started) when the first play starts and C(succeeded) or C(failed) (with the failed and unreachable
    hosts and the first failed task's host, name and message, or when the run reached no host at all) at the end,
    so a failed drain is recorded with its reason, never lost (ansible-rulebook itself only logs it).
  - Without those extra vars (a playbook run by hand) it does nothing.
  - The collection's ansible.cfg enables it in C(callbacks_enabled), beside C(netscale.multinic.fabric_lease). Do
    not replace that list with C(ANSIBLE_CALLBACKS_ENABLED) for the rulebook; without C(fabric_lease) a drain that
    fails keeps the fabric's lease.
requirements:
  - enable in configuration
"""

from ansible.plugins.callback import CallbackBase

try:
    from ansible_collections.netscale.multinic.plugins.module_utils.remediate import eda_journal as _journal
except ImportError:  # pragma: no cover - the collection is always importable where its callback runs
    _journal = None


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "netscale.multinic.eda_journal"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super(CallbackModule, self).__init__(display=display, options=options)
        self.target = None
        self.playbook = None
        self.first_failure = None

    def v2_playbook_on_start(self, playbook):
        self.playbook = getattr(playbook, "_file_name", None)

    def v2_playbook_on_play_start(self, play):
        if self.target is not None or _journal is None:
            return
        extra = play.get_variable_manager().extra_vars or {}
        req, path = extra.get("netscale_eda_request"), extra.get("netscale_eda_journal")
        if not req or not path:
            self.target = False
            return
        case = extra.get("drain_case")
        snap = extra.get("case_snapshot_case")
        if case is None and isinstance(snap, dict):
            # the snapshot playbook (case_snapshot.yml) gets the whole case, as a case event or bare
            case = (snap.get("case") if isinstance(snap.get("case"), dict) else snap).get("id")
        self.target = {"request": str(req), "journal": str(path), "case": case}
        self._record("started", "")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        """Keep the first failed task (not one whose errors are ignored): its message is why the run failed, e.g.
        the fabric lease's refusal naming the holder, which no journal records otherwise."""
        if not self.target or ignore_errors or self.first_failure is not None:
            return
        res = getattr(result, "_result", None) or {}
        host = getattr(getattr(result, "_host", None), "name", None) or "?"
        task = getattr(result, "task_name", None) or getattr(getattr(result, "_task", None), "name", None) or "?"
        msg = res.get("msg") or res.get("stderr") or res.get("reason") or ""
        text = " ".join(str(msg).split())
        self.first_failure = "%s, task %r: %s" % (host, task, text[:600] + ("..." if len(text) > 600 else ""))

    def v2_playbook_on_stats(self, stats):
        if not self.target:
            return
        failed = sorted(h for h, n in stats.failures.items() if n)
        dark = sorted(h for h, n in stats.dark.items() if n)
        if failed or dark:
            detail = "failed hosts: %s; unreachable hosts: %s" % (", ".join(failed) or "-", ", ".join(dark) or "-")
            if self.first_failure:
                detail += "; first failure: %s" % self.first_failure
            self._record("failed", detail)
        elif not stats.processed:
            # every play skipped ("no hosts matched"): nothing was decided or changed, which is not a success
            self._record("failed", "ran on no host: the --limit matched none (ansible-rulebook passes the rulebook's "
                                   "hosts as --limit; they must include localhost, where the decisions run)")
        else:
            self._record("succeeded", "ok on %d host(s)" % len(stats.processed))

    def _record(self, status, detail):
        try:
            _journal.append(self.target["journal"], {
                "type": "run", "request": self.target["request"], "case": self.target["case"], "status": status,
                "playbook": self.playbook, "detail": detail})
        except OSError as exc:
            self._display.warning("netscale.multinic.eda_journal: cannot append to %s: %s" % (
                self.target["journal"], exc))
