#!/usr/bin/env python3
"""Fails unless the first ```cpp block of a Markdown page is exactly the given source file.

Usage: doc_shows_file.py PAGE.md FILE.cpp
"""
import re
import sys

page, source = sys.argv[1:3]
block = re.search(r"```cpp\n(.*?)```", open(page, encoding="utf-8").read(), re.S)
if not block:
    sys.exit(f"{page}: no ```cpp block")
if block.group(1) != open(source, encoding="utf-8").read():
    sys.exit(f"{page}: its first C++ block is not {source} as it is; copy the file into the page")
print(f"{page} shows {source}")
