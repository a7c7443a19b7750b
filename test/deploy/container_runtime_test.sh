#!/usr/bin/env bash
# What can be checked of deploy/container/Containerfile without building the image (the
# container_image test runs the image, where root and podman are): the runtime package list
# covers every library `mira` loads, an install of the build tree runs, and the Containerfile's
# stages read that list.
#   container_runtime_test.sh MIRA_BINARY EXAMPLE_STUDY BUILD_DIR
# Exits 77 (skipped) without dpkg (not a Debian system: the list names Debian packages).
set -uo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 MIRA_BINARY EXAMPLE_STUDY BUILD_DIR" >&2
  exit 2
fi
mira=$1 study=$2 build=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
list=$repo/deploy/container/runtime-packages.txt
containerfile=$repo/deploy/container/Containerfile
cmake=${CMAKE:-cmake}

command -v dpkg >/dev/null || { echo "SKIP: no dpkg"; exit 77; }

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/mira-container-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# The packages of runtime-packages.txt (comments and blank lines left out), as the
# Containerfile's runtime stage (`sed 's/#.*//'`) reads them.
mapfile -t listed < <(sed 's/#.*//' "$list" | tr -s ' \t' '\n' | sed '/^$/d')
((${#listed[@]})) || fail "$list lists no package"
is_listed() {
  local p
  for p in "${listed[@]}"; do [ "$p" = "$1" ] && return 0; done
  return 1
}

# The package that owns a library, asked under each name it may be registered with (with
# merged /usr, /lib/x/libc.so.6 and /usr/lib/x/libc.so.6 are the same file, and dpkg knows one).
owner() {
  local path=$1 real candidate out
  real=$(readlink -f "$path")
  for candidate in "$path" "$real" "${path/#\/usr\/lib\//\/lib\/}" "${path/#\/lib\//\/usr\/lib\/}" \
    "${real/#\/usr\/lib\//\/lib\/}" "${real/#\/lib\//\/usr\/lib\/}"; do
    out=$(dpkg -S "$candidate" 2>/dev/null | head -n 1) || continue
    [ -n "$out" ] && { echo "${out%%:*}"; return 0; }
  done
  return 1
}

# (a) Every shared library ldd resolves for mira comes from a listed package.
check_libraries() {
  local binary=$1 line lib path pkg
  local ldd_out
  ldd_out=$(ldd "$binary" 2>&1) || { fail "ldd $binary: $ldd_out"; return; }
  while IFS= read -r line; do
    line=${line#"${line%%[![:space:]]*}"}
    lib=${line%% *}
    case $line in
      linux-vdso.so* | linux-gate.so*) continue ;;  # the kernel's, not a file
      *"=> not found"*) fail "$lib: not found by ldd"; continue ;;
      *" => "*) path=${line#* => }; path=${path%% (*} ;;
      /*) continue ;;  # the dynamic loader, named by its absolute path (libc6 in any image)
      *) continue ;;
    esac
    if ! pkg=$(owner "$path"); then
      fail "$lib ($path): no Debian package owns it"
    elif is_listed "$pkg"; then
      echo "ok: $lib ($path) is in package $pkg, listed"
    else
      fail "$lib ($path) is in package $pkg, which deploy/container/runtime-packages.txt does not list"
    fi
  done <<<"$ldd_out"
}
echo "== (a) the libraries $mira loads, against $list"
check_libraries "$mira"
echo "== (a) the libraries the example study (also in the image) loads"
check_libraries "$study"

# (b) An install of the build tree puts bin/mira in place, and it runs the example study.
echo "== (b) cmake --install $build into a scratch prefix"
if ! "$cmake" --install "$build" --prefix "$scratch/opt/mira" >"$scratch/install.log" 2>&1; then
  fail "cmake --install $build failed:"
  tail -n 20 "$scratch/install.log"
else
  installed=$scratch/opt/mira/bin/mira
  if [ ! -x "$installed" ]; then
    fail "cmake --install put no executable bin/mira in the prefix"
  else
    echo "ok: bin/mira installed"
    version=$("$installed" --version 2>&1)
    if [[ $version == "mira "* ]]; then
      echo "ok: bin/mira --version: $version"
    else
      fail "bin/mira --version printed '$version'"
    fi
    echo "== (a) again, for the installed bin/mira"
    check_libraries "$installed"
    mkdir -p "$scratch/work"
    if out=$(cd "$scratch/work" && "$installed" run --dry-run --evals greet --color never \
      -- "$study" 2>&1); then
      echo "ok: bin/mira run --dry-run --evals greet -- example_study: ${out##*$'\n'}"
    else
      fail "bin/mira run --dry-run --evals greet -- $study exited $?:"
      echo "$out" | tail -n 20
    fi
    [ -z "$(ls -A "$scratch/work")" ] || fail "a dry run wrote into its working directory"
  fi
fi

# (c) The Containerfile's runtime stages install runtime-packages.txt; the build stage uses
# Boost's versioned development packages, never the libboost-dev metapackage.
echo "== (c) $containerfile"
stage_text() {  # the lines of stage $1 (from its FROM ... AS $1 to the next FROM)
  awk -v name="$1" 'toupper($1) == "FROM" { on = (tolower($NF) == name && toupper($(NF-1)) == "AS") }
                    on' "$containerfile"
}
build_stage=$(stage_text build)
runtime_stage=$(stage_text runtime)
python_stage=$(stage_text runtime-python)
[ -n "$build_stage" ] || fail "no stage 'build'"
[ -n "$runtime_stage" ] || fail "no stage 'runtime'"
[ -n "$python_stage" ] || fail "no stage 'runtime-python'"
if grep -Eq '(^|[^[:alnum:].-])libboost-dev([^[:alnum:].-]|$)' <<<"$build_stage"; then
  fail "the build stage names libboost-dev (Debian 12's default Boost is 1.74: name the 1.81 packages)"
else
  echo "ok: the build stage names no libboost-dev"
fi
# What scripts/setup.sh installs to build (ccache aside) the build stage installs too: the
# image's build broke once when the library came to need OpenSSL and only setup.sh learnt it.
mapfile -t build_packages < <(sed -n '/^packages=(/,/)/p' "$repo/scripts/setup.sh" |
  sed 's/#.*//; s/packages=(//; s/)//' | tr -s ' \t' '\n' | sed '/^$/d; /^ccache$/d')
((${#build_packages[@]})) || fail "found no packages=( ... ) in scripts/setup.sh"
for p in "${build_packages[@]}"; do
  tr -s ' \t\\' '\n' <<<"$build_stage" | grep -Fxq -- "$p" ||
    fail "the build stage does not install $p, which scripts/setup.sh installs to build"
done
if grep -q 'deploy/container/runtime-packages.txt' <<<"$runtime_stage" &&
  grep -q 'apt-get install' <<<"$runtime_stage"; then
  echo "ok: the runtime stage installs deploy/container/runtime-packages.txt"
else
  fail "the runtime stage does not install deploy/container/runtime-packages.txt with apt-get install"
fi
if head -n 1 <<<"$python_stage" | grep -Eiq '^FROM[[:space:]]+runtime[[:space:]]+AS' ||
  grep -q 'deploy/container/runtime-packages.txt' <<<"$python_stage"; then
  echo "ok: the runtime-python stage builds on runtime (and so on its package list)"
else
  fail "the runtime-python stage neither starts FROM runtime nor installs runtime-packages.txt"
fi

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
