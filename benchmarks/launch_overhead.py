"""Launch overhead: many trivial runs through three launchers, side by side on one machine.

Each run is a `random` policy on CartPole-v1 for --steps steps (default 50): the training itself takes
milliseconds, so what is measured is what a launcher costs per run.

  (a) fresh process: a launcher that starts a new `python` process per run, the way CleanRL's benchmark
      script does (benchmark.py: a ThreadPoolExecutor of --workers threads, each running one command line
      `python <script> --env-id ... --seed N` with subprocess). The script imports what a CleanRL script
      imports (torch, gymnasium, numpy), then steps the env with random actions and prints the seconds it
      spent doing so.
  (b) rlbench local: `rlbench run SUITE --workers W` (the suite: --runs seeds of `random`), its pool of
      persistent worker processes; every run recorded in DuckDB with its metrics.
  (c) rlbench on Ray: `rlbench run SUITE --executor ray --workers W` with no --address, so rlbench starts a
      local Ray instance (num_cpus = usable cores) and stops it at the end; both are counted.
  (d) rlbench on a running Ray cluster: the same command with `--address HOST:PORT` of a Ray head started
      before the timing (tests/engines/ray_up.sh, on 127.0.0.1 with W CPUs) and stopped after it, as on a
      cluster that is up before the suite and stays up after it: connecting, the warm actors' start-up and
      shut-down and the driver's exit are counted, the cluster's own start and stop are not.

Per-run overhead = (wall-clock of the whole launch x W - the sum of the runs' in-run seconds) / runs, in
milliseconds: the worker-seconds per run spent on anything but the run's own work (interpreter start,
imports, scheduling, recording, start and stop of the pool or of Ray). Wall-clock is measured around the
whole command, process start included; in-run seconds are each run's own measure (a: printed by the script;
b, c: the run's duration_s in the database, i.e. run_one from spec to final flush). Targets (issue #10):
(b) at least 50x lower per-run overhead than (a); (c) at most 50 ms per run ((d) is checked against the same
50 ms).

For rlbench the one-off costs are also shown apart: "one-off s" is the wall-clock outside the span from the
first run's start to the last run's end (CLI start, imports, worker pool or Ray start-up and shut-down), and
"steady ms" the per-run overhead within that span, by the same formula: what each further run costs.

The breakdown splits rlbench's per-run overhead (ms per run, adding up to it): start-up (command start to the
first run's start, x W), dispatch (the coordinator starting a run to its run_one beginning, from result.json),
return (run_one's end to the coordinator ending the run), idle between runs (a worker waiting for its next
run), shut-down (last run's end to the command's exit, x W); then the coordinator's database writes (from
`rlbench run --json`): transactions, connections, time writing and opening/closing the file.

A `random` run never imports torch in rlbench's workers (a worker imports it with the first run that uses
it); (a) imports it per run because a CleanRL script does. Timings on a shared machine vary: compare the
ratios printed by one invocation.

    python benchmarks/launch_overhead.py                  # 200 runs per launcher, 2 workers (~10 min)
    python benchmarks/launch_overhead.py --runs 4         # a quick check of the script
    python benchmarks/launch_overhead.py --sides b,c,d    # rlbench only
    python benchmarks/launch_overhead.py --sides c --repeat 5   # the median of 5 launches (a busy machine)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# What a CleanRL-style script does per run, minus the learning: imports, env, a seeded random rollout.
RUN_SCRIPT = textwrap.dedent(
    """
    import argparse
    import time

    import gymnasium as gym
    import numpy as np
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--env-id", default="CartPole-v1")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=50)
    args = p.parse_args()
    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    env = gym.make(args.env_id)
    env.action_space.seed(args.seed)
    obs, _ = env.reset(seed=args.seed)
    ret = 0.0
    for _ in range(args.total_timesteps):
        obs, r, term, trunc, _ = env.step(env.action_space.sample())
        ret += float(r)
        if term or trunc:
            obs, _ = env.reset()
    print(f"RUN_S={time.perf_counter() - t0:.6f} return={ret:.1f}")
    """
)


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    # bytecode cached as in any installed package (some sandboxes turn it off: every start then compiles)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def fresh_processes(runs: int, steps: int, workers: int, tmp: Path) -> dict[str, Any]:
    """(a): one new `python` process per run, --workers at a time, as CleanRL's benchmark.py launches them."""
    script = tmp / "trivial_run.py"
    script.write_text(RUN_SCRIPT)

    def one(seed: int) -> float:
        cmd = [sys.executable, str(script), "--env-id", "CartPole-v1", "--seed", str(seed),
               "--total-timesteps", str(steps)]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), check=True).stdout
        return float(re.search(r"RUN_S=([\d.]+)", out).group(1))  # type: ignore[union-attr]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        in_run = list(pool.map(one, range(runs)))
    return {"wall_s": time.perf_counter() - t0, "in_run_s": sum(in_run), "finished": len(in_run)}


ENGINES = Path(__file__).resolve().parents[1] / "tests" / "engines"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def running_ray(runs: int, steps: int, workers: int, tmp: Path) -> dict[str, Any]:
    """(d): (c) against a Ray head started before the timing and stopped after it (untimed)."""
    from rlbench_cli.executors.ray import RAY_ENV

    ray_tmp = Path(tempfile.mkdtemp(prefix="rlray-"))  # short: Ray's socket paths must stay under 108 bytes
    port = _free_port()
    env = {**_env(), **RAY_ENV, "RAY_TMP": str(ray_tmp), "RAY_PORT": str(port),
           "RAY_CLIENT_PORT": str(_free_port()), "RAY_CPUS": str(workers), "RAY_GPUS": "0"}  # fmt: skip
    try:
        up = subprocess.run(["bash", str(ENGINES / "ray_up.sh")], env=env, capture_output=True, text=True,
                            timeout=180)  # fmt: skip
        if up.returncode != 0:
            raise SystemExit(f"(d): could not start a Ray head:\n{up.stdout[-2000:]}\n{up.stderr[-2000:]}")
        return rlbench_runs(runs, steps, workers, tmp, "ray", address=f"127.0.0.1:{port}")
    finally:
        subprocess.run(["bash", str(ENGINES / "ray_down.sh")], env=env, capture_output=True, timeout=60)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def rlbench_runs(
    runs: int, steps: int, workers: int, tmp: Path, executor: str, address: str | None = None
) -> dict[str, Any]:
    """(b) / (c) / (d): `rlbench run` on a suite of --runs seeds of `random`, timed from the command's start."""
    import duckdb

    name = executor if address is None else f"{executor}_cluster"
    suite = tmp / f"overhead_{name}.yaml"
    suite.write_text(
        f"name: overhead_{name}\nseeds: {runs}\n"
        f"budget: {{steps: {steps}, eval_every: {steps}, eval_episodes: 1}}\n"
        "envs: [CartPole-v1]\nalgorithms: [random]\n"
    )
    db = tmp / f"{name}.duckdb"
    rlbench = shutil.which("rlbench") or "rlbench"
    cmd = [rlbench, "run", str(suite), "--db", str(db), "--workers", str(workers), "--json"]
    if executor != "local":
        cmd += ["--executor", executor]
    env = _env()
    if address is not None:
        from rlbench_cli.executors.ray import RAY_ENV

        cmd += ["--address", address]
        env = {**env, **RAY_ENV}
    t0, t0_epoch = time.perf_counter(), time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
    wall, t1_epoch = time.perf_counter() - t0, time.time()
    if r.returncode != 0:
        raise SystemExit(
            f"rlbench run --executor {executor} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        )
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT run_id, suite, attempts, epoch(started_at), epoch(ended_at), duration_s, job_id FROM runs "
            "WHERE status = 'finished'"
        ).fetchall()
    finally:
        con.close()
    in_run = sum(row[5] for row in rows)
    first = min((row[3] for row in rows), default=t0_epoch)
    last = max((row[4] for row in rows), default=t1_epoch)
    res = {"wall_s": wall, "in_run_s": float(in_run), "finished": len(rows), "span_s": float(last - first)}
    res["breakdown"] = _breakdown(rows, db.parent / "runs", t0_epoch, t1_epoch, first, last, workers)
    res["writes"] = summary.get("writes") or {}
    return res


def _breakdown(rows: list[tuple[Any, ...]], runs_root: Path, t0: float, t1: float, first: float, last: float,
               workers: int) -> dict[str, float]:  # fmt: skip
    """Where the worker-seconds that are not a run's own work went, in ms per run (they add up to the per-run
    overhead): before the first run starts, after the last one ends, and in between: from the coordinator's
    start of a run to its run_one (dispatch), from run_one's end to the coordinator's end of it (return), and
    a worker waiting for its next run (idle)."""
    n = max(len(rows), 1)
    dispatch = back = 0.0
    for run_id, suite, attempt, started, ended, _dur, _job in rows:
        res = json.loads((runs_root / suite / run_id / f"attempt-{attempt}" / "result.json").read_text())
        dispatch += res["started_at"] - started
        back += ended - res["ended_at"]
    span_idle = (last - first) * workers - sum(r[5] for r in rows) - dispatch - back
    return {
        "start-up": (first - t0) * workers / n * 1000,
        "dispatch": dispatch / n * 1000,
        "return": back / n * 1000,
        "idle between runs": span_idle / n * 1000,
        "shut-down": (t1 - last) * workers / n * 1000,
    }


def overhead_ms(res: dict[str, Any], runs: int, workers: int, key: str = "wall_s") -> float:
    return (res[key] * workers - res["in_run_s"]) / runs * 1000


def _one_side(side: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One launch of 'side' (a, b, c or d), with its per-run overhead (and, for rlbench, its one-off and
    steady parts)."""
    if side == "a":
        res = fresh_processes(args.runs, args.steps, args.workers, tmp)
    elif side == "d":
        res = running_ray(args.runs, args.steps, args.workers, tmp)
    else:
        res = rlbench_runs(args.runs, args.steps, args.workers, tmp, "local" if side == "b" else "ray")
    res["overhead_ms"] = overhead_ms(res, args.runs, args.workers)
    if "span_s" in res:
        res["steady_ms"] = overhead_ms(res, args.runs, args.workers, "span_s")
        res["one_off_s"] = res["wall_s"] - res["span_s"]
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="runs per launcher (default 200)")
    ap.add_argument("--steps", type=int, default=50, help="env steps per run (default 50)")
    ap.add_argument("--workers", type=int, default=2, help="runs at a time, for every launcher (default 2)")
    ap.add_argument("--sides", default="a,b,c,d",
                    help="which launchers: a (fresh process), b (local), c (ray, started by rlbench), d (ray, "
                         "a running head)")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1,
                    help="launch every side this many times, taking turns (a b c d a b c d ...), and show the "
                         "repetition with the median per-run overhead of each side, with the range (default 1)")  # fmt: skip
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat: give 1 or more")
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    labels = {"a": "(a) fresh python per run", "b": "(b) rlbench local", "c": "(c) rlbench ray (local Ray)",
              "d": "(d) rlbench ray (running)"}  # fmt: skip
    out: dict[str, Any] = {"runs": args.runs, "steps": args.steps, "workers": args.workers, "sides": {}}
    print(f"{args.runs} trivial runs (random policy, CartPole-v1, {args.steps} steps) per launcher, "
          f"{args.workers} at a time")  # fmt: skip
    print(f"{'launcher':<30} {'runs':>5} {'wall s':>8} {'in-run s':>9} {'overhead/run ms':>16} "
          f"{'one-off s':>10} {'steady ms':>10}")  # fmt: skip
    tries: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for k in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="rlbench-overhead-") as d:
            tmp = Path(d)
            for side in sides:
                res = _one_side(side, args, tmp)
                if res["finished"] != args.runs:
                    raise SystemExit(f"{labels[side]}: {res['finished']} of {args.runs} runs finished")
                tries[side].append(res)
                if args.repeat > 1:
                    print(
                        f"  repetition {k + 1}: {labels[side]}: {res['overhead_ms']:.1f} ms per run",
                        flush=True,
                    )
    for side in sides:
        ranked = sorted(tries[side], key=lambda r: r["overhead_ms"])
        res = ranked[(len(ranked) - 1) // 2]  # the median repetition (the lower middle one for an even count)
        spread = ""
        if len(ranked) > 1:
            res["repetitions_ms"] = [r["overhead_ms"] for r in tries[side]]
            spread = (
                f"  (median of {len(ranked)}: {ranked[0]['overhead_ms']:.1f}-{ranked[-1]['overhead_ms']:.1f})"
            )
        out["sides"][side] = res
        steady = f"{res['steady_ms']:.1f}" if "steady_ms" in res else "-"
        one_off = f"{res['one_off_s']:.1f}" if "one_off_s" in res else "-"
        print(f"{labels[side]:<30} {res['finished']:>5} {res['wall_s']:>8.1f} {res['in_run_s']:>9.2f} "
              f"{res['overhead_ms']:>16.1f} {one_off:>10} {steady:>10}{spread}", flush=True)  # fmt: skip
    for side in sides:
        res = out["sides"][side]
        if "breakdown" not in res:
            continue
        parts = ", ".join(f"{k} {v:.1f}" for k, v in res["breakdown"].items())
        print(f"breakdown {labels[side]}, ms per run: {parts}")
        w = res["writes"]
        if w:
            print(f"  database writes: {w['flushes']:.0f} transactions for {w['ops']:.0f} writes, "
                  f"{w['connects']:.0f} connections; per run {w['write_s'] / args.runs * 1000:.1f} ms writing, "
                  f"{(w['connect_s'] + w['close_s']) / args.runs * 1000:.1f} ms opening and closing")  # fmt: skip
    s = out["sides"]
    if "a" in s and "b" in s:
        out["ratio_a_b"] = s["a"]["overhead_ms"] / max(s["b"]["overhead_ms"], 1e-9)
        met = "met" if out["ratio_a_b"] >= 50 else "NOT met"
        print(f"ratio (a)/(b), per-run overhead: {out['ratio_a_b']:.1f}x (target >= 50x: {met})")
    if "a" in s and "c" in s:
        out["ratio_a_c"] = s["a"]["overhead_ms"] / max(s["c"]["overhead_ms"], 1e-9)
        print(f"ratio (a)/(c), per-run overhead: {out['ratio_a_c']:.1f}x")
    if "b" in s and "c" in s:
        print(
            f"ratio (c)/(b), per-run overhead: {s['c']['overhead_ms'] / max(s['b']['overhead_ms'], 1e-9):.1f}x"
        )
    if "c" in s:
        met = "met" if s["c"]["overhead_ms"] <= 50 else "NOT met"
        print(f"ray per-run overhead: {s['c']['overhead_ms']:.1f} ms all-in, {s['c']['steady_ms']:.1f} ms steady "
              f"(target <= 50 ms all-in: {met})")  # fmt: skip
    if "d" in s:
        met = "met" if s["d"]["overhead_ms"] <= 50 else "NOT met"
        print(
            f"ray per-run overhead on a running head: {s['d']['overhead_ms']:.1f} ms all-in, "
            f"{s['d']['steady_ms']:.1f} ms steady (target <= 50 ms all-in: {met})"
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
