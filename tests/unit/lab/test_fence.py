# -*- coding: utf-8 -*-
"""The lab depends on the core, never the reverse: no core module imports the lab package."""
import ast
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
LAB_PACKAGE = "ansible_collections.netscale.multinic.plugins.module_utils.lab"


def _imports(path):
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            for alias in node.names:
                yield "%s.%s" % (node.module, alias.name)


def test_core_never_imports_the_lab():
    offenders = []
    for folder, _dirs, files in os.walk(MODULE_UTILS):
        if os.path.relpath(folder, MODULE_UTILS).split(os.sep)[0] == "lab":
            continue
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            for module in _imports(path):
                if module == LAB_PACKAGE or module.startswith(LAB_PACKAGE + "."):
                    offenders.append("%s imports %s" % (os.path.relpath(path, ROOT), module))
    assert not offenders


def test_core_topology_has_no_lab_attribute():
    from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan
    plan = load_plan(os.path.join(ROOT, "inventories", "lab", "fabric.yml"))
    assert not hasattr(plan.topo, "lab")
    assert set(plan.topo.addons) == {"lab"}
