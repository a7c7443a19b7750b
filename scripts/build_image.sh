#!/usr/bin/env bash
# Builds the container image of deploy/container/Containerfile with podman, on a Debian 12 base
# made here by debootstrap (no registry is asked for anything), and tags it mira:<version>.
#   scripts/build_image.sh [--binaries BUILD_DIR] [--tag NAME]
# --binaries BUILD_DIR  take mira and the example studies from a build of this tree (strips
#                       them) instead of compiling them in the image's build stage; .ci/run
#                       does, so that CI compiles once.
# --tag NAME            the image's name (default: mira:<version of CMakeLists.txt>).
# The base, mira-base:bookworm (a minbase root with the runtime packages of
# deploy/container/runtime-packages.txt), is made once and kept while that list is unchanged.
# MIRA_DEBIAN_MIRROR picks the mirror debootstrap and the build stage fetch from. Needs root;
# installs podman, buildah, runc and debootstrap (Debian's) when missing. Prints the image's
# name and size.
set -euo pipefail
cd "$(dirname "$0")/.."
binaries="" tag=""
while (($#)); do
  case "$1" in
    --binaries) binaries=${2:?--binaries needs a build folder}; shift 2 ;;
    --tag) tag=${2:?--tag needs a name}; shift 2 ;;
    *) echo "build_image.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "build_image.sh: needs root (debootstrap, podman)" >&2; exit 2; }
version=$(sed -n 's/^project(mira VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
tag=${tag:-mira:$version}
scripts/install_packages.sh podman buildah runc debootstrap
# shellcheck source=scripts/podman_env.sh
. scripts/podman_env.sh

work=$(mktemp -d "${TMPDIR:-/tmp}/mira-image.XXXXXX")
trap 'rm -rf "$work"; [ -z "${CONTAINERS_CONF:-}" ] || rm -f "$CONTAINERS_CONF"' EXIT

# The base: its label names the package list it holds, so a changed list makes a new one.
list=deploy/container/runtime-packages.txt
packages=$(sed 's/#.*//' "$list" | xargs | tr ' ' ',')
list_sum=$(sha256sum "$list" | cut -d' ' -f1)
base=localhost/mira-base:bookworm
if [ "$(podman image inspect --format '{{index .Labels "mira.runtime-packages"}}' "$base" 2>/dev/null)" != "$list_sum" ]; then
  echo "build_image.sh: debootstrap bookworm (minbase + $packages)"
  debootstrap --variant=minbase --include="$packages" bookworm "$work/root" \
    "${MIRA_DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  # What debian:12-slim leaves out too: documentation, manuals, translations, package caches.
  rm -rf "$work"/root/usr/share/{doc,man,info,locale}/* "$work"/root/var/cache/apt/* \
    "$work"/root/var/lib/apt/lists/* "$work"/root/var/log/*.log
  tar -C "$work/root" --numeric-owner -c . |
    podman import --change "LABEL mira.runtime-packages=$list_sum" --change 'CMD ["/bin/bash"]' \
      - "$base" > /dev/null
  rm -rf "$work/root"
fi
podman_env_setup "$base"

context=$PWD
# BINARIES is given even at its default: buildah (1.28) finds the stages a build needs from the
# arguments given, not from an ARG's default, and would skip the build stage.
args=(--build-arg "BASE=$base" --build-arg "RUNTIME_BASE=$base" --build-arg BINARIES=build)
if [ -n "$binaries" ]; then
  # The context is a folder of its own, with what the runtime stage copies: the package list and
  # the binaries where the build stage would have installed them.
  context=$work/context
  install -D -m 0644 "$list" "$context/$list"
  install -D -m 0755 -s "$binaries/mira" "$context/prebuilt/opt/mira/bin/mira"
  for study in example_study program_study greeter; do
    install -D -m 0755 -s "$binaries/examples/$study" "$context/prebuilt/opt/study/$study"
  done
  args[-1]=BINARIES=prebuilt
fi
previous=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
podman build -f deploy/container/Containerfile -t "$tag" "${args[@]}" "$context"
# A machine that builds the image at every run (CI) keeps one copy, not one per run: the image
# this tag named before (unless a container still uses it) and the nameless stage images of
# earlier binaries (labelled in the Containerfile) go.
current=$(podman image inspect --format '{{.Id}}' "$tag")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  podman rmi "$previous" > /dev/null 2>&1 || true
fi
podman image prune -f --filter label=org.mira-cpp.stage=prebuilt > /dev/null
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "build_image.sh: $tag, $((size / 1000000)) MB ($size bytes)"
