# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's admin-drain marker: what an operator (or the remediation) drained on this host.

Standard library only: bundled into the NIC watcher and the VipInjector helper (scripts/build-host-programs.py),
which both read it, and used by the ``fabric_drain`` module, which writes it.

``/var/lib/netscale-multinic/admin-drain.json`` (persistent: survives a watcher restart, a sidecar
restart and a host reboot; absent = nothing drained)::

    {"version": 1,
     "nics": {"1": {"since": 1764240000.0, "reason": "...", "job": "...", "case": null}},
     "host": null | {"since": ..., "reason": ..., "job": ..., "case": ...}}

* ``nics``: plan indexes of NICs drained. The watcher keeps them out of the egress set whatever their
  health (eBPF NIC_OUT / kernel per-NIC tables) and publishes them (``drained`` in its egress state);
  every sidecar withdraws the task IP on the BGP session of each of them, so the ToR stops sending there.
* ``host``: every slot drained: every sidecar withdraws everything (as its drain files do, but kept
  across a reboot, which empties /run).

The marker is written atomically (rename); readers treat an unreadable or malformed file as nothing
drained and say so (a marker is a deliberate act: it is never guessed).
"""

from __future__ import annotations

import json

ADMIN_DRAIN_FILE = "/var/lib/netscale-multinic/admin-drain.json"
VERSION = 1


def parse(data):
    """``(nic indexes, host drained, note)`` of a parsed marker (None: no file)."""
    if data is None:
        return set(), False, "no admin drain"
    try:
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError("version")
        nics = set(int(k) for k in (data.get("nics") or {}))
        host = data.get("host")
        if host is not None and not isinstance(host, dict):
            raise ValueError("host")
        host = host is not None
    except (AttributeError, TypeError, ValueError):
        return set(), False, "admin drain marker malformed: ignored"
    return nics, host, "admin drain ok"


def read(path):
    """The parsed marker at ``path`` (None when absent, {} when unreadable or not JSON)."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def empty():
    return {"version": VERSION, "nics": {}, "host": None}


def desired(current, scope, state, nic=None, meta=None):
    """The marker after drain (``state`` "drained") or undrain ("undrained") of ``scope`` ("nic" with
    ``nic``, or "host"). ``current``: the parsed marker (None = none). An entry already there keeps its
    metadata (``since`` of the first drain). Returns None when nothing is drained afterwards (the file
    goes)."""
    doc = empty()
    if isinstance(current, dict) and current.get("version") == VERSION:
        doc["nics"] = dict((str(int(k)), v) for k, v in (current.get("nics") or {}).items())
        doc["host"] = current.get("host") if isinstance(current.get("host"), dict) else None
    entry = dict(meta or {})
    if scope == "nic":
        key = str(int(nic))
        if state == "drained":
            doc["nics"].setdefault(key, entry)
        else:
            doc["nics"].pop(key, None)
    elif scope == "host":
        if state == "drained":
            doc["host"] = doc["host"] if doc["host"] is not None else entry
        else:
            doc["host"] = None
    else:
        raise ValueError("scope %r: nic or host" % (scope,))
    if not doc["nics"] and doc["host"] is None:
        return None
    return doc


def text(doc):
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"
