#!/usr/bin/env bash
# The image of deploy/container/Containerfile, run for real: four containers each run one shard
# (--shard i/4) of the example study into one shared folder, a fifth merges them with
# `mira merge`, and the merged run must hold the same cases with the same verdicts as a single
# run in the image. Also: the image runs as user 10001 and holds no compiler.
#   container_image_test.sh IMAGE
# Exits 77 (skipped) when not root, without podman, or when IMAGE has not been built
# (scripts/build_image.sh builds it; .ci/run does, then runs this test: ctest -L container).
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 IMAGE" >&2
  exit 2
fi
image=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "mira test skipped: needs root (podman)"; exit 77; }
command -v podman > /dev/null || { echo "mira test skipped: podman is not installed"; exit 77; }
podman image exists "$image" ||
  { echo "mira test skipped: no image $image (scripts/build_image.sh builds it)"; exit 77; }
# shellcheck source=scripts/podman_env.sh
. "$repo/scripts/podman_env.sh"

results=$(mktemp -d "${TMPDIR:-/tmp}/mira-container-test.XXXXXX")
names=()
cleanup() {
  ((${#names[@]})) && podman rm -f "${names[@]}" > /dev/null 2>&1
  rm -rf "$results"
  [ -z "${CONTAINERS_CONF:-}" ] || rm -f "$CONTAINERS_CONF"
}
trap cleanup EXIT
podman_env_setup "$image" || exit 1
# The image's user (10001, as the Kubernetes Jobs' fsGroup) writes the shared folder.
chown 10001:10001 "$results"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
in_image() {  # runs mira in a container of the image with the folder at /results
  podman run --rm -v "$results:/results" "$image" "$@"
}

identity=$(podman run --rm --entrypoint sh "$image" -c 'id -u; command -v g++ gcc cc c++ cmake make || true')
[ "$identity" = 10001 ] || fail "expected user 10001 and no compiler in the image, got: $identity"

# The four shards at once, each its own container.
suffix=$$
for i in 0 1 2 3; do
  names+=("mira-shard-$i-$suffix")
  podman run -d --name "mira-shard-$i-$suffix" -v "$results:/results" "$image" \
    run --shard "$i/4" --results-dir "/results/shards/$i" --progress none --color never \
    -- /opt/study/example_study > /dev/null || fail "podman run of shard $i"
done
for i in 0 1 2 3; do
  rc=$(podman wait "mira-shard-$i-$suffix")
  # 1: some case failed, a result like any other (the example study fails some on purpose).
  case "$rc" in 0 | 1) ;; *)
    fail "shard $i exited $rc"
    podman logs "mira-shard-$i-$suffix" | tail -n 20 ;;
  esac
done
shard_runs=()
for folder in "$results"/shards/*/*/; do shard_runs+=("/results/${folder#"$results"/}"); done
[ "${#shard_runs[@]}" -eq 4 ] || fail "expected 4 shard runs, found: ${shard_runs[*]}"
in_image merge "${shard_runs[@]}" --results-dir /results --run-id merged > "$results/merge.out" 2>&1 ||
  { fail "mira merge (exit $?)"; cat "$results/merge.out"; }
in_image run --results-dir /results --run-id single --progress none --color never \
  -- /opt/study/example_study > "$results/single.out" 2>&1
rc=$?
case "$rc" in 0 | 1) ;; *) fail "the single run exited $rc"; tail -n 20 "$results/single.out" ;; esac
python3 "$repo/test/deploy/same_cases.py" "$results/merged" "$results/single" ||
  fail "the merged run differs from the single run (above)"
echo "4 shards in containers of $image, merged in a fifth: the single run's cases and verdicts"

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
