"""Many seeds in one job: rlbench's packed PPO (10 seeds x 500k steps, one process) against CleanRL's ppo.py
training ONE seed of 500k steps, on the same machine (GitHub issue #11).

Three sides, each in its own process, one at a time, with OMP_NUM_THREADS / MKL_NUM_THREADS /
OPENBLAS_NUM_THREADS = --threads (torch's thread count is checked in a child process):

- packed: ``rlbench_cli.packed.run_packed`` on seeds 1..--seeds of CartPole-v1 at CleanRL's defaults (the
  function a worker of ``rlbench run`` calls for a job of ``resources.seeds_per_job`` seeds): every seed
  gets its own folder, spec.json, metric shards and result.json; they train in lock step, batched across
  seeds (``algos.ppo.train_packed``);
- CleanRL: its own script, benchmarks/peers/cleanrl_ppo.py, seed 1 only, through
  ``ppo_vs_cleanrl.run_cleanrl`` (--no-cuda, TensorBoard logging on, as shipped);
- one per job: ``rlbench_cli.runner.run_one`` for each of the same seeds, one process each, through
  ``ppo_vs_cleanrl.run_rlbench`` (what ``rlbench run`` does without packing). --single-seeds K runs only
  the first K and says so (the total for all seeds is then an extrapolation, printed as such).

Times: "process s" is the wall-clock of each whole process (interpreter start, imports, env and network
construction, training, rlbench's evaluation and the final flush of the metric shards); "train s" leaves
out what each side's own figure leaves out (CleanRL's SPS: imports and construction; rlbench: the
evaluations, timed apart). The target compares whole processes: the ten packed seeds must finish in less
wall time than CleanRL's one seed, with IQM final eval/return >= 475 over the ten (final eval/return: mean
of --eval-episodes deterministic episodes at the last step; IQM as rliable, with a 95% stratified bootstrap
interval from ``rlbench_cli.bootstrap``).

Scaling: steps/s (all seeds' env steps / training time, evaluation excluded) of one packed job with
N = 1, 4, 16, 64 seeds of --scaling-steps steps each. ``--device cuda`` puts the packed jobs' networks on the
GPU (the envs stay on the CPU): on a GPU machine, add N = 256 with ``--sides scaling --scaling 1 16 64 256``.

    pip install -e ".[bench]"                       # tyro and tensorboard, which CleanRL's script needs
    python benchmarks/seeds_vectorised.py           # the full comparison (one-per-job is the long part)
    python benchmarks/seeds_vectorised.py --single-seeds 2 --steps 100000    # a shorter look
    python benchmarks/seeds_vectorised.py --quick   # a check that the script runs (seconds, no target)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ppo_vs_cleanrl as pvc  # noqa: E402  - the CleanRL and one-per-job runners, shared

ENV_ID = pvc.ENV_ID
BATCH = pvc.BATCH
TARGET_IQM = 475.0


def _packed_worker(job: dict[str, Any]) -> None:
    """Runs in the child process: one run_packed over the job's seeds; prints one JSON line."""
    import torch

    torch.set_num_threads(job["threads"])
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    from rlbench_cli.algos import ppo  # noqa: F401  - imported before the clock, as below
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.envs import make_env
    from rlbench_cli.packed import run_packed
    from rlbench_cli.suite.grid import RunSpec

    # As ppo_vs_cleanrl's worker: imports done before the clock starts (a worker of `rlbench run` imports once
    # for all its jobs; CleanRL's SPS leaves them out): the module, the env's, and torch._dynamo, which torch
    # imports on the first optimizer construction. The process time includes them anyway.
    make_env(ENV_ID).close()
    torch.optim.Adam(torch.nn.Linear(1, 1).parameters())

    eval_s = [0.0]
    evaluate = RunContext.evaluate

    def timed_evaluate(self: RunContext, step: int, policy: Any) -> float:
        t = time.perf_counter()
        try:
            return evaluate(self, step, policy)
        finally:
            eval_s[0] += time.perf_counter() - t

    RunContext.evaluate = timed_evaluate  # type: ignore[method-assign]
    steps = job["steps"]
    specs = [
        RunSpec(
            suite="seeds-vectorised",
            algo="ppo",
            algo_name="ppo",
            params=job["params"],
            env_id=ENV_ID,
            env_kwargs={},
            seed=seed,
            budget={
                "steps": steps,
                "eval_every": steps,
                "eval_episodes": job["eval_episodes"],
                "timeout": None,
            },
        )  # fmt: skip
        for seed in job["seeds"]
    ]
    folder = Path(job["folder"])
    t0 = time.perf_counter()
    results = run_packed(specs, [folder / s.run_id / "attempt-1" for s in specs], device=job["device"])
    wall = time.perf_counter() - t0
    bad = [r for r in results if r["status"] != "finished"]
    if bad:
        raise SystemExit(f"packed run {bad[0]['status']}: {bad[0].get('error')}")
    rec = {"side": "packed", "seeds": job["seeds"], "steps": steps, "run_packed_s": wall,
           "train_s": wall - eval_s[0], "eval_s": eval_s[0], "finals": [r["final_eval"] for r in results]}  # fmt: skip
    print(json.dumps(rec))


def run_packed_job(seeds: list[int], steps: int, threads: int, workdir: Path, eval_episodes: int,
                   params: dict[str, Any], device: str = "cpu") -> dict[str, Any]:  # fmt: skip
    job = {"steps": steps, "seeds": seeds, "threads": threads, "folder": str(workdir),
           "eval_episodes": eval_episodes, "params": params, "device": device}  # fmt: skip
    cmd = [sys.executable, str(Path(__file__).resolve()), "--packed-worker", json.dumps(job)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=pvc._thread_env(threads), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    pvc._check(proc, "rlbench's packed ppo")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    rec["process_s"] = wall
    return rec


def iqm_interval(values: list[float]) -> tuple[float, float, float]:
    import numpy as np

    from rlbench_cli.bootstrap import interval_estimates

    ci = interval_estimates({"x": np.asarray(values, float)[:, None]}, ["iqm"], reps=20000, seed=0)["x"]
    return float(ci.point[0]), float(ci.lower[0]), float(ci.upper[0])


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--packed-worker":
        _packed_worker(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=500_000, help="env steps per seed (default 500000)")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1..N in the packed job (default 10)")
    ap.add_argument("--single-seeds", type=int, help="one-per-job: run only the first K seeds (default all)")
    ap.add_argument("--sides", nargs="+", choices=["packed", "cleanrl", "single", "scaling"],
                    default=["packed", "cleanrl", "single", "scaling"], help="what to run (default all)")  # fmt: skip
    ap.add_argument("--scaling", type=int, nargs="+", help="seeds per job to time (default 1 4 16 64)")
    ap.add_argument(
        "--scaling-steps", type=int, default=25_600, help="env steps per seed in the scaling table"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads of every process (default 1)")
    ap.add_argument("--eval-episodes", type=int, default=10, help="rlbench's episodes per evaluation")
    ap.add_argument("--device", default="cpu",
                    help="torch device of the packed jobs (cuda: the scaling table on a GPU; default cpu)")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the script runs, no target")
    ap.add_argument("--json", help="also write every figure to this JSON file")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.seeds, args.scaling_steps, args.eval_episodes = BATCH, 2, BATCH, 2
    if args.scaling is None:
        args.scaling = [1, 2] if args.quick else [1, 4, 16, 64]
    steps = (args.steps // BATCH) * BATCH  # as ppo_vs_cleanrl: whole CleanRL iterations on both sides
    if steps < BATCH:
        ap.error(f"--steps must be at least one batch ({BATCH})")
    seen = pvc.torch_threads_seen(args.threads)
    if seen != args.threads:
        raise SystemExit(f"torch uses {seen} threads with OMP_NUM_THREADS={args.threads}")
    seeds = list(range(1, args.seeds + 1))
    out: dict[str, Any] = {"steps": steps, "seeds": seeds, "threads": args.threads}
    print(
        f"{ENV_ID} at CleanRL's defaults, {steps:,} steps per seed, torch threads {args.threads}", flush=True
    )
    with tempfile.TemporaryDirectory(prefix="seeds-vectorised-") as d:
        tmp = Path(d)
        if "packed" in args.sides:
            rec = run_packed_job(
                seeds, steps, args.threads, tmp / "packed", args.eval_episodes, {}, args.device
            )
            out["packed"] = rec
            iqm, lo, hi = iqm_interval(rec["finals"])
            rec["iqm"] = [iqm, lo, hi]
            print(f"packed   {len(seeds)} seeds in one job: process {rec['process_s']:8.1f} s, train "
                  f"{rec['train_s']:8.1f} s, eval {rec['eval_s']:.1f} s, "
                  f"{len(seeds) * steps / rec['train_s']:,.0f} steps/s", flush=True)  # fmt: skip
            print(f"         final eval/return per seed: {', '.join(f'{v:.1f}' for v in rec['finals'])}")
            print(f"         IQM {iqm:.1f} [95% CI {lo:.1f}, {hi:.1f}]")
        if "cleanrl" in args.sides:
            rec = pvc.run_cleanrl(steps, 1, args.threads, tmp / "cleanrl")
            out["cleanrl"] = rec
            print(f"CleanRL  1 seed:  process {rec['process_s']:8.1f} s, train {rec['train_s']:8.1f} s "
                  f"(its SPS), {steps / rec['train_s']:,.0f} steps/s", flush=True)  # fmt: skip
        if "single" in args.sides:
            k = len(seeds) if args.single_seeds is None else min(args.single_seeds, len(seeds))
            recs = [pvc.run_rlbench(steps, s, args.threads, tmp / f"single-{s}", args.eval_episodes, {})
                    for s in seeds[:k]]  # fmt: skip
            out["single"] = recs
            proc_s = sum(r["process_s"] for r in recs)
            train_s = sum(r["train_s"] for r in recs)
            label = f"{k} seeds" if k == len(seeds) else f"{k} of {len(seeds)} seeds"
            print(f"one-per-job rlbench, {label} one after another: process {proc_s:8.1f} s, train "
                  f"{train_s:8.1f} s, {k * steps / train_s:,.0f} steps/s", flush=True)  # fmt: skip
            if k < len(seeds):
                print(
                    f"         all {len(seeds)} seeds, extrapolated: process ~{proc_s * len(seeds) / k:.0f} s"
                )
        if "packed" in args.sides and "cleanrl" in args.sides:
            p, c = out["packed"], out["cleanrl"]
            faster = p["process_s"] < c["process_s"]
            good = p["iqm"][0] >= TARGET_IQM
            print(f"target: {len(seeds)} packed seeds in less wall time than CleanRL's one "
                  f"({p['process_s']:.1f} s vs {c['process_s']:.1f} s, ratio {c['process_s'] / p['process_s']:.2f}x): "
                  f"{'met' if faster else 'NOT met'}; IQM final return >= {TARGET_IQM:.0f}: "
                  f"{'met' if good else 'NOT met'} ({p['iqm'][0]:.1f})")  # fmt: skip
        if "scaling" in args.sides:
            s_steps = max(BATCH, (args.scaling_steps // BATCH) * BATCH)
            print(f"scaling: one packed job on {args.device}, {s_steps:,} steps per seed, evaluation excluded",
                  flush=True)  # fmt: skip
            print(f"{'seeds/job':>9} {'train s':>9} {'steps/s':>10} {'per seed':>10}")
            rows = []
            for n in args.scaling:
                rec = run_packed_job(list(range(1, n + 1)), s_steps, args.threads, tmp / f"scale-{n}", 1, {},
                                     args.device)  # fmt: skip
                sps = n * s_steps / rec["train_s"]
                rows.append({"seeds": n, "train_s": rec["train_s"], "steps_per_s": sps})
                print(f"{n:>9} {rec['train_s']:>9.1f} {sps:>10,.0f} {sps / n:>10,.0f}", flush=True)
            out["scaling"] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
