"""Regenerate the key tables of docs/topology.md from the schema in plugins/module_utils/plan/topology.py.

  .venv/bin/python scripts/gen-topology-doc.py          # rewrite the tables in place
  .venv/bin/python scripts/gen-topology-doc.py --check  # exit 1 if the doc is stale (used by tests)
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import SCHEMA  # noqa: E402

BEGIN = "<!-- BEGIN GENERATED KEY TABLES (scripts/gen-topology-doc.py) -->"
END = "<!-- END GENERATED KEY TABLES -->"
KIND = {"str": "string", "name": "name", "int": "integer", "prefix6": "IPv6 prefix", "prefix4": "IPv4 prefix",
        "ifnames": "list of interface names", "any-map": "mapping",
        "add-on": "any (add-on)"}
ORDER = ["topology", "region", "capacity", "pools", "infrastructure", "addressing", "asn", "building", "zone",
         "spine", "rack", "tor", "host"]


def tables():
    out = [BEGIN]
    for name in ORDER:
        out.append("")
        out.append("### `%s`" % name)
        out.append("")
        out.append("| key | type | required | meaning |")
        out.append("|---|---|---|---|")
        for key, kind, required, doc in SCHEMA[name]:
            if ":" in kind:
                shape, target = kind.split(":", 1)
                kind_text = "list of `%s`" % target if shape == "list" else "`%s`" % target
            else:
                kind_text = KIND[kind]
            out.append("| `%s` | %s | %s | %s |" % (key, kind_text, "yes" if required else "no", doc))
    out.append("")
    out.append(END)
    return "\n".join(out)


def main():
    path = os.path.join(ROOT, "docs", "topology.md")
    with open(path) as handle:
        text = handle.read()
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    new = head + tables() + tail
    if "--check" in sys.argv:
        if new != text:
            print("docs/topology.md is stale: run .venv/bin/python scripts/gen-topology-doc.py")
            sys.exit(1)
        return
    with open(path, "w") as handle:
        handle.write(new)


if __name__ == "__main__":
    main()
