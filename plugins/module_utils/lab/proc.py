# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Process helpers: running commands, PID identity (pid + start time) and safe kills."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError


class LabError(MultinicError):
    """An operation of the lab failed; the message says which step and why."""


def run_command(cmd, check=True, error=LabError, tail=2000, **kw):
    """The lab's one command runner (the engine, the test harnesses and the benches configure it):
    run cmd and return its subprocess.CompletedProcess with text stdout and stderr.

    A list runs as argv; a string runs through /bin/sh (the harnesses' one-liners with pipes).
    With check, a non-zero exit raises ``error`` (each harness keeps the exception type its callers
    catch) naming the command, its exit code and the last ``tail`` characters of its stderr, else
    stdout. ``kw`` goes to subprocess.run (timeout, input, env, cwd); a timeout raises
    subprocess.TimeoutExpired unchanged, for the callers that wait on purpose."""
    p = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, check=False, **kw)
    if check and p.returncode != 0:
        text = cmd if isinstance(cmd, str) else " ".join(str(a) for a in cmd)
        raise error("%s failed rc=%d: %s" % (text, p.returncode, (p.stderr or p.stdout).strip()[-tail:]))
    return p


def run(argv, input_text=None, check=True, timeout=120):
    """Run a command, return (rc, stdout, stderr). Raises LabError with the command on failure."""
    try:
        p = run_command(argv, check=False, input=input_text, timeout=timeout)
    except FileNotFoundError:
        raise LabError("command not found: %s (install it: bash scripts/setup.sh)" % argv[0])
    except subprocess.TimeoutExpired:
        raise LabError("command timed out after %ss: %s" % (timeout, " ".join(argv)))
    if check and p.returncode != 0:
        raise LabError("command failed (rc=%d): %s\n%s" % (p.returncode, " ".join(argv), (p.stderr or p.stdout).strip()))
    return p.returncode, p.stdout, p.stderr


def start_time(pid):
    """Kernel start time of a process (clock ticks since boot), or None when it does not exist."""
    try:
        with open("/proc/%d/stat" % int(pid)) as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    # comm may contain spaces and parentheses: split after the last ')'
    rest = data.rsplit(")", 1)[1].split()
    return int(rest[19])


def is_zombie(pid):
    try:
        with open("/proc/%d/stat" % int(pid)) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, ValueError):
        return True


def alive(pid, started=None):
    """True when pid exists, is not a zombie and (if given) has the recorded start time."""
    st = start_time(pid)
    if st is None:
        return False
    if started is not None and st != started:
        return False
    return not is_zombie(pid)


def reap():
    """Collect exited children of this process (so they stop being zombies)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill(pid, started=None, sig=signal.SIGKILL):
    """Signal pid only when it is still the process we recorded (same start time)."""
    if not alive(pid, started):
        return False
    try:
        os.kill(int(pid), sig)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids, timeout=5.0):
    """Wait until every (pid, started) in pids is gone. Returns the ones still alive."""
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left:
        reap()
        left = [(p, s) for p, s in left if alive(p, s)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return left


def children(pid):
    """Direct children of pid (from /proc/PID/task/*/children)."""
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                    out.extend(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % int(pid), "rb") as f:
            return [x.decode("utf-8", "replace") for x in f.read().split(b"\0") if x]
    except (OSError, ValueError):
        return []
