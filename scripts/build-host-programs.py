# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the programs that run on hosts from ``plugins/module_utils`` (one shipping convention).

Each program's logic lives in ``plugins/module_utils`` (importable, unit-tested); its entry point
is the ``main()`` of one module there. Hosts have no Ansible, so each program is shipped as one
self-contained file: this bundler embeds the entry module and every collection module it imports
(found by reading their imports), registers them under their usual
``ansible_collections.netscale.multinic.plugins.module_utils.*`` names at start, and calls
``main()`` (the way Ansible packs a module with its module_utils). The generated files are
committed in the roles' ``files/`` and copied by ``ansible.builtin.copy`` like any role file;
``tests/unit/datapath/test_host_programs.py`` fails when one is out of date.

Build tooling of the checkout (beside the other generators in ``scripts/``; it was
``labkit/host_programs.py``, which stays as a signpost until the next release). Regenerate after
editing a bundled module::

    .venv/bin/python scripts/build-host-programs.py          # rewrite the role files
    .venv/bin/python scripts/build-host-programs.py --check  # exit 1 when one is out of date
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "ansible_collections.netscale.multinic.plugins.module_utils"
MODULE_UTILS = os.path.join("plugins", "module_utils")


@dataclasses.dataclass(frozen=True)
class HostProgram:
    """One program that runs on hosts: where the role ships it from and which module it runs."""

    target: str   # the generated file, relative to the repository root
    entry: str    # module under module_utils whose main(argv=None) is the program
    summary: str  # first line of the generated file's docstring


PROGRAMS = (
    HostProgram(target="roles/vipinjector/files/vipinjector-helper",
                entry="vipinjector.sidecar",
                summary="VipInjector sidecar helper: ExaBGP's process-API helper for one task slot."),
    HostProgram(target="roles/host_datapath/files/netscale-multinic-watcher.py",
                entry="datapath.watcher",
                summary="netscale.multinic NIC watcher, with the host-local map sync of eBPF mode."),
    HostProgram(target="roles/fabric_monitor/files/netscale-fabric-monitor.py",
                entry="monitor.agent",
                summary="netscale.multinic fabric monitoring agent: probes per NIC, responder, passive signals."),
    HostProgram(target="roles/fabric_monitor/files/netscale-case-correlator.py",
                entry="monitor.live",
                summary="netscale.multinic live correlator: the agents' detection events in, the case file out."),
)


def _module_file(name, repo=REPO):
    """``vipinjector.guard`` -> (path of its file, whether it is a package)."""
    base = os.path.join(repo, MODULE_UTILS, *name.split("."))
    if os.path.isfile(base + ".py"):
        return base + ".py", False
    if os.path.isfile(os.path.join(base, "__init__.py")):
        return os.path.join(base, "__init__.py"), True
    return None, False


def _imported_modules(source, repo=REPO):
    """Names (relative to module_utils) of the collection modules ``source`` imports."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from PACKAGE.datapath import localmap`` imports a module, ``... import Name`` a name
            targets = [node.module] + ["%s.%s" % (node.module, alias.name) for alias in node.names]
        else:
            continue
        for target in targets:
            if target.startswith(PACKAGE + "."):
                name = target[len(PACKAGE) + 1:]
                if _module_file(name, repo)[0]:
                    found.add(name)
    return found


def bundled_modules(entry, repo=REPO):
    """The modules the program needs, each after the modules it imports, package files first."""
    order = []

    def visit(name, chain):
        if name in order:
            return
        if name in chain:
            raise ValueError("import cycle among bundled modules: %s" % " -> ".join(chain + (name,)))
        parts = name.split(".")
        for depth in range(1, len(parts)):
            package = ".".join(parts[:depth])
            if _module_file(package, repo)[1]:
                visit(package, chain + (name,))
        path, _is_package = _module_file(name, repo)
        with open(path) as handle:
            source = handle.read()
        for dependency in sorted(_imported_modules(source, repo)):
            visit(dependency, chain + (name,))
        order.append(name)

    visit(entry, ())
    return order


_LOADER = '''

def _load_bundled_modules():
    """Register the embedded modules under their collection names; returns the entry module."""
    import base64
    import types

    module = None
    for name, path, is_package, encoded in _MODULES:
        full_name = _PACKAGE + "." + name if name else _PACKAGE
        parts = full_name.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            if parent not in sys.modules:
                package = types.ModuleType(parent)
                package.__path__ = []
                sys.modules[parent] = package
                if depth > 1:
                    setattr(sys.modules[".".join(parts[:depth - 1])], parts[depth - 1], package)
        module = types.ModuleType(full_name)
        if is_package:
            module.__path__ = []
        module.__package__ = full_name if is_package else full_name.rpartition(".")[0]
        # registered before it runs: dataclasses and the imports of later modules look it up there
        sys.modules[full_name] = module
        setattr(sys.modules[full_name.rpartition(".")[0]], parts[-1], module)
        code = compile(base64.b64decode(encoded).decode("utf-8"), path, "exec", dont_inherit=True)
        exec(code, module.__dict__)  # pylint: disable=exec-used
    return module


if __name__ == "__main__":
    sys.exit(_load_bundled_modules().main())
'''


def render(program, repo=REPO):
    """The text of the generated file for ``program``."""
    modules = bundled_modules(program.entry, repo)
    paths = []
    entries = []
    for name in modules:
        path, is_package = _module_file(name, repo)
        relative = os.path.relpath(path, repo)
        paths.append(relative)
        with open(path, "rb") as handle:
            encoded = base64.encodebytes(handle.read()).decode("ascii")
        entries.append('    (%r, %r, %r, """\n%s"""),' % (name, relative, is_package, encoded))
    listing = "\n".join("  %s" % p for p in paths)
    return ('# -*- coding: utf-8 -*-\n'
            '# Copyright: netscale.multinic contributors\n'
            '# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)\n'
            '"""%s\n\n'
            'GENERATED by scripts/build-host-programs.py: do not edit. Edit the modules below and run\n'
            '``python scripts/build-host-programs.py``. Entry point: %s.main(). Embedded modules, each\n'
            'after the modules it imports:\n%s\n"""\n\n'
            'import sys\n\n'
            '_PACKAGE = %r\n'
            '_MODULES = (\n%s\n)\n%s'
            % (program.summary, program.entry, listing, PACKAGE, "\n".join(entries), _LOADER))


def out_of_date(repo=REPO):
    """Targets whose committed file differs from what :func:`render` makes now."""
    stale = []
    for program in PROGRAMS:
        try:
            with open(os.path.join(repo, program.target)) as handle:
                current = handle.read()
        except FileNotFoundError:
            current = None
        if current != render(program, repo):
            stale.append(program.target)
    return stale


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(description="Bundle the host programs into the roles' files/.")
    parser.add_argument("--check", action="store_true", help="only report out-of-date files (exit 1)")
    args = parser.parse_args(argv)
    stale = out_of_date()
    if args.check:
        for target in stale:
            sys.stderr.write("out of date: %s (run: python scripts/build-host-programs.py)\n" % target)
        return 1 if stale else 0
    sys.path.insert(0, REPO)   # labkit links the checkout as ansible_collections.netscale.multinic
    from labkit import ensure_collection_importable
    ensure_collection_importable()
    from ansible_collections.netscale.multinic.plugins.module_utils.writing import write_if_changed
    for program in PROGRAMS:
        if write_if_changed(os.path.join(REPO, program.target), render(program)):
            sys.stdout.write("wrote %s\n" % program.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
