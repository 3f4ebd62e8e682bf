# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric lease: one mutating job per fabric at a time (design.md section 9). No Ansible imports.

A rollout, rollback, decommission, site run (and later a drain) takes its fabric's lease before any change
and gives it back at its end. The lease is one JSON file per fabric, ``<lease_dir>/<fabric>.json``
(``<lease_dir>`` is ``<journal_dir>/leases``), read and rewritten only under an exclusive POSIX record lock
on ``<lease_dir>/.<fabric>.lock`` (``fcntl.lockf``: per process, not inherited by forked workers, and
honoured over NFS) and replaced atomically (temporary file + rename), so two controllers that try at once
see exactly one winner. The document::

    {format, fabric, group, rollout_id, playbook, since,
     members: {member: {rollout_id, playbook, controller, pid, pid_start, awx_job_id, awx_workflow_job_id,
                        since, heartbeat}},
     broke: {what the last broken (stale) lease said, when, by whom} (only after a consented break)}

* ``group`` is what may share the lease: the jobs of one AWX workflow (and so the slices of one sliced
  job, which AWX runs as one workflow) share ``awx-wf-<awx_workflow_job_id>``; a job launched alone is
  ``awx-job-<awx_job_id>``; a CLI run is alone, ``<controller>:<pid>``. A job of the holding group *joins*
  (a member more); anything else is refused.
* a member is *stale* when its controller is this host and its pid is gone (or reused: the process start
  time differs), or - seen from another host - when its heartbeat is older than ``ttl`` seconds (the
  ``netscale.multinic.fabric_lease`` callback renews it while the job runs). A lease is stale when every
  member is; it is broken only with the caller's consent (``break_stale``), and never while a member
  lives.
* release removes one member; the last one out removes the file.

Every acquire, join, break and release is also appended to ``<lease_dir>/<fabric>.history.jsonl``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import threading
import time

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

FORMAT = 1
DEFAULT_TTL = 300
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_THREAD_LOCK = threading.RLock()   # lockf is per process: threads of one process (the callback) also queue here


class LeaseError(MultinicError):
    """Bad input to the lease (a name, a directory), or a lease file that is not one."""


def check_name(value, field):
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise LeaseError("%s=%r: use letters, digits, '.', '_' and '-' (1 to 128 characters, first a letter "
                         "or digit); nothing was changed" % (field, value))
    return value


def lease_path(lease_dir, fabric):
    return os.path.join(lease_dir, "%s.json" % check_name(fabric, "fabric"))


def lock_path(lease_dir, fabric):
    return os.path.join(lease_dir, ".%s.lock" % check_name(fabric, "fabric"))


def history_path(lease_dir, fabric):
    return os.path.join(lease_dir, "%s.history.jsonl" % check_name(fabric, "fabric"))


# --- processes --------------------------------------------------------------------------------------------

def process_start(pid):
    """Start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22), None when unknown."""
    try:
        with open("/proc/%d/stat" % int(pid)) as f:
            stat = f.read()
    except (OSError, ValueError, TypeError):
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    rest = stat[stat.rfind(")") + 2:].split()
    return rest[19] if len(rest) > 19 else None


def pid_alive(pid, start=None):
    """True when ``pid`` runs on this host and, when ``start`` is given, is the same process (not a reuse)."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass   # exists, another user's
    if start is not None:
        now = process_start(pid)
        return now is None or str(now) == str(start)
    return True


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _ppid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        return int(stat[stat.rfind(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def controller_pid(start=None):
    """The pid of the ``ansible-playbook`` process this module runs under (a module runs in a worker forked
    from it, through a shell). The nearest ancestor whose command line runs ansible-playbook, then up while the
    parent has the very same command line (forked workers do); a nested ansible-playbook (one started by a task
    of another) is its own controller. None when there is no such ancestor."""
    pid = os.getppid() if start is None else start
    found = None
    for _hop in range(64):
        if pid <= 1:
            break
        cmd = _cmdline(pid)
        if found is None:
            if any(os.path.basename(a) == b"ansible-playbook" for a in cmd.split(b"\0")[:3]):
                found = pid
        else:
            if cmd != _cmdline(found):
                break
            found = pid
        pid = _ppid(pid)
    return found


def this_host():
    return socket.gethostname()


# --- holder identity ----------------------------------------------------------------------------------------

def make_member(rollout_id, playbook, controller=None, pid=None, pid_start=None, awx_job_id=None,
                awx_workflow_job_id=None, now=None):
    """Identity of one job that takes (or joins) the lease."""
    now = time.time() if now is None else float(now)
    check_name(str(rollout_id), "rollout_id")
    if not playbook or not isinstance(playbook, str):
        raise LeaseError("playbook=%r: name the playbook that takes the lease (e.g. rollout.yml)" % (playbook,))
    controller = controller or this_host()
    m = {"rollout_id": str(rollout_id), "playbook": playbook, "controller": controller,
         "pid": int(pid) if pid else None,
         "pid_start": str(pid_start) if pid_start is not None else (process_start(pid) if pid else None),
         "awx_job_id": str(awx_job_id) if awx_job_id not in (None, "") else None,
         "awx_workflow_job_id": str(awx_workflow_job_id) if awx_workflow_job_id not in (None, "") else None,
         "since": round(now, 3), "heartbeat": round(now, 3)}
    if not m["awx_job_id"] and not m["pid"]:
        raise LeaseError("lease holder of rollout %s: no pid and no awx_job_id; a holder must be a process "
                         "(pid) or an AWX job (awx_job_id)" % rollout_id)
    return m


def member_key(m):
    return ("awx-job-%s" % m["awx_job_id"]) if m.get("awx_job_id") else "%s:%s" % (m["controller"], m["pid"])


def group_key(m):
    """What may share the lease with ``m``: its AWX workflow (slices of a sliced job run as one workflow),
    else its AWX job, else only itself."""
    if m.get("awx_workflow_job_id"):
        return "awx-wf-%s" % m["awx_workflow_job_id"]
    return member_key(m)


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(t)))


def _age(seconds):
    seconds = max(0, int(seconds))
    if seconds < 120:
        return "%d s" % seconds
    if seconds < 7200:
        return "%d min" % (seconds // 60)
    return "%.1f h" % (seconds / 3600.0)


def member_state(m, host=None, now=None, ttl=DEFAULT_TTL, alive=pid_alive):
    """(stale, why) of one member: by its pid on its own controller, by its heartbeat from elsewhere."""
    host = host or this_host()
    now = time.time() if now is None else float(now)
    hb_age = now - float(m.get("heartbeat") or m.get("since") or 0)
    if m.get("pid") and m.get("controller") == host:
        if alive(m["pid"], m.get("pid_start")):
            return False, "pid %s running on %s" % (m["pid"], host)
        return True, "pid %s gone on %s (killed or crashed without releasing)" % (m["pid"], host)
    if hb_age > ttl:
        return True, ("no heartbeat for %s (ttl %d s; its controller %s is another host, so its pid cannot be "
                      "checked from here)" % (_age(hb_age), ttl, m.get("controller")))
    return False, "heartbeat %s ago from %s" % (_age(hb_age), m.get("controller"))


def describe_member(m, now=None):
    now = time.time() if now is None else float(now)
    parts = ["rollout %s" % m.get("rollout_id"), "playbook %s" % m.get("playbook"),
             "controller %s" % m.get("controller")]
    if m.get("pid"):
        parts.append("pid %s" % m["pid"])
    if m.get("awx_job_id"):
        parts.append("AWX job %s" % m["awx_job_id"]
                     + (" of workflow %s" % m["awx_workflow_job_id"] if m.get("awx_workflow_job_id") else ""))
    parts.append("since %s (%s ago)" % (_iso(m.get("since") or 0), _age(now - float(m.get("since") or 0))))
    return ", ".join(parts)


def inspect_doc(doc, host=None, now=None, ttl=DEFAULT_TTL, alive=pid_alive):
    """What a lease document says: {held, stale, group, rollout_id, members [{key, ..., stale, why,
    description}], description}."""
    if not doc or not doc.get("members"):
        return {"held": False, "stale": False, "members": [], "group": None, "rollout_id": None,
                "description": "free"}
    members = []
    for key, m in sorted(doc["members"].items()):
        stale, why = member_state(m, host=host, now=now, ttl=ttl, alive=alive)
        members.append(dict(m, key=key, stale=stale, why=why, description=describe_member(m, now=now)))
    stale = all(m["stale"] for m in members)
    desc = "; ".join("%s [%s]" % (m["description"], m["why"]) for m in members)
    return {"held": True, "stale": stale, "members": members, "group": doc.get("group"),
            "rollout_id": doc.get("rollout_id"), "description": desc}


def refusal(fabric, view, path, journal_dir=None):
    """The refusal message: who holds the fabric, and what to do."""
    rid = view.get("rollout_id")
    head = ("fabric %s: another job holds this fabric's lease (one change at a time per fabric); nothing was "
            "changed by this job. Holder: %s." % (fabric, view["description"]))
    if not view["stale"]:
        return head + (" Wait until it ends (it releases the lease when it finishes or fails) or stop it, then "
                       "run this job again. Lease file %s." % path)
    where = (" (journal %s/%s)" % (journal_dir, rid)) if journal_dir else ""
    return head + (" It looks dead: it was killed or crashed without releasing, and may have left its change "
                   "half done. Read what it did in its journal%s, then resume it (playbooks/rollout.yml "
                   "-e rollout_id=%s) or undo it (playbooks/rollback.yml -e rollout_id=%s), and add "
                   "-e rollout_break_lease=true to break the stale lease (recorded in the journal and in %s). "
                   "Lease file %s." % (where, rid, rid, os.path.basename(path).replace(".json", ".history.jsonl"),
                                       path))


# --- file I/O ------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def locked(lease_dir, fabric):
    """Exclusive lock of one fabric's lease (POSIX record lock on the lock file, plus a thread lock)."""
    if not os.path.isdir(lease_dir):
        os.makedirs(lease_dir, mode=0o700, exist_ok=True)
    with _THREAD_LOCK:
        fd = os.open(lock_path(lease_dir, fabric), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def read_doc(lease_dir, fabric):
    path = lease_path(lease_dir, fabric)
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise LeaseError("%s: not a lease file (%s); a job may have been killed while writing it. Move it away "
                         "after checking that no job runs on fabric %s" % (path, exc, fabric))
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("members"), dict):
        raise LeaseError("%s: not a lease file (format %s); move it away after checking that no job runs on "
                         "fabric %s" % (path, FORMAT, fabric))
    return doc


def _write(lease_dir, fabric, doc):
    path = lease_path(lease_dir, fabric)
    if doc is None or not doc.get("members"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    atomic_write(path, json.dumps(doc, indent=1, sort_keys=True) + "\n", mode=0o600)


def _history(lease_dir, fabric, entry):
    line = json.dumps(entry, sort_keys=True) + "\n"
    fd = os.open(history_path(lease_dir, fabric), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


# --- operations ---------------------------------------------------------------------------------------------

def acquire(lease_dir, fabric, member, break_stale=False, ttl=DEFAULT_TTL, host=None, now=None, check=False,
            alive=pid_alive, journal_dir=None):
    """Take or join the fabric's lease for ``member`` (from :func:`make_member`).

    Returns {action, changed, path, member, group, lease, holder, previous, message}; ``action`` is one of
    acquired (was free), joined (a job of the holding group), held (this member already holds it; heartbeat
    renewed), broken (a stale lease broken with consent, then acquired; ``previous`` is what it said) or refused
    (``message`` says who holds it and what to do). ``check``: decide and report only, never write."""
    now = time.time() if now is None else float(now)
    path = lease_path(lease_dir, fabric)
    key, group = member_key(member), group_key(member)
    member = dict(member, heartbeat=round(now, 3))
    ctx = locked(lease_dir, fabric) if not check else contextlib.nullcontext()   # check mode creates nothing
    with ctx:
        doc = read_doc(lease_dir, fabric) if os.path.isdir(lease_dir) else None
        view = inspect_doc(doc, host=host, now=now, ttl=ttl, alive=alive)
        previous = None
        if not view["held"]:
            action = "acquired"
            doc = {"format": FORMAT, "fabric": fabric, "group": group, "rollout_id": member["rollout_id"],
                   "playbook": member["playbook"], "since": round(now, 3), "members": {key: member}}
        elif key in doc["members"]:
            action = "held"
            doc["members"][key] = dict(doc["members"][key], heartbeat=round(now, 3))
        elif doc.get("group") == group:
            action = "joined"
            doc["members"][key] = member
        elif view["stale"] and break_stale:
            action = "broken"
            previous = view
            doc = {"format": FORMAT, "fabric": fabric, "group": group, "rollout_id": member["rollout_id"],
                   "playbook": member["playbook"], "since": round(now, 3), "members": {key: member},
                   "broke": {"at": round(now, 3), "by": describe_member(member, now=now),
                             "previous": view["description"], "previous_rollout_id": view["rollout_id"]}}
        else:
            action = "refused"
        result = {"action": action, "changed": action in ("acquired", "joined", "broken"), "path": path,
                  "member": key, "group": group, "previous": previous, "stale": view["stale"],
                  "holder": view if view["held"] else None}
        if action == "refused":
            msg = refusal(fabric, view, path, journal_dir=journal_dir)
            if not view["stale"] and break_stale:
                msg += (" rollout_break_lease=true breaks only a stale lease (its holder's pid gone, or no heartbeat "
                        "for %d s); this holder is alive." % ttl)
            result.update(message=msg, lease=doc)
            return result
        if not check:
            _write(lease_dir, fabric, doc)
            entry = {"t": round(now, 3), "event": action, "member": key, "group": group,
                     "holder": describe_member(member, now=now)}
            if previous:
                entry["previous"] = previous["description"]
            if action != "held":
                _history(lease_dir, fabric, entry)
        result["lease"] = doc
        result["message"] = {
            "acquired": "fabric %s: lease taken by %s" % (fabric, describe_member(member, now=now)),
            "joined": "fabric %s: lease shared with the jobs of %s (%s)" % (fabric, group, describe_member(member, now=now)),
            "held": "fabric %s: lease already held by this job (%s); heartbeat renewed" % (fabric, key),
            "broken": "fabric %s: STALE lease broken with consent (rollout_break_lease); it said: %s. Now held by %s"
                      % (fabric, previous and previous["description"], describe_member(member, now=now)),
        }[action]
        return result


def release(lease_dir, fabric, key, now=None, check=False, reason="finished"):
    """Give ``key``'s share back. Returns {action: released (file removed) | left (other members remain) |
    not_held, changed, path, remaining}. A lease broken by another job meanwhile is not touched."""
    now = time.time() if now is None else float(now)
    path = lease_path(lease_dir, fabric)
    if not os.path.isdir(lease_dir):
        return {"action": "not_held", "changed": False, "path": path, "remaining": []}
    ctx = locked(lease_dir, fabric) if not check else contextlib.nullcontext()
    with ctx:
        doc = read_doc(lease_dir, fabric)
        if not doc or key not in doc["members"]:
            return {"action": "not_held", "changed": False, "path": path,
                    "remaining": sorted((doc or {}).get("members", {}))}
        gone = doc["members"].pop(key)
        remaining = sorted(doc["members"])
        action = "left" if remaining else "released"
        if not check:
            _write(lease_dir, fabric, doc)
            _history(lease_dir, fabric, {"t": round(now, 3), "event": "released", "member": key,
                                         "group": doc.get("group"), "reason": reason,
                                         "holder": describe_member(gone, now=now), "remaining": remaining})
        return {"action": action, "changed": True, "path": path, "remaining": remaining}


def renew(lease_dir, fabric, key, now=None):
    """Heartbeat of ``key``; False when it no longer holds the lease (released, or broken as stale)."""
    now = time.time() if now is None else float(now)
    with locked(lease_dir, fabric):
        doc = read_doc(lease_dir, fabric)
        if not doc or key not in doc["members"]:
            return False
        doc["members"][key]["heartbeat"] = round(now, 3)
        _write(lease_dir, fabric, doc)
        return True


def inspect(lease_dir, fabric, host=None, now=None, ttl=DEFAULT_TTL, alive=pid_alive):
    """The lease as it stands (never locks for long, never writes)."""
    doc = read_doc(lease_dir, fabric) if os.path.isdir(lease_dir) else None
    view = inspect_doc(doc, host=host, now=now, ttl=ttl, alive=alive)
    view["path"] = lease_path(lease_dir, fabric)
    view["lease"] = doc
    return view
