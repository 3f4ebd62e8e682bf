# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lab and test tooling of the netscale.multinic checkout. NOT shipped in the collection build.

Shared by ``tests/e2e`` and ``bench`` (both import ``labkit.<module>`` with the repository root on
``sys.path``; ``python -m pytest`` from the root puts it there):

* :mod:`labkit.host_programs`: a signpost only; the bundler of the programs that run on hosts is build
  tooling, ``scripts/build-host-programs.py``;
* :mod:`labkit.dp_harness`, :mod:`labkit.dp_core_cli`: the host-datapath namespace lab (prefix mnd);
* :mod:`labkit.mnv_harness`: the VipInjector sidecar lab (prefix mnv).

Module names stay unique across ``tests/`` and ``labkit/`` (pytest's rootdir import mode once let two
``harness.py`` files shadow each other).
"""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, ".build")


def ensure_collection_importable():
    """Make the checkout importable as ``ansible_collections.netscale.multinic`` (as tests/conftest.py
    does): ``.build/ansible_collections/netscale/multinic`` links to the checkout."""
    link = os.path.join(BUILD, "ansible_collections", "netscale", "multinic")
    if not os.path.lexists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(REPO, link)
    if BUILD not in sys.path:
        sys.path.insert(0, BUILD)
