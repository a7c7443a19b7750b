#!/usr/bin/env python3
"""Fails on a function longer than the limit (default 100 lines, from its first line to its
closing brace) under src/, tools/ and include/, so that each one stays readable. The functions
are found by universal-ctags (Debian package universal-ctags). Prints those over the limit,
longest first, as `LINES FILE:LINE NAME`, and exits 1 if there is any.
Usage: scripts/function_sizes.py [--max N] [ROOT]"""
import argparse
import pathlib
import shutil
import subprocess
import sys

# Functions that are only data, allowed whatever their length: splitting a table of text across
# functions would make it no easier to read. Each entry says why it is only data.
ALLOWED = {
    # One `case` per command returning its help text's head and tail as string literals: no
    # logic beyond the switch.
    ("tools/mira/help.cpp", "text_of"),
}
FOLDERS = ["src", "tools", "include"]

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--max", type=int, default=100, help="most lines a function may have")
parser.add_argument("root", nargs="?", default=pathlib.Path(__file__).resolve().parent.parent)
args = parser.parse_args()

# Debian installs universal-ctags as ctags-universal, and ctags only through alternatives (which
# may name Exuberant Ctags, without --_xformat).
ctags = shutil.which("ctags-universal") or shutil.which("ctags")
if not ctags:
    sys.exit("function_sizes: ctags not found (Debian package universal-ctags)")
# C++ kind f: function definitions (prototypes are kind p); `end` is the line of the closing
# brace, which universal-ctags gives with --fields=+e.
listing = subprocess.run(
    [ctags, "-R", "--languages=C++", "--kinds-C++=f", "--fields=+ne", "-x",
     "--_xformat=%{line} %{end} %F %N"] + FOLDERS,
    cwd=args.root, check=True, capture_output=True, text=True).stdout

functions = 0
long = []
seen = set()
for row in listing.splitlines():
    line, end, path, name = row.split(" ", 3)
    seen.add((path, name))
    if not end.isdigit():  # no end found: nothing to measure
        continue
    functions += 1
    lines = int(end) - int(line) + 1
    if lines > args.max and (path, name) not in ALLOWED:
        long.append((lines, path, int(line), name))
for lines, path, line, name in sorted(long, key=lambda f: (-f[0], f[1], f[2])):
    print(f"{lines} {path}:{line} {name}")
# An entry for a function that is gone would later excuse a new one of that name.
stale = sorted(ALLOWED - seen)
for path, name in stale:
    print(f"function_sizes: {path} {name} is allowed but no longer there: remove it from ALLOWED")
if long or stale:
    sys.exit(f"function_sizes: {len(long)} function(s) over {args.max} lines, "
             f"{len(stale)} stale allowance(s)")
print(f"function_sizes: {functions} functions, none over {args.max} lines "
      f"({len(ALLOWED)} table(s) of text allowed)")
