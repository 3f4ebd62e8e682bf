"""The lab's interpreter (module_utils/lab/interpreter.py): python3 with a compile cache for zip imports and a zygote
that forks the runs. It must run a script exactly as python3 does (its __main__, argv, sys.path[0], output, exit
status, tracebacks naming the files being run), in a process of its own or forked by the zygote (the ``node``
fixture runs each such test both ways), and serve what zipimport compiles from its cache, keyed by the source,
named after the current path."""
import json
import marshal
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import zipfile

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab import interpreter

MOD = "VALUE = 'compiled'\n\ndef fail():\n    raise ValueError('from the zip')\n"
SCRIPT = r'''
import json, os, sys, traceback
here = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else None
first_path = sys.path[0]
sys.path.insert(0, os.environ["ZIP"])
import pkg.mod
try:
    pkg.mod.fail()
except ValueError:
    frames = traceback.extract_tb(sys.exc_info()[2])
print(json.dumps({"name": __name__, "argv": sys.argv, "path0": first_path, "file": globals().get("__file__"),
                  "mod_file": pkg.mod.__file__, "co_filename": pkg.mod.fail.__code__.co_filename,
                  "tb_file": frames[-1].filename, "value": pkg.mod.VALUE, "here": here}))
sys.exit(int(os.environ.get("EXIT", "0")))
'''


def _zip(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/__init__.py", "")
        z.writestr("pkg/mod.py", MOD)
    return path


@pytest.fixture(params=["in-process", "zygote"])
def node(request, tmp_path):
    """install(node dir) -> the program's directory; with "zygote", a zygote serves it (killed by PID after)."""
    def make():
        d = interpreter.install(str(tmp_path / "node"))
        if request.param == "zygote":
            _start_zygote(request, d)
        return d
    return make


def _start_zygote(request, d):
    z = subprocess.Popen([sys.executable, os.path.join(d, "python3"), "--serve"], start_new_session=True,
                         stdin=subprocess.DEVNULL)

    def stop():   # the zygote, its supervisors and any run left: its process group
        try:
            os.killpg(z.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        z.wait()
    request.addfinalizer(stop)
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(d, interpreter.SOCKET)):
        assert z.poll() is None and time.monotonic() < deadline, "the zygote did not listen (rc %s)" % z.poll()
        time.sleep(0.01)
    return z


def _run(d, script, zip_path, *args, stdin=None, **env):
    argv = [sys.executable, os.path.join(d, "python3")] + ([script] if script else []) + list(args)
    e = dict(os.environ, ZIP=zip_path, **env)
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=e, check=False, timeout=60)


def test_install_writes_a_root_only_program_and_cache(tmp_path):
    d = interpreter.install(str(tmp_path / "node"))
    assert d == str(tmp_path / "node" / "python")
    assert stat.S_IMODE(os.stat(os.path.join(d, "python3")).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert open(os.path.join(d, "python3")).read() == interpreter.PROGRAM
    assert interpreter.IN_NODE_PATH == interpreter.IN_NODE_DIR + "/python3"
    assert interpreter.install(str(tmp_path / "node")) == d   # again: rewritten, no error


def test_runs_a_script_as_python3_does_and_caches_what_zipimport_compiles(tmp_path, node):
    d = node()
    script = tmp_path / "AnsiballZ_x.py"
    script.write_text(SCRIPT)
    zip_a = _zip(str(tmp_path / "a.zip"))
    plain = subprocess.run([sys.executable, str(script), "arg1"], capture_output=True, text=True, check=False,
                           env=dict(os.environ, ZIP=zip_a, EXIT="3"))
    first = _run(d, str(script), zip_a, "arg1", EXIT="3")
    assert (first.returncode, first.stderr) == (3, ""), first.stderr
    assert plain.returncode == 3 and json.loads(first.stdout) == json.loads(plain.stdout)
    out = json.loads(first.stdout)
    assert out["name"] == "__main__" and out["argv"] == [str(script), "arg1"] and out["path0"] == str(tmp_path)
    assert out["co_filename"] == out["tb_file"] == os.path.join(zip_a, "pkg", "mod.py")
    entries = sorted(os.listdir(os.path.join(d, "cache")))
    assert len(entries) == 2 and not [e for e in entries if e.endswith(".tmp")]   # pkg/__init__.py and pkg/mod.py
    for e in entries:
        assert stat.S_IMODE(os.stat(os.path.join(d, "cache", e)).st_mode) == 0o600
    # another payload path (every module run has its own): served from the cache, named after the new path
    zip_b = _zip(str(tmp_path / "b.zip"))
    second = json.loads(_run(d, str(script), zip_b).stdout)
    assert second["co_filename"] == second["tb_file"] == os.path.join(zip_b, "pkg", "mod.py")
    assert sorted(os.listdir(os.path.join(d, "cache"))) == entries


def _poison(d, zip_path):
    """Replace mod.py's cache entry by the code of other source: a run that prints it read the cache."""
    import hashlib
    from importlib.util import MAGIC_NUMBER
    key = hashlib.sha256(MAGIC_NUMBER + MOD.encode()).hexdigest()
    code = compile("VALUE = 'from the cache'\n\ndef fail():\n    raise ValueError('x')\n",
                   os.path.join(zip_path, "pkg", "mod.py"), "exec", dont_inherit=True)
    with open(os.path.join(d, "cache", key), "wb") as f:
        f.write(marshal.dumps(code))
    return key


def test_the_cache_is_read_turned_off_by_the_environment_and_skipped_when_unreadable(tmp_path, node):
    d = node()
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    zip_a = _zip(str(tmp_path / "a.zip"))
    key = _poison(d, zip_a)
    assert json.loads(_run(d, str(script), zip_a).stdout)["value"] == "from the cache"
    assert json.loads(_run(d, str(script), zip_a, NETSCALE_LAB_COMPILE_CACHE="0").stdout)["value"] == "compiled"
    with open(os.path.join(d, "cache", key), "wb") as f:
        f.write(b"not marshal data")
    run = _run(d, str(script), zip_a)
    assert run.returncode == 0 and json.loads(run.stdout)["value"] == "compiled", run.stderr
    # the unreadable entry was replaced by a good one
    with open(os.path.join(d, "cache", key), "rb") as f:
        assert marshal.loads(f.read()).co_filename == os.path.join(zip_a, "pkg", "mod.py")
    # no cache directory (a file in its place, which root cannot write into either): runs, compiled
    shutil.rmtree(os.path.join(d, "cache"))
    open(os.path.join(d, "cache"), "w").close()
    run = _run(d, str(script), zip_a)
    assert run.returncode == 0 and run.stderr == "" and json.loads(run.stdout)["value"] == "compiled"


def test_a_script_on_stdin_and_a_failing_script(tmp_path, node):
    d = node()
    zip_a = _zip(str(tmp_path / "a.zip"))
    piped = _run(d, None, zip_a, stdin=SCRIPT)
    assert piped.returncode == 0, piped.stderr
    out = json.loads(piped.stdout)
    assert out["name"] == "__main__" and out["file"] is None and out["argv"] == [""] and out["value"] == "compiled"
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nprint('before')\nraise RuntimeError('boom')\n")
    run = _run(d, str(bad), zip_a)
    assert run.returncode == 1 and run.stdout == "before\n"
    assert 'File "%s", line 3' % bad in run.stderr and "RuntimeError: boom" in run.stderr
    # sys.exit with a message, an atexit handler: as python3
    other = tmp_path / "other.py"
    other.write_text("import atexit, sys\natexit.register(lambda: print('at exit'))\nsys.exit('a message')\n")
    run = _run(d, str(other), zip_a)
    assert (run.returncode, run.stdout, run.stderr) == (1, "at exit\n", "a message\n")


PROBE = r"""
import json, os, sys
with open("/proc/%d/stat" % os.getppid()) as f:
    grandparent = int(f.read().rsplit(")", 1)[1].split()[1])
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "grandparent": grandparent, "cwd": os.getcwd(),
                  "x": os.environ.get("X"), "umask": os.umask(0), "stdin": sys.stdin.read(),
                  "executable": sys.executable}))
sys.stdout.flush()
if os.environ.get("SLEEP"):
    import time
    time.sleep(float(os.environ["SLEEP"]))
"""


def _client(d, script, cwd, **env):
    return subprocess.Popen([sys.executable, os.path.join(d, "python3"), script], cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env),
                            preexec_fn=lambda: os.umask(0o027))


def test_the_zygote_forks_the_run_with_the_clients_stdio_environment_directory_and_umask(tmp_path, request):
    d = interpreter.install(str(tmp_path / "node"))
    z = _start_zygote(request, d)
    assert stat.S_IMODE(os.stat(os.path.join(d, interpreter.SOCKET)).st_mode) & 0o077 == 0
    assert 'SOCKET = "%s"' % interpreter.SOCKET in interpreter.PROGRAM
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    work = tmp_path / "work"
    work.mkdir()
    p = _client(d, str(script), str(work), X="from the client")
    out, err = p.communicate("to stdin", timeout=60)
    assert p.returncode == 0 and err == "", err
    run = json.loads(out)
    # forked: its parent is a supervisor of the zygote, not the client
    assert run["pid"] != p.pid and run["ppid"] != p.pid and run["grandparent"] == z.pid, (run, p.pid, z.pid)
    assert (run["cwd"], run["x"], run["umask"], run["stdin"]) == (str(work), "from the client", 0o027, "to stdin")
    # turned off by the environment: the client runs it in its own process
    p = _client(d, str(script), str(work), NETSCALE_LAB_ZYGOTE="0")
    out, err = p.communicate("", timeout=60)
    assert p.returncode == 0 and json.loads(out)["pid"] == p.pid, err


def test_signals_reach_the_run_and_the_client_ends_as_it_did(tmp_path, request):
    d = interpreter.install(str(tmp_path / "node"))
    _start_zygote(request, d)
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    p = _client(d, str(script), str(tmp_path), SLEEP="60")
    p.stdin.close()
    run = json.loads(p.stdout.readline())
    p.send_signal(signal.SIGTERM)   # as a cancelled task would: the run gets it, the client ends by it
    assert p.wait(timeout=30) == -signal.SIGTERM
    deadline = time.monotonic() + 10
    while os.path.exists("/proc/%d" % run["pid"]) and _state(run["pid"]) != "Z":
        assert time.monotonic() < deadline, "the run outlived SIGTERM"
        time.sleep(0.05)
    killer = tmp_path / "killer.py"
    killer.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    p = _client(d, str(killer), str(tmp_path))
    p.communicate("", timeout=60)
    assert p.returncode == -signal.SIGKILL


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_without_a_listening_zygote_the_client_runs_the_script_itself(tmp_path, request):
    """A zygote that died leaves its socket: the client runs the script in its own python3 (the program's
    shebang, python3 -S, execs python3 with its site for that), nothing is run twice."""
    d = interpreter.install(str(tmp_path / "node"))
    z = _start_zygote(request, d)
    os.killpg(z.pid, signal.SIGKILL)
    z.wait()
    assert os.path.exists(os.path.join(d, interpreter.SOCKET))
    script = tmp_path / "probe.py"
    script.write_text(PROBE + "open(os.environ['MARK'], 'a').write('ran\\n')\n")
    for argv in ([sys.executable, os.path.join(d, "python3"), str(script)], [os.path.join(d, "python3"), str(script)]):
        mark = tmp_path / ("mark-%d" % len(argv))
        p = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, MARK=str(mark)), check=False,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        assert mark.read_text() == "ran\n"
    # run directly (the shebang), the script's Python has its site: the node's python3, not -S
    assert json.loads(p.stdout)["executable"] == "/usr/bin/python3"
    # install() again (a node started anew) removes the dead zygote's socket
    interpreter.install(str(tmp_path / "node"))
    assert not os.path.exists(os.path.join(d, interpreter.SOCKET))


def test_a_zygote_that_does_not_take_the_run_in_time_gets_nothing_and_the_client_runs_it(tmp_path, request):
    """A hung (here: stopped) zygote: after NETSCALE_LAB_ZYGOTE_TIMEOUT the client says so on stderr and runs the
    script itself, instead of hanging the task; nothing of the run (no file descriptor of Ansible's either) was
    handed to the zygote, which, once it goes on, runs nothing and serves the next run."""
    d = interpreter.install(str(tmp_path / "node"))
    z = _start_zygote(request, d)
    script = tmp_path / "mark.py"
    script.write_text("import os\nopen(os.environ['MARK'], 'a').write('%d\\n' % os.getpid())\n")
    mark = tmp_path / "mark"
    os.kill(z.pid, signal.SIGSTOP)
    try:
        p = subprocess.Popen([sys.executable, os.path.join(d, "python3"), str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, MARK=str(mark), NETSCALE_LAB_ZYGOTE_TIMEOUT="1"))
        out, err = p.communicate(timeout=30)   # EOF on its pipes: no copy of them is left with the zygote
    finally:
        os.kill(z.pid, signal.SIGCONT)
    assert p.returncode == 0 and "the zygote did not take the run within 1s" in err, (p.returncode, err)
    assert mark.read_text() == "%d\n" % p.pid   # run once, by the client itself
    time.sleep(1.5)   # the zygote goes on: it accepts the abandoned connection and runs nothing
    assert mark.read_text() == "%d\n" % p.pid
    p = subprocess.Popen([sys.executable, os.path.join(d, "python3"), str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, MARK=str(mark)))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and err == "", err
    runs = mark.read_text().split()
    assert len(runs) == 2 and runs[1] != str(p.pid)   # the next run: forked by the zygote
