#!/usr/bin/env python3
"""Checks the user guide (docs/src) the way a reader would find it broken.

- Every chapter named in SUMMARY.md exists, and every page is in SUMMARY.md.
- Every relative link resolves to a page of the book (links never leave
  docs/src: the book is published without the repository around it), and
  every #anchor to a heading of that page (ids as mdBook makes them).
- Every {{#include path:anchor}} names an existing file and an anchor in it.
- Every ```rust block either is made of {{#include}} lines only (code from
  the crates cargo builds and tests: docs/samples, templates/) or is marked
  `ignore` (a fragment shown for its shape).

- Every relative link of README.md resolves, and every ```rust block of
  README.md is, after its first `// path` line, a
  whole file or an ANCHOR region of templates/ or docs/samples/, so the
  front page shows only code that CI builds.

Exits 1 with one line per problem.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "docs", "src")

LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")


def mdbook_id(text):
    """The id mdBook gives a heading (mdbook's normalize_id)."""
    text = re.sub(r"`|\*\*|\*|\\", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    out = []
    for ch in text.strip():
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def split_fences(lines):
    """Yields (kind, info, line) for every line: kind is "open" or "close"
    for a fence (line None), "code" inside a block, "text" outside."""
    fence, info = None, ""
    for line in lines:
        m = FENCE.match(line)
        if m and fence is None:
            fence, info = m.group(2), m.group(3).strip()
            yield "open", info, None
        elif m and fence is not None and m.group(2).startswith(fence[0]) and not m.group(3).strip():
            fence = None
            yield "close", info, None
        else:
            yield ("code" if fence else "text"), info, line


def heading_ids(path):
    ids, seen = set(), {}
    with open(path, encoding="utf-8") as f:
        for kind, _, line in split_fences(f.read().splitlines()):
            if kind != "text":
                continue
            m = HEADING.match(line)
            if m:
                base = mdbook_id(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                ids.add(base if n == 0 else f"{base}-{n}")
    return ids


def main():
    problems = []
    pages = set()
    for dirpath, _, files in os.walk(SRC):
        for name in files:
            if name.endswith(".md"):
                pages.add(os.path.relpath(os.path.join(dirpath, name), SRC))
    summary = open(os.path.join(SRC, "SUMMARY.md"), encoding="utf-8").read()
    listed = set()
    for target in LINK.findall(summary):
        path = os.path.normpath(target.split("#")[0])
        listed.add(path)
        if path not in pages:
            problems.append(f"SUMMARY.md: chapter {target} does not exist")
    for page in sorted(pages - listed - {"SUMMARY.md"}):
        problems.append(f"{page}: not in SUMMARY.md (mdBook would not build it)")

    ids = {}
    for page in sorted(pages):
        path = os.path.join(SRC, page)
        here = os.path.dirname(path)
        lines = open(path, encoding="utf-8").read().splitlines()
        block, block_start = [], 0
        for number, (kind, info, line) in enumerate(split_fences(lines), 1):
            where = f"{page}:{number}"
            if kind == "open":
                block, block_start = [], number
                continue
            if kind == "close":
                check_block(page, block_start, info, block, problems)
                continue
            if kind == "code":
                block.append(line)
                for target in INCLUDE.findall(line):
                    check_include(where, here, target, problems)
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                file, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(here, file)) if file else path
                rel = os.path.relpath(dest, SRC)
                if rel.startswith(".."):
                    problems.append(f"{where}: link {target} leaves the book (name the repository path in code instead)")
                    continue
                if not os.path.exists(dest):
                    problems.append(f"{where}: link {target}: {rel} does not exist")
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in ids:
                        ids[dest] = heading_ids(dest)
                    if anchor not in ids[dest]:
                        problems.append(f"{where}: link {target}: no heading #{anchor} in {rel}")
    check_readme(problems)
    for p in problems:
        print(p)
    if problems:
        print(f"check-book: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-book: {len(pages)} page(s), every link, anchor and include resolves")
    return 0


def built_code():
    """Every whole file and ANCHOR region of the crates CI builds, as
    tuples of lines without trailing blanks."""
    regions = set()
    for top in ("templates", os.path.join("docs", "samples")):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(".rs"):
                    continue
                lines = [l.rstrip() for l in open(os.path.join(dirpath, name), encoding="utf-8")]
                plain = [l for l in lines if "ANCHOR" not in l]
                regions.add(tuple(trim(plain)))
                for i, l in enumerate(lines):
                    m = re.search(r"ANCHOR: (\S+)", l)
                    if not m:
                        continue
                    end = next(j for j, e in enumerate(lines) if f"ANCHOR_END: {m.group(1)}" in e)
                    regions.add(tuple(trim([x for x in lines[i + 1:end] if "ANCHOR" not in x])))
    return regions


def trim(lines):
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def check_readme(problems):
    lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()
    regions = None
    block, start = [], 0
    for number, (kind, info, line) in enumerate(split_fences(lines), 1):
        if kind == "open":
            block, start = [], number
        elif kind == "code":
            block.append(line.rstrip())
        elif kind == "text":
            for target in LINK.findall(line):
                file = target.split("#")[0]
                if file and not re.match(r"^[a-z]+:", target) and not os.path.exists(os.path.join(ROOT, file)):
                    problems.append(f"README.md:{number}: link {target} does not exist")
        elif kind == "close" and info.split(",")[0] == "rust":
            body = block[1:] if block and block[0].startswith("// ") else block
            regions = regions if regions is not None else built_code()
            if tuple(trim(body)) not in regions:
                problems.append(
                    f"README.md:{start}: a rust block that is not a file or ANCHOR region of templates/ or docs/samples/"
                )


def check_include(where, here, target, problems):
    file, _, anchor = target.partition(":")
    dest = os.path.normpath(os.path.join(here, file))
    if not os.path.isfile(dest):
        problems.append(f"{where}: include {target}: {os.path.relpath(dest, ROOT)} does not exist")
        return
    if anchor and not anchor.isdigit():
        text = open(dest, encoding="utf-8").read()
        if f"ANCHOR: {anchor}" not in text or f"ANCHOR_END: {anchor}" not in text:
            problems.append(f"{where}: include {target}: no ANCHOR {anchor} in {os.path.relpath(dest, ROOT)}")


def check_block(page, start, info, body, problems):
    words = re.split(r"[,\s]+", info)
    if not words or words[0] != "rust":
        return
    included = [l for l in body if l.strip()]
    if included and all(INCLUDE.fullmatch(l.strip()) for l in included):
        return
    if "ignore" not in words:
        problems.append(
            f"{page}:{start}: a rust block that is not included from a built crate must be marked `ignore`"
        )


if __name__ == "__main__":
    sys.exit(main())
