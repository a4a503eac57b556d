"""A worker's first ppo run: its seconds with rlbench's FusedAdam against torch.optim.Adam(fused=True).

Every worker of the pool pays a one-time start-up in its first torch run. torch.optim's first optimiser
imports torch._dynamo (``Optimizer.add_param_group`` is wrapped by ``torch._disable_dynamo``); ppo steps its
parameters with the same fused kernel through ``rlbench_cli.algos.adam.FusedAdam`` and never imports it.
This script runs, in fresh processes that have imported torch as a worker has, one small ppo run each
(CartPole-v1, --steps), alternating: ppo as it is, and ppo with ``torch.optim.Adam(fused=True)`` in its place
(CleanRL's optimiser, and rlbench's before FusedAdam), and prints each one's median seconds for the run, the
seconds of the first update (optimiser created, first step taken), whether torch._dynamo was imported, and
the ratio. The values of both runs are the same bit for bit (tests/unit/test_fused_adam.py).

    python benchmarks/cold_start.py                      # CPU, 3 runs each
    python benchmarks/cold_start.py --device cuda:0      # on a GPU: CUDA's start-up is in both
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
from pathlib import Path
import torch
from rlbench_cli.runner import configure_torch
configure_torch(torch)  # as a worker does before its first job
import rlbench_cli.algos.ppo.update as ppo_update
from rlbench_cli.suite.grid import expand
from rlbench_cli.runner import run_one
from rlbench_cli.suite.loader import parse_suite

args = json.loads(sys.argv[1])
first = {}
make = ppo_update.adam
if args["optimiser"] == "torch.optim":
    def make(params, lr, device, capturable=False):
        return torch.optim.Adam(params, lr=lr, eps=1e-5, fused=True, capturable=capturable)

def timed(params, lr, device, capturable=False):
    t = time.perf_counter()
    opt = make(params, lr, device, capturable)
    step = opt.step
    def first_step(*a, **k):
        out = step(*a, **k)
        if "update" not in first:
            first["update"] = time.perf_counter() - t
        return out
    opt.step = first_step
    return opt

ppo_update.adam = timed
suite = parse_suite({"name": "cold", "seeds": 1, "envs": ["CartPole-v1"],
                     "budget": {"steps": args["steps"], "eval_every": args["steps"], "eval_episodes": 1},
                     "algorithms": [{"name": "ppo", "params": {"num_envs": 4, "num_steps": 128}}]}, "cold")
t = time.perf_counter()
result = run_one(expand(suite)[0], Path(args["folder"]), device=args["device"])
print(json.dumps({"run": time.perf_counter() - t, "update": first.get("update"), "status": result["status"],
                  "dynamo": "torch._dynamo" in sys.modules}))
"""

SIDES = ("rlbench", "torch.optim")


def one(optimiser: str, device: str, steps: int, folder: str) -> dict:
    args = {"optimiser": optimiser, "device": device, "steps": steps, "folder": folder}
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"cold_start: the {optimiser} run failed:\n{out.stderr[-2000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    if row["status"] != "finished":
        raise SystemExit(f"cold_start: the {optimiser} run ended {row['status']}")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="torch device of the runs (cpu, cuda:0)")
    ap.add_argument("--steps", type=int, default=2048, help="environment steps of each run")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side (alternating)")
    a = ap.parse_args(argv)
    rows: dict[str, list[dict]] = {s: [] for s in SIDES}
    with tempfile.TemporaryDirectory(prefix="rlbench-cold-") as tmp:
        for i in range(a.repeat):
            for side in SIDES:
                rows[side].append(one(side, a.device, a.steps, f"{tmp}/{side}-{i}"))
    print(f"a fresh worker's first ppo run, CartPole-v1, {a.steps} steps, {a.device}, median of {a.repeat}:")
    med = {}
    for side in SIDES:
        run = statistics.median(r["run"] for r in rows[side])
        update = statistics.median(r["update"] for r in rows[side])
        dynamo = "imports" if any(r["dynamo"] for r in rows[side]) else "does not import"
        med[side] = (run, update)
        print(f"  {side:<12} run {run:6.2f} s   first update {update:6.2f} s   {dynamo} torch._dynamo")
    (run_r, upd_r), (run_t, upd_t) = med["rlbench"], med["torch.optim"]
    print(f"rlbench's first run {run_t / run_r:.2f}x faster ({run_t - run_r:.2f} s less); "
          f"first update {upd_t / upd_r:.1f}x faster")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
