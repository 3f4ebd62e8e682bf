# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health-gate filters (a host's verdict); documentation in the same-named .yml files."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.netscale.multinic.plugins.module_utils.gates import engine


def gates_verdict(results, check_mode=False):
    results = list(results or [])
    bad = [r for r in results if not isinstance(r, dict)]
    if bad:
        raise AnsibleFilterError("netscale.multinic.gates_verdict: every gate result must be a mapping with a verdict "
                                 "(got %r); pass the health_gate results" % (bad[0],))
    return engine.host_verdict(results, check_mode=bool(check_mode))


class FilterModule(object):
    def filters(self):
        return {"gates_verdict": gates_verdict}
