#!/usr/bin/env bash
# The Slurm deployment on a real Slurm: starts a single-node cluster
# (../shared/tools/slurm-single-node.sh beside the repository; it installs slurm-wlm and munge
# when missing), submits deploy/slurm/submit.sh as a 4-task array over the example study, waits
# for the merge job it chains, and checks that the merged run has exactly the keys and verdicts
# of a single-process run of the same plan. Stops the daemons it started. Skipped (exit 77) when
# the script is absent or not running as root.
#   test/slurm/slurm_array_test.sh MIRA_BINARY EXAMPLE_STUDY
set -euo pipefail
mira="$(realpath "$1")"
study="$(realpath "$2")"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
tool="$repo/../shared/tools/slurm-single-node.sh"
if [ ! -f "$tool" ]; then
  echo "mira test skipped: $tool not found (a single-node Slurm is started with it)"
  exit 77
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "mira test skipped: starting Slurm needs root (slurmctld, slurmd and munged)"
  exit 77
fi
tmp="$(mktemp -d)"
export SLURM_LOCAL_DIR="$tmp/slurm"
started_slurm=0
started_munge=0
cleanup() {
  if [ "$started_slurm" = 1 ]; then
    # Only the daemons this test started, by the pids they wrote; then wait until they are gone.
    pids="$(cat "$SLURM_LOCAL_DIR/ctld.pid" "$SLURM_LOCAL_DIR/d.pid" 2> /dev/null || true)"
    bash "$tool" stop || true
    # Read once: the stop above may be ending munged, which removes its pid file meanwhile.
    munged=""
    [ "$started_munge" = 1 ] && munged="$(cat /run/munge/munged.pid 2> /dev/null || true)"
    if [ -n "$munged" ]; then
      pids="$pids $munged"
      kill "$munged" 2> /dev/null || true
    fi
    for pid in $pids; do
      for _ in $(seq 1 300); do
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.1
      done
    done
  fi
  rm -rf "$tmp" || true
}
trap cleanup EXIT

if pgrep -x slurmctld > /dev/null; then
  echo "slurm is already running: using it, leaving it running"
else
  pgrep -x munged > /dev/null || started_munge=1
  started_slurm=1
  bash "$tool" start
fi

# The reference: one process, the same plan.
"$mira" run --results-dir "$tmp/single" --color never -- "$study" > /dev/null 2>&1 || [ $? -eq 1 ]
single="$(find "$tmp/single" -mindepth 1 -maxdepth 1 -type d | head -n 1)"

t0=$(date +%s)
ids="$(MIRA="$mira" "$repo/deploy/slurm/submit.sh" -n 4 -d "$tmp/run" -i merged -- -- "$study")"
echo "submitted: $ids"
merge="${ids##*merge=}"
state=""
for _ in $(seq 1 600); do
  state="$(scontrol show job "$merge" -o 2> /dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)"
  case "$state" in
    COMPLETED) break ;;
    FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
      break ;;
  esac
  sleep 1
done
echo "merge job $merge: ${state:-unknown} after $(($(date +%s) - t0)) s"
if [ "$state" != COMPLETED ]; then
  squeue -a || true
  for f in "$tmp"/run/logs/*; do echo "== $f"; cat "$f"; done
  exit 1
fi
cat "$tmp"/run/logs/merge-*.out
shards="$(find "$tmp/run/shards" -mindepth 2 -maxdepth 2 -type d | wc -l)"
if [ "$shards" -ne 4 ]; then
  echo "expected 4 shard runs, found $shards"
  exit 1
fi
python3 "$repo/test/deploy/same_cases.py" "$tmp/run/merged" "$single"
