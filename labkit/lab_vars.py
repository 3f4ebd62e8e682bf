# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The settings every lab fabric shares, linked into the group_vars of a fabric a test or a bench writes at run
time (the fabrics kept in the repository link the same files in git)."""

from __future__ import annotations

import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(REPO, "inventories", "lab", "group_vars", "all")
# 300 ms x 3 detection timers, for fabrics whose tests check decisions, not receiver stalls (the file says why)
RELAXED_TIMERS = os.path.join(REPO, "inventories", "lab", "shared", "relaxed_timers.yml")


def link_group_vars(folder, relaxed_timers=True, monitoring_port=None, monitoring=True):
    """``folder``/group_vars/all with links to the lab's lab.yml and vault.yml (MD5 keys, BFD, consent flags)
    and, unless ``relaxed_timers`` is false, to the relaxed detection timers, read after lab.yml; with
    ``monitoring_port``, a monitoring.yml giving the lab that port block (a lab that runs beside others); with
    ``monitoring`` false, that file turns the lab's monitoring off (lab.yml turns it on), for a fabric whose tests
    never read it: its Prometheus and what runs with it cost CPU for nothing. Returns the group_vars/all
    path; links already there are kept."""
    gv = os.path.join(str(folder), "group_vars", "all")
    os.makedirs(gv, exist_ok=True)
    targets = [os.path.join(SHARED, name) for name in ("lab.yml", "vault.yml")]
    if relaxed_timers:
        targets.append(RELAXED_TIMERS)
    for target in targets:
        link = os.path.join(gv, os.path.basename(target))
        if not os.path.lexists(link):
            os.symlink(target, link)
    lines = [] if monitoring else ["lab_monitoring: false"]
    if monitoring_port is not None:
        lines.append("lab_monitoring_port: %d" % monitoring_port)
    if lines:
        with open(os.path.join(gv, "monitoring.yml"), "w") as f:
            f.write("".join(x + "\n" for x in lines))
    return gv
