"""Thousands of tracked seeds: ``rlbench run`` of ppo_jax (suites/jax-cartpole.yaml: 32 seeds x 500k steps of
gymnax/CartPole-v1 packed into one job) against CleanRL's ppo.py training ONE seed, side by side, and a
scaling table over the pack size.

Side by side (default): the whole ``rlbench run`` command (interpreter start, suite checks, the worker, JAX's
compilation, training, evaluation, every seed's rows into DuckDB) against CleanRL's vendored ppo.py
(benchmarks/peers/cleanrl_ppo.py, run by ppo_vs_cleanrl.run_cleanrl, --no-cuda) as a whole process, each
timed by the wall clock; the ratio is CleanRL's seconds for one seed / rlbench's for all of them (> 1: all the
tracked seeds finished before CleanRL had trained one). Then the IQM of the seeds' final eval/return (10
deterministic episodes each) and the number of seeds at or above 475.

Scaling (--scaling N ...): one ``rlbench run`` per pack size N (N seeds, seeds_per_job N): env steps/s over
the training alone (N x steps / sys/train_s, after the compilation), the compilation's seconds
(sys/compile_s: a hit in JAX's persistent cache makes it small), the share of the command's wall time the
worker spent turning the compiled program's chunks into rows (sys/tracking_s), and the command's wall time.

While a ``rlbench run`` goes, its progress is printed as its job writes it (the compilation, then each
evaluation chunk with its seconds and env steps/s), so a run that does not finish still says where the time
went. Each ``rlbench run`` gets a fresh folder and database; JAX's compilation cache is a fresh folder too unless
--warm-cache (then the first run of a shape pays for the compilation and later ones do not).

    pip install -e ".[jax,bench]"
    python benchmarks/jax_seeds.py                                    # 32 x 500k vs CleanRL, 1 x 500k
    python benchmarks/jax_seeds.py --seeds 64 --no-cleanrl
    python benchmarks/jax_seeds.py --steps 100000 --scaling 1 4 16 64 # a reduced run (2 shared cores)
    python benchmarks/jax_seeds.py --device cuda --seeds 2048 --no-cleanrl --scaling 256 2048 8192
    python benchmarks/jax_seeds.py --seeds 2 --steps 2048 --scaling 1 2 --scaling-steps 2048 --no-cleanrl
                                                                      # a quick check of the script
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SOLVED = 475.0


def suite_text(seeds: int, steps: int, device: str) -> str:
    """suites/jax-cartpole.yaml's suite at another size (``seeds`` packed into one job)."""
    gpus = "gpus_per_job: 1, " if device == "cuda" else ""
    every = max(steps // 10, 1)
    return (f"name: jax-seeds\nseeds: {seeds}\nbudget: {{steps: {steps}, eval_every: {every}, eval_episodes: 10}}\n"
            "envs: [gymnax/CartPole-v1]\nalgorithms: [ppo_jax]\nscore: {metric: eval/return, rule: final}\n"
            f"resources: {{{gpus}seeds_per_job: {seeds}}}\n")  # fmt: skip


def run_rlbench(seeds: int, steps: int, device: str, folder: Path, cache: Path) -> dict[str, Any]:
    """One whole ``rlbench run`` in its own folder; its wall time and what its runs logged."""
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    suite = folder / "suite.yaml"
    suite.write_text(suite_text(seeds, steps, device))
    env = {**os.environ, "RLBENCH_JAX_CACHE": str(cache)}
    db = folder / "r.duckdb"
    t0 = time.perf_counter()
    print(f"  [{seeds} seeds x {steps:,} steps] rlbench run started", flush=True)
    with open(folder / "stdout.txt", "w+") as out, open(folder / "stderr.txt", "w+") as err:
        proc = subprocess.Popen(["rlbench", "run", str(suite), "--db", str(db), "--workers", "1"], cwd=folder,
                                env=env, stdout=out, stderr=err, text=True)  # fmt: skip
        marks = follow(proc, folder, t0, f"{seeds} seeds x {steps:,} steps")
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"rlbench run failed ({proc.returncode}):\n{stdout[-3000:]}\n{stderr[-3000:]}")
    with duckdb.connect(str(db), read_only=True) as con:
        status = dict(con.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())
        final = [v for (v,) in con.execute("""SELECT arg_max(value, step) FROM metrics WHERE name = 'eval/return'
                                              GROUP BY run_id""").fetchall()]  # fmt: skip
        sys_ = dict(
            con.execute("""SELECT name, max(value) FROM metrics WHERE name IN
                                   ('sys/compile_s', 'sys/train_s', 'sys/tracking_s') GROUP BY name""").fetchall()
        )
        trained = con.execute("SELECT max(step) FROM metrics WHERE name = 'train/loss/policy'").fetchone()[0]
    return {"seeds": seeds, "steps": steps, "trained": int(trained or 0), "wall_s": wall, "status": status,
            "final": final, "compile_s": sys_.get("sys/compile_s"), "train_s": sys_.get("sys/train_s"),
            "tracking_s": sys_.get("sys/tracking_s"), "marks": marks}  # fmt: skip


def follow(
    proc: subprocess.Popen, folder: Path, t0: float, label: str, every: float = 0.25
) -> dict[str, float]:
    """Until ``proc`` ends, print the progress lines its jobs write to their output.log ("rlbench jax:
    compiled in ...", "chunk i/n ...: seconds, env steps/s"), each with the seconds since ``t0``: a run that
    does not finish still says where its time went. Returns when (seconds since ``t0``, to ``every``) the
    compilation ended, the last chunk was tracked and the kept policies were written, and the seconds the
    last took: ``phases`` splits the command's wall time with them."""
    offsets: dict[Path, int] = {}
    marks: dict[str, float] = {}

    def poll() -> None:
        for log in sorted(folder.glob("runs/*/*/attempt-*/output.log")):
            with open(log, "rb") as f:
                f.seek(offsets.get(log, 0))
                data = f.read()
            end = data.rfind(b"\n") + 1  # whole lines only
            offsets[log] = offsets.get(log, 0) + end
            for line in data[:end].decode(errors="replace").splitlines():
                if line.startswith("rlbench jax: "):
                    now, text = time.perf_counter() - t0, line.removeprefix("rlbench jax: ")
                    print(f"  [{label}, {now:6.1f} s] {text}", flush=True)
                    if " compiled in " in text:
                        marks.setdefault("compiled", now)
                    elif " tracked in " in text:
                        marks["tracked"] = now
                    elif text.startswith("kept policies written in "):
                        marks["kept"], marks["kept_s"] = now, float(text.split()[4])

    while proc.poll() is None:
        time.sleep(every)
        poll()
    poll()
    return marks


def phases(r: dict[str, Any]) -> str:
    """Where a run's wall time went, from its progress lines (to the follower's polling, a quarter second)."""
    m = r.get("marks") or {}
    if not {"compiled", "tracked", "kept"} <= set(m) or r["compile_s"] is None:
        return "  (where the time went: not all progress lines were seen)"
    before = m["compiled"] - r["compile_s"]
    return (f"  where the time went: {before:.1f} s before the job's compilation (the command's start, "
            f"{r['seeds']} runs recorded, the worker and its imports), compilation {r['compile_s']:.1f} s, "
            f"the chunks {m['tracked'] - m['compiled']:.1f} s (training, evaluation and every seed's rows), kept "
            f"policies {m['kept_s']:.1f} s, {r['wall_s'] - m['kept']:.1f} s after them (the seeds' last shards "
            "and results, the database)")  # fmt: skip


def iqm(xs: list[float]) -> float:
    """The interquartile mean (rliable's: the mean of the middle 50%, scipy.stats.trim_mean(x, 0.25))."""
    a = np.sort(np.asarray(xs, np.float64))
    cut = int(np.floor(0.25 * len(a)))
    return float(a[cut : len(a) - cut].mean())


def scaling_row(r: dict[str, Any]) -> str:
    sps = r["seeds"] * r["trained"] / r["train_s"] if r["train_s"] else float("nan")
    share = 100 * (r["tracking_s"] or 0.0) / r["wall_s"]
    return (f"{r['seeds']:>6} {sps:>14,.0f} {r['compile_s']:>10.1f} {share:>9.2f}% {r['wall_s']:>9.1f} "
            f"{iqm(r['final']):>9.1f}")  # fmt: skip


def save(path: Path | None, out: dict[str, Any]) -> None:
    """Every figure so far to ``path`` (after each run: a benchmark cut short keeps the runs it finished)."""
    if path is not None:
        path.write_text(json.dumps(out, indent=1, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=32, help="seeds of the side-by-side run, all in one job")
    ap.add_argument("--steps", type=int, default=500_000, help="env steps per seed (both sides)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--no-cleanrl", action="store_true", help="skip CleanRL's ppo.py")
    ap.add_argument("--threads", type=int, default=1, help="CleanRL's torch threads (ppo_vs_cleanrl.py's)")
    ap.add_argument("--scaling", type=int, nargs="*", default=[], help="pack sizes of the scaling table")
    ap.add_argument("--scaling-steps", type=int, default=None, help="steps per seed there (default --steps)")
    ap.add_argument("--warm-cache", action="store_true", help="share one JAX compilation cache between runs")
    ap.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    args = ap.parse_args()

    out: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory(prefix="jax-seeds-") as d:
        tmp = Path(d)

        def cache(name: str) -> Path:
            return tmp / ("jax-cache" if args.warm_cache else f"jax-cache-{name}")

        main_run = run_rlbench(args.seeds, args.steps, args.device, tmp / "main", cache("main"))
        out["rlbench"] = main_run
        save(args.json, out)
        print(f"rlbench run, ppo_jax, {args.seeds} seeds x {args.steps:,} steps in one job ({args.device}): "
              f"{main_run['wall_s']:.1f} s whole command (compile {main_run['compile_s']:.1f} s, training "
              f"{main_run['train_s']:.1f} s); runs {main_run['status']}")  # fmt: skip
        print(phases(main_run))
        finals = main_run["final"]
        print(f"  final eval/return over {len(finals)} seeds: IQM {iqm(finals):.1f}, mean {np.mean(finals):.1f}, "
              f"min {min(finals):.1f}; {sum(v >= SOLVED for v in finals)} of {len(finals)} at >= {SOLVED:g}")  # fmt: skip
        if not args.no_cleanrl:
            sys.path.insert(0, str(HERE))
            from ppo_vs_cleanrl import run_cleanrl

            clean = run_cleanrl(args.steps, 1, args.threads, tmp / "cleanrl")
            out["cleanrl"] = {k: v for k, v in clean.items() if k != "episode_returns"}
            last = clean["episode_returns"][-100:]
            print(f"CleanRL ppo.py, 1 seed x {args.steps:,} steps: {clean['process_s']:.1f} s whole process "
                  f"(mean of its last {len(last)} training episodes {np.mean(last):.1f})")  # fmt: skip
            ratio = clean["process_s"] / main_run["wall_s"]
            out["ratio"] = ratio
            save(args.json, out)
            print(f"ratio: CleanRL's one seed takes {ratio:.2f}x the wall time of rlbench's {args.seeds} tracked "
                  "seeds (> 1: all of them finish first)")  # fmt: skip
        if args.scaling:
            steps = args.scaling_steps or args.steps
            print(f"\nscaling, {steps:,} steps per seed, one job per pack ({args.device}):")
            print(f"{'N':>6} {'env steps/s':>14} {'compile s':>10} {'tracking':>10} {'wall s':>9} {'IQM':>9}")
            out["scaling"] = []
            for n in args.scaling:
                r = run_rlbench(n, steps, args.device, tmp / f"n{n}", cache(f"n{n}"))
                out["scaling"].append(r)
                save(args.json, out)
                print(scaling_row(r), flush=True)
                print(phases(r), flush=True)


if __name__ == "__main__":
    main()
