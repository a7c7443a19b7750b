#!/usr/bin/env bash
# Builds mira-cpp (installing dependencies when missing) and runs every test: the unit and
# integration suites through CTest, then a consumer project built against the installed library.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
scripts/setup.sh
ctest --test-dir "$build" --output-on-failure -j 2 --timeout 300

# A separate project that finds the installed package, as a library user would.
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix/install" > /dev/null
cmake -S test/consumer -B "$prefix/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix/install" > /dev/null
cmake --build "$prefix/consumer" > /dev/null
"$prefix/consumer/consumer" "$build/examples/example_study"
