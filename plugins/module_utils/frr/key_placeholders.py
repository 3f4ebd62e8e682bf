# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TCP-MD5 keys out of the files on disk: a rendered config is written with ``password <md5:NAME>``
placeholders (NAME = the host or spine whose key it is), reviewable without the keys, and the keys are
filled in on the device, just before the config is validated and applied (``frr_config``'s ``secrets``).
"""

from __future__ import annotations

import re

_PASSWORD = re.compile(r"(\bpassword) (\S+)")
_PLACEHOLDER = re.compile(r"<md5:([^<>\s]+)>")


def with_placeholders(text, md5_keys):
    """``text`` with every ``password <key>`` whose key is in ``md5_keys`` ({name: key}) replaced by
    ``password <md5:name>``. Returns (text, sorted names used)."""
    by_key = {}
    for name, key in sorted((md5_keys or {}).items()):
        if key:
            by_key.setdefault(str(key), str(name))
    if not by_key:
        return text, []
    used = set()

    def sub(m):
        name = by_key.get(m.group(2))
        if name is None:
            return m.group(0)
        used.add(name)
        return "%s <md5:%s>" % (m.group(1), name)

    return _PASSWORD.sub(sub, text), sorted(used)


def placeholder_names(text):
    """The names of the ``<md5:NAME>`` placeholders in ``text``, sorted, unique."""
    return sorted(set(_PLACEHOLDER.findall(text)))


def fill_placeholders(text, secrets):
    """``text`` with each ``<md5:NAME>`` replaced by ``secrets[NAME]``. Returns (text, missing names)."""
    secrets = secrets or {}
    missing = sorted(n for n in placeholder_names(text) if not secrets.get(n))
    if missing:
        return text, missing
    return _PLACEHOLDER.sub(lambda m: str(secrets[m.group(1)]), text), []
