# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The import rule of docs/architecture.md, checked by parsing (ast) every Python file of the tree.

Layers, bottom up: the core (``plugins/module_utils/`` without ``lab/``), the lab add-on
(``plugins/module_utils/lab/``), the thin plugins (modules, action, inventory, filter, callback,
doc fragments), roles and playbooks; beside them the programs that run on hosts (``roles/*/files``)
and the checkout's own tooling (``bench/``, ``labkit/``, ``tests/``). A layer imports only from
layers below it. Each test lists every violation with its file and line.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COLLECTION = "ansible_collections.netscale.multinic"
MODULE_UTILS = COLLECTION + ".plugins.module_utils"
LAB = MODULE_UTILS + ".lab"
BENCH = COLLECTION + ".bench"
PLUGIN_DIRS = ("modules", "action", "inventory", "filter", "callback", "connection", "lookup", "doc_fragments")
# Imports of Ansible from module_utils that are allowed (file -> module). None today: module_utils
# also runs on managed hosts and in the checkout's tools, where only the standard library is certain.
ANSIBLE_IMPORT_EXCEPTIONS = {}
# Names the core may not read: the lab's topology section and its lab_* keys. Add-ons' keys may be
# declared in the topology schema (rows of a tuple) but never read by the core.
LAB_KEY_RE = re.compile(r"^lab(_\w+)?$")


def python_files(*parts):
    top = os.path.join(REPO, *parts)
    found = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "out"))
        for name in sorted(files):
            if name.endswith(".py"):
                found.append(os.path.join(folder, name))
    return found


def rel(path):
    return os.path.relpath(path, REPO)


def dotted_name(path):
    """The module name a file of the collection has under ansible_collections.netscale.multinic."""
    parts = rel(path)[:-3].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([COLLECTION] + parts)


def parse(path):
    with open(path, "rb") as handle:
        return ast.parse(handle.read(), filename=path)


def imports(path, tree=None):
    """(line, absolute module name) of every import in ``path``; ``from X import y`` yields X and X.y
    (y may be a module). Relative imports are resolved against the file's place in the collection."""
    tree = tree or parse(path)
    package = dotted_name(path)
    if not path.endswith("__init__.py"):
        package = package.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.append((node.lineno, module))
            found.extend((node.lineno, "%s.%s" % (module, alias.name)) for alias in node.names if alias.name != "*")
    return found


def relative_imports(tree):
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]


def under(module, prefix):
    return module == prefix or module.startswith(prefix + ".")


def core_files():
    return [p for p in python_files("plugins", "module_utils")
            if not rel(p).startswith(os.path.join("plugins", "module_utils", "lab") + os.sep)]


def lab_files():
    return python_files("plugins", "module_utils", "lab")


def plugin_files():
    return [p for d in PLUGIN_DIRS for p in python_files("plugins", d)]


def report(violations):
    return "\n".join(sorted(set(violations)))


def test_the_layers_exist():
    assert core_files() and lab_files() and plugin_files()
    assert python_files("bench")


def test_module_utils_never_import_ansible():
    bad = []
    for path in core_files() + lab_files():
        allowed = ANSIBLE_IMPORT_EXCEPTIONS.get(rel(path), ())
        for line, module in imports(path):
            if under(module, "ansible") and module not in allowed:
                bad.append("%s:%d imports %s (module_utils has no Ansible imports)" % (rel(path), line, module))
    assert not bad, report(bad)


def test_module_utils_import_only_module_utils_of_the_collection():
    bad = []
    for path in core_files() + lab_files():
        for line, module in imports(path):
            if under(module, COLLECTION) and not under(module, MODULE_UTILS):
                bad.append("%s:%d imports %s (outside plugins/module_utils)" % (rel(path), line, module))
            if module.split(".")[0] in ("tests", "bench", "labkit"):
                bad.append("%s:%d imports %s (checkout tooling)" % (rel(path), line, module))
    assert not bad, report(bad)


def test_core_never_imports_the_lab():
    bad = ["%s:%d imports %s (the lab depends on the core, never the reverse)" % (rel(path), line, module)
           for path in core_files() for line, module in imports(path) if under(module, LAB)]
    assert not bad, report(bad)


def _lab_key_reads(tree):
    """Lines where the core reads the lab's part of the topology: an attribute ``.lab``, or the string
    ``lab`` / ``lab_*`` anywhere but as a row of a declaration tuple (the topology schema)."""
    declared = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple):
            declared.update(id(elt) for elt in node.elts)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "lab":
            lines.append((node.lineno, ".lab"))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and LAB_KEY_RE.match(node.value)
              and id(node) not in declared):
            lines.append((node.lineno, repr(node.value)))
    return sorted(lines)


def test_core_reads_no_lab_key():
    bad = ["%s:%d reads the lab key %s (lab additions come through the lab add-on's hook)" % (rel(path), line, what)
           for path in core_files() for line, what in _lab_key_reads(parse(path))]
    assert not bad, report(bad)


def test_plugins_import_module_utils_and_no_checkout_tooling():
    bad = []
    for path in plugin_files():
        for line, module in imports(path):
            top = module.split(".")[0]
            # an action plugin may read its same-named module file (documentation, argument spec)
            own_module = COLLECTION + ".plugins.modules." + os.path.basename(path)[:-3]
            if under(module, COLLECTION) and not under(module, MODULE_UTILS) and not (
                    rel(path).startswith(os.path.join("plugins", "action") + os.sep) and under(module, own_module)):
                bad.append("%s:%d imports %s (plugins import module_utils, not each other)" % (rel(path), line, module))
            elif top in ("tests", "bench", "labkit"):
                bad.append("%s:%d imports %s (checkout tooling)" % (rel(path), line, module))
    assert not bad, report(bad)


def _is_third_party_or_stdlib(top):
    if top in sys.stdlib_module_names or top == "__future__":
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    where = spec.origin if spec.origin not in (None, "namespace") else next(iter(spec.submodule_search_locations or []), "")
    where = os.path.realpath(where or "")
    # the project's own virtualenv lives inside the checkout: what it holds is installed, not ours
    installed = tuple(os.path.realpath(os.path.join(REPO, d)) + os.sep for d in (".venv", ".cache"))
    return where.startswith(installed) or not where.startswith(os.path.realpath(REPO) + os.sep)


def _sys_path_into_tests(tree):
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("insert", "append")
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "path"):
            if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and "tests" in n.value.split("/")
                   for arg in node.args for n in ast.walk(arg)):
                lines.append(node.lineno)
    return lines


def test_bench_imports_only_the_collection_and_its_own_helpers():
    bad = []
    for path in python_files("bench"):
        tree = parse(path)
        for line in relative_imports(tree):
            bad.append("%s:%d relative import (write it absolute, through %s)" % (rel(path), line, BENCH))
        for line in _sys_path_into_tests(tree):
            bad.append("%s:%d puts tests/ on sys.path" % (rel(path), line))
        for line, module in imports(path, tree):
            top = module.split(".")[0]
            if under(module, COLLECTION):
                # the bare collection package: probing that it is importable
                if module != COLLECTION and not (under(module, MODULE_UTILS) or under(module, BENCH)):
                    bad.append("%s:%d imports %s (only module_utils and bench itself)" % (rel(path), line, module))
            elif top == "labkit":
                continue
            elif top in ("tests", "bench") or not _is_third_party_or_stdlib(top):
                bad.append("%s:%d imports %s (not the collection, labkit, the standard library or an "
                           "installed package)" % (rel(path), line, module))
    assert not bad, report(bad)


def _host_programs():
    files = []
    for role in sorted(os.listdir(os.path.join(REPO, "roles"))):
        top = os.path.join(REPO, "roles", role, "files")
        for folder, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                if name.endswith(".py"):
                    files.append(path)
                elif not os.path.islink(path):
                    with open(path, "rb") as handle:
                        if re.match(rb"#!.*python", handle.readline()):
                            files.append(path)
    return files


def test_host_programs_are_standalone():
    """Programs the roles copy to hosts run on the host's python3 alone: real files (no links into
    plugins/), standard library and their sibling files only."""
    bad = []
    for path in _host_programs():
        if os.path.islink(path):
            bad.append("%s is a symlink to %s (ship a file)" % (rel(path), os.readlink(path)))
            continue
        siblings = set(n[:-3] for n in os.listdir(os.path.dirname(path)) if n.endswith(".py"))
        for line, module in imports(path):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__" or top in siblings:
                continue
            bad.append("%s:%d imports %s (hosts have only python3's standard library)" % (rel(path), line, module))
    assert not bad, report(bad)


@pytest.mark.parametrize("source, expected", [
    ("from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import alive\n",
     ["ansible_collections.netscale.multinic.plugins.module_utils.lab.proc",
      "ansible_collections.netscale.multinic.plugins.module_utils.lab.proc.alive"]),
    ("from . import stats\n", ["ansible_collections.netscale.multinic.bench.headline",
                               "ansible_collections.netscale.multinic.bench.headline.stats"]),
])
def test_imports_resolves_absolute_and_relative(tmp_path, monkeypatch, source, expected):
    path = os.path.join(REPO, "bench", "headline", "report.py")
    monkeypatch.setattr(sys.modules[__name__], "parse", lambda _p: ast.parse(source))
    assert [m for _l, m in imports(path)] == expected


def test_lab_key_rule_sees_reads_not_declarations():
    tree = ast.parse('SCHEMA = [("lab", "add-on", False, "doc")]\n'
                     'x = topo.lab\ny = data.get("lab_state_dir")\nz = getattr(topo, "lab", None)\n')
    assert [what for _line, what in _lab_key_reads(tree)] == [".lab", "'lab_state_dir'", "'lab'"]
