"""A script that reports through rlbench's tiny client (JSON lines), then fails if asked to."""

import sys

from rlbench_cli import client

steps = int(sys.argv[1])
for step in range(0, steps + 1, 100):
    client.log(step, **{"eval/return": step / 10, "train/loss/value": 1.0 / (step + 1)})
if "--fail" in sys.argv:
    print("diverged at the end", file=sys.stderr)
    sys.exit(3)
