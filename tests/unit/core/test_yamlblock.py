# -*- coding: utf-8 -*-
"""yamlblock.BlockYaml writes PyYAML's bytes (yaml.dump with sorted keys, block style), with and without
redaction: fixed cases of every layout, scalars PyYAML quotes, folds or escapes, and random documents."""

from __future__ import annotations

import random

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact
from ansible_collections.netscale.multinic.plugins.module_utils.yamlblock import BlockYaml, pyyaml_dump, tree_copy

TRICKY = [
    "", " ", "a", "a b", "a  b", " a", "a ", "yes", "No", "on", "OFF", "true", "null", "~", "Null", "0", "012",
    "0x1f", "1_000", "1:30", "1.5", ".5", "1e3", "1.0e+3", ".inf", ".NaN", "2026-11-27", "2026-11-27 12:00:00",
    "<<", "=", "-", "- a", "-a", "?", "? a", ":", "a:", "a: b", "a:b", "fd00::", "fd00::1", "::1", "fd00:1::/64",
    "198.18.0.1/27", "#", "a #b", "a#b", "!x", "&x", "*x", "|", ">", "'", '"', "%x", "@x", "`x", "[a]", "{a}",
    "a,b", "a\nb", "a\tb", "\u00e9t\u00e9", "x\x01", "---", "...", "a...", "HOST-h1-1-1-1-s3", "neighbor x password k",
    "md5-password secret", "key-string 7 abc", "h" * 130, "word " * 30, "x" * 100, "a b" + "c" * 90,
    "x" * 70 + " y", "w" * 60 + " z z z", "v" * 50 + " a: b", "\u00e9" * 40 + "x" * 30, "q" * 75 + "\x01",
    "SPINES-IPV6", "+1", "-1", "+", "0b101", "0o17", "1__0", "y", "n", "Y", "~a",
]


def docs():
    yield {}
    yield []
    yield {"a": [], "b": {}, "c": [[]], "d": [{}], "e": [[1, 2], [3]], "f": [{"a": 1, "b": [1, {"c": [2]}]}]}
    yield {"x": [{"a": {"b": [{"c": 1}]}}], "t": (("fd00::1/128", "ipv6"), ()), "n": None, "b": [True, False]}
    yield [[["deep"]], {"k": "v"}, [], {}, -5, 10 ** 20, 0]
    yield {"secret": "s", "md5_key": "k", "md5_keys": {"h": "k"}, "password": ["a", "b"], "key_string": None,
           "bgp_password": "", "my_secret": {}, "x_md5_password": False, "text": "neighbor fd00::1 password abc"}
    yield {"s%d" % i: s for i, s in enumerate(TRICKY)}
    yield [TRICKY]
    for depth in range(1, 12):   # the same scalars at every column: folding depends on where a line starts
        doc = {"k": TRICKY}
        for level in range(depth):
            doc = {"level%d" % level: [doc] if level % 2 else doc}
        yield doc


def random_doc(rng, depth=0):
    roll = rng.random()
    if depth > 4 or roll < 0.45:
        return rng.choice([rng.choice(TRICKY), rng.randint(-10, 10 ** 6), None, True, False,
                           "".join(rng.choice("ab:-. #0/") for _i in range(rng.randint(0, 12)))])
    if roll < 0.75:
        return dict((rng.choice(["a", "b", "name", "md5_key", "password", "k%d" % rng.randint(0, 9),
                                 rng.choice(TRICKY[:40]) or "e"]), random_doc(rng, depth + 1))
                    for _i in range(rng.randint(0, 5)))
    return [random_doc(rng, depth + 1) for _i in range(rng.randint(0, 4))]


@pytest.mark.parametrize("redacting", [False, True])
def test_fixed_documents_are_pyyaml_bytes(redacting):
    writer = BlockYaml(redact=redacting)
    for doc in docs():
        want = pyyaml_dump(redact(doc) if redacting else tree_copy(doc))
        assert writer.dump(doc) == want, doc


@pytest.mark.parametrize("redacting", [False, True])
def test_random_documents_are_pyyaml_bytes(redacting):
    rng = random.Random(27)
    writer = BlockYaml(redact=redacting)
    for _i in range(1500):
        doc = random_doc(rng)
        if not isinstance(doc, (dict, list)):
            doc = {"v": doc}
        want = pyyaml_dump(redact(doc) if redacting else tree_copy(doc))
        assert writer.dump(doc) == want, doc


def test_what_it_cannot_vouch_for_goes_to_pyyaml():
    writer = BlockYaml()
    for doc in ({"f": 1.5}, {1: "a"}, {"k" * 130: 1}, {"k": "word " * 30}, "top", 5,
                {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {"j": "x" * 60 + " y"}}}}}}}}}}):
        assert writer.dump(doc) == pyyaml_dump(doc)
    assert writer.fallbacks == 7
    # the common case does not fall back
    writer = BlockYaml(redact=True)
    writer.dump({"name": "lab-r1-tor", "peers": [{"address": "fd00::1", "description": "h1 slot0 eth0"}]})
    assert writer.fallbacks == 0


def test_shared_containers_are_written_out_not_aliased():
    shared = {"a": [1, 2]}
    doc = {"x": shared, "y": shared}
    assert BlockYaml().dump(doc) == pyyaml_dump(tree_copy(doc))
    assert "&id" in pyyaml_dump(doc)   # what PyYAML does with the shared object itself
