# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The datapath's files in its state directory: the state record (what was changed and the values
it replaced, read by removal) and the watcher's runtime file. Written atomically: a crash leaves
the previous record, never a truncated one that removal could not read."""

from __future__ import annotations

import json
import os

from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

STATE_FILE = "datapath.json"
RUNTIME_FILE = "runtime.json"


def new_record():
    """An empty state record (version 1)."""
    return {"version": 1, "sysctl_prev": {}, "added_nic_addresses": [], "clsact_created": [],
            "bpffs_mounted": False, "sysctl_file_prev": None, "spec": None, "bpf_version": None}


def load_json(path):
    """The JSON document at ``path``, or None when it is missing or unreadable."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def save_json(path, data):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True), mode=0o644)
