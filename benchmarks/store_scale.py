"""Open RL Benchmark scale: the whole `rlbench` commands on a store of 10,000 runs and 10 million metric rows.

Issue #12's targets, each the wall time of the WHOLE command in a subprocess (interpreter start and imports
included), as a user types it:

    fetch, filtered (one algorithm, task and seed)            < 1 s
    fetch --scores (10,000 runs)                              < 1 s
    fetch --format parquet -o FILE (all 10M rows)             < 3 s
    leaderboard (50,000 bootstrap reps)                       < 5 s
    plot --no-curves (50,000 bootstrap reps)                  < 5 s
    fetch --from d3rlpy:DIR (1,500 D4RL-style run folders)    < 5 s

The store (10 algorithms x 50 tasks x 20 seeds, 1,000 ``eval/return`` rows each) is built once through the
Store API (one Arrow bulk insert) and cached in --cache (default: a folder in the temp directory), keyed by its
size. The d3rlpy logs (--import-runs folders of params.json and six ``epoch,step,value`` CSVs of 100 rows,
written with numpy) are cached beside it.

    python benchmarks/store_scale.py                       # the full scale (builds the store once: ~1 min)
    python benchmarks/store_scale.py --profile             # + where the time goes in each command (cProfile)
    python benchmarks/store_scale.py --runs 200 --rows 100 --reps 2000 --import-runs 100   # smaller
    python benchmarks/store_scale.py --quick               # tiny, for the test suite

To compare with another checkout, run this script with PYTHONPATH pointing at it: the commands run the
``rlbench`` next to the Python running this script, which loads ``rlbench_cli`` from PYTHONPATH. Or side by side
in one run: ``--baseline /path/to/other/checkout`` times every command with that checkout's ``rlbench_cli``
too, the two taking turns, and prints the baseline's time and the speed-up beside each target.
Timings are medians of --repeat runs; on a shared machine they move a lot, so compare runs made side by side.
Each target's verdict (met / NOT met) is on the median wall time of this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SUITE = "orb"
METRIC = "eval/return"
D4RL_ALGOS = ("CQL", "IQL", "TD3PlusBC", "AWAC", "BCQ", "BEAR", "CRR", "PLAS", "BC", "SAC")
D4RL_TASKS = tuple(f"{env}-{level}-v2" for env in ("hopper", "walker2d", "halfcheetah")
                   for level in ("random", "medium", "medium-replay", "medium-expert", "expert"))  # fmt: skip
D3RLPY_FILES = ("environment", "critic_loss", "actor_loss", "time_step", "time_sample_batch",
                "time_algorithm_update")  # fmt: skip


@dataclass(frozen=True)
class Shape:
    algos: int
    tasks: int
    seeds: int
    rows: int

    @property
    def runs(self) -> int:
        return self.algos * self.tasks * self.seeds

    @property
    def key(self) -> str:
        return f"{self.algos}a-{self.tasks}t-{self.seeds}s-{self.rows}r"


def shape_for(runs: int, rows: int) -> Shape:
    """10 algorithms x 50 tasks x 20 seeds at 10,000 runs; fewer runs keep the 10 x 20 grid and fewer tasks."""
    algos = 10 if runs >= 200 else max(2, runs // 20)
    seeds = 20 if runs >= 200 else 10
    tasks = max(1, runs // (algos * seeds))
    return Shape(algos, tasks, seeds, rows)


# ------------------------------------------------------------------------------------------------- the store
def build_store(path: Path, shape: Shape, seed: int = 0) -> float:
    """Writes a suite of ``shape.runs`` finished runs with ``shape.rows`` eval/return rows each through
    ``Store.import_runs`` (one Arrow bulk insert). Returns the seconds it took."""
    import pyarrow as pa

    from rlbench_cli.store import Store

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    runs = []
    for a in range(shape.algos):
        for t in range(shape.tasks):
            for s in range(shape.seeds):
                runs.append({"run_id": f"r-{a:02d}-{t:03d}-{s:02d}", "suite": SUITE, "algo": f"algo{a:02d}",
                             "algo_name": f"algo{a:02d}", "env": f"task{t:03d}", "seed": s, "config": {}})  # fmt: skip
    n, k = len(runs), shape.rows
    skill = np.repeat(np.linspace(0.2, 1.2, shape.algos), shape.tasks * shape.seeds)
    task = np.tile(np.repeat(rng.normal(0, 0.3, shape.tasks), shape.seeds), shape.algos)
    progress = np.linspace(0.0, 1.0, k)
    values = (skill + task)[:, None] * progress[None, :] * 100 + rng.normal(0, 5, size=(n, k))
    table = pa.table(
        {
            "run_id": pa.array(
                np.repeat(np.array([r["run_id"] for r in runs], dtype=object), k), pa.string()
            ),
            "step": pa.array(np.tile(np.arange(1, k + 1, dtype=np.int64) * 1000, n)),
            "name": pa.array(np.full(n * k, METRIC, dtype=object), pa.string()),
            "value": pa.array(values.ravel()),
            "wall_time": pa.array(np.tile(np.arange(k, dtype=np.float64), n)),
        }
    )
    store = Store(path)
    with store.writer() as con:
        store.import_runs(con, SUITE, "synthetic Open RL Benchmark scale suite", runs, table)
    return time.perf_counter() - t0


def write_d3rlpy_logs(folder: Path, runs: int, rows: int = 100, seed: int = 0) -> None:
    """``runs`` d3rlpy run folders (``<ALGO>_<task>_<seed>_<time>/``) of D4RL-like runs: params.json and
    six ``epoch,step,value`` CSVs (no header) of ``rows`` rows, written with numpy."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    i = 0
    for s in range(1 + runs // (len(D4RL_ALGOS) * len(D4RL_TASKS))):
        for algo in D4RL_ALGOS:
            for task in D4RL_TASKS:
                if i == runs:
                    return
                run = folder / f"{algo}_{task}_{s}_2022{i:010d}"
                run.mkdir(exist_ok=True)
                (run / "params.json").write_text(json.dumps({"batch_size": 256, "gamma": 0.99, "seed": s}))
                epochs = np.arange(1, rows + 1)
                for name in D3RLPY_FILES:
                    data = np.column_stack([epochs, epochs * 10_000, rng.normal(100, 30, rows)])
                    np.savetxt(run / f"{name}.csv", data, fmt=["%d", "%d", "%.10g"], delimiter=",")
                i += 1


# -------------------------------------------------------------------------------------------- the commands
def rlbench_command() -> list[str]:
    """The ``rlbench`` console script of this interpreter (falls back to ``python -c``)."""
    script = Path(sys.executable).parent / "rlbench"
    if script.exists():
        return [sys.executable, str(script)]
    return [sys.executable, "-c", "from rlbench_cli.cli.app import main; main()"]


def run(args: list[str], profile: Path | None = None, checkout: Path | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one ``rlbench ARGS`` in a subprocess (fails loudly on a
    non-zero exit). On a loaded machine the wall time waits for the CPU; the CPU time says what it needed.
    ``checkout``: run that checkout's ``rlbench_cli`` (first on PYTHONPATH) instead of this one's."""
    import resource

    cmd = rlbench_command()
    if profile is not None:
        cmd = [cmd[0], "-m", "cProfile", "-o", str(profile), *cmd[1:]]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=1800)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(
            f"rlbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def has_no_curves() -> bool:
    """Whether this ``rlbench plot`` has ``--no-curves``."""
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([*rlbench_command(), "plot", "--help"], capture_output=True, text=True, env=env)
    return "--no-curves" in proc.stdout


def profile_lines(path: Path, top: int = 14) -> list[str]:
    """Where a command's time went, from its cProfile file: the total, the imports, and rlbench's own
    functions (the CLI wrappers left out) by cumulative time."""
    import io
    import pstats

    stats = pstats.Stats(str(path), stream=io.StringIO())
    total = stats.total_tt  # type: ignore[attr-defined]
    imports = max((v[3] for k, v in stats.stats.items() if k[2] == "_find_and_load"), default=0.0)  # type: ignore[attr-defined]
    lines = [f"total {total:.2f}s, of which imports {imports:.2f}s; rlbench's functions by cumulative time:"]
    rows = [(v[3], v[2], k) for k, v in stats.stats.items()  # type: ignore[attr-defined]
            if "rlbench_cli" in k[0] and "/cli/app.py" not in k[0] and "/cli/common.py" not in k[0]]  # fmt: skip
    for cum, own, (file, line, func) in sorted(rows, reverse=True)[:top]:
        short = file[file.index("rlbench_cli") :]
        lines.append(f"  {cum:7.2f}s cumulative {own:7.2f}s own  {short}:{line}({func})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=10_000, help="runs in the store (10 algos x tasks x 20 seeds)"
    )
    parser.add_argument("--rows", type=int, default=1_000, help="eval/return rows per run")
    parser.add_argument("--reps", type=int, default=50_000, help="bootstrap reps of leaderboard and plot")
    parser.add_argument(
        "--import-runs", type=int, default=1_500, help="d3rlpy run folders to import (0: skip)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command; the median is printed")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rlbench-store-scale")
    parser.add_argument("--profile", action="store_true", help="also profile each command (cProfile)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (for the tests)")
    parser.add_argument("--json", type=Path, help="also write the timings to this JSON file")
    parser.add_argument("--baseline", type=Path, help="another checkout to time side by side (e.g. main)")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.rows, args.reps, args.import_runs, args.repeat = 40, 20, 200, 20, 1
    shape = shape_for(args.runs, args.rows)
    args.cache.mkdir(parents=True, exist_ok=True)
    db = args.cache / f"store-{shape.key}.duckdb"
    if not db.exists():
        partial = db.with_suffix(".partial.duckdb")
        partial.unlink(missing_ok=True)
        print(f"building {db} ({shape.runs} runs x {shape.rows} rows)...", flush=True)
        print(f"  built in {build_store(partial, shape):.1f}s", flush=True)
        partial.rename(db)
    work = Path(tempfile.mkdtemp(prefix="rlbench-scale-"))
    try:
        out = work / "out"
        out.mkdir()
        commands = {
            "fetch filtered": (["fetch", "--db", db, "--suite", SUITE, "--algo", "algo01", "--env", "task000",
                                "--seed", "0", "--metric", METRIC], 1.0),
            "fetch --scores": (["fetch", "--db", db, "--suite", SUITE, "--scores", "--format", "csv", "-o",
                                out / "scores.csv"], 1.0),
            "fetch --format parquet": (["fetch", "--db", db, "--format", "parquet", "-o", out / "all.parquet"], 3.0),
            "leaderboard": (["leaderboard", SUITE, "--db", db, "--reps", args.reps, "-o", out / "board.md"], 5.0),
            "plot --no-curves": (["plot", SUITE, "--db", db, "--reps", args.reps, "--no-curves", "--out",
                                  out / "figures"], 5.0),
        }  # fmt: skip
        if not has_no_curves():  # an rlbench from before the flag (to compare): its plot draws every figure
            cmd = [c for c in commands.pop("plot --no-curves")[0] if c != "--no-curves"]
            commands["plot (all figures)"] = (cmd, 5.0)
        if args.import_runs:
            logs = args.cache / f"d3rlpy-logs-{args.import_runs}"
            if not logs.exists():
                print(f"writing {args.import_runs} d3rlpy run folders to {logs}...", flush=True)
                write_d3rlpy_logs(logs.with_suffix(".partial"), args.import_runs)
                logs.with_suffix(".partial").rename(logs)
            commands["fetch --from d3rlpy"] = (["fetch", "--from", f"d3rlpy:{logs}", "--into", "d4rl", "--db",
                                                 work / "import.duckdb"], 5.0)  # fmt: skip
        results = {}
        print(f"\n{shape.runs} runs ({shape.algos} algorithms x {shape.tasks} tasks x {shape.seeds} seeds), "
              f"{shape.runs * shape.rows:,} metric rows; reps {args.reps}; median of {args.repeat}\n")  # fmt: skip
        print(
            f"load average before: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
        )
        base = args.baseline
        head = f"{'command':<26} {'wall s':>8} {'cpu s':>7} {'target s':>9}  {'wall spread':<14} verdict"
        print(head + (f"   {'baseline wall s':>15} {'cpu s':>7} {'speed-up':>8}" if base else ""))
        for name, (cmd, target) in commands.items():
            times, cpus, btimes, bcpus = [], [], [], []
            for _ in range(args.repeat):  # with a baseline the two take turns, so a slow spell hits both
                for checkout, walls, cpu_list in ((None, times, cpus), (base, btimes, bcpus))[
                    : 2 if base else 1
                ]:
                    (work / "import.duckdb").unlink(missing_ok=True)
                    wall, cpu = run([str(c) for c in cmd], checkout=checkout)
                    walls.append(wall)
                    cpu_list.append(cpu)
            med, cpu = statistics.median(times), statistics.median(cpus)
            results[name] = {"seconds": med, "cpu_seconds": cpu, "all": times, "target": target,
                             "met": med < target}  # fmt: skip
            spread = f"{min(times):.2f}..{max(times):.2f}"
            verdict = "met" if med < target else "NOT met"
            line = f"{name:<26} {med:>8.2f} {cpu:>7.2f} {target:>9.1f}  {spread:<14} {verdict:<7}"
            if base:
                bmed, bcpu = statistics.median(btimes), statistics.median(bcpus)
                results[name]["baseline"] = {"seconds": bmed, "cpu_seconds": bcpu, "all": btimes}
                line += f"   {bmed:>15.2f} {bcpu:>7.2f} {bmed / med:>7.2f}x"
            print(line, flush=True)
        met = sum(r["met"] for r in results.values())
        print(f"targets met: {met} of {len(results)} (median wall time of this checkout)")
        print(f"load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if args.profile:
            for name, (cmd, _) in commands.items():
                (work / "import.duckdb").unlink(missing_ok=True)
                prof = work / "profile.out"
                run([str(c) for c in cmd], profile=prof)
                print(f"\n--- where the time goes: rlbench {name} (cProfile, cumulative) ---")
                print("\n".join(profile_lines(prof)))
        if args.json:
            args.json.write_text(
                json.dumps({"shape": shape.__dict__, "reps": args.reps, "results": results}, indent=1)
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
