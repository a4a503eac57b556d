"""Open RL Benchmark scale: the whole `rlbench` commands on a store of 10,000 runs and 10 million metric rows.

Issue #12's targets, each the wall time of the WHOLE command in a subprocess (interpreter start and imports
included), as a user types it:

    fetch, filtered (one algorithm, task and seed)            < 1 s
    fetch --scores (10,000 runs)                              < 1 s
    fetch --format parquet -o FILE (all 10M rows)             < 3 s
    leaderboard (50,000 bootstrap reps)                       < 5 s
    plot --no-curves (50,000 bootstrap reps)                  < 5 s
    fetch --from d3rlpy:DIR (1,500 D4RL run folders, 6M rows)  < 5 s

Both inputs look like what users have. The store (10 algorithms x 50 tasks x 20 seeds, 1,000 metric rows a
run: ``eval/return``, episode returns and lengths, a loss and two system metrics, ``RUN_METRICS``) is written
the way ``rlbench run`` writes it: 16 runs in flight, each run's rows in 3-8 Parquet shards, ingested a tick
at a time by the coordinator's batched transactions (``Store.batch``: ``start_attempts``, ``ingest_many``,
``end_attempts``), the writer connection reopened every five ticks. It is built once (minutes) and cached in
--cache (default: a folder in the temp directory), keyed by its size. The d3rlpy logs are laid out as
d3rlpy-benchmarks' D4RL logs (1,490 folders, 11,690 CSVs, 6.3M rows, 200 MB), written by d3rlpy 2.8.1:
params.json and every CSV its FileAdapter writes for the algorithm (its losses, three timings,
``environment.csv``), 500 epochs a file (IQL 1,000), values printed as Python prints floats; 1,500 folders
make 11,100 CSVs, 6.15M rows, 185 MB. They are cached beside the store.

    python benchmarks/store_scale.py                       # the full scale (builds the store once: minutes)
    python benchmarks/store_scale.py --profile             # + where the time goes in each command (cProfile)
    python benchmarks/store_scale.py --runs 200 --rows 100 --reps 2000 --import-runs 100 --import-epochs 50
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
from typing import Any

import numpy as np

SUITE = "orb"
METRIC = "eval/return"
D4RL_TASKS = tuple(f"{env}-{level}-v2" for env in ("hopper", "walker2d", "halfcheetah")
                   for level in ("random", "medium", "medium-replay", "medium-expert", "expert"))  # fmt: skip
# The CSVs d3rlpy 2.8.1's FileAdapter writes for each algorithm of d3rlpy-benchmarks' D4RL logs: every key of
# the algorithm's update (its loss dataclasses), the three timings ``fit`` measures and the evaluator's
# ``environment``, one row per epoch. IQL's runs are 1M steps (1,000 epochs of 1,000 steps), the others 500k.
D3RLPY_LOSSES = {
    "CQL": ("critic_loss", "conservative_loss", "alpha", "actor_loss", "temp", "temp_loss"),
    "IQL": ("critic_loss", "q_loss", "v_loss", "actor_loss"),
    "TD3PlusBC": ("critic_loss", "actor_loss", "bc_loss"),
    "AWAC": ("critic_loss", "actor_loss"),
    "BCQ": ("vae_loss", "critic_loss", "actor_loss"),
    "BEAR": ("imitator_loss", "critic_loss", "actor_loss", "temp", "temp_loss", "mmd_loss", "alpha"),
    "CRR": ("critic_loss", "actor_loss"),
    "PLAS": ("vae_loss", "critic_loss", "actor_loss"),
    "BC": ("loss",),
    "ReBRAC": ("critic_loss", "actor_loss", "bc_loss"),
}
D3RLPY_TIMINGS = ("time_step", "time_sample_batch", "time_algorithm_update")
D3RLPY_LONGER = {"IQL": 2}  # epochs: twice --import-epochs (500)
# What an `rlbench run` run logs, as (name, share of the run's rows): evaluations, every episode's return and
# length, a loss per update and the sampled system metrics.
RUN_METRICS = (("eval/return", 0.1), ("train/episode_return", 0.25), ("train/episode_length", 0.25),
               ("losses/critic_loss", 0.2), ("sys/steps_per_second", 0.1), ("sys/cpu_percent", 0.1))  # fmt: skip
POOL = 16  # runs in flight at once, as in a local pool or a Slurm array


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
def run_rows(rows: int, level: float, rng: Any) -> Any:
    """One run's metric rows, in the order its sink logs them (by step, the names of a step together): each
    name of ``RUN_METRICS`` its share of ``rows``, ``eval/return`` rising to ``level`` * 100."""
    import pyarrow as pa

    last = rows * 1_000
    parts = []
    for name, share in RUN_METRICS:
        k = max(1, round(rows * share))
        steps = np.linspace(last / k, last, k).astype(np.int64)
        if name == "eval/return":
            values = level * np.linspace(0.0, 1.0, k) * 100 + rng.normal(0, 5, k)
        else:
            values = rng.normal(100, 30, k)
        parts.append((steps, np.full(k, name, dtype=object), values))
    steps = np.concatenate([p[0] for p in parts])
    order = np.argsort(steps, kind="stable")
    names = np.concatenate([p[1] for p in parts])[order]
    return pa.table({"step": pa.array(steps[order]), "name": pa.array(names, pa.string()).dictionary_encode(),
                     "value": pa.array(np.concatenate([p[2] for p in parts])[order]),
                     "wall_time": pa.array(1.7e9 + steps[order] / 1_000.0)})  # fmt: skip


def cached_store(cache: Path, shape: Shape) -> Path:
    """The store of ``shape`` in ``cache``, built there first if it is not (minutes at full scale)."""
    cache.mkdir(parents=True, exist_ok=True)
    db = cache / f"store-v2-{shape.key}.duckdb"  # v2: written as rlbench run writes, RUN_METRICS
    if not db.exists():
        partial = db.with_suffix(".partial.duckdb")
        partial.unlink(missing_ok=True)
        print(f"building {db} ({shape.runs} runs x {shape.rows} rows)...", flush=True)
        print(f"  built in {build_store(partial, shape):.1f}s", flush=True)
        partial.rename(db)
    return db


def build_store(path: Path, shape: Shape, seed: int = 0, work: Path | None = None) -> float:
    """Writes a suite of ``shape.runs`` finished runs with ``shape.rows`` metric rows each (``RUN_METRICS``)
    the way ``rlbench run`` writes it: the suite and its pending runs first, then ``POOL`` runs in flight at
    a time, each writing its rows as 3-8 Parquet shards (the sink's flushes) that go in, a tick at a time, by
    ``Store.batch`` transactions of ``start_attempts``, ``ingest_many`` and ``end_attempts`` (the
    coordinator's recorder), the writer connection closed and opened again every few ticks. Returns the
    seconds it took."""
    import pyarrow.parquet as pq

    from rlbench_cli.store import Store

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    runs = []
    for a in range(shape.algos):
        for t in range(shape.tasks):
            for s in range(shape.seeds):
                runs.append({"run_id": f"r-{a:02d}-{t:03d}-{s:02d}", "suite": SUITE, "algo": f"algo{a:02d}",
                             "algo_name": f"algo{a:02d}", "env": f"task{t:03d}", "seed": s, "config": {}})  # fmt: skip
    skill = np.linspace(0.2, 1.2, shape.algos)
    difficulty = rng.normal(0, 0.3, shape.tasks)
    order = rng.permutation(len(runs))  # the order the pool takes them in
    folder = Path(work or tempfile.mkdtemp(prefix="rlbench-scale-shards-"))
    store = Store(path)
    with store.writer() as con:
        store.register_suite(con, SUITE, "synthetic Open RL Benchmark scale suite", {}, "store_scale.py")
        store.add_runs(con, runs)
    con = store.open_writer(migrated=True)
    queue = list(order)
    slots: list[dict[str, Any] | None] = [None] * POOL
    ticks = 0
    try:
        while queue or any(slots):
            starts, ingests, ends = [], [], []
            for j, slot in enumerate(slots):
                if slot is None and queue:
                    run = runs[queue.pop()]
                    a, t = int(run["algo"][4:]), int(run["env"][4:])
                    table = run_rows(shape.rows, skill[a] + difficulty[t], rng)
                    cut = min(int(rng.integers(2, 8)), table.num_rows - 1)  # 3-8 shards
                    cuts = np.sort(rng.choice(np.arange(1, table.num_rows), cut, replace=False))
                    bounds = [0, *cuts.tolist(), table.num_rows]
                    shards = [table.slice(b0, b1 - b0) for b0, b1 in zip(bounds, bounds[1:])]
                    slot = slots[j] = {
                        "run": run,
                        "shards": shards,
                        "dir": folder / run["run_id"] / "metrics",
                    }
                    slot["dir"].mkdir(parents=True)
                    starts.append((run["run_id"], 1, {"started_at": time.time(), "host": "bench"}))
                if slot is None:
                    continue
                n = len(list(slot["dir"].iterdir()))  # one flush of the sink: the next shard
                pq.write_table(slot["shards"][n], slot["dir"] / f"{n:08d}.parquet", compression="snappy",
                               use_dictionary=["name"])  # fmt: skip
                ingests.append((slot["run"]["run_id"], 1, sorted(slot["dir"].iterdir())))
                if n + 1 == len(slot["shards"]):
                    ends.append((slot["run"]["run_id"], "finished", {"exit_code": 0, "duration_s": 1.0}))
                    slots[j] = None
            with store.batch(con):
                store.start_attempts(con, starts)
                store.ingest_many(con, ingests)
                store.end_attempts(con, ends)
            for run_id, _, _ in ends:
                shutil.rmtree(folder / run_id)
            ticks += 1
            if ticks % 5 == 0:  # the recorder holds the file half a second, five ticks of 0.1 s
                con.close()
                con = store.open_writer(migrated=True)
    finally:
        con.close()
        if work is None:
            shutil.rmtree(folder, ignore_errors=True)
    return time.perf_counter() - t0


def _csv_text(epochs: Any, steps: Any, values: Any) -> bytes:
    """``epoch,step,value`` lines as d3rlpy's ``print(f"{epoch},{step},{value}")`` writes them (the value
    as Python prints a float: its shortest round-trip digits), built column-wise by pyarrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = [pc.cast(pa.array(c), pa.string()) for c in (epochs, steps, values)]
    lines = pc.binary_join_element_wise(pc.binary_join_element_wise(*cols, ","), "", "\n")
    offsets = np.frombuffer(lines.buffers()[1], np.int32)[lines.offset : lines.offset + len(lines) + 1]
    return lines.buffers()[2].to_pybytes()[offsets[0] : offsets[-1]]


def d3rlpy_params(algo: str, seed: int) -> dict[str, Any]:
    """A params.json like d3rlpy 2.8.1's for an algorithm: observation and action shape, and the config."""
    return {"observation_shape": [17], "action_size": 6, "config": {"type": algo.lower(), "params": {
        "batch_size": 256, "gamma": 0.99, "observation_scaler": {"type": "standard", "params": {}},
        "action_scaler": {"type": "min_max", "params": {}}, "reward_scaler": {"type": "none", "params": {}},
        "actor_learning_rate": 0.0001, "critic_learning_rate": 0.0003, "tau": 0.005, "n_critics": 2,
        "actor_optim_factory": {"type": "adam", "params": {"betas": [0.9, 0.999], "eps": 1e-08,
                                                           "weight_decay": 0, "amsgrad": False}},
        "critic_optim_factory": {"type": "adam", "params": {"betas": [0.9, 0.999], "eps": 1e-08,
                                                            "weight_decay": 0, "amsgrad": False}},
        "actor_encoder_factory": {"type": "vector", "params": {"hidden_units": [256, 256],
                                                               "activation": "relu", "use_batch_norm": False}},
        "critic_encoder_factory": {"type": "vector", "params": {"hidden_units": [256, 256],
                                                                "activation": "relu", "use_batch_norm": False}},
        "q_func_factory": {"type": "mean", "params": {"share_encoder": False}}, "compile_graph": False,
        "seed": seed}}}  # fmt: skip


def write_d3rlpy_logs(folder: Path, runs: int, epochs: int = 500, seed: int = 0) -> tuple[int, int]:
    """``runs`` run folders as d3rlpy-benchmarks' D4RL logs hold them (``<ALGO>_<task>_<seed>_<time>/``,
    written by d3rlpy 2.8.1): params.json (indented) and each CSV its FileAdapter writes for the algorithm
    (``D3RLPY_LOSSES``, the timings, ``environment.csv``), ``epochs`` rows of ``epoch,step,value`` each (IQL
    twice as many). Returns (CSV files, rows)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = rows = i = 0
    for s in range(1 + runs // (len(D3RLPY_LOSSES) * len(D4RL_TASKS))):
        for algo, losses in D3RLPY_LOSSES.items():
            for task in D4RL_TASKS:
                if i == runs:
                    return files, rows
                run = folder / f"{algo}_{task}_{s}_2022{i:010d}"
                run.mkdir(exist_ok=True)
                (run / "params.json").write_text(json.dumps(d3rlpy_params(algo, s), indent=2))
                n = epochs * D3RLPY_LONGER.get(algo, 1)
                epoch = np.arange(1, n + 1)
                for name in (*losses, *D3RLPY_TIMINGS, "environment"):
                    if name.startswith("time_"):
                        values = np.abs(rng.normal(0.004, 0.001, n))
                    elif name == "environment":
                        values = np.linspace(0, 3000, n) + rng.normal(0, 300, n)
                    else:
                        values = np.cumsum(rng.normal(0, 0.05, n)) + rng.normal(5, 1)
                    (run / f"{name}.csv").write_bytes(_csv_text(epoch, epoch * 1_000, values))
                    files += 1
                    rows += n
                i += 1
    return files, rows


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
    parser.add_argument("--rows", type=int, default=1_000, help="metric rows per run (RUN_METRICS)")
    parser.add_argument("--reps", type=int, default=50_000, help="bootstrap reps of leaderboard and plot")
    parser.add_argument(
        "--import-runs", type=int, default=1_500, help="d3rlpy run folders to import (0: skip)"
    )
    parser.add_argument("--import-epochs", type=int, default=500, help="epochs (CSV rows) of a d3rlpy run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command; the median is printed")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rlbench-store-scale")
    parser.add_argument("--profile", action="store_true", help="also profile each command (cProfile)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (for the tests)")
    parser.add_argument("--json", type=Path, help="also write the timings to this JSON file")
    parser.add_argument("--baseline", type=Path, help="another checkout to time side by side (e.g. main)")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.rows, args.reps, args.import_runs, args.import_epochs, args.repeat = (
            40,
            20,
            200,
            20,
            10,
            1,
        )
    shape = shape_for(args.runs, args.rows)
    db = cached_store(args.cache, shape)
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
            logs = args.cache / f"d3rlpy-2.8.1-logs-{args.import_runs}x{args.import_epochs}"
            if not logs.exists():
                print(f"writing {args.import_runs} d3rlpy run folders to {logs}...", flush=True)
                partial = logs.with_suffix(".partial")
                shutil.rmtree(partial, ignore_errors=True)
                files, rows = write_d3rlpy_logs(partial, args.import_runs, args.import_epochs)
                partial.rename(logs)
                size = sum(f.stat().st_size for f in logs.rglob("*")) / 1e6
                print(f"  {files:,} CSVs, {rows:,} rows, {size:.0f} MB", flush=True)
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
