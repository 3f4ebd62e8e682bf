# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's TCP-MD5 keys and a byte search for them (issue 13: keys never leave the vault).

The lab derives every key from one vaulted secret and the device's name (inventories/lab/group_vars/
all/lab.yml: sha256('<secret>/<name>'), first 32 hex characters); this module computes the same keys
from the decrypted vault, then searches files and captured output for each key and for the secret.
"""

from __future__ import annotations

import hashlib
import os

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VAULT = os.path.join(REPO, "inventories", "lab", "group_vars", "all", "vault.yml")
PASSWORD_FILE = os.path.join(REPO, ".cache", "lab-vault-password")


def lab_secret():
    """The lab's vaulted secret (an inline ``!vault`` value in vault.yml), decrypted with the lab password."""
    from ansible.parsing.vault import VaultLib, VaultSecret

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_constructor("!vault", lambda loader, node: loader.construct_scalar(node))
    with open(VAULT) as f:
        data = yaml.load(f, Loader=_Loader) or {}
    if "lab_vault_md5_secret" not in data:
        raise AssertionError("the lab vault holds no lab_vault_md5_secret: %s" % sorted(data))
    with open(PASSWORD_FILE, "rb") as f:
        password = f.read().strip()
    plain = VaultLib([("default", VaultSecret(password))]).decrypt(data["lab_vault_md5_secret"].encode())
    return plain.decode()


def lab_keys(names, secret=None):
    """{device: key} exactly as the lab's group_vars derive them."""
    secret = lab_secret() if secret is None else secret
    return dict((n, hashlib.sha256(("%s/%s" % (secret, n)).encode()).hexdigest()[:32]) for n in names)


def search(needles, paths=(), texts=None):
    """Every (where, needle name) at which a needle occurs: files under ``paths`` (recursively, every byte)
    and the strings of ``texts`` ({label: text}). Returns (hits, files_searched, bytes_searched)."""
    hits, nfiles, nbytes = [], 0, 0
    encoded = dict((name, value.encode()) for name, value in needles.items() if value)
    for label, text in (texts or {}).items():
        raw = text.encode() if isinstance(text, str) else text
        nbytes += len(raw)
        hits += [(label, name) for name, value in encoded.items() if value in raw]
    for top in paths:
        for root, _dirs, files in os.walk(top):
            for fn in files:
                path = os.path.join(root, fn)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as f:
                    raw = f.read()
                nfiles += 1
                nbytes += len(raw)
                hits += [(path, name) for name, value in encoded.items() if value in raw]
    return hits, nfiles, nbytes


def key_files(top, needles):
    """Files under ``top`` that hold a needle: [{path, mode, uid, gid, holds}] (never the needle itself)."""
    out = []
    for root, _dirs, files in os.walk(top):
        for fn in files:
            path = os.path.join(root, fn)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            holds = sorted(name for name, value in needles.items() if value and value.encode() in raw)
            if holds:
                st = os.stat(path)
                out.append({"path": path, "mode": "%04o" % (st.st_mode & 0o7777), "uid": st.st_uid,
                            "gid": st.st_gid, "holds": holds})
    return out


if __name__ == "__main__":
    # python keysearch.py <lab nodes dir> <out.json> <device> ...: which files of a running lab hold a key
    import json
    import sys

    found = key_files(sys.argv[1], lab_keys(sys.argv[3:]))
    with open(sys.argv[2], "w") as f:
        json.dump(found, f, indent=1, sort_keys=True)
