#!/usr/bin/env python3
"""Fails on an include that goes up a layer: each file under src/ and include/mira/ may include
its own layer and those before it in the order docs/architecture.md writes down (the block
between its "layer order" markers; names on one line are side by side and may not include each
other). A name is a folder, or a folder and a file stem (schedule/results) for files that sit in
another layer than their folder's. Usage: scripts/check_layers.py [ROOT]"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
doc = (root / "docs" / "architecture.md").read_text()
block = re.search(r"<!-- layer order[^>]*-->\s*```\n(.*?)```\s*<!-- /layer order -->", doc, re.S)
if not block:
    sys.exit("check_layers: no layer order block in docs/architecture.md")
rank = {}
for i, line in enumerate(l for l in block.group(1).splitlines() if l.strip()):
    for name in line.split():
        rank[name] = i
HOST_FILES = {"host", "pool", "error", "log", "detail", "asio", "command_line", "fail_when", "as_expected"}
# Asio and Boost.Process come in with the connection: the layers before it (the protocol, the
# results layer) include neither, so a program that only reads saved runs compiles no Asio.
IO_HEADERS = ("boost/asio", "boost/process")


def layer(parts):
    """The layer a path (relative to src/ or include/mira/) or an include names, or None."""
    if not parts:
        return None
    head = parts[0]
    if "/".join(parts).startswith(IO_HEADERS):
        return "connection"
    if len(parts) == 1:  # a top-level file: host.hpp, error.cpp, version.hpp ...
        stem = head.split(".")[0]
        return "host" if stem in HOST_FILES else None
    if head == "detail":
        return "host"
    stem = "/".join(parts).split(".")[0]  # schedule/results.hpp -> schedule/results
    if stem in rank:
        return stem
    return head if head in rank else None


include = re.compile(r'^\s*#\s*include\s*[<"](?:mira/)?([^>"]+)[>"]', re.M)
bad = []
files = list((root / "src").rglob("*.[ch]pp")) + list((root / "include" / "mira").rglob("*.hpp"))
for f in files:
    base = root / "src" if (root / "src") in f.parents else root / "include" / "mira"
    own = layer(f.relative_to(base).parts)
    if own is None:
        continue
    for target in include.findall(f.read_text()):
        to = layer(tuple(target.split("/")))
        if to is None or to == own:
            continue
        if rank[to] >= rank[own]:
            bad.append(f"{f.relative_to(root)}: {own} includes {target} ({to})")
for b in bad:
    print(b, file=sys.stderr)
if bad:
    sys.exit(f"check_layers: {len(bad)} include(s) against the order in docs/architecture.md")
print(f"check_layers: {len(files)} files, every include goes down the layers")
