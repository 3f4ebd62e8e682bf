# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Python interpreter Ansible uses on the lab's nodes: the node's own ``/usr/bin/python3`` with a compile
cache for what Ansible's module runs import.

Every module run is a new Python that imports the module and Ansible's module_utils from the AnsiballZ payload, a
zip file; ``zipimport`` cannot keep bytecode, so each run compiles the same sources again (~0.06 of the ~0.18
CPU-seconds of a ``command`` run here; docs/lab.md "Module runs"). The lab's interpreter is a small program,
:data:`PROGRAM`, that the build installs in every node (:func:`install`); Ansible runs it as
``<IN_NODE_PATH> AnsiballZ_<module>.py``. It keeps the code objects that ``zipimport`` compiles in a cache beside
itself, keyed by the source's SHA-256 and the interpreter's bytecode magic, then runs the script as ``python3``
would: ``__main__``, ``sys.argv``, ``sys.path[0]``, the exit status and the output are the script's. Nothing of
the module's behaviour changes: the same source gives the same code object, whose file name is set to the path
being imported. A cache that cannot be read or written is skipped (the source is compiled, as without it);
``NETSCALE_LAB_COMPILE_CACHE=0`` in a module run's environment turns it off.

Lab only: production hosts run their modules with their own interpreter (``ansible_python_interpreter``).
"""

from __future__ import annotations

import os

from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

# Where a node finds it: the node's own /run (a tmpfs of its mount namespace), a bind mount of
# <node dir>/python made by the node's start script, so nothing is written to the machine's /usr or /run.
IN_NODE_DIR = "/run/netscale-lab-python"
IN_NODE_PATH = IN_NODE_DIR + "/python3"
NODE_SUBDIR = "python"   # under the node's directory (lab.node_dir)

PROGRAM = r'''#!/usr/bin/python3
# netscale.multinic lab: python3 with a compile cache for zip imports (plugins/module_utils/lab/interpreter.py)
import os
import sys


def _install_cache():
    import marshal
    import types
    import zipimport
    from importlib.util import MAGIC_NUMBER

    compile_source = getattr(zipimport, "_compile_source", None)
    if compile_source is None:
        return
    cache = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")

    def retarget(code, filename):
        consts = tuple(retarget(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
        return code.replace(co_filename=filename, co_consts=consts)

    def cached(pathname, source):
        import hashlib
        path = os.path.join(cache, hashlib.sha256(MAGIC_NUMBER + source).hexdigest())
        try:
            with open(path, "rb") as f:
                code = marshal.loads(f.read())
            if isinstance(code, types.CodeType):
                return retarget(code, pathname)
        except Exception:  # no entry yet, or one that cannot be read: compile
            pass
        code = compile_source(pathname, source)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        try:
            os.makedirs(cache, mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(marshal.dumps(code))
            os.replace(tmp, path)
        except Exception:  # a cache that cannot be written changes nothing (and keeps no partial file)
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return code

    zipimport._compile_source = cached


def main():
    if os.environ.get("NETSCALE_LAB_COMPILE_CACHE", "1") != "0":
        try:
            _install_cache()
        except Exception:
            pass
    import runpy
    del sys.argv[0]
    if not sys.argv or sys.argv[0] == "-":
        # a script on stdin (Ansible's pipelining), run as "python3" or "python3 -" runs it
        import types
        sys.argv[:] = sys.argv or [""]
        sys.path[0] = ""
        main_module = types.ModuleType("__main__")
        sys.modules["__main__"] = main_module
        exec(compile(sys.stdin.read(), "<stdin>", "exec"), main_module.__dict__)
        return
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
    runpy.run_path(sys.argv[0], run_name="__main__")


main()
'''


def install(node_dir):
    """Write the interpreter into ``<node_dir>/python`` (mode 0700, root's); returns that directory, which the
    node's start script binds at :data:`IN_NODE_DIR`."""
    d = os.path.join(node_dir, NODE_SUBDIR)
    os.makedirs(os.path.join(d, "cache"), mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    atomic_write(os.path.join(d, "python3"), PROGRAM, mode=0o700)
    return d
