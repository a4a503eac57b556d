"""PPO speed and parity: rlbench's ``ppo`` against CleanRL's ppo.py, side by side on one machine.

The peer is CleanRL's own script, vendored as benchmarks/peers/cleanrl_ppo.py (its header lists where it came
from and the only change needed here: gymnasium 0.29's same-step autoreset restored on gymnasium 1.0).
rlbench's side is one run through ``rlbench_cli.runner.run_one``, the function a worker of ``rlbench run``
calls for each run (spec written, metrics to Parquet shards, result.json), without the coordinator.
Both sides train CartPole-v1 at CleanRL's defaults (4 envs x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4
annealed to 0, GAE 0.99 / 0.95, clip 0.2, ent 0.01, vf 0.5, grad-norm 0.5), rlbench with no params: its
PPOConfig defaults are CleanRL's, plus bootstrap_truncated (True: a time-limit truncation is bootstrapped with
V(final obs); CleanRL treats it like termination; --rlbench-param bootstrap_truncated=false for CleanRL's
exact semantics). Every run is its own process, one at a time, with OMP_NUM_THREADS / MKL_NUM_THREADS /
OPENBLAS_NUM_THREADS = --threads (torch's thread count, checked in a child process; rlbench's worker also
calls torch.set_num_threads, as rlbench's executor does). CleanRL runs with --no-cuda; rlbench on CPU.
The step budget is rounded down to a multiple of the batch (512), as CleanRL's script does, so both sides
run the same iterations and updates (--steps 100000 trains 99,840 steps, 500000 trains 499,712).

Speed (default): CleanRL, then rlbench, alternately, --repeats times each, seed 1; the median is reported.
  steps/s = trained env steps / training time, where
  - CleanRL: its own last "SPS:" figure (time from just before the first reset to the end of the last
    update; imports, env and network construction excluded);
  - rlbench: run_one's whole duration (spec, sink, envs, network, training, the final flush of the metric
    shards) minus the time spent in evaluation, which is measured and printed on its own. rlbench evaluates
    at step 0 and at the end (eval_every = steps), --eval-episodes deterministic episodes each. The imports
    that CleanRL's figure leaves out too (the adapter's module, the env's, and torch._dynamo, which torch
    imports on the first optimizer construction: about 2 s) are done before run_one starts, as in a worker
    of `rlbench run`, which imports them once for all its runs;
  - "process s" is the wall-clock of each whole process (interpreter start, imports, evaluation included).
  The ratio is rlbench / CleanRL steps/s; the target is >= 1.

Parity (--parity): --seeds seeds (1, 2, 3, ...) x 500k steps for both, one process at a time. Reported as
CleanRL's benchmark table reports ppo.py's 490.04 +- 6.12 on CartPole-v1 (openrlbenchmark's rlops, which
CleanRL's benchmark/ppo_plot.sh calls with metric=charts/episodic_return: for each run the mean of its last 100 training episodic returns, the
charts/episodic_return of all envs; then the mean and the population std, numpy's default, over runs). The
same statistic is computed from rlbench's train/episode_return, and rlbench's own score, the final eval/return
(mean of --eval-episodes deterministic episodes at the last step), is printed next to it.

    pip install -e ".[bench]"                        # tyro and tensorboard, which CleanRL's script needs
    python benchmarks/ppo_vs_cleanrl.py              # speed: 100k steps, 3 repeats each (~2.5 min on 2 cores)
    python benchmarks/ppo_vs_cleanrl.py --parity     # parity: 500k steps x 3 seeds each (~8 min on 2 cores)
    python benchmarks/ppo_vs_cleanrl.py --parity --sides rlbench --rlbench-param bootstrap_truncated=false
                                                     # rlbench alone, with CleanRL's treatment of truncation
    python benchmarks/ppo_vs_cleanrl.py --steps 4096 --repeats 1            # a quick check of the script
    python benchmarks/ppo_vs_cleanrl.py --parity --steps 4096 --seeds 1     # idem, parity
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLEANRL = HERE / "peers" / "cleanrl_ppo.py"
ENV_ID = "CartPole-v1"
BATCH = 4 * 128  # CleanRL's default num_envs x num_steps
PUBLISHED = (490.04, 6.12)  # docs.cleanrl.dev/rl-algorithms/ppo/#ppopy, CartPole-v1, 500k steps, 3 seeds
LAST_N = 100  # openrlbenchmark rlops' metric_last_n_average_window

_EPISODE = re.compile(r"^global_step=(\d+), episodic_return=\[?([-+0-9.eE]+)\]?")
_SPS = re.compile(r"^SPS: (\d+)")


def _thread_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _check(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{tail}")


def run_cleanrl(steps: int, seed: int, threads: int, workdir: Path) -> dict[str, Any]:
    """One run of CleanRL's script; its episodic returns and SPS come from its own stdout."""
    workdir.mkdir(parents=True, exist_ok=True)  # its TensorBoard logs go to workdir/runs/
    cmd = [sys.executable, str(CLEANRL), "--no-cuda", "--env-id", ENV_ID, "--seed", str(seed),
           "--total-timesteps", str(steps)]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=_thread_env(threads), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    _check(proc, "CleanRL's ppo.py")
    returns, sps = [], None
    for line in proc.stdout.splitlines():
        if m := _EPISODE.match(line):
            returns.append(float(m.group(2)))
        elif m := _SPS.match(line):
            sps = int(m.group(1))
    trained = (steps // BATCH) * BATCH
    if sps is None:
        raise SystemExit(f"CleanRL's ppo.py printed no SPS line for {steps} steps")
    return {"side": "cleanrl", "seed": seed, "steps": trained, "train_s": trained / sps, "eval_s": 0.0,
            "process_s": wall, "episode_returns": returns, "final_eval": None}  # fmt: skip


def run_rlbench(
    steps: int, seed: int, threads: int, workdir: Path, eval_episodes: int, params: dict[str, Any]
) -> dict[str, Any]:
    """One run of rlbench's ppo through run_one, in a fresh process (see ``_rlbench_worker``)."""
    job = {"steps": steps, "seed": seed, "threads": threads, "folder": str(workdir),
           "eval_episodes": eval_episodes, "params": params}  # fmt: skip
    cmd = [sys.executable, str(Path(__file__).resolve()), "--rlbench-worker", json.dumps(job)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=_thread_env(threads), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    _check(proc, "rlbench's ppo")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    rec["process_s"] = wall
    return rec


def _rlbench_worker(job: dict[str, Any]) -> None:
    """Runs in the child process: one run_one, evaluation timed apart; prints one JSON line."""
    import torch

    torch.set_num_threads(job["threads"])
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rlbench_cli.algos import get_algorithm
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.envs import make_env
    from rlbench_cli.runner import run_one
    from rlbench_cli.sink import list_shards
    from rlbench_cli.suite.grid import RunSpec

    # Imports done before the clock starts, as in a worker of `rlbench run` (which imports once per worker)
    # and as CleanRL's SPS excludes them: the adapter's module, the env's (gymnasium imports it on make), and
    # torch._dynamo, which torch imports on the first optimizer construction (about 2 s; CleanRL builds its
    # Adam before its clock starts).
    get_algorithm("ppo")
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
    spec = RunSpec(
        suite="ppo-vs-cleanrl",
        algo="ppo",
        algo_name="ppo",
        params=job["params"],
        env_id=ENV_ID,
        env_kwargs={},
        seed=job["seed"],
        budget={"steps": steps, "eval_every": steps, "eval_episodes": job["eval_episodes"], "timeout": None},
    )
    folder = Path(job["folder"])
    result = run_one(spec, folder, device="cpu")
    if result["status"] != "finished":
        raise SystemExit(f"rlbench run {result['status']}: {result.get('error')}")
    table = pa.concat_tables([pq.read_table(p) for p in list_shards(folder / "metrics")]).to_pandas()
    ep = table[table["name"] == "train/episode_return"].sort_values("step", kind="stable")
    rec = {"side": "rlbench", "seed": job["seed"], "steps": steps, "train_s": result["duration_s"] - eval_s[0],
           "eval_s": eval_s[0], "episode_returns": ep["value"].tolist(), "final_eval": result["final_eval"]}  # fmt: skip
    print(json.dumps(rec))


def torch_threads_seen(threads: int) -> int:
    """torch's intra-op thread count in a child process started with the benchmark's environment."""
    code = "import torch; print(torch.get_num_threads())"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=_thread_env(threads), capture_output=True, text=True
    )
    _check(proc, "torch thread check")
    return int(proc.stdout.strip())


def _fmt_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "none (PPOConfig defaults)"


def speed(args: argparse.Namespace, params: dict[str, Any], tmp: Path) -> None:
    steps = (args.steps // BATCH) * BATCH
    runs: dict[str, list[dict[str, Any]]] = {"cleanrl": [], "rlbench": []}
    for r in range(args.repeats):  # alternate the two so that load on the machine hits both alike
        runs["cleanrl"].append(run_cleanrl(steps, 1, args.threads, tmp / f"cleanrl-{r}"))
        runs["rlbench"].append(
            run_rlbench(steps, 1, args.threads, tmp / f"rlbench-{r}", args.eval_episodes, params)
        )
        if args.verbose:
            for side in runs:
                rec = runs[side][-1]
                print(f"  repeat {r + 1} {side:<8} {steps / rec['train_s']:>8,.0f} steps/s", flush=True)
    print(f"PPO speed, {ENV_ID}, {steps:,} steps at CleanRL's defaults, seed 1, torch threads "
          f"{args.threads}; median of {args.repeats} alternating runs each")  # fmt: skip
    print(f"rlbench params: {_fmt_params(params)}; rlbench evaluates at step 0 and at the end, "
          f"{args.eval_episodes} episodes each (timed apart, not in steps/s)")  # fmt: skip
    print(
        f"{'side':<8} {'train s':>8} {'steps/s':>9} {'eval s':>7} {'process s':>10} {'process steps/s':>16}"
    )
    med = {}
    for side, recs in runs.items():
        sps = statistics.median(steps / rec["train_s"] for rec in recs)
        train_s = statistics.median(rec["train_s"] for rec in recs)
        eval_s = statistics.median(rec["eval_s"] for rec in recs)
        proc_s = statistics.median(rec["process_s"] for rec in recs)
        med[side] = (sps, proc_s)
        ev = f"{eval_s:>7.2f}" if side == "rlbench" else f"{'-':>7}"
        print(f"{side:<8} {train_s:>8.2f} {sps:>9,.0f} {ev} {proc_s:>10.2f} {steps / proc_s:>16,.0f}")
    ratio = med["rlbench"][0] / med["cleanrl"][0]
    pratio = med["cleanrl"][1] / med["rlbench"][1]
    print(f"ratio rlbench/CleanRL, training steps/s: {ratio:.2f}x  "
          f"(target >= 1: {'met' if ratio >= 1 else 'NOT met'})")  # fmt: skip
    print(f"ratio rlbench/CleanRL, whole process (imports and rlbench's evaluation included): {pratio:.2f}x")
    _write_json(args, "speed", steps, runs)


def _last_n_mean(returns: list[float]) -> float:
    tail = returns[-LAST_N:]
    return sum(tail) / len(tail) if tail else float("nan")


def _mean_std(xs: list[float]) -> str:
    import numpy as np

    a = np.asarray(xs, dtype=float)
    return f"{a.mean():.2f} +- {a.std():.2f}"  # population std, as openrlbenchmark's table


def parity(args: argparse.Namespace, params: dict[str, Any], tmp: Path) -> None:
    steps = (args.steps // BATCH) * BATCH
    seeds = list(range(1, args.seeds + 1))
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in args.sides}
    for seed in seeds:  # one process at a time, the two sides alternating
        for side in runs:
            t0 = time.perf_counter()
            if side == "cleanrl":
                rec = run_cleanrl(steps, seed, args.threads, tmp / f"cleanrl-s{seed}")
            else:
                rec = run_rlbench(
                    steps, seed, args.threads, tmp / f"rlbench-s{seed}", args.eval_episodes, params
                )
            runs[side].append(rec)
            if args.verbose:
                extra = (
                    f", final eval/return {rec['final_eval']:.1f}" if rec["final_eval"] is not None else ""
                )
                print(f"  seed {seed} {side:<8} last-{LAST_N} training return "
                      f"{_last_n_mean(rec['episode_returns']):.2f}{extra} ({time.perf_counter() - t0:.0f} s)",
                      flush=True)  # fmt: skip
    print(f"PPO parity, {ENV_ID}, {steps:,} steps x seeds {seeds} at CleanRL's defaults, torch threads "
          f"{args.threads}")  # fmt: skip
    print(f"rlbench params: {_fmt_params(params)}")
    print(f"score = per run, mean of the last {LAST_N} training episodic returns; then mean +- std over runs "
          f"(CleanRL's benchmark table)")  # fmt: skip
    print(f"{'':<32} {'score':>17}   per seed")
    published = f"{PUBLISHED[0]:.2f} +- {PUBLISHED[1]:.2f}"
    print(f"{'CleanRL ppo.py, published':<32} {published:>17}   (docs.cleanrl.dev)")
    for side, label in (("cleanrl", "CleanRL ppo.py, run here"), ("rlbench", "rlbench ppo, run here")):
        if side in runs:
            scores = [_last_n_mean(rec["episode_returns"]) for rec in runs[side]]
            print(f"{label:<32} {_mean_std(scores):>17}   {', '.join(f'{s:.2f}' for s in scores)}")
    if "rlbench" not in runs:
        return _write_json(args, "parity", steps, runs)
    finals = [rec["final_eval"] for rec in runs["rlbench"]]
    print(f"{'rlbench ppo, final eval/return':<32} {_mean_std(finals):>17}   "
          f"{', '.join(f'{s:.2f}' for s in finals)}   ({args.eval_episodes} deterministic episodes each)")  # fmt: skip
    ours = [_last_n_mean(rec["episode_returns"]) for rec in runs["rlbench"]]
    mean = sum(ours) / len(ours)
    lo = PUBLISHED[0] - 2 * PUBLISHED[1]
    print(f"parity (rlbench's score >= published mean - 2 std = {lo:.2f}): "
          f"{'met' if mean >= lo else 'NOT met'} ({mean:.2f})")  # fmt: skip
    _write_json(args, "parity", steps, runs)


def _write_json(args: argparse.Namespace, mode: str, steps: int, runs: dict[str, Any]) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps({"mode": mode, "steps": steps, "runs": runs}, indent=1))


def _parse_param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--rlbench-worker":
        _rlbench_worker(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parity", action="store_true", help="the parity run instead of the speed comparison")
    ap.add_argument("--steps", type=int, help="env steps per run (default 100000 speed, 500000 parity)")
    ap.add_argument("--repeats", type=int, default=3, help="speed: runs per side; the median is reported")
    ap.add_argument("--seeds", type=int, default=3, help="parity: seeds 1..N per side")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of every run (default 1)")
    ap.add_argument("--eval-episodes", type=int, default=10, help="rlbench's episodes per evaluation")
    ap.add_argument("--rlbench-param", type=_parse_param, action="append", default=[], metavar="KEY=VALUE",
                    help="a ppo param for rlbench's side, e.g. bootstrap_truncated=false (repeatable)")  # fmt: skip
    ap.add_argument("--sides", nargs="+", choices=["cleanrl", "rlbench"], default=["cleanrl", "rlbench"],
                    help="parity: run only these sides (e.g. rlbench with other params)")  # fmt: skip
    ap.add_argument("--json", help="also write every run's figures to this JSON file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each run as it ends")
    args = ap.parse_args()
    if args.steps is None:
        args.steps = 500_000 if args.parity else 100_000
    if args.steps < BATCH:
        ap.error(f"--steps must be at least one batch ({BATCH})")
    if not args.parity and len(set(args.sides)) < 2:
        ap.error("--sides is for --parity: the speed comparison needs both sides")
    params = dict(args.rlbench_param)
    seen = torch_threads_seen(args.threads)
    if seen != args.threads:
        raise SystemExit(f"torch uses {seen} threads with OMP_NUM_THREADS={args.threads}")
    with tempfile.TemporaryDirectory(prefix="ppo-vs-cleanrl-") as d:
        (parity if args.parity else speed)(args, params, Path(d))


if __name__ == "__main__":
    main()
