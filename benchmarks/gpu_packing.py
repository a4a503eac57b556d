"""GPU packing: the same small runs with one whole GPU each versus four runs sharing a GPU.

Small RL networks leave a GPU mostly idle: one run per GPU wastes it. ``resources.gpus_per_job: 0.25`` puts
four runs on each GPU (each sees only that device through CUDA_VISIBLE_DEVICES). This script runs --runs
identical small runs (--algo ppo or dqn on CartPole-v1, --steps each, seeds 0..runs-1) through the real
``rlbench run`` twice, once with ``gpus_per_job: 1`` and once with ``0.25``, on the same machine, one after
the other, each into its own fresh database, and prints the wall time and the aggregate throughput (total
environment steps of all runs / wall seconds) of each, and their ratio. Target: 0.25 at least 3x the
throughput of 1 on one GPU (met under MPS, ``--mps``, at the default 500,000 ppo steps a run:
docs/benchmarks.md). Per side it also shows where the wall went (each run's own seconds, the seconds before the first run and after the
last) and, from the runs' system metrics, how busy the GPU was and how much of a core a run used. Each
worker's first run also starts the worker's CUDA (context, cuBLAS, ppo's graph capture): a one-time cost per
worker, paid once per side here and amortised in a long suite (ppo's own Adam spares it torch.optim's import
of torch._dynamo, ``benchmarks/cold_start.py``). The script shows it (seconds from such a run's start to its
first training step) and the ratio of the runs that did not pay it: what packing gives a suite of many runs.

    python benchmarks/gpu_packing.py --mps                 # 8 PPO runs x 500,000 steps (CleanRL's budget)
    python benchmarks/gpu_packing.py --steps 200000        # shorter runs: start-up weighs more
    python benchmarks/gpu_packing.py --algo dqn --steps 20000 --executor ray
    python benchmarks/gpu_packing.py --param cuda_graph=false   # ppo's updates without CUDA graphs
    python benchmarks/gpu_packing.py --mps --steps 50000        # both sides with resources.mps: true
    python benchmarks/gpu_packing.py --keep out/                # keep both sides' stores to query later

It needs an NVIDIA GPU (nvidia-smi): without one it says so and exits 0 having measured nothing (packing
on CPU-only machines is not what it measures). ``--executor ray`` starts a local Ray instance and packs with
Ray's fractional GPUs instead of the local worker pool. ``--mps`` runs both sides with ``resources.mps: true``:
each ``rlbench run`` starts a CUDA MPS control daemon for its workers and stops it after them (under MPS the
kernels of runs sharing a GPU run side by side instead of taking turns; ``rlbench_cli/mps.py``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

PARAMS = {
    "ppo": {"num_envs": 4, "num_steps": 128},
    "dqn": {"update_start_step": 1000, "hidden_units": [64, 64]},
}
# Each run's steps unless --steps says otherwise: ppo's is CleanRL ppo.py's total_timesteps on CartPole-v1 (with
# the same num_envs and num_steps above); d3rlpy's dqn waits for the device twice an env step, so it gets less.
STEPS = {"ppo": 500_000, "dqn": 50_000}


def suite(name: str, algo: str, runs: int, steps: int, gpus_per_job: float, params: dict,
          mps: bool = False) -> dict:  # fmt: skip
    return {
        "name": name,
        "seeds": runs,
        "budget": {"steps": steps, "eval_every": steps, "eval_episodes": 5},
        "envs": ["CartPole-v1"],
        "algorithms": [{"name": algo, "params": {**PARAMS[algo], **params}}],
        "resources": {"gpus_per_job": gpus_per_job, "threads_per_job": 1, "mps": mps},
    }


@dataclass
class Side:
    """One side's figures: its gpus_per_job, the command's wall seconds and each run's own seconds
    (``runs.duration_s``: from its start in a worker to its final flush); where the store has them, the
    GPU's mean utilisation (NVML's, of the whole device) and a run's median CPU share (of one core, in
    percent) over the runs' ``sys/`` samples, the seconds before the first run started and after the
    last one ended; ``cold``: for each worker's first run, the seconds from its start to its first metric
    past step 0 (the worker's one-time start-up in it); ``warm``: the seconds of every other run."""

    gpus_per_job: float
    wall: float
    secs: list[float]
    gpu_util: float | None = None
    cpu_percent: float | None = None
    before: float | None = None
    after: float | None = None
    cold: list[float] | None = None
    warm: list[float] | None = None

    @property
    def per_gpu(self) -> int:
        """Runs at a time on the one GPU."""
        return 1 if self.gpus_per_job >= 1 else int(1 / self.gpus_per_job)


def read_side(db: Path, gpus_per_job: float, started: float, ended: float) -> Side:
    """The figures of a side whose ``rlbench run`` ran from ``started`` to ``ended`` (epoch seconds) into
    ``db``."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        secs = [float(r[0]) for r in con.execute("SELECT duration_s FROM runs ORDER BY run_id").fetchall()]
        first, last = con.execute("SELECT epoch(min(started_at)), epoch(max(ended_at)) FROM runs").fetchone()
        # a worker is a job_id (the local pool's worker pid); its first run pays the worker's start-up
        runs = con.execute(
            "SELECT row_number() OVER (PARTITION BY job_id ORDER BY started_at) = 1, duration_s,"
            " (SELECT min(m.wall_time) FROM metrics m WHERE m.run_id = r.run_id AND m.step > 0"
            "  AND m.name NOT LIKE 'sys/%') - epoch(r.started_at)"
            " FROM runs r ORDER BY started_at"
        ).fetchall()
        util, cpu = con.execute(
            "SELECT (SELECT avg(value) FROM metrics WHERE name = 'sys/gpu_util'),"
            " (SELECT median(v) FROM (SELECT avg(value) AS v FROM metrics WHERE name = 'sys/cpu_percent'"
            " GROUP BY run_id))"
        ).fetchone()
    finally:
        con.close()
    cold = [float(to_step) for first_on_worker, _, to_step in runs if first_on_worker and to_step is not None]
    warm = [float(secs) for first_on_worker, secs, _ in runs if not first_on_worker]
    return Side(gpus_per_job, ended - started, secs, util, cpu,
                None if first is None else first - started, None if last is None else ended - last,
                cold, warm)  # fmt: skip


def side_name(gpus_per_job: float) -> str:
    """The suite (and store) name of the side packed at ``gpus_per_job``: pack10, pack025."""
    return f"pack{str(gpus_per_job).replace('.', '')}"


def measure(folder: Path, algo: str, runs: int, steps: int, gpus_per_job: float,
            executor: str, params: dict, mps: bool = False) -> Side:  # fmt: skip
    """``rlbench run`` of the suite packed at ``gpus_per_job``, measured; exits if any run fails."""
    name = side_name(gpus_per_job)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(suite(name, algo, runs, steps, gpus_per_job, params, mps)))
    started = time.time()
    proc = subprocess.run(
        ["rlbench", "run", str(path), "--db", str(folder / f"{name}.duckdb"), "--workers", str(runs),
         "--executor", executor, "--json"],
        capture_output=True, text=True,
    )  # fmt: skip
    ended = time.time()
    if proc.returncode != 0:
        sys.exit(
            f"gpus_per_job={gpus_per_job}: rlbench run failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    if summary["finished"] != runs:
        sys.exit(f"gpus_per_job={gpus_per_job}: {summary['finished']} of {runs} runs finished")
    return read_side(folder / f"{name}.duckdb", gpus_per_job, started, ended)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with --steps filled in from STEPS and --param read into ``args.params``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", choices=sorted(PARAMS), default="ppo")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument(
        "--steps", type=int, help="environment steps of each run (default: ppo 500,000, dqn 50,000)"
    )
    ap.add_argument("--executor", choices=["local", "ray"], default="local")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="an algorithm param for both sides (YAML value; repeatable), e.g. cuda_graph=false")  # fmt: skip
    ap.add_argument("--mps", action="store_true",
                    help="both sides with resources.mps: true (rlbench run starts and stops a CUDA MPS daemon)")  # fmt: skip
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="copy each side's store (pack10.duckdb, pack025.duckdb) into DIR, e.g. to query its metrics")  # fmt: skip
    args = ap.parse_args(argv)
    args.steps = args.steps or STEPS[args.algo]
    if args.mps and args.executor != "local":
        ap.error("--mps: rlbench starts CUDA MPS for the local executor only; leave out --executor ray")
    args.params = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--param {item!r}: write KEY=VALUE, e.g. --param cuda_graph=false")
        args.params[key] = yaml.safe_load(value)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from rlbench_cli.executors.base import detect_gpus

    gpus = detect_gpus()
    if gpus == 0:
        print("gpu_packing: no NVIDIA GPU visible (nvidia-smi lists none): nothing measured on this machine")
        return 0
    total = args.runs * args.steps
    print(
        f"{args.runs} x {args.algo} CartPole-v1 x {args.steps:,} steps on {gpus} GPU(s), executor {args.executor}, "
        f"params {dict(PARAMS[args.algo], **args.params)}" + (", under CUDA MPS" if args.mps else "")
    )
    sides = []
    with tempfile.TemporaryDirectory() as tmp:
        for g in (1.0, 0.25):
            sides.append(
                measure(Path(tmp), args.algo, args.runs, args.steps, g, args.executor, args.params, args.mps)
            )
            print(side_line(sides[-1], total))  # as soon as it is measured
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(tmp) / f"{side_name(g)}.duckdb", args.keep)
    print("\n".join(report(sides, total)[len(sides) :]))
    return 0


def side_line(side: Side, total: int) -> str:
    """One side's line: its wall time, throughput, each run's own seconds, the wall outside the runs (and
    how much of it came before the first run and after the last), how long a worker's first run took to reach
    its first step and, where the runs sampled them, how busy the GPU was and how much of a core a run used."""
    g, wall, secs = side.gpus_per_job, side.wall, side.secs
    outside = wall - sum(secs) / side.per_gpu  # wall not covered by runs: start-up, spawn, shut-down
    split = (
        ""
        if side.before is None
        else f" ({side.before:.1f} before the first, {side.after:.1f} after the last)"
    )
    cold = (
        ""
        if not side.cold
        else f", a worker's first run {statistics.median(side.cold):.1f} s to its first step"
    )
    busy = "" if side.gpu_util is None else f", GPU {side.gpu_util:.0f}% busy"
    cpu = "" if side.cpu_percent is None else f", a run's CPU {side.cpu_percent:.0f}%"
    return (f"  gpus_per_job={g:<5g} wall {wall:7.1f} s   {total / wall:9,.0f} env steps/s   run "
            f"{statistics.median(secs):5.1f} s each (median), ~{outside:.1f} s outside runs{split}{cold}{busy}{cpu}")  # fmt: skip


def report(sides: list[Side], total: int) -> list[str]:
    """The lines for the whole-GPU side, then the packed one: a line per side, then the packing ratio of the
    whole command (the target's), within the runs (how much slower a run gets when it shares the GPU,
    start-up and shut-down left out) and, where both sides have them, within the runs on warm workers (each
    worker's first run, which starts the worker's torch and CUDA, left out too: what a long suite gets)."""
    lines = [side_line(side, total) for side in sides]
    if len(sides) < 2:
        return lines
    whole, packed = sides
    per_gpu, alone, shared = packed.per_gpu, statistics.median(whole.secs), statistics.median(packed.secs)
    lines.append(f"packing {per_gpu} runs per GPU: {whole.wall / packed.wall:.2f}x the throughput of one run per GPU "
                 f"(target >= 3x)")  # fmt: skip
    lines.append(f"within the runs: {per_gpu * alone / shared:.2f}x ({per_gpu} sharing the GPU take {shared:.1f} s "
                 f"each, one alone {alone:.1f} s; {per_gpu}x if sharing cost nothing)")  # fmt: skip
    if whole.warm and packed.warm:
        alone, shared = statistics.median(whole.warm), statistics.median(packed.warm)
        lines.append(f"on warm workers (each worker's first run left out): {per_gpu * alone / shared:.2f}x "
                     f"({per_gpu} sharing take {shared:.1f} s each, one alone {alone:.1f} s)")  # fmt: skip
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
