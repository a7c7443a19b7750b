#!/bin/bash
# The read-only finding of docs/reliability.md ("Store faults"), reproduced by hand (root: a loop
# device and ext4's trigger_fs_error; not part of ctest). Each trial runs a compact-layout
# `mira run` on a loop-mounted ext4 (errors=remount-ro), forces an ext4 error mid-run, then
# unmounts, runs e2fsck and mounts again, and compares the records found with those the run
# reported saved (printed as finished and not listed as "could not be saved").
# Usage: ext4_remount_ro.sh MIRA_BINARY [TRIALS]
set -u
mira=${1:?usage: ext4_remount_ro.sh MIRA_BINARY [TRIALS]}
trials=${2:-20}
study="python3 $(dirname "$0")/../studies/py_study.py --samples 6000"
work=$(mktemp -d)
trap 'umount "$work/mnt" 2>/dev/null; [ -n "${loop:-}" ] && losetup -d "$loop"; rm -rf "$work"' EXIT
dd if=/dev/zero of="$work/img" bs=1M count=256 status=none
mkfs.ext4 -q -F "$work/img"
mkdir "$work/mnt"
loop=$(losetup -f --show "$work/img")
lost_trials=0
for i in $(seq 1 "$trials"); do
  mount -o errors=remount-ro "$loop" "$work/mnt"
  delay=$(awk -v i="$i" -v n="$trials" 'BEGIN { printf "%.2f", 0.3 + 0.8 * i / n }')
  (sleep "$delay"; echo 1 > "/sys/fs/ext4/$(basename "$loop")/trigger_fs_error") &
  "$mira" run --store compact -j 8 --format jsonl --results-dir "$work/mnt/r" -- $study \
    > "$work/out" 2> "$work/err"
  wait
  umount "$work/mnt"
  e2fsck -fy "$loop" > /dev/null 2>&1
  mount "$loop" "$work/mnt"
  line=$(python3 - "$work" <<'EOF'
import glob, json, re, sys
work = sys.argv[1]
finished = set()
for line in open(f"{work}/out"):
    v = json.loads(line)
    if "sample" not in v:
        continue
    error = v["transcript"].get("error") or ""
    if not error.startswith(("not run", "cancelled")):
        finished.add(f"{v['eval']}/{v['sample']}@{v['target']}")
err = open(f"{work}/err").read()
unsaved = set()
if "could not be saved" in err:
    for l in err[err.index("could not be saved"):].splitlines()[1:]:
        if not l.startswith("  "):
            break
        unsaved.add(l[2:])
first = re.search(r"cannot save the result of \S+: (.*)", err)
acknowledged = finished - unsaved
found = set()
for f in glob.glob(f"{work}/mnt/r/*/segments/*.ndjson"):
    for l in open(f, errors="replace"):
        m = re.search(r'"key":"([^"]*)"', l)
        if m:
            found.add(m.group(1))
print(f"acknowledged {len(acknowledged)} missing {len(acknowledged - found)} "
      f"found-but-reported-unsaved {len(found - acknowledged)} "
      f"first error: {first.group(1) if first else 'none'}")
EOF
)
  echo "trial $i (error after ${delay} s): $line"
  case "$line" in *"missing 0 "*) ;; *) lost_trials=$((lost_trials + 1)) ;; esac
  rm -rf "$work/mnt/r"
  umount "$work/mnt"
done
echo "$lost_trials of $trials trials lost acknowledged records"
