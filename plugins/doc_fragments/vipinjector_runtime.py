# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    """Where the VipInjector sidecars publish their state (status JSON and metrics per task slot)."""

    DOCUMENTATION = r"""
options:
  runtime_dir:
    description: Runtime directory of the VipInjector instances (status and metrics files per task slot).
    type: path
    default: /run/netscale-vipinjector
"""
