# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ToR (and spine) BGP policy model: plan -> structured config -> per-platform text.

Pure Python, no Ansible imports. The model is computed from the planner's ``rack_data(rack)`` and
``spine_data(spine)`` plus a small set of policy options (``DEFAULT_OPTIONS``); templates under
``templates/tor/<template set>/`` turn it into device text. A platform is a capability entry in
``PLATFORMS`` plus a template set; adding one is adding both.

One module per output section, as AVD's eos_designs builds one structured-config key per module:
``options`` (defaults and validation), ``platforms``, ``prefix_lists``, ``route_maps``, ``bgp``
(host peer-groups and uplinks), ``interfaces``, ``ecmp``; ``tor`` and ``spine`` assemble them,
``render`` turns the result into text, ``fabric`` does every device of a plan.
"""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.error import TorPolicyError
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.fabric import build_fabric_configs, fib_size, redact
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.names import safe_name
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.options import (
    DEFAULT_OPTIONS, DESIGN_MIN_PATHS, HOP_MODES, MD5_MODES, resolve_options,
)
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.platforms import PLATFORMS
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.render import TEMPLATE_DIR, render
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.spine import spine_structured_config
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.tor import tor_structured_config, tor_uplinks_config
from ansible_collections.netscale.multinic.plugins.module_utils.writing import REDACTED as SECRET_PLACEHOLDER

__all__ = [
    "DEFAULT_OPTIONS", "DESIGN_MIN_PATHS", "HOP_MODES", "MD5_MODES", "PLATFORMS", "SECRET_PLACEHOLDER", "TEMPLATE_DIR",
    "TorPolicyError", "build_fabric_configs", "fib_size", "redact", "render", "resolve_options", "safe_name",
    "spine_structured_config", "tor_structured_config", "tor_uplinks_config",
]
