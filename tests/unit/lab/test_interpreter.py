"""The lab's interpreter (module_utils/lab/interpreter.py): python3 with a compile cache for zip imports. It must run
a script exactly as python3 does (its __main__, argv, sys.path[0], output, exit status, tracebacks naming the files
being run) and serve what zipimport compiles from its cache, keyed by the source, named after the current path."""
import json
import marshal
import os
import shutil
import stat
import subprocess
import sys
import zipfile

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


def test_runs_a_script_as_python3_does_and_caches_what_zipimport_compiles(tmp_path):
    d = interpreter.install(str(tmp_path / "node"))
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


def test_the_cache_is_read_turned_off_by_the_environment_and_skipped_when_unreadable(tmp_path):
    d = interpreter.install(str(tmp_path / "node"))
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


def test_a_script_on_stdin_and_a_failing_script(tmp_path):
    d = interpreter.install(str(tmp_path / "node"))
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
