"""The lab's one command runner (module_utils/lab/proc.run_command), the bare FRR daemon line the
harnesses share (lab/frr.bare_daemon_argv), and the rule that the test and
bench harnesses configure it instead of keeping their own (issue 28 item 3)."""
import ast
import os
import subprocess

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, run_command

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HARNESS_DIRS = ("labkit", "tests/e2e", "bench")
RUNNER_NAMES = ("sh", "run", "run_tuple")


def test_argv_and_shell_string_return_the_completed_process():
    p = run_command(["printf", "%s", "a b"])
    assert (p.returncode, p.stdout, p.stderr) == (0, "a b", "")
    p = run_command("printf one | tr o O")           # a string goes through /bin/sh
    assert p.stdout == "One"


def test_failure_raises_the_callers_error_naming_command_rc_and_output_tail():
    with pytest.raises(LabError, match=r"sh -c echo bad >&2; exit 3 failed rc=3: bad"):
        run_command(["sh", "-c", "echo bad >&2; exit 3"])
    with pytest.raises(AssertionError, match=r"rc=4: only stdout$"):
        run_command("echo only stdout; exit 4", error=AssertionError)
    with pytest.raises(RuntimeError, match=r"rc=1: 6789$"):
        run_command("printf 0123456789 >&2; exit 1", error=RuntimeError, tail=4)


def test_unchecked_failure_returns_the_exit_code():
    assert run_command(["sh", "-c", "exit 5"], check=False).returncode == 5


def test_input_and_timeout_go_to_subprocess():
    assert run_command(["cat"], input="fed").stdout == "fed"
    with pytest.raises(subprocess.TimeoutExpired):
        run_command(["sleep", "5"], timeout=0.2)


def _private_runners(path):
    """Top-level functions named like a runner that call subprocess.run themselves."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in RUNNER_NAMES:
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "run" \
                        and isinstance(call.func.value, ast.Name) and call.func.value.id == "subprocess":
                    found.append("%s:%d %s()" % (os.path.relpath(path, REPO), node.lineno, node.name))
                    break
    return found


def test_harnesses_configure_the_one_runner():
    files = []
    for d in HARNESS_DIRS:
        for root, _dirs, names in os.walk(os.path.join(REPO, d)):
            files += [os.path.join(root, n) for n in names if n.endswith(".py")]
    assert len(files) > 40, files                      # the walk really found the harnesses
    private = [r for f in sorted(files) for r in _private_runners(f)]
    assert private == [], "use module_utils/lab/proc.run_command (with the caller's error type): %s" % private


def test_bare_frr_daemon_keeps_everything_in_its_run_dir():
    from ansible_collections.netscale.multinic.plugins.module_utils.lab import frr
    argv = frr.bare_daemon_argv("bgpd", "/tmp/r", "/tmp/r/bgpd.conf", ["-p", "179"])
    assert argv == ["/usr/lib/frr/bgpd", "-d", "-f", "/tmp/r/bgpd.conf", "-i", "/tmp/r/bgpd.pid",
                    "--vty_socket", "/tmp/r", "-z", "/tmp/r/zserv.api", "-p", "179"]
    assert frr.bare_daemon_argv("zebra", "/x")[3] == "/dev/null"      # no config file: vtysh configures it
