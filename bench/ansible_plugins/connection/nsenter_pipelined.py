# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""community.docker.nsenter with pipelining: the connection of bench/lab_connection.py (never shipped).

The lab reaches its nodes over community.docker.nsenter, which declares no pipelining: every module run creates a
remote temporary directory, copies the AnsiballZ file with ``tee``, makes it executable, runs it and removes the
directory, each an ``nsenter`` + ``sh`` spawn. Its exec_command already hands ``in_data`` to the command's stdin,
so pipelining (the module on python's stdin, one spawn) needs only the flag and the option; this bench measures what
that would save per module run.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: nsenter_pipelined
short_description: community.docker.nsenter with pipelining (bench only)
description:
  - The lab's node connection with pipelining on; for bench/lab_connection.py.
author:
  - netscale network engineering (@netscale)
options:
  nsenter_pid:
    description: PID whose namespaces are entered.
    type: int
    default: 1
    vars:
      - name: ansible_nsenter_pid
  pipelining:
    description: Pipeline modules (the module on the interpreter's stdin, no remote files).
    type: bool
    default: true
    vars:
      - name: ansible_pipelining
"""

from ansible.plugins.loader import connection_loader

# the lab's connection as Ansible resolves it (community.docker, from the installed ansible bundle)
_NsenterConnection = connection_loader.get("community.docker.nsenter", class_only=True)


class Connection(_NsenterConnection):  # pylint: disable=too-few-public-methods
    transport = "nsenter_pipelined"
    has_pipelining = True
