# shellcheck shell=bash
# Sourced by scripts/build_image.sh and test/deploy/container_image_test.sh: makes podman start
# containers on this machine.
#   podman_env_setup IMAGE   (returns 1, saying why, when no container of IMAGE starts)
# A machine whose kernel gives podman what it expects needs nothing. Two kinds of machine do not:
# where the processes lack CAP_SYS_RESOURCE (inside another container or sandbox), podman's
# default ulimits (1048576 open files and processes) cannot be set and crun refuses to start; and
# where cgroup v1 and v2 are mounted together (hybrid), crun refuses the cgroup setup. runc
# accepts both, given limits no higher than this shell's own. podman reads them from the file
# that CONTAINERS_CONF names (build, run and kube play alike), so nothing of the machine's own
# configuration is changed.

podman_env_setup() {
  local image=$1 first conf nofile nproc
  if first=$(podman run --rm --network none --entrypoint /bin/true "$image" 2>&1); then
    return 0
  fi
  command -v runc > /dev/null || {
    echo "podman cannot start a container of $image ($first); runc, which might, is not installed" >&2
    return 1
  }
  nofile=$(ulimit -Hn)
  [ "$nofile" = unlimited ] && nofile=1048576
  nproc=$(ulimit -Hu)
  { [ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ]; } && nproc=4096
  conf=$(mktemp "${TMPDIR:-/tmp}/mira-containers.XXXXXX.conf")
  cat > "$conf" << EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF=$conf
  if ! podman run --rm --network none --entrypoint /bin/true "$image" > /dev/null 2>&1; then
    echo "podman cannot start a container of $image: $first" >&2
    return 1
  fi
  echo "podman: runc with ulimits nofile=$nofile, nproc=$nproc (crun refused: $first)" >&2
}
