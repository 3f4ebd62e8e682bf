# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every device of a plan rendered into ``intended/``, one device at a time (what ``tor_render`` does).

Per device: structured config, text, TCP-MD5 placeholders, the two files compared with what is on
disk and, when they differ, written to a temporary file beside their target; then the device's data
is dropped, only its summary is kept (a region's configs never sit in memory together: 2.4 GiB at 30K
hosts when they did). The temporary files are renamed into place only after every device rendered
without a problem, so bad input writes nothing. With ``workers`` > 1 the devices are shared out to
forked processes (the plan is read once, before the fork), each stages its files and returns its
summaries; the parent renames. No Ansible imports.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import pickle
import secrets
import shutil
import tempfile
import traceback

from ansible_collections.netscale.multinic.plugins.module_utils.errors import InputProblem
from ansible_collections.netscale.multinic.plugins.module_utils.frr.key_placeholders import with_placeholders
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.error import TorPolicyError
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.render import render
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.spine import spine_structured_config
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy.tor import tor_structured_config
from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact
from ansible_collections.netscale.multinic.plugins.module_utils.yamlblock import BlockYaml

CONFIG_MODE = 0o600       # a config may hold TCP-MD5 keys (placeholders today; the mode stays)
STRUCTURED_MODE = 0o644   # keys redacted
# Below this many devices the fork costs more than it saves (the lab: a few ToRs and spines).
MIN_DEVICES_PER_WORKER = 200


def default_workers(device_count):
    """Worker processes for ``device_count`` devices: one per usable core, none for a small fabric."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, device_count // MIN_DEVICES_PER_WORKER))


def fabric_devices(plan, devices=None):
    """([(name, kind, rack or spine)], [names not in the fabric]): the plan's devices in render order
    (ToRs in rack order, then spines), or the named ones."""
    want = set(devices) if devices else None
    out = [(rack.pins["tor_name"], "tor", rack) for rack in plan.topo.racks]
    out += [(spine.name, "spine", spine) for spine in plan.topo.spines]
    if want is None:
        return out, []
    missing = sorted(want - set(name for name, _kind, _obj in out))
    return [d for d in out if d[0] in want], missing


def file_differs(path, text, mode):
    """Whether ``path`` must be (re)written to hold ``text`` with ``mode``: missing, other mode or other
    content. A file of another size is not read (``text`` all ASCII: its size is its length)."""
    try:
        st = os.stat(path)
    except OSError:
        return True
    if (st.st_mode & 0o7777) != mode:
        return True
    if text.isascii() and st.st_size != len(text):
        return True
    try:
        with open(path) as handle:
            return handle.read() != text
    except (IOError, OSError, UnicodeDecodeError):
        return True


def _stage(path, text, mode, tag):
    """``text`` in a temporary file beside ``path`` (named with this run's ``tag``), mode set before
    anything is written. Returns its path."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s.%s." % (os.path.basename(path), tag), suffix=".tmp", dir=folder)
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


class _Renderer(object):
    """Renders devices one by one; stages changed files unless in check mode or after a problem."""

    def __init__(self, plan, dest, options, md5_keys, check_mode, tag):
        self.plan = plan
        self.dest = dest
        self.options = options
        self.spine_options = dict(options or {})
        self.md5_keys = md5_keys or {}
        self.check_mode = check_mode
        self.tag = tag
        self.yaml = BlockYaml(redact=True)
        self.summaries = []   # (name, summary, [changed paths])
        self.staged = []      # (tmp, path)
        self.problems = []    # (name, [InputProblem])

    def device(self, name, kind, obj):
        try:
            if kind == "tor":
                sc = tor_structured_config(self.plan.rack_data(obj), self.options, self.md5_keys)
            else:
                sc = spine_structured_config(self.plan.spine_data(obj), self.spine_options, md5_keys=self.md5_keys)
        except TorPolicyError as exc:
            self.problems.append((name, exc.problems))
            return
        text = render(sc)
        if self.problems:
            return   # nothing is written after a problem; the rest is still checked for problems
        cfg_path = os.path.join(self.dest, "configs", name + ".cfg")
        sc_path = os.path.join(self.dest, "structured_configs", name + ".yml")
        # the file on disk names each key (<md5:host>), the device gets the key (frr_config secrets)
        on_disk, md5_names = with_placeholders(text, self.md5_keys)
        changed = []
        for path, content, mode in ((cfg_path, on_disk, CONFIG_MODE),
                                    (sc_path, self.yaml.dump(sc), STRUCTURED_MODE)):
            if file_differs(path, content, mode):
                changed.append(path)
                if not self.check_mode:
                    self.staged.append((_stage(path, content, mode, self.tag), path))
        summary = {"kind": kind, "platform": sc["platform"], "config": cfg_path,
                   "structured_config": sc_path, "counts": sc["counts"],
                   # of the redacted text: a hash of a keyed config would be an offline
                   # guessing oracle for a weak key
                   "sha256": hashlib.sha256(redact(text).encode()).hexdigest(),
                   "sysctls": (sc.get("ecmp_hash") or {}).get("sysctls", {}),
                   "live": bool(sc["capabilities"].get("live")),
                   "md5_names": md5_names}
        self.summaries.append((name, summary, changed))

    def run(self, devices):
        for name, kind, obj in devices:
            self.device(name, kind, obj)
        return {"summaries": self.summaries, "staged": self.staged, "problems": self.problems}


def render_fabric(plan, dest, options=None, md5_keys=None, devices=None, check_mode=False, workers=None):
    """Render every ToR and spine of ``plan`` (or the named ``devices``) into ``dest``.

    Writes ``dest/configs/<device>.cfg`` (mode 0600, TCP-MD5 keys as ``<md5:NAME>`` placeholders) and
    ``dest/structured_configs/<device>.yml`` (0644, redacted), only the files whose content or mode
    differs; in check mode nothing. Returns ``(written, summaries)``: the paths written (or that would
    be) in device-name order, and {device: summary} in name order. Raises TorPolicyError listing the
    problems of every device (devices in rack order, then spines), having written nothing.
    ``workers``: processes to share the devices among (default :func:`default_workers`).
    """
    todo, missing = fabric_devices(plan, devices)
    if workers is None:
        workers = default_workers(len(todo))
    tag = "render-%d-%s" % (os.getpid(), secrets.token_hex(4))
    # an unknown name is reported after the devices' own problems (as before), nothing is staged
    stage = not (check_mode or missing)
    folders = [f for f in (os.path.join(dest, "structured_configs"), os.path.join(dest, "configs"), dest)
               if not os.path.isdir(f)]
    try:
        if workers <= 1:
            parts = [_Renderer(plan, dest, options, md5_keys, not stage, tag).run(todo)]
        else:
            parts = _forked(plan, dest, options, md5_keys, not stage, tag, todo, workers)
        # every device's problems, in the devices' order (racks, then spines) whoever rendered them
        order = dict((d[0], i) for i, d in enumerate(todo))
        problems = [p for _name, found in sorted((f for part in parts for f in part["problems"]),
                                                 key=lambda f: order[f[0]]) for p in found]
        if problems:
            raise TorPolicyError(problems)
        if missing:
            raise TorPolicyError([InputProblem("devices", missing, "no ToR or spine of that name in the fabric",
                                               "use names from the topology (ToR: <rack>-tor or racks[].tor.name)")])
        for part in parts:
            for tmp, path in part["staged"]:
                os.replace(tmp, path)
    except BaseException:
        _remove_staged(dest, tag)
        for folder in folders:   # the directories this run made, if still empty
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise
    written, summaries = [], {}
    for name, summary, changed in sorted((s for part in parts for s in part["summaries"]), key=lambda s: s[0]):
        written.extend(changed)
        summaries[name] = summary
    return written, summaries


def _remove_staged(dest, tag):
    """Remove every temporary file of the run ``tag`` (also those of a worker that died before reporting)."""
    for folder in ("configs", "structured_configs"):
        for tmp in glob.glob(os.path.join(glob.escape(os.path.join(dest, folder)), ".*.%s.*.tmp" % tag)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _forked(plan, dest, options, md5_keys, check_mode, tag, todo, workers):
    """Share ``todo`` among ``workers`` forked processes (device i to worker i mod n, so each gets
    ToRs and spines alike); their results in worker order."""
    shares = [todo[i::workers] for i in range(workers)]
    folder = tempfile.mkdtemp(prefix="multinic-render-")
    try:
        pids = []
        for index, share in enumerate(shares):
            out = os.path.join(folder, "%d.pickle" % index)
            pid = os.fork()
            if pid == 0:   # pragma: no cover (the child; its result is checked by the parent)
                _child(plan, dest, options, md5_keys, check_mode, tag, share, out)
            pids.append(pid)
        failures = []
        for index, pid in enumerate(pids):
            _pid, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                failures.append("worker %d (pid %d) ended with status %d" % (index, pid, os.waitstatus_to_exitcode(status)))
        parts = []
        for index in range(len(shares)):
            path = os.path.join(folder, "%d.pickle" % index)
            if not os.path.exists(path):
                continue
            with open(path, "rb") as handle:
                part = pickle.load(handle)
            if "error" in part:
                failures.append("worker %d: %s" % (index, part["error"]))
            parts.append(part)
        if failures:
            raise RuntimeError("rendering failed in a worker process: %s" % "; ".join(failures))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return parts


def _child(plan, dest, options, md5_keys, check_mode, tag, share, out):  # pragma: no cover (runs forked)
    code = 0
    try:
        try:
            result = _Renderer(plan, dest, options, md5_keys, check_mode, tag).run(share)
        except Exception as exc:  # pylint: disable=broad-except
            result = {"error": "%s: %s" % (type(exc).__name__, exc), "trace": traceback.format_exc(),
                      "summaries": [], "staged": [], "problems": []}
            code = 1
        with open(out, "wb") as handle:
            pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # pylint: disable=broad-except
        code = 2
    finally:
        os._exit(code)  # pylint: disable=protected-access
