#!/usr/bin/env bash
# Stop the Ray head that ray_up.sh started with the same RAY_TMP (and RAY_PORT), and only it: the processes
# whose command line names that folder or its GCS address (`ray stop` would kill every Ray process of the
# machine, by name), plus their descendants (Ray's dashboard and runtime-env agents rename themselves and
# would be left behind). What ignores SIGTERM for 3 s gets SIGKILL.
RAY_TMP=${RAY_TMP:-${TMPDIR:-/tmp}/rlbench-ray}
pattern=$RAY_TMP
[ -n "${RAY_PORT:-}" ] && pattern="$pattern|--address=127\.0\.0\.1:$RAY_PORT( |\$)"  # the Ray client server
pids=$(pgrep -f -- "$pattern" | grep -vx "$$")
[ -n "$pids" ] || exit 0
all=$pids
todo=$pids
while [ -n "$todo" ]; do
  children=$(for p in $todo; do pgrep -P "$p"; done)
  all="$all $children"
  todo=$children
done
kill $all 2>/dev/null
for i in $(seq 1 10); do
  alive=$(for p in $all; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
  [ -z "$alive" ] && exit 0
  sleep 0.3
done
kill -9 $alive 2>/dev/null
exit 0
