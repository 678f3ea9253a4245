#!/usr/bin/env python3
"""Cuts one entry's call graph out of a PTX module, for timing what the
driver compiles at that kernel's first launch:

    python3 scripts/ptx-entry-cut.py MODULE.ptx ENTRY OUT.ptx
    time ptxas -arch=sm_90 OUT.ptx -o /dev/null

OUT.ptx keeps the module's directives, ENTRY, and every function and
global variable ENTRY reaches (calls, addresses taken, initialisers
naming functions); every other function and global is left out. Prints
how many functions and globals it kept.
"""
import re
import sys

DEFINITION = re.compile(r"^(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\b")
DEFINED_NAME = re.compile(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")
GLOBAL = re.compile(
    r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:global|const|shared)\b[^=;]*?"
    r"([A-Za-z_$][\w$]*)\s*(?:\[[^\]]*\])?\s*(?:=|;)"
)
IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")


def pieces(lines):
    """The module as (kind, name, text): kind 'def' for a function or
    entry with a body, 'decl' for a declaration, 'global' for a global
    variable, None for anything else (name None)."""
    i = 0
    while i < len(lines):
        if not DEFINITION.match(lines[i]):
            line = lines[i]
            g = GLOBAL.match(line)
            yield ("global", g.group(1), line) if g else (None, None, line)
            i += 1
            continue
        j, depth, body = i, 0, False
        while j < len(lines):
            depth += lines[j].count("{") - lines[j].count("}")
            body = body or "{" in lines[j]
            if (body and depth == 0) or (not body and lines[j].rstrip().endswith(";")):
                break
            j += 1
        text = "\n".join(lines[i : j + 1])
        name = DEFINED_NAME.search(" ".join(lines[i : j + 1]))
        yield ("def" if body else "decl", name.group(1) if name else None, text)
        i = j + 1


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    module, root, out = sys.argv[1:]
    items = list(pieces(open(module).read().split("\n")))
    bodies = {name: text for kind, name, text in items if kind in ("def", "global")}
    if root not in bodies:
        sys.exit(f"no entry or function named {root} in {module}")
    kept, todo = {root}, [root]
    while todo:
        for name in set(IDENTIFIER.findall(bodies[todo.pop()])):
            if name in bodies and name not in kept:
                kept.add(name)
                todo.append(name)
    with open(out, "w") as f:
        f.write("\n".join(text for kind, name, text in items if name is None or name in kept))
    print(f"{len(kept)} functions and globals kept")


if __name__ == "__main__":
    main()
