"""The picture of plugins/module_utils in docs/architecture.md, drawn from the code's own imports.

Rooms are the packages of module_utils (a folder) and its loose files; an arrow A -> B says that some
file of room A imports room B (the count is the number of importing files); floors stack the rooms so
that every arrow points down (floor 0 imports no other room). Lines are the rooms' non-blank lines.

  .venv/bin/python scripts/gen-architecture-doc.py            # rewrite the picture of the work tree in place
  .venv/bin/python scripts/gen-architecture-doc.py --check    # exit 1 if the doc is stale (used by tests)
  .venv/bin/python scripts/gen-architecture-doc.py --rev REV  # print the picture of a git revision
"""
import argparse
import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE_UTILS = "plugins/module_utils"
PREFIX = "ansible_collections.netscale.multinic.plugins.module_utils."
DOC = os.path.join(ROOT, "docs", "architecture.md")
BEGIN = "<!-- BEGIN GENERATED PICTURE (scripts/gen-architecture-doc.py) -->"
END = "<!-- END GENERATED PICTURE -->"


def sources(rev=None):
    """{path relative to the repo: text} of every .py file under module_utils (work tree or ``rev``)."""
    if rev is None:
        found = {}
        for folder, dirs, files in os.walk(os.path.join(ROOT, MODULE_UTILS)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as handle:
                        found[os.path.relpath(path, ROOT)] = handle.read()
        return found
    names = subprocess.run(["git", "-C", ROOT, "ls-tree", "-r", "--name-only", rev, MODULE_UTILS + "/"],
                           capture_output=True, text=True, check=True).stdout.split()
    return dict((n, subprocess.run(["git", "-C", ROOT, "show", "%s:%s" % (rev, n)], capture_output=True, text=True,
                                   check=True).stdout) for n in names if n.endswith(".py"))


def room_of_path(path):
    inner = path[len(MODULE_UTILS) + 1:]
    head = inner.split("/", 1)[0]
    return head[:-3] if head.endswith(".py") else head


def room_of_module(module, rooms):
    if not module.startswith(PREFIX):
        return None
    head = module[len(PREFIX):].split(".", 1)[0]
    return head if head in rooms else None


def picture(files):
    rooms = {}
    for path, text in files.items():
        room = room_of_path(path)
        if room == "__init__":
            continue
        entry = rooms.setdefault(room, {"files": 0, "lines": 0, "package": "/" in path[len(MODULE_UTILS) + 1:]})
        entry["files"] += 1
        entry["lines"] += sum(1 for line in text.splitlines() if line.strip())
    arrows = {}
    for path, text in files.items():
        src = room_of_path(path)
        if src not in rooms:
            continue
        seen = set()
        for node in ast.walk(ast.parse(text)):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods = [node.module] + ["%s.%s" % (node.module, a.name) for a in node.names]
            for mod in mods:
                dst = room_of_module(mod, rooms)
                if dst and dst != src:
                    seen.add(dst)
        for dst in seen:
            arrows[(src, dst)] = arrows.get((src, dst), 0) + 1
    floors = {}

    def floor(room, path=()):
        if room in floors:
            return floors[room]
        if room in path:
            raise SystemExit("import circle: %s" % " -> ".join(path + (room,)))
        below = [floor(dst, path + (room,)) for (src, dst) in arrows if src == room]
        floors[room] = 1 + max(below) if below else 0
        return floors[room]

    for room in rooms:
        floor(room)
    upward = [(s, d) for (s, d) in arrows if floors[d] >= floors[s]]
    return rooms, arrows, floors, upward


def render(files, title):
    rooms, arrows, floors, upward = picture(files)
    loose = sorted(r for r in rooms if not rooms[r]["package"])
    out = ["**%s**: %d rooms (%d packages, %d loose files), %d floors, %d arrows, %d pointing up or sideways; "
           "%d files, %d lines." % (title, len(rooms), len(rooms) - len(loose), len(loose), max(floors.values()) + 1,
                                    len(arrows), len(upward), sum(r["files"] for r in rooms.values()),
                                    sum(r["lines"] for r in rooms.values())), "",
           "| floor | rooms (files, lines; `name.py` = a loose file) |", "|---|---|"]
    for level in sorted(set(floors.values()), reverse=True):
        names = sorted(r for r in rooms if floors[r] == level)
        cells = ["`%s%s` (%d, %d)" % (r, "" if rooms[r]["package"] else ".py", rooms[r]["files"], rooms[r]["lines"])
                 for r in names]
        out.append("| %d | %s |" % (level, ", ".join(cells)))
    out += ["", "Arrows (room -> rooms it imports, with the number of importing files):", ""]
    for src in sorted(rooms, key=lambda r: (-floors[r], r)):
        dsts = sorted((d, n) for (s, d), n in arrows.items() if s == src)
        if dsts:
            out.append("- `%s` -> %s" % (src, ", ".join("`%s` (%d)" % (d, n) for d, n in dsts)))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--rev")
    args = ap.parse_args()
    if args.rev:
        print(render(sources(args.rev), "module_utils at %s" % args.rev))
        return 0
    block = "\n".join([BEGIN, "", render(sources(), "module_utils today"), "", END])
    with open(DOC, encoding="utf-8") as handle:
        doc = handle.read()
    if BEGIN not in doc or END not in doc:
        print("docs/architecture.md has no generated picture (%s ... %s)" % (BEGIN, END))
        return 1
    new = doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):]
    if args.check:
        if new != doc:
            print("docs/architecture.md is stale: run .venv/bin/python scripts/gen-architecture-doc.py")
            return 1
        return 0
    with open(DOC, "w", encoding="utf-8") as handle:
        handle.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
