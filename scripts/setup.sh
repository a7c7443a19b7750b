#!/usr/bin/env bash
# README command 1's first half: installs what building mira-cpp needs from Debian 12 when it is
# missing, configures ./build (override with BUILD_DIR) and builds the `mira` command line and
# the example study, nothing more. scripts/test.sh installs what the tests need and builds the
# rest. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build ccache pkg-config
          libboost1.81-dev libboost-json1.81-dev libboost-test1.81-dev
          libboost-filesystem1.81-dev libexpected-dev
          libssl-dev zlib1g-dev  # mira::models: HTTPS and gzip
          libtomlplusplus-dev)  # mira.toml (the Rust host's configuration file)
scripts/install_packages.sh "${packages[@]}"

build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" ${CMAKE_ARGS:-}
cmake --build "$build" -j 2 --target mira_cli example_study
