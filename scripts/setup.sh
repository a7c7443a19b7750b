#!/usr/bin/env bash
# Installs mira-cpp's build dependencies from Debian 12 when missing, then configures and
# builds everything into ./build (override with BUILD_DIR). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build ccache pkg-config python3 python3-jsonschema
          libboost1.81-dev libboost-json1.81-dev libboost-test1.81-dev
          libboost-filesystem1.81-dev libexpected-dev
          libtomlplusplus-dev  # mira.toml (the Rust host's configuration file)
          doxygen   # the reference documentation (cmake --build build --target docs)
          clang-format  # .ci/run checks the formatting of every C++ file
          clang-tidy    # .ci/run runs scripts/tidy.sh over the library sources
          chromium  # renders the HTML report in the tests
          slurm-wlm munge)  # the Slurm test (ctest -L slurm, run by .ci/run): a single-node Slurm
scripts/install_packages.sh "${packages[@]}"

build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" ${CMAKE_ARGS:-}
cmake --build "$build" -j 2
