#!/usr/bin/env python3
"""scripts/function_sizes.py over small trees made here: a function over the limit is listed and
fails the check, one at the limit does not, the help text table is allowed by name, and an
allowance whose function is gone fails. Skipped (77) without universal-ctags.
Usage: function_sizes_test.py PATH/TO/function_sizes.py"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

script = sys.argv[1]
if not (shutil.which("ctags-universal") or shutil.which("ctags")):
    print("function_sizes_test: skipped, no ctags (Debian package universal-ctags)")
    sys.exit(77)


def function(name, lines):
    """A C++ function of `lines` lines, from its signature to its closing brace."""
    body = "".join(f"  x += {i};\n" for i in range(lines - 3))
    return f"int {name}(int x) {{\n{body}  return x;\n}}\n\n"


def check(files, want_code, want_lines, args=()):
    """Runs the script over a tree of `files`; its exit code and its lines but the last."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            f = pathlib.Path(root, path)
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
        r = subprocess.run([sys.executable, script, *args, root], capture_output=True, text=True)
        got = [l for l in r.stdout.splitlines() if "functions, none over" not in l]
        if r.returncode != want_code or got != want_lines:
            sys.exit(f"function_sizes_test: over {sorted(files)} got exit {r.returncode}, "
                     f"{r.stdout!r}, {r.stderr!r}; want exit {want_code}, {want_lines}")


help_table = {"tools/mira/help.cpp": function("text_of", 150)}
# 101 lines fail, 100 pass; the longest is listed first; the help table is allowed.
check({**help_table,
       "src/a.cpp": function("at_limit", 100) + function("over", 101),
       "include/b.hpp": function("longest", 130)},
      1, ["130 include/b.hpp:1 longest", "101 src/a.cpp:102 over"])
check({**help_table, "src/a.cpp": function("at_limit", 100)}, 0, [])
# --max sets the limit.
check({**help_table, "tools/c.cpp": function("f", 81) + function("g", 80)}, 1,
      ["81 tools/c.cpp:1 f"], ["--max", "80"])
# Outside src/, tools/ and include/ nothing is measured.
check({**help_table, "test/t.cpp": function("t", 300)}, 0, [])
# The allowance names a function that is gone: the check fails, saying so.
check({"src/a.cpp": function("at_limit", 100)}, 1,
      ["function_sizes: tools/mira/help.cpp text_of is allowed but no longer there: remove it "
       "from ALLOWED"])
print("function_sizes_test: ok")
