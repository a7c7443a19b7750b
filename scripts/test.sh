#!/usr/bin/env bash
# README command 2: installs what the tests need when missing, builds everything (scripts/setup.sh
# then the tests, examples and benchmarks) and runs every test but the Slurm and container ones
# (ctest -L slurm, ctest -L container; .ci/run runs them): the unit and integration suites
# through CTest, then a consumer project built three ways (CMake package, add_subdirectory,
# pkg-config), and against mira::host, mira::study and mira::results alone.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
# What the tests use beyond the build: the schema validator, Chromium (renders the HTML report),
# pkg-config (a consumer below) and openssl (the model tests' throwaway certificates).
scripts/install_packages.sh python3 python3-jsonschema chromium pkg-config openssl
scripts/setup.sh
cmake --build "$build" -j 2
# The Slurm test (label slurm) starts daemons as root, the container tests (label container) run
# the image scripts/build_image.sh builds: .ci/run runs them on their own.
ctest --test-dir "$build" --output-on-failure -j 2 --timeout 300 -LE 'slurm|container'
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
pc_path="$(dirname "$(find "$tmp/install" -name mira.pc)")"
# shellcheck disable=SC2046  # pkg-config's output is meant to be split into arguments
g++ -std=c++20 -O1 test/consumer/main.cpp -o "$tmp/pkg-config-consumer" \
  $(PKG_CONFIG_PATH="$pc_path" pkg-config --cflags --libs mira)
"$tmp/pkg-config-consumer" "$study"
# The documentation's snippets, as a user copies them, compile without a warning.
# shellcheck disable=SC2046
g++ -std=c++20 -O0 -Wall -Wextra -Werror test/consumer/snippets.cpp -o "$tmp/snippets" \
  $(PKG_CONFIG_PATH="$pc_path" pkg-config --cflags --libs mira)
"$tmp/snippets"

# Each call shape of a host and pool operation (default token, use_awaitable, a callback,
# as_expected in a fail-fast parallel group), as a user builds it against the installed package.
# shellcheck disable=SC2046
g++ -std=c++20 -O1 test/consumer/call_shapes.cpp -o "$tmp/call-shapes" \
  $(PKG_CONFIG_PATH="$pc_path" pkg-config --cflags --libs mira-host)
"$tmp/call-shapes" "$study" --slow-ms 60000

# mira::host alone: a service that wants a host_handle opens no toml++ or Beast header and links
# neither (CMake package and pkg-config alike).
no_toml_or_beast() {  # what: a description; stdin: the headers opened or the link line
  if grep -E 'toml|beast' ; then echo "test: $1 names toml++ or Beast (above)" >&2; exit 1; fi
}
cmake -S test/consumer -B "$tmp/host" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/install" \
  -DMIRA_TARGET=mira::host > /dev/null
cmake --build "$tmp/host" > /dev/null
"$tmp/host/consumer" "$study"
ninja -C "$tmp/host" -t deps | no_toml_or_beast "the mira::host consumer's compile"
ninja -C "$tmp/host" -t commands consumer | tail -n 1 | no_toml_or_beast "its link"
ldd "$tmp/host/consumer" | no_toml_or_beast "its binary"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 -H test/consumer/main.cpp -o "$tmp/pkg-config-host" \
  $(PKG_CONFIG_PATH="$pc_path" pkg-config --cflags --libs mira-host) 2> "$tmp/host-headers.txt"
no_toml_or_beast "the pkg-config mira-host consumer's compile" < "$tmp/host-headers.txt"
PKG_CONFIG_PATH="$pc_path" pkg-config --libs mira-host | no_toml_or_beast "pkg-config --libs mira-host"
"$tmp/pkg-config-host" "$study"
# mira::study alone: a study built on the SDK links no part of the host, and the mira::host
# consumer above runs it.
cmake -S test/consumer -B "$tmp/study" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/install" \
  -DMIRA_TARGET=mira::study > /dev/null
cmake --build "$tmp/study" > /dev/null
if ninja -C "$tmp/study" -t commands consumer | tail -n 1 | grep -E 'mira_host|mira_results|mira_run|toml|beast'; then
  echo "test: the mira::study consumer links more than the study SDK (above)" >&2
  exit 1
fi
"$tmp/host/consumer" "$tmp/study/consumer"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 test/consumer/study.cpp -o "$tmp/pkg-config-study" \
  $(PKG_CONFIG_PATH="$pc_path" pkg-config --cflags --libs mira-study)
"$tmp/pkg-config-host" "$tmp/pkg-config-study"
# mira::results alone: a program that reads a saved run (one the command line saves here) opens
# no Asio or Boost.Process header and links neither the host nor Asio (CMake package and
# pkg-config alike).
no_asio() {  # what: a description; stdin: the headers opened or the link line
  if grep -E 'boost/asio|boost/process|mira_host|mira_asio|boost_filesystem'; then
    echo "test: $1 names Asio, Boost.Process or the host (above)" >&2
    exit 1
  fi
}
"$build/mira" run --results-dir "$tmp/results" --run-id saved --progress none --study "$study" \
  > /dev/null
# What the command line counted: the consumers must print the same.
counted="$(python3 -c 'import json, sys
o = json.load(open(sys.argv[1]))["summary"]["overall"]
print(o["passed"], "of", o["scored"])' "$tmp/results/saved/report.json")"
reads_the_run() {  # the consumer to run
  local out
  out="$("$1" "$tmp/results" saved)"
  echo "$out"
  grep -qF ": $counted scored" <<< "$out" || { echo "test: mira counted $counted" >&2; exit 1; }
}
cmake -S test/consumer -B "$tmp/results-consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/install" \
  -DMIRA_TARGET=mira::results > /dev/null
cmake --build "$tmp/results-consumer" > /dev/null
reads_the_run "$tmp/results-consumer/consumer"
ninja -C "$tmp/results-consumer" -t deps | no_asio "the mira::results consumer's compile"
ninja -C "$tmp/results-consumer" -t commands consumer | tail -n 1 | no_asio "its link"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 -H test/consumer/results.cpp -o "$tmp/pkg-config-results" \
  $(PKG_CONFIG_PATH="$pc_path" pkg-config --cflags --libs mira-results) \
  2> "$tmp/results-headers.txt"
no_asio "the pkg-config mira-results consumer's compile" < "$tmp/results-headers.txt"
PKG_CONFIG_PATH="$pc_path" pkg-config --libs mira-results | no_asio "pkg-config --libs mira-results"
reads_the_run "$tmp/pkg-config-results"
# The install holds the public headers and none of the private ones beside the sources.
diff <(cd include && find mira -type f | sort) \
  <(cd "$tmp/install/include" && find mira -type f ! -path mira/version.hpp | sort)
echo "test: consumers of mira::mira (package, subdirectory, pkg-config), of mira::host alone, of mira::study alone and of mira::results alone run"
