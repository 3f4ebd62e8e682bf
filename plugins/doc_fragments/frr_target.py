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
