# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    """Options, attributes and notes shared by the modules that act on a running lab node."""

    DOCUMENTATION = r"""
options:
  topology:
    description: Path of the lab's fabric topology file.
    type: path
    required: true
  state_root:
    description: Directory of the lab state files.
    type: path
    default: /run/netscale-multinic/lab
attributes:
  diff_mode:
    support: none
    description: Nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Runs on the machine that hosts the lab (connection local, root).
notes:
  - Runs on the lab machine as root (connection local).
"""
