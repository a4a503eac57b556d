#!/usr/bin/env bash
# Start a real Ray head on 127.0.0.1 with fake GPUs (declared, no hardware), for tests and CI.
# Usage: RAY_TMP=DIR RAY_PORT=6379 [RAY_CLIENT_PORT=10001 RAY_CPUS=2 RAY_GPUS=2] bash tests/engines/ray_up.sh
# Stop it with ray_down.sh and the same RAY_TMP (only the processes of that head are stopped).
# Export the SAME three variables in the driver process too (rlbench sets them itself if unset), or
# ray.init(address=...) may hang:
#   RAY_USAGE_STATS_ENABLED=0            never upload usage stats
#   RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0  keep 127.0.0.1 (otherwise Ray rewrites it to the first NIC's address)
#   RAY_AUTH_MODE=disabled               Ray 2.60: a local ray.init() writes ~/.ray/auth_token, and a later
#                                        `ray start` then turns token auth on and drivers fail
# --num-gpus N schedules like real GPUs (CUDA_VISIBLE_DEVICES, ray.get_gpu_ids()). Worker processes inherit
# this shell's environment (PYTHONPATH included), so they import the same rlbench as the driver.
set -euo pipefail
export RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_AUTH_MODE=disabled
RAY_TMP=${RAY_TMP:-${TMPDIR:-/tmp}/rlbench-ray}
mkdir -p "$RAY_TMP"
ray start --head --node-ip-address=127.0.0.1 --port="${RAY_PORT:-6379}" \
  --ray-client-server-port="${RAY_CLIENT_PORT:-10001}" --num-cpus="${RAY_CPUS:-2}" --num-gpus="${RAY_GPUS:-2}" \
  --include-dashboard=false --disable-usage-stats --temp-dir="$RAY_TMP"
echo "driver: RAY_ADDRESS=127.0.0.1:${RAY_PORT:-6379} (with the three variables above exported)"
