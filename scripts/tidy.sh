#!/usr/bin/env bash
# clang-tidy over every library source (src/), with the checks of .clang-tidy; exits non-zero on
# any finding. Needs a configured build directory (compile_commands.json): scripts/setup.sh makes
# one. Usage: scripts/tidy.sh [FILE...]   (default: every src/*.cpp)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
[ -f "$build/compile_commands.json" ] || {
  echo "tidy: $build/compile_commands.json not found: run scripts/setup.sh first" >&2
  exit 2
}
if (($#)); then files=("$@"); else mapfile -t files < <(git ls-files 'src/*.cpp'); fi
# One clang-tidy per core; --quiet leaves only the findings.
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$build" --quiet
echo "tidy: ${#files[@]} library sources, no finding"
