#!/usr/bin/env bash
# Issue #27's crash bound at full size: a `mira run --store compact` of N echo cases (default
# 1 000 000) killed with SIGKILL at K random points, each once its segments hold a random number
# of records, then resumed with --resume ID until it exits 0. Prints what each invocation did and
# what the run holds in the end: every planned key listed once by `mira report ID --format
# jsonl`, all passed, and once in the segments. test/integration/kill_resume_test.cpp is the
# same at a few thousand cases, at fixed points, in the test suite.
#
#   benchmarks/kill_resume.sh [-n N] [-k KILLS] [-s SEED] [-j J] [--keep] MIRA_BIN ECHO_STUDY
#
# SEED (default: from the clock, printed) repeats the same kill points. Exit 0 when nothing was
# lost or duplicated, 1 otherwise. Needs python3 for the final check.
set -euo pipefail

n=1000000 kills=4 seed=$(( $(date +%s) % 32768 )) j=64 keep=0
pos=()
while (($#)); do
  case "$1" in
    -n) n=$2; shift 2 ;;
    -k) kills=$2; shift 2 ;;
    -s) seed=$2; shift 2 ;;
    -j) j=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) pos+=("$1"); shift ;;
  esac
done
if ((${#pos[@]} != 2)); then
  echo "usage: kill_resume.sh [-n N] [-k KILLS] [-s SEED] [-j J] [--keep] MIRA_BIN ECHO_STUDY" >&2
  exit 2
fi
mira=${pos[0]} study=${pos[1]}

dir=$(mktemp -d /tmp/mira-kill-resume-XXXXXX)
results=$dir/results
pid=""
cleanup() {  # a run of ours still going (the script stopped early) ends with it
  if [[ -n $pid ]]; then kill -KILL "$pid" 2> /dev/null || true; fi
  if ((keep)); then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
args=(-j "$j" --max-retries 0 --store compact --results-dir "$results" -- "$study" --samples "$n")

run_folder() {  # nothing before the first invocation has made it
  find "$results" -mindepth 1 -maxdepth 1 -type d -not -name '.*' 2> /dev/null | head -n 1 || true
}
segment_bytes() {  # every byte the segments hold now (0 before the run folder exists)
  local run; run=$(run_folder)
  [[ -n $run && -d $run/segments ]] || { echo 0; return; }
  find "$run/segments" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'
}
segment_records() {  # whole lines: what a resume finds saved (a torn tail has no newline)
  local run; run=$(run_folder)
  [[ -n $run && -d $run/segments ]] || { echo 0; return; }
  cat "$run"/segments/* | wc -l
}

# The kill points: K record counts in [1, N), drawn from SEED, in increasing order. Segment
# files are polled by size, so a count becomes bytes at the echo record's size (measured on
# the first records saved; keys grow by a digit or two over the run, so the points are close,
# not exact).
RANDOM=$seed  # drawn here: a subshell would seed RANDOM afresh
points=()
for ((i = 0; i < kills; i++)); do points+=($(( (RANDOM * 32768 + RANDOM) % (n - 1) + 1 ))); done
mapfile -t points < <(printf '%s\n' "${points[@]}" | sort -n)
echo "kill_resume: $n cases, -j $j, $kills kills at saved records ${points[*]} (seed $seed)"

bytes_per_record=0
id=""
killed=0
start_ns() { date +%s%N; }
for point in "${points[@]}"; do
  t0=$(start_ns)
  "$mira" run ${id:+--resume "$id"} "${args[@]}" > /dev/null 2>> "$dir/mira.stderr" &
  pid=$!
  while kill -0 "$pid" 2> /dev/null; do
    if ((bytes_per_record == 0)); then
      run=$(run_folder)
      first=("$run"/segments/*)  # the first segment in name order, once there is one
      if [[ -n $run && -f ${first[0]} ]] && (($(head -n 1000 "${first[0]}" | wc -l) == 1000)); then
        bytes_per_record=$(( $(head -n 1000 "${first[0]}" | wc -c) / 1000 ))
      fi
    elif (($(segment_bytes) >= point * bytes_per_record)); then
      kill -KILL "$pid" 2> /dev/null || true
      break
    fi
    sleep 0.01
  done
  status=0
  wait "$pid" 2> /dev/null || status=$?  # bash's "Killed" notice is no news here
  pid=""
  secs=$(awk -v a="$t0" -v b="$(start_ns)" 'BEGIN {printf "%.2f", (b - a) / 1e9}')
  id=$(basename "$(run_folder)")
  if ((status == 137)); then
    killed=$((killed + 1))
    echo "  killed at >= $point records after ${secs} s: $(segment_records) records saved"
  else
    echo "  point $point: the run exited with status $status after ${secs} s, before its kill"
    break
  fi
done

resumes=0
while :; do
  t0=$(start_ns)
  status=0
  "$mira" run --resume "$id" "${args[@]}" > /dev/null 2>> "$dir/mira.stderr" || status=$?
  resumes=$((resumes + 1))
  secs=$(awk -v a="$t0" -v b="$(start_ns)" 'BEGIN {printf "%.2f", (b - a) / 1e9}')
  echo "  resume $resumes: exit $status after ${secs} s"
  ((status == 0)) && break
  if ((resumes == 3)); then
    echo "kill_resume: the run did not finish in 3 resumes; mira's stderr:" >&2
    tail -n 20 "$dir/mira.stderr" >&2
    exit 1
  fi
done

# The run as `mira report` lists it, and the segments as they are on disk: one key per line of
# each, checked against the planned keys bench/s0@sim .. bench/s<N-1>@sim.
t0=$(start_ns)
"$mira" report "$id" --results-dir "$results" --format jsonl 2> /dev/null > "$dir/report.jsonl"
secs=$(awk -v a="$t0" -v b="$(start_ns)" 'BEGIN {printf "%.2f", (b - a) / 1e9}')
echo "  mira report --format jsonl: ${secs} s"
python3 - "$n" "$dir/report.jsonl" "$results/$id/segments" "$killed" << 'EOF'
import collections, json, os, sys

n, report, segments, killed = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
planned = {"bench/s%d@sim" % i for i in range(n)}

def check(name, keys):
    """Prints what `keys` (a Counter) lacks, repeats and adds beside the plan; True if nothing."""
    missing = len(planned - keys.keys())
    repeated = sum(1 for c in keys.values() if c > 1)
    unplanned = len(keys.keys() - planned)
    print("  %s: %d keys, %d missing, %d more than once, %d never planned"
          % (name, len(keys), missing, repeated, unplanned))
    return missing == repeated == unplanned == 0

listed, not_passed = collections.Counter(), 0
with open(report) as f:
    for line in f:
        o = json.loads(line)
        if "summary" in o:
            continue
        listed[o["key"]] += 1
        not_passed += o.get("status") != "passed"
saved = collections.Counter()
for name in sorted(os.listdir(segments)):
    with open(os.path.join(segments, name)) as f:
        for line in f:
            saved[json.loads(line)["key"]] += 1
report_ok = check("report", listed)
segments_ok = check("segments", saved)
print("  %d listed cases did not pass" % not_passed)
ok = report_ok and segments_ok and not_passed == 0
print("kill_resume: %d kills, %s" % (killed, "nothing lost or duplicated" if ok else "FAILED"))
sys.exit(0 if ok else 1)
EOF
