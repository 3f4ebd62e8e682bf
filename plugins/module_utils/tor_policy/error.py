# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The error of the ToR policy: bad input, with every problem found."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError


class TorPolicyError(MultinicError):
    """Bad policy input. Carries every problem found."""

    def __init__(self, problems, device=None):
        self.problems = list(problems)
        head = "invalid ToR policy input"
        if device:
            head += " for %s" % device
        lines = ["%s (%d problem%s):" % (head, len(self.problems), "" if len(self.problems) == 1 else "s")]
        lines.extend("  - %s" % p for p in self.problems)
        super(TorPolicyError, self).__init__("\n".join(lines))
