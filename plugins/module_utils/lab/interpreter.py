# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Python interpreter Ansible uses on the lab's nodes: the node's own ``/usr/bin/python3`` with a compile
cache for what Ansible's module runs import, and a zygote per node that forks the runs.

Every module run is a new Python that imports the module and Ansible's module_utils from the AnsiballZ payload, a
zip file; ``zipimport`` cannot keep bytecode, so each run compiled the same sources again, and each run started
Python and imported the same standard library again (together ~0.12 of a ``command`` run's ~0.18 CPU-seconds
here; docs/lab.md "Module runs"). The lab's interpreter is a small program, :data:`PROGRAM`, that the build
installs in every node (:func:`install`); Ansible runs it as ``<IN_NODE_PATH> AnsiballZ_<module>.py``.

- **The zygote** (``python3 <program> --serve``, one per node, started with the node: by a box's script, by a
  GPU host's systemd unit :data:`ZYGOTE_UNIT`) imports the standard library modules Ansible's module_utils use
  (``PRELOAD``), then listens on :data:`SOCKET` beside the program. For each run it forks a supervisor, which
  forks the run and reports the run's PID and its end.
- **The client** is what Ansible starts (``python3 -S``: no site, a light start). It hands the zygote its
  arguments, environment, working directory, umask and its stdin, stdout and stderr (SCM_RIGHTS), forwards
  SIGTERM, SIGINT, SIGHUP and SIGQUIT to the run, and exits as the run did (status, or the same signal). The run
  writes to Ansible's pipes itself. With no zygote listening (none started, or one that died), or with
  ``NETSCALE_LAB_ZYGOTE=0`` in the environment, the client runs the script in a python3 of its own, as before;
  also when the zygote's supervisor does not answer within ``NETSCALE_LAB_ZYGOTE_TIMEOUT`` s (30): the run and
  its file descriptors are sent only after that answer, so a late zygote has nothing to run.
- **The compile cache** keeps the code objects that ``zipimport`` compiles beside the program, keyed by the
  source's SHA-256 and the interpreter's bytecode magic; the file name is set to the path being imported. A cache
  that cannot be read or written is skipped; ``NETSCALE_LAB_COMPILE_CACHE=0`` in a module run's environment turns
  it off.

Either way the script runs as ``python3`` would run it: ``__main__``, ``sys.argv``, ``sys.path[0]``, the exit
status, the output, atexit handlers. What differs in a forked run: its parent is the supervisor, and on a GPU host
it runs in the zygote unit's cgroup.

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
SOCKET = "zygote.sock"   # the zygote's, beside the program
# A GPU host's systemd starts the zygote (a box's script starts it in the box). KillMode=process: stopping the
# zygote leaves the runs it forked, and what they started, alone, as a plain python3 run would be left.
ZYGOTE_UNIT = "mnl-lab-python.service"
ZYGOTE_UNIT_TEXT = """[Unit]
Description=netscale.multinic lab: the zygote that forks Ansible's module runs (plugins/module_utils/lab/interpreter.py)
DefaultDependencies=no

[Service]
ExecStart=/usr/bin/python3 %s --serve
KillMode=process
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
""" % IN_NODE_PATH

PROGRAM = r'''#!/usr/bin/python3 -S
# netscale.multinic lab: python3 with a compile cache for zip imports, and a zygote that forks module runs
# from a Python with the standard library already imported (plugins/module_utils/lab/interpreter.py)
import os
import sys

SOCKET = "zygote.sock"
# Imported once by the zygote, shared by every run it forks: what Ansible's module_utils import from the
# standard library (the AnsiballZ payload's own modules are imported by each run, from the compile cache).
PRELOAD = ("abc", "ast", "atexit", "base64", "collections", "contextlib", "copy", "dataclasses", "datetime",
           "decimal", "enum", "errno", "fcntl", "functools", "glob", "grp", "hashlib", "importlib.util", "inspect",
           "io", "itertools", "json", "locale", "marshal", "operator", "pathlib", "pkgutil", "platform", "pwd",
           "re", "runpy", "select", "selectors", "shlex", "shutil", "signal", "stat", "string", "subprocess",
           "syslog", "tempfile", "textwrap", "threading", "time", "traceback", "types", "typing", "urllib.parse",
           "uuid", "weakref", "zipfile", "zipimport")


def _install_cache():
    import marshal
    import types
    import zipimport
    from importlib.util import MAGIC_NUMBER

    compile_source = getattr(zipimport, "_compile_source", None)
    if compile_source is None:
        return None
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
    return compile_source


def _run_script():
    # sys.argv: the script and its arguments, as python3 would set them
    import runpy
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


def in_process():
    if os.environ.get("NETSCALE_LAB_COMPILE_CACHE", "1") != "0":
        try:
            _install_cache()
        except Exception:
            pass
    _run_script()


# ---- the zygote: python3 <this> --serve, one per node, started with the node ----------------------------
def _recv_request(conn):
    import array
    import marshal
    import socket
    fds = array.array("i")
    data, ancdata, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, cdata in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cdata[:len(cdata) - (len(cdata) % fds.itemsize)])
    if len(fds) != 3 or len(data) < 4:
        raise OSError("bad request")
    size = int.from_bytes(data[:4], "big")
    data = data[4:]
    while len(data) < size:
        more = conn.recv(size - len(data))
        if not more:
            raise OSError("short request")
        data += more
    return marshal.loads(data), list(fds)


def _child(request, fds, original_compile):
    # the module run: the client's stdio, argv, environment, directory and umask, default signal handlers
    import signal
    argv, env, cwd, umask = request
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(env)
    import time
    time.tzset()
    os.umask(umask)
    if cwd:
        try:
            os.chdir(cwd)
        except OSError:
            pass
    if env.get("NETSCALE_LAB_COMPILE_CACHE", "1") == "0" and original_compile is not None:
        import zipimport
        zipimport._compile_source = original_compile
    sys.argv[:] = argv
    code = 0
    try:
        _run_script()
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        import threading
        threading._shutdown()
    except Exception:
        pass
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def _supervise(conn, listener, original_compile):
    # a fork of the zygote per run: forks the run, tells the client its PID, then its end
    listener.close()
    try:
        conn.sendall(b"R")   # the client sends its run only now: one that gave up waiting sends nothing
        request, fds = _recv_request(conn)
    except Exception:
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(request, fds, original_compile)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(b"P%d\n" % pid)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    end = b"S%d\n" % os.WTERMSIG(status) if os.WIFSIGNALED(status) else b"X%d\n" % os.WEXITSTATUS(status)
    try:
        conn.sendall(end)
    except OSError:
        pass
    os._exit(0)


def serve():
    import importlib
    import signal
    import socket
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    original_compile = _install_cache()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), SOCKET)
    os.chdir("/")   # pins no directory of whoever started it; each run goes to its client's
    tmp = "%s.%d" % (path, os.getpid())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        if os.path.exists(tmp):
            os.unlink(tmp)
        listener.bind(tmp)
    finally:
        os.umask(old)
    listener.listen(128)
    os.replace(tmp, path)   # clients see a socket that is already listening

    def reap(*_):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
    signal.signal(signal.SIGCHLD, reap)
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:   # e.g. out of file descriptors: try again, not in a busy loop
            import time
            time.sleep(0.1)
            continue
        try:
            if os.fork() == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _supervise(conn, listener, original_compile)
        except OSError:
            pass
        conn.close()


# ---- the client: what Ansible runs ---------------------------------------------------------------------
def _fallback():
    # no zygote: run in this process, as python3 with its site (the shebang's -S left it out)
    if sys.flags.no_site:
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "--in-process"] + sys.argv[1:])
    del sys.argv[0]
    in_process()


def client():
    import array
    import marshal
    import signal
    import socket
    if os.environ.get("NETSCALE_LAB_ZYGOTE", "1") == "0":
        return _fallback()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    timeout = os.environ.get("NETSCALE_LAB_ZYGOTE_TIMEOUT", "30")
    try:
        s.connect(os.path.join(os.path.dirname(os.path.abspath(__file__)), SOCKET))
        # A zygote that does not take the run in time (hung, stopped) gets nothing: no file descriptor of
        # Ansible's is left in flight with it, and the run goes on here.
        s.settimeout(float(timeout))
        if s.recv(1) != b"R":
            raise OSError("no supervisor")
        s.settimeout(None)
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        umask = os.umask(0)
        os.umask(umask)
        payload = marshal.dumps((sys.argv[1:], dict(os.environ), cwd, umask))
        s.sendmsg([len(payload).to_bytes(4, "big") + payload],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
    except OSError as e:
        if not isinstance(e, (FileNotFoundError, ConnectionRefusedError)):   # no zygote at all: nothing to say
            sys.stderr.write("lab interpreter: the zygote did not take the run within %ss (%s); running it here\n"
                             % (timeout, e))
        s.close()
        return _fallback()
    # from here the run is the zygote's: never run it a second time here
    f = s.makefile("rb")
    line = f.readline()
    if not line.startswith(b"P"):
        sys.stderr.write("lab interpreter: the zygote dropped the run (%r)\n" % line)
        os._exit(1)
    pid = int(line[1:])

    def forward(sig, _frame):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    line = f.readline()   # retried after a forwarded signal (PEP 475)
    if line.startswith(b"X"):
        os._exit(int(line[1:]))
    if line.startswith(b"S"):
        sig = int(line[1:])
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):   # SIGKILL, SIGSTOP: no handler to reset
            pass
        os.kill(os.getpid(), sig)
    sys.stderr.write("lab interpreter: the zygote lost the run (%r)\n" % line)
    os._exit(1)


if len(sys.argv) > 1 and sys.argv[1] == "--serve":
    serve()
elif len(sys.argv) > 1 and sys.argv[1] == "--in-process":
    del sys.argv[:2]
    in_process()
else:
    client()
'''


def install(node_dir):
    """Write the interpreter into ``<node_dir>/python`` (mode 0700, root's); returns that directory, which the
    node's start script binds at :data:`IN_NODE_DIR`."""
    d = os.path.join(node_dir, NODE_SUBDIR)
    os.makedirs(os.path.join(d, "cache"), mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    atomic_write(os.path.join(d, "python3"), PROGRAM, mode=0o700)
    try:   # a socket left by the zygote of a node that ran here before: the node's new zygote makes its own
        os.unlink(os.path.join(d, SOCKET))
    except FileNotFoundError:
        pass
    return d
