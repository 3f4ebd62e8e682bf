# -*- coding: utf-8 -*-
"""Each action plugin takes its arguments from one spec that matches its documentation module."""
import importlib

import pytest
import yaml

BASE = "ansible_collections.netscale.multinic.plugins"


@pytest.mark.parametrize("name", ["fabric_plan", "lab_fabric", "tor_render"])
def test_action_arguments_match_the_documentation(name):
    action = importlib.import_module("%s.action.%s" % (BASE, name))
    docs = yaml.safe_load(importlib.import_module("%s.modules.%s" % (BASE, name)).DOCUMENTATION)["options"]
    spec = action.ARGUMENT_SPEC
    assert action.ActionModule._VALID_ARGS == frozenset(spec) == frozenset(docs)
    for option, entry in spec.items():
        documented = docs[option]
        assert entry.get("type") == documented.get("type"), option
        assert entry.get("default") == documented.get("default"), option
        assert bool(entry.get("required")) == bool(documented.get("required")), option
        assert entry.get("choices") == documented.get("choices"), option
