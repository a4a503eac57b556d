"""Continuous-control PPO parity: rlbench's ``ppo`` (no params) against CleanRL's ppo_continuous_action.py.

The peer is CleanRL's own script, vendored as benchmarks/peers/cleanrl_ppo_continuous_action.py (its header lists
the changes needed on gymnasium 1.0). rlbench's side is ``ppo`` with NO params: on a Box action space it picks
CleanRL's continuous defaults by itself (ppo.CONTINUOUS_DEFAULTS: 1 env x 2048 steps, 10 epochs x 32
minibatches, lr 3e-4 annealed, ent 0, observation and reward normalisation clipped to +-10, actions clipped).
Three sides, the same env, the same steps (rounded down to a multiple of 2048, as CleanRL's script trains whole
iterations) and the same seeds 1..--seeds:

  cleanrl          CleanRL's script, one process per seed (--no-cuda);
  rlbench          rlbench_cli.runner.run_one (what a worker of `rlbench run` calls per run), one process per
                   seed;
  rlbench-packed   rlbench_cli.packed.run_packed (resources.seeds_per_job): ALL seeds in one process, trained
                   in lock step with stacked weights (algos.ppo.train_packed).

Score, as CleanRL's benchmark tables report it (openrlbenchmark's rlops, metric charts/episodic_return): per
run the mean of its last 100 training episodic returns (raw env rewards), then mean +- population std over
the seeds. rlbench's own score, the final eval/return (mean action, frozen normalisation statistics,
--eval-episodes episodes), is printed next to it. Wall time is the sum of each side's processes (interpreter
start, imports, evaluation included); the ratio is CleanRL's wall time / the side's (> 1: faster).

One difference is deliberate and on by default: rlbench bootstraps time-limit truncations with V(final obs)
(bootstrap_truncated, as SB3), which CleanRL treats like termination; pass
--rlbench-param bootstrap_truncated=false for CleanRL's exact semantics. Every process runs with
OMP/MKL/OPENBLAS_NUM_THREADS = --threads (default 1).

    pip install -e ".[bench]"                                 # tyro and tensorboard, for CleanRL's script
Measured on the shared 2-core development machine (load 10-15, so wall times and ratios are indicative only),
Pendulum-v1, 98,304 steps x seeds 1-3, last-100 training returns:
  CleanRL -1185.0 +- 7.4; rlbench -604.9 +- 95.8 (eval -345.7); packed -635.3 +- 45.6 (eval -417.9);
  with bootstrap_truncated=false (CleanRL's semantics): rlbench -1182.2 +- 22.5, packed -1174.9 +- 73.5.
Pendulum only ends by truncation, so bootstrapping it is what separates the two; without it they agree.
HalfCheetah-v5, 999,424 steps x seeds 1-3 (2026-11-26, the same machine; the sides ran two or three at a time
and were paused for other measurements, so their wall times say nothing), last-100 training returns:
  CleanRL 1473.9 +- 23.6 (1440.8, 1493.6, 1487.2);
  with bootstrap_truncated=false (CleanRL's semantics): rlbench 1429.0 +- 69.5 (1368.5, 1392.2, 1526.4; eval
  1609.4 +- 73.1), packed 2027.1 +- 765.5 (1529.3, 3108.5, 1443.5): seed 2 of the pack left the ~1,500
  plateau that every other run of these semantics stayed on;
  rlbench's defaults (truncations bootstrapped): rlbench 3287.6 +- 1087.6 (1771.5, 4270.1, 3821.1; eval
  3646.0 +- 1266.6), packed 2339.3 +- 874.1 (3573.8, 1665.9, 1778.1).
HalfCheetah also only ends by truncation (1,000 steps), so bootstrapping there is worth twice the return.

    python benchmarks/ppo_continuous_vs_cleanrl.py            # Pendulum-v1, 100k steps x 3 seeds x 3 sides
    python benchmarks/ppo_continuous_vs_cleanrl.py --env HalfCheetah-v4 --steps 1000000   # needs the mujoco extra
    python benchmarks/ppo_continuous_vs_cleanrl.py --steps 4096 --seeds 1                 # a quick check
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ppo_vs_cleanrl import (  # noqa: E402 - the sibling benchmark's helpers
    _check,
    _last_n_mean,
    _mean_std,
    _parse_param,
    _thread_env,
    torch_threads_seen,
)

CLEANRL = HERE / "peers" / "cleanrl_ppo_continuous_action.py"
BATCH = 2048  # CleanRL's continuous default num_envs x num_steps (= rlbench's CONTINUOUS_DEFAULTS)
LAST_N = 100
SIDES = ("cleanrl", "rlbench", "rlbench-packed")

_EPISODE = re.compile(r"^global_step=(\d+), episodic_return=\[?([-+0-9.eE]+)\]?")


def run_cleanrl(env_id: str, steps: int, seed: int, threads: int, workdir: Path) -> dict[str, Any]:
    """One run of CleanRL's script; its episodic returns come from its own stdout."""
    workdir.mkdir(parents=True, exist_ok=True)  # its TensorBoard logs go to workdir/runs/
    cmd = [sys.executable, str(CLEANRL), "--no-cuda", "--env-id", env_id, "--seed", str(seed),
           "--total-timesteps", str(steps)]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=_thread_env(threads), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    _check(proc, "CleanRL's ppo_continuous_action.py")
    returns = [float(m.group(2)) for line in proc.stdout.splitlines() if (m := _EPISODE.match(line))]
    return {"seed": seed, "episode_returns": returns, "final_eval": None, "process_s": wall}


def run_rlbench(job: dict[str, Any], threads: int) -> list[dict[str, Any]]:
    """rlbench's ppo in a fresh process (``_rlbench_worker``): one seed, or all of them packed."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--rlbench-worker", json.dumps(job)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=_thread_env(threads), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    _check(proc, "rlbench's ppo")
    recs = json.loads(proc.stdout.strip().splitlines()[-1])
    for rec in recs:  # a packed process's time is shared by its seeds
        rec["process_s"] = wall / len(recs)
    return recs


def _rlbench_worker(job: dict[str, Any]) -> None:
    """Runs in the child process: run_one (one seed) or run_packed (all seeds); prints one JSON line."""
    import torch

    torch.set_num_threads(job["threads"])
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rlbench_cli.packed import run_packed
    from rlbench_cli.runner import run_one
    from rlbench_cli.sink import list_shards
    from rlbench_cli.suite.grid import RunSpec

    steps = job["steps"]
    specs = [
        RunSpec(
            suite="ppo-continuous-vs-cleanrl",
            algo="ppo",
            algo_name="ppo",
            params=job["params"],
            env_id=job["env_id"],
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
    folders = [Path(job["folder"]) / f"seed-{s.seed}" for s in specs]
    if job["packed"]:
        results = run_packed(specs, folders, device="cpu")
    else:
        results = [run_one(s, f, device="cpu") for s, f in zip(specs, folders)]
    recs = []
    for spec, folder, result in zip(specs, folders, results):
        if result["status"] != "finished":
            raise SystemExit(f"rlbench run seed {spec.seed} {result['status']}: {result.get('error')}")
        table = pa.concat_tables([pq.read_table(p) for p in list_shards(folder / "metrics")]).to_pandas()
        ep = table[table["name"] == "train/episode_return"].sort_values("step", kind="stable")
        recs.append({"seed": spec.seed, "episode_returns": ep["value"].tolist(),
                     "final_eval": result["final_eval"]})  # fmt: skip
    print(json.dumps(recs))


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--rlbench-worker":
        _rlbench_worker(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="Pendulum-v1", help="a gymnasium id with a Box action space")
    ap.add_argument("--steps", type=int, default=100_000, help="env steps per run (default 100000)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 1..N per side (default 3)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of every process (default 1)")
    ap.add_argument("--eval-episodes", type=int, default=10, help="rlbench's episodes per evaluation")
    ap.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="which sides to run")
    ap.add_argument("--rlbench-param", type=_parse_param, action="append", default=[], metavar="KEY=VALUE",
                    help="a ppo param for rlbench's sides, e.g. bootstrap_truncated=false (repeatable)")  # fmt: skip
    ap.add_argument("--json", help="also write every run's figures to this JSON file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each side as it ends")
    args = ap.parse_args()
    if args.steps < BATCH:
        ap.error(f"--steps must be at least one batch ({BATCH})")
    steps = (args.steps // BATCH) * BATCH
    seeds = list(range(1, args.seeds + 1))
    params = dict(args.rlbench_param)
    seen = torch_threads_seen(args.threads)
    if seen != args.threads:
        raise SystemExit(f"torch uses {seen} threads with OMP_NUM_THREADS={args.threads}")
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in args.sides}
    job = {"env_id": args.env, "steps": steps, "threads": args.threads, "params": params,
           "eval_episodes": args.eval_episodes}  # fmt: skip

    def done(side: str, recs: list[dict[str, Any]], t0: float) -> None:
        runs[side] += recs
        if args.verbose:
            scores = ", ".join(f"seed {r['seed']}: {_last_n_mean(r['episode_returns']):.1f}" for r in recs)
            print(f"  {side:<15} {time.perf_counter() - t0:>7.1f} s   last-{LAST_N} {scores}", flush=True)
        if args.json:  # rewritten as runs end, so a long run that is stopped leaves what it finished
            Path(args.json).write_text(json.dumps({"env": args.env, "steps": steps, "runs": runs}, indent=1))

    with tempfile.TemporaryDirectory(prefix="ppo-continuous-") as d:
        tmp = Path(d)
        for s in seeds:  # one process at a time, the one-seed sides alternating seed by seed
            if "cleanrl" in runs:
                t0 = time.perf_counter()
                done("cleanrl", [run_cleanrl(args.env, steps, s, args.threads, tmp / f"cleanrl-{s}")], t0)
            if "rlbench" in runs:
                t0 = time.perf_counter()
                one = {**job, "packed": False, "seeds": [s], "folder": str(tmp / f"one-{s}")}
                done("rlbench", run_rlbench(one, args.threads), t0)
        if "rlbench-packed" in runs:
            t0 = time.perf_counter()
            pack = {**job, "packed": True, "seeds": seeds, "folder": str(tmp / "packed")}
            done("rlbench-packed", run_rlbench(pack, args.threads), t0)
    print(f"PPO continuous parity, {args.env}, {steps:,} steps x seeds {seeds}, torch threads {args.threads}")
    print(
        f"rlbench params: {', '.join(f'{k}={v}' for k, v in params.items()) or 'none (continuous defaults)'}"
    )
    print(f"score = per run, mean of the last {LAST_N} training episodic returns; mean +- std over runs "
          f"(CleanRL's tables); eval = rlbench's final eval/return ({args.eval_episodes} episodes)")  # fmt: skip
    print(f"{'side':<15} {'score':>19} {'eval':>19} {'wall s':>8} {'vs CleanRL':>10}   per seed")
    base = sum(r["process_s"] for r in runs["cleanrl"]) if "cleanrl" in runs else None
    for side, recs in runs.items():
        scores = [_last_n_mean(r["episode_returns"]) for r in recs]
        finals = [r["final_eval"] for r in recs if r["final_eval"] is not None]
        wall = sum(r["process_s"] for r in recs)
        ratio = f"{base / wall:>9.2f}x" if base else f"{'-':>10}"
        ev = _mean_std(finals) if finals else "-"
        print(f"{side:<15} {_mean_std(scores):>19} {ev:>19} {wall:>8.1f} {ratio}   "
              f"{', '.join(f'{s:.1f}' for s in scores)}")  # fmt: skip


if __name__ == "__main__":
    main()
