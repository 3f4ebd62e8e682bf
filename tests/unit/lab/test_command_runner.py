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


def test_bare_daemon_that_writes_no_pid_file_fails_naming_it(tmp_path, monkeypatch):
    """A daemon that returns without a pid file (it died at start) stops the harness with its name, its
    namespace and the missing file, after the timeout, instead of going on without it."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab import routing
    started = []
    monkeypatch.setattr(routing, "run_command", lambda argv, error: started.append(argv))
    with pytest.raises(RuntimeError, match=r"bgpd in mnt-x-t1: no %s/bgpd.pid after 0 s" % tmp_path):
        routing.start_bare_daemon("mnt-x-t1", "bgpd", str(tmp_path), error=RuntimeError, timeout=0.1)
    assert started and started[0][:4] == ["ip", "netns", "exec", "mnt-x-t1"]
    # zebra also waits for zserv.api: a pid file alone is not enough
    (tmp_path / "zebra.pid").write_text("4242\n")
    with pytest.raises(RuntimeError, match="zebra in mnt-x-t1: no %s/zserv.api" % tmp_path):
        routing.start_bare_daemon("mnt-x-t1", "zebra", str(tmp_path), error=RuntimeError, timeout=0.1)
    (tmp_path / "zserv.api").write_text("")
    assert routing.start_bare_daemon("mnt-x-t1", "zebra", str(tmp_path), timeout=0.1) == (str(tmp_path / "zebra.pid"), 4242)


def test_bare_daemon_in_a_missing_namespace_raises_the_callers_error(tmp_path):
    """ip netns exec refuses a namespace that does not exist (nothing is created or started)."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab import routing
    with pytest.raises(AssertionError, match=r"ip netns exec mnp-missing-0 /usr/lib/frr/bgpd .* failed rc="):
        routing.start_bare_daemon("mnp-missing-0", "bgpd", str(tmp_path), error=AssertionError, timeout=0.1)
    assert not os.path.exists("/run/netns/mnp-missing-0")
