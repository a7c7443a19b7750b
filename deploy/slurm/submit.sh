#!/usr/bin/env bash
# Submits a sharded mira run to Slurm: an array job of N tasks (deploy/slurm/mira-shards.sbatch,
# one shard each) and a merge job chained to it with --dependency=afterok (mira-merge.sbatch).
# Prints "array=<job id> merge=<job id>".
#   deploy/slurm/submit.sh -n SHARDS -d RUN_DIR [-i RUN_ID] [-c CPUS] -- [mira run options] -- STUDY_CMD...
# -n  number of shards (array tasks)        -d  run directory, shared by every node
# -i  the merged run's id (default merged)  -c  CPUs per task (default 1; --procs follows it)
# Other sbatch settings come from sbatch's own environment variables (SBATCH_PARTITION,
# SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ...). MIRA names the mira binary (default: mira on PATH).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
usage() {
  echo "usage: $0 -n SHARDS -d RUN_DIR [-i RUN_ID] [-c CPUS] -- [mira run options] -- STUDY_CMD..." >&2
  exit 2
}
shards="" run_dir="" run_id="merged" cpus=1
while getopts "n:d:i:c:" opt; do
  case "$opt" in
    n) shards="$OPTARG" ;;
    d) run_dir="$OPTARG" ;;
    i) run_id="$OPTARG" ;;
    c) cpus="$OPTARG" ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ -n "$shards" ] && [ -n "$run_dir" ] && [ "$shards" -ge 1 ] 2>/dev/null || usage
mkdir -p "$run_dir/logs"
run_dir="$(cd "$run_dir" && pwd)"
array=$(sbatch --parsable --array="0-$((shards - 1))" --cpus-per-task="$cpus" \
  --output="$run_dir/logs/shard-%A_%a.out" "$here/mira-shards.sbatch" "$run_dir" "$@")
array="${array%%;*}"
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --output="$run_dir/logs/merge-%j.out" "$here/mira-merge.sbatch" "$run_dir" "$run_id")
merge="${merge%%;*}"
echo "array=$array merge=$merge"
