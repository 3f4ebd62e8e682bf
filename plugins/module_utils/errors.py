# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Error types of the pure-Python core. No Ansible imports: importable anywhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class InputProblem:
    """One problem in the user's input: where it is, what was found, how to fix it."""

    path: str
    value: Any
    message: str
    fix: str

    def __str__(self):
        where = self.path or "(top level)"
        return "%s: %s (value: %r). Fix: %s" % (where, self.message, self.value, self.fix)

    def as_dict(self):
        return {"path": self.path, "value": self.value, "message": self.message, "fix": self.fix}


class MultinicError(Exception):
    """Base class for every error the collection reports to the user.

    A subclass may also derive from a builtin (``ValueError``...) where callers catch that."""


class TopologyError(MultinicError):
    """The topology file is invalid. Carries every problem found, not only the first."""

    def __init__(self, problems, source=None):
        self.problems = list(problems)
        self.source = source
        head = "invalid fabric topology"
        if source:
            head += " in %s" % source
        lines = ["%s (%d problem%s):" % (head, len(self.problems), "" if len(self.problems) == 1 else "s")]
        lines.extend("  - %s" % p for p in self.problems)
        super(TopologyError, self).__init__("\n".join(lines))


class PlanChangedError(MultinicError):
    """A re-plan would change allocations that are already on disk."""

    def __init__(self, changes, limit=50):
        self.changes = list(changes)
        shown = self.changes[:limit]
        lines = [
            "re-plan would change %d existing allocation%s; nothing was written. "
            "Review the list; if the renumbering is intended, re-run with allow_renumber=true "
            "(this moves live task IPs and BGP sessions)." % (len(self.changes), "" if len(self.changes) == 1 else "s")
        ]
        lines.extend("  - %s" % c for c in shown)
        if len(self.changes) > limit:
            lines.append("  ... and %d more" % (len(self.changes) - limit))
        super(PlanChangedError, self).__init__("\n".join(lines))
