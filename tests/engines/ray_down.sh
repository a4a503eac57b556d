#!/usr/bin/env bash
# Stop the Ray head that ray_up.sh started with the same RAY_TMP: only the processes whose command line
# names that folder (`ray stop` would kill every Ray process of the machine, by name).
RAY_TMP=${RAY_TMP:-${TMPDIR:-/tmp}/rlbench-ray}
pids=$(pgrep -f -- "$RAY_TMP" | grep -vx "$$")
[ -n "$pids" ] || exit 0
kill $pids 2>/dev/null
for i in $(seq 1 30); do
  alive=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
  [ -z "$alive" ] && exit 0
  sleep 0.3
done
kill -9 $alive 2>/dev/null
exit 0
