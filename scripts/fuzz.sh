#!/usr/bin/env bash
# Builds the libFuzzer target fuzz/wire_fuzzer.cpp with clang (ASan + UBSan) and runs it for
# SECONDS (default 60) on both cores, starting from the seed corpus in fuzz/corpus/wire.
# New inputs go to build-fuzz/corpus; crashes to build-fuzz/ (crash-*). Prints the executions.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out="build-fuzz"

packages=(clang libclang-rt-14-dev libboost1.81-dev libboost-json1.81-dev libexpected-dev)
scripts/install_packages.sh "${packages[@]}"

mkdir -p "$out/corpus"
# Boost.JSON is compiled into the target (src.hpp), so the fuzzer sees its parser too.
echo '#include <boost/json/src.hpp>' > "$out/boost_json.cpp"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -DBOOST_JSON_NO_LIB -Iinclude -Isrc -Itest \
  fuzz/wire_fuzzer.cpp src/framing/line_framer.cpp src/connection/multiplexer.cpp \
  src/protocol/codec.cpp src/protocol/json_scan.cpp src/protocol/envelope.cpp \
  src/protocol/json_text.cpp src/protocol/text_decoder.cpp src/protocol/text_encoder.cpp \
  src/protocol/trajectory.cpp "$out/boost_json.cpp" \
  -o "$out/wire_fuzzer"

"$out/wire_fuzzer" -max_total_time="$seconds" -jobs=2 -workers=2 -max_len=4096 \
  -artifact_prefix="$out/" "$out/corpus" fuzz/corpus/wire 2>&1 | tee "$out/fuzz.log" |
  grep -E "^#[0-9]+.*(DONE|pulse)|ERROR|SUMMARY" || true
# With -jobs, each job logs to fuzz-N.log: sum their final execution counts.
total=0
for log in fuzz-*.log; do
  [ -f "$log" ] || continue
  n=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  total=$((total + ${n:-0}))
  if grep -q "ERROR: " "$log"; then
    echo "fuzz: a crash, see $log and $out/crash-*" >&2
    exit 1
  fi
  mv "$log" "$out/"
done
echo "fuzz: $total executions in ${seconds} s"
