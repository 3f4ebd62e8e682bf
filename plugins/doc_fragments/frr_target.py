# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    """Where vtysh is and how it reaches the FRR daemons (modules that talk to FRR)."""

    DOCUMENTATION = r"""
options:
  vty_socket:
    description: Directory of the daemons' vty sockets when not the default.
    type: path
  bindir:
    description: Directory holding vtysh.
    type: path
    default: /usr/bin
"""

    # modules that apply a config with frr-reload.py (frr_config, spine_drain): frr_apply.RELOAD_ARGUMENT_SPEC
    RELOAD = r"""
options:
  rundir:
    description: Scratch directory for frr-reload.py (its temporary files hold the applied lines).
    type: path
    default: /var/run/frr
  reload_script:
    description: Path of frr-reload.py.
    type: path
    default: /usr/lib/frr/frr-reload.py
  python:
    description: Python interpreter for frr-reload.py.
    type: path
    default: /usr/bin/python3
"""
