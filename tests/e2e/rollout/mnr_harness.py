# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Live harness for the health gates (prefix ``mnr``): the VipInjector agent's harness (real FRR ToR
with the tor_policy-rendered config, real ExaBGP per slot with the real helper), with every kernel
object, temp dir and process named with ``mnr`` instead of ``mnv``.

Only naming and the bridged ToR ports differ from ``labkit/mnv_harness.py`` (its ``prefix`` and
``bridge`` arguments); everything else, cleanup included, is that harness.
"""

from __future__ import annotations

import os

from labkit.mnv_harness import Harness


class MnrHarness(Harness):
    """Same topology as the VipInjector harness, named ``mnr``, the ToR ports always bridges."""

    def __init__(self, host="lab-r1-h2", slots=(1,), ttl_mode="gtsm", md5=None, tag=None):
        super().__init__(host, slots, ttl_mode=ttl_mode, md5=md5, tag=tag, prefix="mnr", bridge=True)

    def vtysh_argv(self):
        return ["vtysh", "--vty_socket", self.frr_dir]

    def runtime_dir(self):
        return os.path.join(self.tmp, "run")
