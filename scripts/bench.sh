#!/usr/bin/env bash
# Builds (Release) and runs the benchmarks; each prints its figures beside its baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build-release}"
BUILD_DIR="$build" BUILD_TYPE=Release CMAKE_ARGS="-DMIRA_BUILD_TESTS=OFF" scripts/setup.sh > /dev/null
echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
echo "== codec"
"$build/benchmarks/codec_throughput"
# --pin: the client (baseline or host) on CPU 0, the study on CPU 1 (see host_throughput.cpp).
for c in 1 8 64 512; do
  echo "== host_throughput, minimal echo results, c=$c"
  "$build/benchmarks/host_throughput" -n 200000 -c "$c" -r 3 --pin -- "$build/benchmarks/echo_study"
done
echo "== host_throughput, typical results, c=64"
"$build/benchmarks/host_throughput" -n 200000 -c 64 -r 3 --pin -- "$build/benchmarks/echo_study" --typical
echo "== host_throughput, typical against minimal results side by side, c=64, 31 paired rounds"
"$build/benchmarks/host_throughput" -n 100000 -c 64 -r 31 --pin --versus --typical -- "$build/benchmarks/echo_study"
echo "== host_throughput, the study SDK's echo study against the hand-written one, c=64, 21 paired rounds"
"$build/benchmarks/host_throughput" -n 100000 -c 64 -r 21 --against "$build/benchmarks/sdk_echo_study" -- "$build/benchmarks/echo_study"
echo "== host_throughput, minimal echo results, c=64, unpinned"
"$build/benchmarks/host_throughput" -n 200000 -c 64 -r 3 -- "$build/benchmarks/echo_study"
echo "== host_throughput, minimal echo results, c=64, callers on a second thread (unpinned)"
"$build/benchmarks/host_throughput" -n 200000 -c 64 -r 3 --two-threads -- "$build/benchmarks/echo_study"
echo "== memory_in_flight: 100000 requests held by the study"
"$build/benchmarks/memory_in_flight" -n 100000 -- "$build/benchmarks/echo_study" --hold 100000
echo "== planning: 1000000 samples in 2000 pages x 3 targets x 2 trials; resume over 1000000 keys"
"$build/benchmarks/planning" -t 2 -k 1000000 -- "$build/benchmarks/echo_study" --samples 1000000 --targets 3
echo "== run_end_to_end: mira run, 100000 cases, -j 64"
"$build/benchmarks/run_end_to_end" -n 100000 -j 64 -r 3 --per-case "$build/mira" "$build/benchmarks/echo_study"
echo "== store_layouts: 100000 saved echo cases, per-case layout vs compact segments"
"$build/benchmarks/store_layouts" -n 100000
echo "== scheduler_goodput: capacity 8, 20 ms per run, 400 cases, -j 32"
"$build/benchmarks/scheduler_goodput" -n 400 -k 8 -l 20 -j 32 -r 3
echo "== scheduler_goodput: capacity 4, 50 ms per run, 200 cases, -j 64"
"$build/benchmarks/scheduler_goodput" -n 200 -k 4 -l 50 -j 64 -r 3
echo "== pool_speedup: a study answering one request at a time, 100 ms each, 400 cases, -j 2P"
"$build/benchmarks/pool_speedup" -P 1,2,4,8,16 -- python3 test/studies/py_study.py --sequential --samples 400 --run-ms 100
echo "== pool_speedup --echo: the echo study through one host_handle, a pool of 1 and a pool of 2, c=64"
"$build/benchmarks/pool_speedup" --echo -n 200000 -c 64 -r 3 -- "$build/benchmarks/echo_study"
