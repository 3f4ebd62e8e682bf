# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the collection writes anything: atomic file writes and redaction of secrets.

Every writer (plan store, rendered configs, reports, snapshots, journals, sidecar files, lab state,
datapath state) goes through :func:`atomic_write` / :class:`StagedWrite`, and everything that can
carry a key (a config, a diff, tool output, a structured record) goes through :func:`redact` before
it is returned, logged or written where a key does not belong. Modules that install a directory of
rendered files (read what is there, compare, write atomically with mode and owner, diff before/after,
check mode) use :class:`FileInstall` and :func:`remove_dir`. No Ansible imports.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile

REDACTED = "<redacted>"

# Config-text forms of a secret: FRR ``neighbor X password K``, EOS ``password 7 K``,
# ``md5-password``, ``authentication-key``, ``key-string``; ExaBGP ``md5-password K;``.
_SECRET_TEXT_RE = re.compile(
    r"(\b(?:password|md5-password|authentication-key|key-string)(?:\s+[07])?\s+)([^\s;]+)")
# Keys of structured records whose values are secrets.
_SECRET_KEY_RE = re.compile(r"(^|_)(md5_key|md5_password|md5_keys|password|secret|key_string)$")


def redact(value, secrets=()):
    """Copy of ``value`` with secrets replaced by ``<redacted>``.

    ``value`` may be text (config, diff, tool output) or a structure of dicts, lists and scalars.
    Text is redacted by the config forms above and by every literal in ``secrets`` (for example
    the old and the new key of a rotation); in structures, the values of secret-named keys are
    replaced whatever their form. Returns the same type it was given.
    """
    literals = sorted((s for s in secrets if isinstance(s, str) and s), key=len, reverse=True)
    return _redact(value, literals)


def _redact(value, literals):
    if isinstance(value, str):
        if not value:
            return value
        for lit in literals:
            value = value.replace(lit, REDACTED)
        return _SECRET_TEXT_RE.sub(lambda m: m.group(1) + REDACTED, value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, str) and _SECRET_KEY_RE.search(key) and item not in (None, "", {}, []):
                out[key] = _mask(item)
            else:
                out[key] = _redact(item, literals)
        return out
    if isinstance(value, (list, tuple)):
        return type(value)(_redact(item, literals) for item in value)
    return value


def _mask(item):
    if isinstance(item, dict):
        return dict((k, REDACTED) for k in item)
    if isinstance(item, (list, tuple)):
        return type(item)([REDACTED] * len(item))
    return REDACTED


def atomic_write(path, text, mode=0o644, owner=None, makedirs=True):
    """Write ``text`` to ``path`` so that readers see the old or the new file, never a part.

    The temporary file is created beside ``path`` with ``mode`` already set (a secret is never
    world-readable, not even for an instant), then renamed over it. ``owner`` is ``(uid, gid)``
    for files a daemon reads. On any error the temporary file is removed and ``path`` is unchanged.
    """
    folder = os.path.dirname(path) or "."
    if makedirs:
        os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=folder)
    try:
        os.chmod(tmp, mode)
        if owner is not None:
            os.fchown(fd, owner[0], owner[1])
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_if_changed(path, text, mode=0o644, check_mode=False, owner=None):
    """Atomically write ``text`` when the file's content or mode differs; returns whether it did
    (or, in check mode, would)."""
    try:
        with open(path) as handle:
            same = handle.read() == text
        if same and (os.stat(path).st_mode & 0o7777) == mode:
            return False
    except (IOError, OSError):
        pass
    if not check_mode:
        atomic_write(path, text, mode=mode, owner=owner)
    return True


def read_text(path):
    """The text of ``path``, or None when there is none to read (missing, unreadable)."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


class FileInstall(object):
    """Install-if-changed of the files of one directory (a sidecar's or a responder's configuration).

    ``files``: {name: (text, mode)}. ``owner``: (uid, gid) to give the files, or None to leave them to
    the writing process. ``check_owner``: the (uid, gid) an installed file must have, a None element
    not checked (default ``owner``). ``secrets``: literals hidden in the diff (e.g. the old and new key).

    Built, it has compared every file with what is installed (nothing written yet), so a caller can
    validate the new content before :meth:`install`:

    - ``changed``: {path: whether the file must be written} (content, mode or owner differs, or missing),
      in name order;
    - ``diff``: one ``{before_header, after_header, before, after}`` per file whose content differs,
      in name order, redacted;
    - ``any_changed``: whether anything must be written.
    """

    def __init__(self, folder, files, owner=None, check_owner=None, secrets=()):
        self.folder = folder
        self.files = dict(files)
        self.owner = owner
        check_owner = owner if check_owner is None else check_owner
        self.changed = {}
        self.diff = []
        for name in sorted(self.files):
            text, mode = self.files[name]
            path = os.path.join(folder, name)
            old = read_text(path)
            ok = old == text
            if ok:
                st = os.stat(path)
                ok = (st.st_mode & 0o7777) == mode and (check_owner is None or all(
                    want is None or have == want for have, want in zip((st.st_uid, st.st_gid), check_owner)))
            self.changed[path] = not ok
            if old != text:
                self.diff.append({"before_header": path, "after_header": path,
                                  "before": redact(old or "", secrets), "after": redact(text, secrets)})

    @property
    def any_changed(self):
        return any(self.changed.values())

    def install(self, order=None, check_mode=False):
        """Write every changed file atomically (its mode and owner set before it appears), in ``order``
        (names; default name order; e.g. the file a restart loads last). Creates the directory (0755)
        when missing. In check mode writes nothing. Returns ``changed``."""
        if check_mode or not self.any_changed:
            return self.changed
        if not os.path.isdir(self.folder):
            os.makedirs(self.folder, 0o755)
        for name in (order or sorted(self.files)):
            path = os.path.join(self.folder, name)
            if self.changed[path]:
                text, mode = self.files[name]
                atomic_write(path, text, mode=mode, owner=self.owner, makedirs=False)
        return self.changed


def remove_dir(folder, check_mode=False):
    """Remove ``folder`` and everything in it (state=absent of an installed directory).

    Returns (changed, {path: True} of the files it held, diff); unchanged when it does not exist.
    In check mode nothing is removed."""
    if not os.path.isdir(folder):
        return False, {}, None
    files = dict((os.path.join(folder, name), True) for name in sorted(os.listdir(folder)))
    if not check_mode:
        shutil.rmtree(folder)
    return True, files, {"before": "%s present\n" % folder, "after": ""}


class StagedWrite(object):
    """Stage several files, then rename them all into place only when every one was written.

    ``stage`` writes each text to a temporary file beside its target; ``commit`` flushes them to disk
    once (``os.sync``: one flush instead of one fsync per file, which dominated at fabric scale) and
    renames them over their targets. ``abort`` (also on any exception in a ``with`` block) removes the
    temporary files and changes nothing.
    """

    def __init__(self, mode=0o644):
        self.mode = mode
        self.staged = []

    def stage(self, path, text):
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=folder)
        self.staged.append((tmp, path))
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        # mkstemp made the file 0600: it is never readable by others before it is complete.
        os.chmod(tmp, self.mode)

    def commit(self, remove=()):
        os.sync()
        for tmp, path in self.staged:
            os.replace(tmp, path)
        self.staged = []
        for path in remove:
            os.unlink(path)

    def abort(self):
        for tmp, _path in self.staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        self.staged = []

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        return False


def atomic_write_many(items, mode=0o644):
    """Write every (path, text) with :class:`StagedWrite` semantics."""
    with StagedWrite(mode) as batch:
        for path, text in items:
            batch.stage(path, text)
        batch.commit()
