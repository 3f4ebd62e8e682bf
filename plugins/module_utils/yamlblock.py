# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Block YAML of plain data, the same bytes as ``yaml.safe_dump(data, sort_keys=True,
default_flow_style=False)``, several times faster.

What costs in PyYAML is not the emitter (libyaml's when built in) but its Python representer: a node
object per value and an implicit-resolver check per scalar (~11 ms for one ToR's 40 KB structured
config on a 100K-GPU region, 70 % of rendering it). Here the layout of block mappings and sequences is
written directly, and the text of each distinct scalar is asked of PyYAML itself once and remembered,
so quoting and escaping are PyYAML's own. Whatever this writer cannot vouch for (a scalar type other
than str/int/bool/None, a non-string or long key, a scalar that PyYAML folds or that would reach
past the line width with a space or a double quote in it, a top-level scalar) makes it hand the whole
document to PyYAML: the bytes are always PyYAML's. No Ansible imports.
"""

from __future__ import annotations

import re

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core on every controller
    yaml = None
    HAS_YAML = False

from ansible_collections.netscale.multinic.plugins.module_utils.writing import REDACTED, redact as redact_copy

SAFE_DUMPER = (getattr(yaml, "CSafeDumper", None) or yaml.SafeDumper) if HAS_YAML else None

# PyYAML's default line width: plain, single- and double-quoted scalars may be folded beyond it.
_WIDTH = 80
# Longer keys are written as complex keys ("? key"); the writer leaves those to PyYAML.
_MAX_KEY = 120
_SCALARS = (str, int, bool, type(None))
# Strings both emitters write plain whatever the context (block style, not a key): no indicator first,
# no ": ", " #", leading or trailing space or colon, no double space, no line break, no character that
# needs escaping. Whether the plain text would read back as a string (not a number, boolean, null,
# date...) is still asked of PyYAML's resolver.
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./+-]*(?:(?::+| )[A-Za-z0-9_./+-]+)*$")
# Distinct scalars remembered (most are addresses met once: the memo must not grow with the fabric).
_MEMO_MAX = 50000
_RESOLVER = yaml.resolver.Resolver() if HAS_YAML else None
_STR_TAG = "tag:yaml.org,2002:str"


class _Fallback(Exception):
    """The writer cannot vouch for the bytes of this document."""


def pyyaml_dump(data):
    """The reference: PyYAML's block dump with sorted keys."""
    return yaml.dump(data, Dumper=SAFE_DUMPER, sort_keys=True, default_flow_style=False)


def tree_copy(data):
    """``data`` with a new container for every dict, list and tuple met (PyYAML writes an anchor and
    an alias for a container met twice in one document; this writer writes it out each time, as PyYAML
    does for such a copy, and as it does for :func:`writing.redact`'s)."""
    kind = type(data)
    if kind is dict:
        return dict((key, tree_copy(value)) for key, value in data.items())
    if kind is list or kind is tuple:
        return kind(tree_copy(value) for value in data)
    return data


class BlockYaml(object):
    """A writer with its memo of scalar texts (keep one per run: the texts repeat across documents).

    ``dump(data)`` is ``pyyaml_dump(tree_copy(data))`` (``pyyaml_dump(redact(data))`` with ``redact``).

    ``redact``: write the document as :func:`writing.redact` would have made it (secret-named keys
    masked, config-form secrets in strings replaced), without building the redacted copy.
    """

    def __init__(self, redact=False):
        self.redact = redact
        self._values = {}
        self._keys = {}
        self.fallbacks = 0

    def dump(self, data):
        """The YAML text of ``data`` (dicts with string keys, lists, str, int, bool, None)."""
        if type(data) in (dict, list, tuple):  # pylint: disable=unidiomatic-typecheck
            out = []
            try:
                if not data:
                    return "{}\n" if type(data) is dict else "[]\n"  # pylint: disable=unidiomatic-typecheck
                if type(data) is dict:  # pylint: disable=unidiomatic-typecheck
                    self._mapping(data, 0, False, out)
                else:
                    self._sequence(data, 0, False, out)
                return "".join(out)
            except _Fallback:
                pass
        self.fallbacks += 1
        return pyyaml_dump(redact_copy(data) if self.redact else tree_copy(data))

    # -- scalars: PyYAML's own text, once per distinct value --------------------------------------
    def _value(self, value, kind):
        """The text of a scalar: a str, or a 1-tuple holding the text when PyYAML may fold it past the
        line width."""
        if kind not in _SCALARS:
            raise _Fallback()
        memo_key = (kind, value)
        text = self._values.get(memo_key, False)
        if text is False:
            text = self._values[memo_key] = self._scalar_text(value, kind)
            if len(self._values) >= _MEMO_MAX:
                self._values.clear()
        if text is None:
            raise _Fallback()
        return text

    def _scalar_text(self, value, kind):
        if kind is str:
            plain = _PLAIN.match(value)
            # config-form secrets need a blank after the keyword: none in a plain word
            if self.redact and not (plain and " " not in value):
                value = redact_copy(value)
                plain = _PLAIN.match(value)
            if plain and _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG:
                return (value,) if " " in value else value
        dumped = pyyaml_dump({"k": value})
        if not (dumped.startswith("k: ") and dumped.endswith("\n") and dumped.count("\n") == 1):
            return None
        text = dumped[3:-1]
        # may PyYAML fold it at some column? (at a space, or anywhere in double quotes)
        return (text,) if (" " in text or text.startswith('"')) else text

    def _key(self, key):
        """(text of the key with its colon, whether its value is a secret when redacting)."""
        if type(key) is not str or len(key) > _MAX_KEY:  # pylint: disable=unidiomatic-typecheck
            raise _Fallback()
        dumped = pyyaml_dump({key: None})
        if not dumped.endswith(": null\n") or dumped.count("\n") != 1 or dumped.startswith("?"):
            raise _Fallback()
        # a key whose value redact() masks (whatever the value, unless empty)
        secret = self.redact and redact_copy({key: "x"})[key] == REDACTED
        entry = self._keys[key] = (dumped[:-len(" null\n")], secret)
        return entry

    # -- block collections (PyYAML's layout: indent 2, sequences in a mapping not indented) -------
    def _mapping(self, mapping, indent, inline, out):
        pad = " " * indent
        keys = self._keys
        try:
            order = sorted(mapping)
        except TypeError:
            raise _Fallback()
        for key in order:
            value = mapping[key]
            entry = keys.get(key) if type(key) is str else None  # pylint: disable=unidiomatic-typecheck
            ktext, secret = entry or self._key(key)
            if secret:   # rare (TCP-MD5 keys): redact()'s own masking of the entry
                value = redact_copy({key: value})[key]
            if inline:
                out.append(ktext)
                inline = False
            else:
                out.append(pad + ktext)
            self._item(value, indent, indent + len(ktext), True, out)

    def _sequence(self, items, indent, inline, out):
        pad = pad_dash = " " * indent + "-"
        if inline:
            pad = "-"
        for value in items:
            out.append(pad)
            pad = pad_dash
            self._item(value, indent, indent + 1, False, out)

    def _item(self, value, indent, column, in_mapping, out):
        kind = type(value)
        if kind is dict:
            if not value:
                out.append(" {}\n")
            elif in_mapping:
                out.append("\n")
                self._mapping(value, indent + 2, False, out)
            else:
                out.append(" ")
                self._mapping(value, indent + 2, True, out)
        elif kind is list or kind is tuple:
            if not value:
                out.append(" []\n")
            elif in_mapping:
                out.append("\n")
                self._sequence(value, indent, False, out)
            else:
                out.append(" ")
                self._sequence(value, indent + 2, True, out)
        elif kind is int:
            out.append(" %d\n" % value)
        else:
            text = self._value(value, kind)
            if type(text) is tuple:  # pylint: disable=unidiomatic-typecheck
                text = text[0]
                if column + 1 + len(text) > _WIDTH:
                    raise _Fallback()
            out.append(" " + text + "\n")
