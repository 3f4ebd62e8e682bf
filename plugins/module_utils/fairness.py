# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How evenly traffic spreads over NICs (used by the lab's probes and the benchmarks)."""

from __future__ import annotations


def jain(values):
    """Jain's fairness index of non-negative values: 1 = all equal, 1/n = everything on one;
    None when there is nothing to compare (no values, or all zero)."""
    vals = [float(v) for v in values]
    sq = sum(v * v for v in vals)
    if not vals or sq == 0:
        return None
    return round(sum(vals) ** 2 / (len(vals) * sq), 4)
