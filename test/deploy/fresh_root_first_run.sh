#!/usr/bin/env bash
# README command 1 on a fresh Debian 12 root, timed: what a new user's first run costs.
# A minbase root (debootstrap, plus git and ca-certificates to clone with) gets a clean clone of
# this repository; inside it, as root, `scripts/setup.sh && build/mira run --format html --out
# report.html -- build/examples/example_study` runs under `time`. Then it checks that the run
# wrote report.html, that none of the tests' and CI's packages were installed, and how many
# objects the build compiled (at most 90), and prints the figures.
# With --tests, README command 2 (`scripts/test.sh`) runs there instead, after command 1, and
# must pass: every package the tests use installed by the project's scripts.
# Needs root and Debian's package mirror. Usage: fresh_root_first_run.sh [--tests] [ROOT_DIR]
# (default: a new temporary directory; an existing root made by an earlier call is reused only
# if given). Exit 77 without root.
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "fresh_root_first_run: needs root (debootstrap, chroot)"; exit 77; }
# In a mount namespace of its own, private: the root's /proc, /sys and /dev go with it, and no
# unmount can reach the host's.
if [ -z "${MIRA_FRESH_ROOT_NS:-}" ]; then
  exec unshare --mount --propagation private env MIRA_FRESH_ROOT_NS=1 "$0" "$@"
fi
repo="$(cd "$(dirname "$0")/../.." && pwd)"
tests=0
if [ "${1:-}" = "--tests" ]; then
  tests=1
  shift
fi
root="${1:-}"
scratch=""
if [ -z "$root" ]; then
  scratch="$(mktemp -d)"
  root="$scratch/root"
fi
# The mounts first (private to this namespace, so the host keeps its own), then a root this
# script made; --one-file-system never follows a mount that is left.
cleanup() {
  for m in proc sys dev; do umount -R "$root/$m" 2> /dev/null || true; done
  [ -z "$scratch" ] || rm -rf --one-file-system "$scratch"
}
trap cleanup EXIT
if [ ! -x "$root/bin/sh" ]; then
  command -v debootstrap > /dev/null || "$repo/scripts/install_packages.sh" debootstrap
  debootstrap --variant=minbase --include=ca-certificates,git bookworm "$root" \
    http://deb.debian.org/debian > "$root.debootstrap.log" 2>&1
fi
for m in proc sys dev; do
  mkdir -p "$root/$m"
  mount --rbind "/$m" "$root/$m"
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
rm -rf "$root/src"
git clone -q --no-hardlinks "$repo" "$root/src"

if [ "$tests" = 1 ]; then
  chroot "$root" /bin/bash -c 'cd /src && scripts/setup.sh > /src/first-run.log 2>&1'
  start=$(date +%s.%N)
  status=0
  chroot "$root" /bin/bash -c 'cd /src && CI=true scripts/test.sh < /dev/null' \
    > "$root/src/tests.log" 2>&1 || status=$?
  end=$(date +%s.%N)
  grep -E 'tests passed|consumers|skipped:' "$root/src/tests.log" || true
  printf 'fresh_root_first_run: README command 2 exited %d after %.0f s\n' "$status" \
    "$(python3 -c "print($end - $start)")"
  exit "$status"
fi
start=$(date +%s.%N)
chroot "$root" /bin/bash -c 'cd /src && { time (scripts/setup.sh && build/mira run --format html \
  --out report.html -- build/examples/example_study) ; } > /src/first-run.log 2>&1'
end=$(date +%s.%N)
seconds=$(echo "$end - $start" | bc 2>/dev/null || python3 -c "print($end - $start)")

fail=0
[ -s "$root/src/report.html" ] || { echo "fresh_root_first_run: no report.html"; fail=1; }
for p in chromium slurm-wlm munge doxygen clang-tidy clang-format python3-jsonschema; do
  if chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "fresh_root_first_run: README command 1 installed $p"
    fail=1
  fi
done
objects=$(grep -c 'Building CXX object' "$root/src/first-run.log" || true)
if [ "$objects" -gt 90 ]; then
  echo "fresh_root_first_run: $objects objects compiled (at most 90)"
  fail=1
fi
tail -n 4 "$root/src/first-run.log"
printf 'fresh_root_first_run: README command 1 took %.0f s (apt included), compiled %d objects\n' \
  "$seconds" "$objects"
exit "$fail"
