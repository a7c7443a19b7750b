#!/usr/bin/env bash
# Builds mira-cpp (installing dependencies when missing) and runs every test but the Slurm one
# (ctest -L slurm; .ci/run runs it): the unit and integration suites through CTest, then a
# consumer project built three ways (CMake package, add_subdirectory, pkg-config).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
scripts/setup.sh
# The Slurm test (label slurm) starts daemons as root: .ci/run runs it on its own.
ctest --test-dir "$build" --output-on-failure -j 2 --timeout 300 -LE slurm
# What was skipped, and why (a clone without ../shared has no protocol schema to validate with).
awk '/ Testing: /{name=$3} /^mira test skipped: /{sub(/^mira test skipped: /, ""); print "skipped: " name ": " $0}' \
  "$build/Testing/Temporary/LastTest.log"

# A separate project that uses the library as its users would, three ways: the installed CMake
# package, add_subdirectory of this source tree, and pkg-config with no CMake at all.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
study="$build/examples/example_study"
cmake --install "$build" --prefix "$tmp/install" > /dev/null
cmake -S test/consumer -B "$tmp/package" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/install" > /dev/null
cmake --build "$tmp/package" > /dev/null
"$tmp/package/consumer" "$study"
cmake -S test/consumer -B "$tmp/subdirectory" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMIRA_CONSUME=subdirectory -DMIRA_SOURCE_DIR="$PWD" > /dev/null
cmake --build "$tmp/subdirectory" -j 2 > /dev/null
"$tmp/subdirectory/consumer" "$study"
# shellcheck disable=SC2046  # pkg-config's output is meant to be split into arguments
g++ -std=c++20 -O1 test/consumer/main.cpp -o "$tmp/pkg-config-consumer" \
  $(PKG_CONFIG_PATH="$(dirname "$(find "$tmp/install" -name mira.pc)")" pkg-config --cflags --libs mira)
"$tmp/pkg-config-consumer" "$study"
