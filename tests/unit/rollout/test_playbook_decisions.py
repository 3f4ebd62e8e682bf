# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's decisions are not computed in playbook Jinja (docs/architecture.md "From the user to the
verdict"): in ``playbooks/``, the templates of ``set_fact`` values (facts ``__rollout_*`` or named for a budget,
verdict or unreachable/lost hosts), of task and play ``vars`` named so, and of ``assert`` conditions hold no
arithmetic, no comparison and no ``int``/``round``/``length`` filter, nor do the status, verdict and
unreachable fields a ``rollout_journal``/``rollout_report`` task records (its ``data`` and ``report`` events).
Such decisions belong to ``module_utils/rollout/decide.py`` (via ``netscale.multinic.rollout_decide``). Guards (``when``) may compare.
The preflight (the first play of rollout.yml) has no Jinja loop over hosts. Each failure names file:line."""

from __future__ import annotations

import os
import re

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOKS = os.path.join(REPO, "playbooks")
DECISION_NAME = re.compile(r"^__rollout_|budget|verdict|unreachable|lost|over_", re.I)
# an assert is a decision when its condition reads such a fact (input checks like "rollout_id given" are guards)
DECISION_REF = re.compile(r"\b__rollout_\w+|\w*(?:budget|verdict|unreachable)\w*", re.I)
RECORDERS = ("netscale.multinic.rollout_journal", "netscale.multinic.rollout_report")
RECORDED = re.compile(r"^(status|verdict|over_budget|unreachable|max_unreachable|lost)$")
_STRINGS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_EXPR = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
FORBIDDEN = [
    (re.compile(r"==|!=|<=|>=|(?<![-=])>(?!-)|<"), "comparison"),
    (re.compile(r"(?<=[\w)\]\s])\s*(?:\*\*|//|[*/%])\s*(?=[\w(\[])"), "arithmetic"),
    (re.compile(r"(?<=[\w)\]])\s+[-+]\s+(?=[\w(\[])"), "arithmetic"),
    (re.compile(r"\|\s*(?:int|round|length|count|sum|max|min)\b"), "number filter"),
]


class Loader(yaml.SafeLoader):
    """YAML with line numbers on mappings."""


def _construct_mapping(loader, node):
    mapping = loader.construct_mapping(node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
Loader.add_constructor("!vault", lambda loader, node: "")


def playbook_files():
    out = []
    for folder, _dirs, files in os.walk(PLAYBOOKS):
        out += [os.path.join(folder, f) for f in sorted(files) if f.endswith((".yml", ".yaml"))]
    return sorted(out)


def expressions(value):
    """Jinja expressions inside a template value (strings of nested lists/dicts), string literals blanked."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k != "__line__":
                yield from expressions(v)
    elif isinstance(value, list):
        for v in value:
            yield from expressions(v)
    elif isinstance(value, str):
        for m in _EXPR.finditer(value):
            yield _STRINGS.sub("''", m.group(1) or m.group(2) or "")


def offences(text):
    return [why for expr in [text] for rx, why in FORBIDDEN if rx.search(expr)]


def tasks_of(node):
    """Every task (with blocks, rescue, always, handlers) of a play or task list."""
    for key in ("pre_tasks", "tasks", "post_tasks", "handlers", "block", "rescue", "always"):
        for task in node.get(key) or []:
            if isinstance(task, dict):
                yield task
                yield from tasks_of(task)


def findings(path, data):
    rel = os.path.relpath(path, REPO)
    found = []
    plays = data if isinstance(data, list) else []
    nodes = []
    for play in plays:
        if not isinstance(play, dict):
            continue
        if any(k in play for k in ("hosts", "import_playbook", "ansible.builtin.import_playbook")):
            nodes.append(play)
            nodes.extend(tasks_of(play))
        else:   # a task file
            nodes.append(play)
            nodes.extend(tasks_of(play))

    def check(line, what, value):
        for expr in expressions(value):
            for why in offences(expr):
                found.append("%s:%s: %s in %s: {{%s}}" % (rel, line, why, what, expr.strip()[:120]))

    for node in nodes:
        line = node.get("__line__")
        for name, value in (node.get("vars") or {}).items():
            if name != "__line__" and DECISION_NAME.search(name):
                check(line, "vars %s" % name, value)
        for key in ("set_fact", "ansible.builtin.set_fact"):
            for name, value in (node.get(key) or {}).items():
                if name not in ("__line__", "cacheable") and DECISION_NAME.search(name):
                    check(line, "set_fact %s" % name, value)
        # what the journal and the report record: a status or verdict comes from a module, never from Jinja
        for key in RECORDERS:
            args = node.get(key) or {}
            for data in [args.get("data")] + [e.get("data") for e in args.get("report") or [] if isinstance(e, dict)]:
                for name, value in (data or {}).items() if isinstance(data, dict) else []:
                    if name != "__line__" and RECORDED.search(name):
                        check(line, "%s data %s" % (key.rsplit(".", 1)[-1], name), value)
        for key in ("assert", "ansible.builtin.assert"):
            that = (node.get(key) or {}).get("that")
            that = [that] if isinstance(that, str) else (that or [])
            check(line, "assert", ["{{ %s }}" % t for t in that if DECISION_REF.search(_STRINGS.sub("''", str(t)))])
    return found


def load(path):
    with open(path) as f:
        return yaml.load(f, Loader=Loader)


def test_scanner_finds_what_it_is_for():
    bad = yaml.load("""
- hosts: all
  tasks:
    - name: budget in jinja
      ansible.builtin.set_fact:
        __rollout_budget: "{{ (spec[:-1] | float) * hosts | length / 100 }}"
        __rollout_over: "{{ lost | length > budget }}"
        rollout_id_note: "{{ a + b }}"
    - name: verdict
      ansible.builtin.set_fact:
        __rollout_wave_verdict: "{{ 'fail' if x == 'fail' else 'pass' }}"
    - name: assert
      ansible.builtin.assert:
        that: __rollout_lost | length > 3
""", Loader=Loader)
    got = findings(os.path.join(PLAYBOOKS, "x.yml"), bad)
    assert [g.split(": ")[1] for g in got] == ["arithmetic in set_fact __rollout_budget", "number filter in set_fact "
                                               "__rollout_budget", "comparison in set_fact __rollout_over",
                                               "number filter in set_fact __rollout_over",
                                               "comparison in set_fact __rollout_wave_verdict", "comparison in assert",
                                               "number filter in assert"]
    assert got[0].startswith("playbooks/x.yml:4: ")
    recorded = yaml.load("""
- hosts: all
  tasks:
    - netscale.multinic.rollout_journal:
        record: wave
        data: {status: "{{ 'fail' if lost | length > budget else 'pass' }}", name: w}
        report:
          - event: wave
            data: {over_budget: "{{ lost | length > 1 }}", hosts: "{{ a + b }}"}
""", Loader=Loader)
    assert [g.split(": ")[1] for g in findings(os.path.join(PLAYBOOKS, "z.yml"), recorded)] == [
        "comparison in rollout_journal data status", "number filter in rollout_journal data status",
        "comparison in rollout_journal data over_budget", "number filter in rollout_journal data over_budget"]
    fine = yaml.load("""
- hosts: all
  tasks:
    - ansible.builtin.set_fact:
        __rollout_host_error: "{{ 'deploy failed in ' ~ (name | default('?')) ~ ': ' ~ msg | truncate(300) }}"
        __rollout_wave_started: "{{ lookup('pipe', 'date +%s.%N') | float }}"
      when: __rollout_verdict.verdict == 'fail'
""", Loader=Loader)
    assert findings(os.path.join(PLAYBOOKS, "y.yml"), fine) == []


@pytest.mark.parametrize("path", playbook_files(), ids=lambda p: os.path.relpath(p, PLAYBOOKS))
def test_no_decision_computed_in_playbook_jinja(path):
    found = findings(path, load(path))
    assert not found, "decisions computed in Jinja (move them to module_utils/rollout/decide.py):\n" + "\n".join(found)


def test_preflight_has_no_jinja_loop_over_hosts():
    """Everything before the first ToR is touched scales with the inventory: no {% for %} in it."""
    path = os.path.join(PLAYBOOKS, "rollout.yml")
    text = open(path).read()
    plays = text.split("\n- name: ")
    preflight = "\n- name: ".join(plays[:3])   # preflight, ToRs and spines reachable
    assert "Rollout | ToR policy" not in preflight
    loops = [i + 1 for i, line in enumerate(preflight.splitlines()) if re.search(r"\{%-?\s*for\b", line)]
    assert not loops, "rollout.yml:%s: Jinja loop in the preflight" % loops
