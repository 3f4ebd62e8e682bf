# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    """Where the host datapath keeps its state (the datapath module writes it, the facts module reads it)."""

    DOCUMENTATION = r"""
options:
  state_dir:
    description: Directory of the datapath state file (previous sysctl values, what was created).
    type: path
    default: /var/lib/netscale-multinic
  bpffs_root:
    description: bpffs mount point (M(netscale.multinic.multinic_datapath) mounts it when absent).
    type: path
    default: /sys/fs/bpf
attributes:
  platform:
    support: full
    platforms: posix
    description: Linux hosts.
"""
