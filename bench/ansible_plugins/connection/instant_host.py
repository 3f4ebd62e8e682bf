# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host that answers at once: the connection of bench/controller_cost.py (never shipped).

Every module Ansible sends (pipelined: one exec_command with the module on stdin) "runs" in no time and
returns ``{"changed": false, "ping": "pong"}``; nothing runs anywhere. The controller still does all its
own work for each host and task: the worker fork, templating, the module payload (AnsiballZ), result
parsing and the callbacks. That is what this bench measures.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: instant_host
short_description: a benchmark host that answers every module at once (bench only)
description:
  - Returns a fixed successful module result for every pipelined module; transfers nothing.
author:
  - netscale network engineering (@netscale)
"""

from ansible.plugins.connection import ConnectionBase

RESULT = b'{"changed": false, "ping": "pong", "invocation": {"module_args": {}}}'


class Connection(ConnectionBase):
    transport = "instant_host"
    has_pipelining = True

    def _connect(self):
        self._connected = True
        return self

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        return 0, RESULT, b""

    def put_file(self, in_path, out_path):
        raise NotImplementedError("instant_host transfers no file: run with pipelining")

    def fetch_file(self, in_path, out_path):
        raise NotImplementedError("instant_host transfers no file")

    def close(self):
        self._connected = False
