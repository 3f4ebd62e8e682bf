# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: fabric_lease
type: notification
short_description: Heartbeat and end-of-playbook release of the fabric lease taken by netscale.multinic.fabric_lease
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Once a M(netscale.multinic.fabric_lease) task has taken (or joined) a fabric's lease, renews this job's
    heartbeat in the lease file every quarter of the lease's C(ttl) from a thread of the C(ansible-playbook)
    process, so a controller on another host (an AWX execution node) sees the holder alive exactly as long as
    this process runs.
  - At the end of the playbook (C(v2_playbook_on_stats)), gives back every lease the playbook still holds - also
    when a play failed and the playbook's own release task never ran.
  - Cancel (SIGTERM from AWX, SIGINT/Ctrl-C) - gives the lease back too, then hands the signal on to the handler
    before it (the rollout_progress callback's, which records the cancel in the journal, or Ansible's, which stops
    the workers). A controller killed with SIGKILL runs no callback, so its lease stays, stale, until a run with
    C(-e rollout_break_lease=true) breaks it.
  - Enabled in this collection's C(ansible.cfg) (C(callbacks_enabled)); where C(ANSIBLE_CALLBACKS_ENABLED)
    replaces that list, name it there too. Without it a failed job leaves a stale lease behind.
requirements:
  - enable in configuration
"""

import os
import signal
import threading

from ansible.plugins.callback import CallbackBase

try:
    from ansible_collections.netscale.multinic.plugins.module_utils.rollout import lease as _lease
except ImportError:  # pragma: no cover - the collection is always importable where its callback runs
    _lease = None

_ACTIONS = ("netscale.multinic.fabric_lease", "fabric_lease")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "netscale.multinic.fabric_lease"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super(CallbackModule, self).__init__(display=display, options=options)
        self.held = {}   # (dir, fabric, member) -> ttl
        self._stop = threading.Event()
        self._thread = None
        self._failed = False
        self._previous = {}

    def _beat(self):
        while not self._stop.is_set():
            wait = min([max(2.0, ttl / 4.0) for ttl in self.held.values()] or [30.0])
            if self._stop.wait(wait):
                return
            for (d, fabric, member) in list(self.held):
                try:
                    if not _lease.renew(d, fabric, member):
                        self.held.pop((d, fabric, member), None)
                except Exception as exc:  # pylint: disable=broad-except  # a heartbeat must never stop the job
                    self._display.warning("fabric lease heartbeat %s/%s: %s" % (d, fabric, exc))

    def v2_runner_on_ok(self, result):
        if _lease is None or result._task.action not in _ACTIONS:
            return
        r = result._result
        key = (r.get("lease_dir"), r.get("fabric"), r.get("member"))
        if not all(key):
            return
        if r.get("taken"):
            self.held[key] = float(r.get("ttl") or _lease.DEFAULT_TTL)
            if self._thread is None and os.getpid() == (r.get("pid") or os.getpid()):
                self._thread = threading.Thread(target=self._beat, name="fabric-lease-heartbeat", daemon=True)
                self._thread.start()
                for sig in (signal.SIGTERM, signal.SIGINT):
                    try:
                        self._previous[sig] = signal.signal(sig, self._on_signal)
                    except (ValueError, OSError):  # not the main thread
                        pass
        elif r.get("action") in ("released", "left", "not_held"):
            self.held.pop(key, None)

    def _release_all(self, reason):
        self._stop.set()
        for (d, fabric, member) in list(self.held):
            try:
                res = _lease.release(d, fabric, member, reason=reason)
                self._display.display("fabric lease %s: %s by %s (%s)" % (fabric, res["action"], member, reason))
            except Exception as exc:  # pylint: disable=broad-except
                self._display.warning("fabric lease %s: release failed (%s); the lease stays and will be stale"
                                      % (fabric, exc))
        self.held.clear()

    def _on_signal(self, signum, frame):
        self._release_all("cancelled by %s" % signal.Signals(signum).name)
        prev = self._previous.get(signum)
        signal.signal(signum, prev if prev is not None else signal.SIG_DFL)
        if callable(prev):
            prev(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt()
        else:
            os.kill(os.getpid(), signum)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._failed = True

    def v2_runner_on_unreachable(self, result):
        self._failed = True

    def v2_playbook_on_stats(self, stats):
        failed = self._failed or any(stats.failures.values()) or any(stats.dark.values())
        self._release_all("playbook ended, %s" % ("failed" if failed else "ok"))
