# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's verdict over its gate results (gates/engine.host_verdict, the gates_verdict filter the health_gates
role publishes it with): the same as the role's former Jinja for any mix of verdicts, in and out of check mode."""

from __future__ import annotations

import jinja2
import pytest
from hypothesis import given, strategies as st

from ansible.errors import AnsibleFilterError

from ansible_collections.netscale.multinic.plugins.filter.gates import gates_verdict
from ansible_collections.netscale.multinic.plugins.module_utils.gates import engine

# What roles/health_gates/tasks/main.yml computed in set_fact before the verdict moved into the core.
FORMER_JINJA = (
    "{{ 'fail' if results | selectattr('verdict', 'eq', 'fail') | list | length > 0"
    " else ('inconclusive' if results | selectattr('verdict', 'eq', 'inconclusive') | list | length > 0"
    " else ('skipped' if check_mode and results | rejectattr('verdict', 'eq', 'skipped') | list | length == 0"
    " else ('inconclusive' if results | rejectattr('verdict', 'eq', 'skipped') | list | length == 0"
    " else 'pass'))) }}")
VERDICTS = st.sampled_from(["pass", "fail", "inconclusive", "skipped"])


@given(st.lists(VERDICTS, max_size=8), st.booleans())
def test_host_verdict_is_the_former_jinja(verdicts, check_mode):
    results = [{"gate": "g%d" % i, "verdict": v} for i, v in enumerate(verdicts)]
    former = jinja2.Environment().from_string(FORMER_JINJA).render(results=results, check_mode=check_mode)
    assert engine.host_verdict(results, check_mode) == former
    assert gates_verdict(results, check_mode) == former


def test_cases_by_name():
    assert engine.host_verdict([]) == "inconclusive"                       # no evidence is no pass
    assert engine.host_verdict([], check_mode=True) == "skipped"
    assert engine.host_verdict([{"verdict": "skipped"}]) == "inconclusive"
    assert engine.host_verdict([{"verdict": "pass"}, {"verdict": "inconclusive"}]) == "inconclusive"
    assert engine.host_verdict([{"verdict": "inconclusive"}, {"verdict": "fail"}], check_mode=True) == "fail"
    assert engine.host_verdict([{"verdict": "pass"}, {"verdict": "skipped"}]) == "pass"


def test_filter_refuses_what_is_not_a_gate_result():
    with pytest.raises(AnsibleFilterError, match="every gate result must be a mapping"):
        gates_verdict(["pass"])
