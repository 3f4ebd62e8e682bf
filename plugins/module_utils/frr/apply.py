# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate, diff and apply an FRR candidate config with vtysh and frr-reload.py (no bgpd restart).

Pure Python, no Ansible imports: the caller passes ``run(argv) -> (rc, stdout, stderr)`` (the
module's ``run_command``, or ``subprocess`` in tests and harnesses). Secrets: frr-reload.py logs the
commands it applies (passwords included) at level INFO into /var/log/frr/frr-reload.log, so it is
always called with ``--stdout --log-level error``; every text this module returns goes through
:func:`redact`.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
# ``redact`` stays importable from here (frr_apply.redact) for callers that used this module's copy.
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write, redact


@dataclass
class FrrTarget:
    """Where the FRR instance lives: binaries, config dir, vty socket dir, scratch dir."""

    bindir: str = "/usr/bin"
    confdir: str = "/etc/frr"
    vty_socket: str | None = None
    rundir: str | None = None
    reload_script: str = "/usr/lib/frr/frr-reload.py"
    python: str = "/usr/bin/python3"
    pathspace: str | None = None

    def vtysh(self, *extra):
        argv = ["%s/vtysh" % self.bindir.rstrip("/")]
        if self.vty_socket:
            argv += ["--vty_socket", self.vty_socket]
        if self.confdir and self.confdir != "/etc/frr":
            argv += ["--config_dir", self.confdir]
        if self.pathspace:
            argv += ["-N", self.pathspace]
        return argv + list(extra)

    def reload(self, mode, path):
        argv = [self.python, self.reload_script, "--%s" % mode, "--stdout", "--log-level", "error",
                "--bindir", self.bindir, "--confdir", self.confdir]
        if self.rundir:
            argv += ["--rundir", self.rundir]
        if self.vty_socket:
            argv += ["--vty_socket", self.vty_socket]
        if self.pathspace:
            argv += ["--pathspace", self.pathspace]
        return argv + [path]


# The options of a module that reloads an FRR instance (frr_config, spine_drain): one place for their defaults
RELOAD_ARGUMENT_SPEC = dict(
    confdir=dict(type="path", default="/etc/frr"),
    vty_socket=dict(type="path"),
    bindir=dict(type="path", default="/usr/bin"),
    rundir=dict(type="path", default="/var/run/frr"),
    reload_script=dict(type="path", default="/usr/lib/frr/frr-reload.py"),
    python=dict(type="path", default="/usr/bin/python3"),
)


def reload_target(params):
    """(FrrTarget, None) from a module's RELOAD_ARGUMENT_SPEC parameters, or (None, message) when frr-reload.py or
    vtysh is missing (the message names the option and the fix)."""
    for path, what in ((params["reload_script"], "reload_script"), (os.path.join(params["bindir"], "vtysh"),
                                                                    "bindir")):
        if not os.path.exists(path):
            return None, ("%s: %s does not exist; install FRR with frr-pythontools or set %s; nothing was changed"
                          % (what, path, what))
    return FrrTarget(bindir=params["bindir"], confdir=params["confdir"], vty_socket=params["vty_socket"],
                     rundir=params["rundir"] if os.path.isdir(params["rundir"]) else None,
                     reload_script=params["reload_script"], python=params["python"]), None


class FrrApplyError(MultinicError):
    """vtysh or frr-reload.py rejected or did not converge on a candidate; message and output redacted."""

    def __init__(self, message, output=""):
        self.output = redact(output)
        super(FrrApplyError, self).__init__(redact(message))


_HOSTNAME_RE = re.compile(r"^hostname\s+(\S+)\s*$", re.M)


def running_hostname(run, target):
    """The ``hostname`` line FRR shows in its running config (vtysh prints the system hostname)."""
    rc, out, _err = run(target.vtysh("-c", "show running-config"))
    if rc != 0:
        return None
    m = _HOSTNAME_RE.search(out or "")
    return m.group(1) if m else None


def with_hostname(text, hostname):
    """The candidate as applied: FRR always shows a ``hostname`` line, so a candidate without one
    keeps the running hostname (else every run would delete it and never converge)."""
    if hostname and not _HOSTNAME_RE.search(text):
        return "hostname %s\n%s" % (hostname, text)
    return text


_LINE_ERR = re.compile(r"^line (\d+): (.*)$")


def validate(run, target, path):
    """``vtysh -C -f path`` (dry run). Returns a list of error strings (empty when valid)."""
    rc, out, err = run(target.vtysh("-C", "-f", path))
    text = (out or "") + (err or "")
    errors = []
    for line in text.splitlines():
        line = line.strip()
        if _LINE_ERR.match(line) or line.startswith("%"):
            errors.append(redact(line))
    if rc != 0 and not errors:
        errors.append("vtysh -C exited %d: %s" % (rc, redact(text.strip())[:500]))
    return errors


def parse_reload_test(text):
    """Split frr-reload.py --test output into (lines_to_delete, lines_to_add) command blocks."""
    dels, adds = [], []
    cur = None
    for raw in (text or "").splitlines():
        stripped = raw.strip()
        if stripped == "Lines To Delete":
            cur = dels
            continue
        if stripped == "Lines To Add":
            cur = adds
            continue
        if cur is None or not stripped or set(stripped) == {"="}:
            continue
        cur.append(raw.rstrip())
    return dels, adds


def delta(run, target, path):
    """(lines_to_delete, lines_to_add) between the running config and the candidate file."""
    rc, out, err = run(target.reload("test", path))
    if rc != 0:
        raise FrrApplyError("frr-reload.py --test failed (rc %d)" % rc, (out or "") + (err or ""))
    return parse_reload_test(out)


def format_delta(dels, adds):
    """Human-readable, redacted diff text (used as Ansible's ``diff.prepared``)."""
    lines = []
    for line in dels:
        lines.append("- " + line)
    for line in adds:
        lines.append("+ " + line)
    return redact("\n".join(lines) + ("\n" if lines else ""))


# FRR 8.4 bgpd (bgp_bfd.c): the "no" forms of a neighbor's BFD sub-options ("no neighbor X bfd
# check-control-plane-failure", "no neighbor X bfd profile P") first (re)create the neighbor's BFD
# configuration (bgp_peer_configure_bfd / bgp_group_configure_bfd) and only then clear the option.
# frr-reload.py deletes a neighbor's lines in running-config order, "no neighbor X bfd" before its
# sub-options, so taking BFD away (a ToR restored from a pre-BFD copy) turned it straight back on:
# "neighbor X bfd" stayed, bgpd kept its BFD sessions, bfdd its "bfd" node ("running config did not
# converge: no bfd"; a second frr-reload.py pass would remove what the first re-created). Deleting the
# sub-options first, while BFD is still on, leaves frr-reload.py nothing to re-enable.
# Likewise bfdd's node: frr-reload.py sends "no bfd" and after it "bfd" / " no profile P", which re-creates
# an empty "bfd" node. A deleted "bfd" node is therefore removed first, as a whole, by "no bfd".
_BFD_OPTION_DELETE = re.compile(r"^\s*no neighbor (\S+) bfd (check-control-plane-failure|profile)\b.*$")


def bfd_options_first(dels):
    """[(context, command)] to send before frr-reload.py (context None: top level): the deleted BFD
    sub-option lines of BGP neighbors in their ``router bgp`` context, then ``no bfd`` when the whole bfdd
    node goes (see ``_BFD_OPTION_DELETE``). ``dels``: the "Lines To Delete" of :func:`delta`."""
    out = []
    ctx = None
    for line in dels:
        if line and not line[0].isspace():
            ctx = line.strip()
            continue
        if ctx and ctx.startswith("router bgp") and _BFD_OPTION_DELETE.match(line):
            out.append((ctx, line.strip()))
    if any(line.strip() == "no bfd" and not line[0].isspace() for line in dels if line):
        out.append((None, "no bfd"))
    return out


def apply(run, target, path, dels=None):
    """Apply the candidate with ``frr-reload.py --reload``; returns ``(left, warnings)``.

    Success is judged by the result, not by frr-reload.py's exit code: its second pass re-sends
    every added line, and FRR 8.4 rejects a repeated ``graceful-restart-disable`` ("not valid at this
    moment") although the first pass applied it. So: reload, then diff again; the running config
    matching the candidate (``left`` empty) is success, with the tool's complaints as warnings.

    ``dels``: the lines to delete (from :func:`delta`; measured here when not given). Deleted BFD
    sub-option lines go first, through vtysh (see :func:`bfd_options_first`).
    """
    if dels is None:
        dels = delta(run, target, path)[0]
    first = bfd_options_first(dels)
    if first:
        argv, cur = ["-c", "configure terminal"], None
        for ctx, cmd in first:
            if ctx != cur:
                argv += (["-c", "exit"] if cur else []) + (["-c", ctx] if ctx else [])
                cur = ctx
            argv += ["-c", cmd]
        rc, out, err = run(target.vtysh(*(argv + ["-c", "end"])))
        if rc != 0:
            raise FrrApplyError("vtysh (BFD options before frr-reload.py: %s) failed (rc %d)"
                                % ("; ".join(cmd for dummy, cmd in first), rc), (out or "") + (err or ""))
    rc, out, err = run(target.reload("reload", path))
    warnings = []
    if rc != 0:
        warnings = [redact(line.strip()) for line in ((out or "") + (err or "")).splitlines() if line.strip()]
    left = delta(run, target, path)
    if rc != 0 and (left[0] or left[1]):
        raise FrrApplyError("frr-reload.py --reload failed (rc %d) and the running config still differs "
                            "from the candidate:\n%s" % (rc, format_delta(*left)), (out or "") + (err or ""))
    return left, warnings


def tighten_config_modes(confdir, names=("frr.conf", "frr.conf.sav")):
    """FRR's saved configs hold the TCP-MD5 keys, and a distribution's FRR may write them group-readable
    (Debian: 0640): make them readable by their owner (FRR's user) only. Returns the paths changed."""
    changed = []
    for name in names:
        path = os.path.join(confdir, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_mode & 0o077:
            os.chmod(path, st.st_mode & 0o700)
            changed.append(path)
    return changed


def converge(run, target, text, check_mode=False, candidate_path=None, scratch_dir=None, write_file=None,
             remove_file=None):
    """One idempotent step: validate ``text``, diff it against the running config, apply unless
    ``check_mode``. Returns {changed, deleted, added, diff, warnings, candidate}.

    ``write_file(path, text)`` writes a 0600 file (default: ``writing.atomic_write``); in check mode the
    candidate goes to a scratch file that is removed afterwards, so nothing on the box changes.
    """
    write_file = write_file or (lambda path, data: atomic_write(path, data, mode=0o600))
    remove_file = remove_file or (lambda p: os.path.exists(p) and os.unlink(p))
    text = with_hostname(text, running_hostname(run, target))
    if check_mode or not candidate_path:
        fd, path = tempfile.mkstemp(prefix="netscale-candidate-", suffix=".conf",
                                    dir=scratch_dir or target.rundir or None)
        os.close(fd)
        scratch = True
    else:
        path, scratch = candidate_path, False
    try:
        write_file(path, text)
        errors = validate(run, target, path)
        if errors:
            raise FrrApplyError("candidate config is invalid (vtysh -C): %s" % "; ".join(errors[:20]))
        dels, adds = delta(run, target, path)
        result = {"changed": bool(dels or adds), "deleted": len(dels), "added": len(adds),
                  "diff": format_delta(dels, adds), "warnings": [],
                  "candidate": None if scratch else path}
        if result["changed"] and not check_mode:
            left, warnings = apply(run, target, path, dels)
            result["warnings"] = warnings
            if left[0] or left[1]:
                raise FrrApplyError("running config did not converge:\n%s" % format_delta(*left))
        return result
    finally:
        if scratch:
            remove_file(path)
