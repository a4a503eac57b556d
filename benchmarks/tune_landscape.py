"""`rlbench tune` against the full grid on a landscape whose best configuration is known (issue #41).

The landscape is an ``entrypoint:`` algorithm (written into the work folder) whose final eval/return is a known
noisy function of two params: ``100 * exp(-(log10(lr) + 3)^2 / 0.5 - (ent - 0.01)^2 / 0.00045)`` plus
Gaussian noise of sd --noise per run (seeded by the run's seed and params), reached linearly over the run's
steps. Its best configuration is lr = 1e-3, ent = 0.01 (return 100). Both sides run the same runs through the
real ``rlbench`` command, each into its own database:

- grid: ``sweep:`` over --grid values of each param (log-spaced lr in [1e-5, 1e-1], ent in [0, 0.05]), 5 seeds
  a configuration: --grid^2 x 5 runs;
- tune: ``rlbench tune`` with a TPE sampler, --trials trials of 3 seeds, then the top 2 and the default
  (lr 3e-4, ent 0) confirmed on 10 fresh seeds.

It prints both budgets (environment steps, search and confirmation counted), the grid's best configuration
with its IQM interval (95% stratified bootstrap over its 5 seeds), the tuned configuration's search score and
its confirmed IQM with interval, whether the confirmed IQM lies within (or above) the grid best's interval
(target: yes, at <= 25% of the grid's steps), and the study's overhead per trial: the tune command's wall time
less the wall time its runs took, per trial.

    python benchmarks/tune_landscape.py                 # 8 x 8 grid (320 runs) vs 12 trials
    python benchmarks/tune_landscape.py --quick         # tiny: checks that the script runs (no target)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import yaml

LANDSCAPE = textwrap.dedent(
    """
    import hashlib
    import math

    import numpy as np


    def value(lr, ent):
        return 100.0 * math.exp(-((math.log10(lr) + 3.0) ** 2) / 0.5 - (ent - 0.01) ** 2 / 0.00045)


    def train(ctx):
        p = ctx.params
        lr, ent, noise = float(p.get("learning_rate", 3e-4)), float(p.get("ent_coef", 0.0)), float(p.get("noise", 10))
        key = hashlib.sha256(f"{ctx.seed}|{lr!r}|{ent!r}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(key[:8], "little"))
        final = value(lr, ent) + rng.normal(0.0, noise)
        for step in ctx.eval_schedule():
            ctx.sink.log(step, **{"eval/return": final * step / ctx.steps})
        ctx.sink.log(ctx.steps, **{"sys/sps_overall": 0.0})
    """
)
DEFAULT = {"learning_rate": 3e-4, "ent_coef": 0.0}


def base_suite(name: str, steps: int, noise: float) -> dict:
    return {"name": name, "budget": {"steps": steps, "eval_every": steps // 4, "eval_episodes": 1},
            "envs": ["CartPole-v1"],
            "algorithms": [{"name": "toy", "entrypoint": "landscape:train", "params": {**DEFAULT, "noise": noise}}],
            "score": {"metric": "eval/return", "rule": "final"}, "normalize": {"references": {"CartPole-v1": [0, 100]}}}  # fmt: skip


def rlbench(*args: object, env: dict) -> tuple[float, str]:
    exe = Path(sys.executable).with_name("rlbench")
    t0 = time.perf_counter()
    r = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"rlbench {' '.join(map(str, args))} failed:\n{r.stdout}\n{r.stderr}")
    return time.perf_counter() - t0, r.stdout


def run_seconds(db: Path, suite: str) -> float:
    from rlbench_cli.store import Store

    store = Store(db)
    with store.reader() as con:
        return float(sum(r["duration_s"] or 0.0 for r in store.runs(con, suite)))


def interval(matrix: np.ndarray, key: str) -> tuple[float, float, float]:
    from rlbench_cli.bootstrap import interval_estimates

    iv = interval_estimates({key: matrix}, ["iqm"], 50_000, 0.95, 0)[key]
    return tuple(float(x[0]) for x in iv)  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", type=int, default=8, help="values per param on the grid (default 8)")
    ap.add_argument("--trials", type=int, default=12, help="tune trials (default 12)")
    ap.add_argument("--steps", type=int, default=100_000, help="notional env steps per run (default 100000)")
    ap.add_argument("--noise", type=float, default=10.0, help="sd of a run's noise (default 10)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the script runs (no target)")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = ap.parse_args()
    if args.quick:
        args.grid, args.trials = 2, 2
    work = args.keep or Path(tempfile.mkdtemp(prefix="rlbench-tune-landscape-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "landscape.py").write_text(LANDSCAPE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")])),
           "MPLBACKEND": "Agg"}  # fmt: skip
    try:
        lrs = [float(f"{x:.3g}") for x in np.logspace(-5, -1, args.grid)]
        ents = [float(f"{x:.3g}") for x in np.linspace(0.0, 0.05, args.grid)]
        grid = {**base_suite("landscape-grid", args.steps, args.noise), "seeds": 5,
                "sweep": {"toy.learning_rate": lrs, "toy.ent_coef": ents}}  # fmt: skip
        (work / "grid.yaml").write_text(yaml.safe_dump(grid))
        grid_wall, _ = rlbench(
            "run", work / "grid.yaml", "--db", work / "grid.duckdb", "--workers", args.workers, env=env
        )
        confirm_seeds = 3 if args.quick else 10
        tune = {**base_suite("landscape", args.steps, args.noise), "seeds": 3, "tune": {
            "algorithm": "toy", "params": {"learning_rate": {"log": [1e-5, 1e-1]}, "ent_coef": {"range": [0.0, 0.05]}},
            "trials": args.trials, "seeds_per_trial": 3, "sampler": "tpe", "confirm": {"top": 2, "seeds": confirm_seeds}}}  # fmt: skip
        (work / "tune.yaml").write_text(yaml.safe_dump(tune))
        tune_wall, _ = rlbench("tune", work / "tune.yaml", "--db", work / "tune.duckdb", "--workers", args.workers,
                               "--json", env=env)  # fmt: skip
        _, status = rlbench("tune", work / "tune.yaml", "--db", work / "tune.duckdb", "--status", "--json",
                            "--out", work / "figs", env=env)  # fmt: skip
        found = json.loads(status)

        from rlbench_cli.analysis import score_table
        from rlbench_cli.store import Store

        table = score_table(Store(work / "grid.duckdb"), "landscape-grid")
        ranked = sorted(((interval(m, a), a) for a, m in table.scores.items()), key=lambda x: -x[0][0])
        (g_iv, g_label) = ranked[0]
        tuned = next(c for c in found["confirmed"] if c["poi_vs_default"] is not None)
        default = next(c for c in found["confirmed"] if c["poi_vs_default"] is None)
        grid_runs = len(lrs) * len(ents) * 5
        tune_runs = args.trials * 3 + 3 * confirm_seeds
        share = tune_runs / grid_runs
        inside = tuned["iqm"][0] >= g_iv[1]
        print(f"landscape: best lr 1e-3, ent 0.01 (return 100); noise sd {args.noise:g} a run; {args.steps:,} "
              "notional env steps a run; normalised x 1/100")  # fmt: skip
        print(f"grid   {len(lrs)} x {len(ents)} configurations x 5 seeds = {grid_runs} runs, "
              f"{grid_runs * args.steps:,} env steps, {grid_wall:.1f} s")  # fmt: skip
        print(f"tune   {args.trials} trials x 3 seeds + 3 configurations x {confirm_seeds} fresh seeds = {tune_runs} runs, "
              f"{tune_runs * args.steps:,} env steps ({share:.1%} of the grid's), {tune_wall:.1f} s")  # fmt: skip
        print(f"grid's best       {g_label}: IQM {g_iv[0]:.3f} [{g_iv[1]:.3f}, {g_iv[2]:.3f}] (seeds 0-4)")
        print(f"tune's best       {tuned['label']} {json.dumps(tuned['params'])}: search score {tuned['search_value']:.3f} "
              f"(seeds 0-2), confirmed IQM {tuned['iqm'][0]:.3f} [{tuned['iqm'][1]:.3f}, {tuned['iqm'][2]:.3f}] "
              f"(seeds {1000}-{1000 + confirm_seeds - 1}), P(beats default) {tuned['poi_vs_default'][0]:.3f}")  # fmt: skip
        print(
            f"default           confirmed IQM {default['iqm'][0]:.3f} [{default['iqm'][1]:.3f}, {default['iqm'][2]:.3f}]"
        )
        overhead = (tune_wall - run_seconds(work / "tune.duckdb", "landscape.tune") / args.workers
                    - run_seconds(work / "tune.duckdb", "landscape.confirm") / args.workers) / args.trials  # fmt: skip
        print(f"study overhead    {overhead:.2f} s a trial (tune's wall time less its runs' own time / workers, "
              f"per trial; a run here takes {run_seconds(work / 'tune.duckdb', 'landscape.tune') / (args.trials * 3):.2f} s)")  # fmt: skip
        if not args.quick:
            verdict = "met" if inside and share <= 0.25 else "NOT met"
            print(
                f"target: confirmed IQM within or above the grid best's interval at <= 25% of its steps: {verdict}"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
