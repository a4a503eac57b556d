"""Metric throughput: rlbench's metric path vs TensorBoard's SummaryWriter vs MLflow's log_batch.

Each tool receives the same stream: S steps x 10 named scalars (train/loss/0 .. train/loss/9).
rlbench is timed twice: with its columnar call ``log_columns(step, names, values)`` (one call a step, as a
vectorised agent logs) and with ``log_many(step, {name: value})`` (rlbench-dict). rlbench is timed end to end: logger calls -> Parquet shards (background flush each second) -> ingest into
DuckDB -> a COUNT(*) query that sees every row. TensorBoard: add_scalar per scalar, then close (flushes
the event file). MLflow: log_batch of 1,000 metrics at a time to a local SQLite store (MLflow 3's default backend).

    pip install -e ".[bench]"
    python benchmarks/metric_throughput.py                 # 1M scalars through rlbench, 200k through peers
    python benchmarks/metric_throughput.py --peer-scalars 1000000   # the full million through peers too (slow)

Every tool first runs one untimed round on a tenth of its stream (one-time set-up in the process), then the
tools take turns --repeat times; each row is the median of those runs, with the fastest and slowest beside it.

Peers are slower by orders of magnitude, so by default they get a smaller stream; every tool is compared by
throughput (scalars per second), which does not depend on the stream length for these append-only writers.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

NAMES = [f"train/loss/{i}" for i in range(10)]


def bench_rlbench(n: int, tmp: Path, columnar: bool = True) -> tuple[float, float]:
    """Returns (end-to-end seconds, seconds the logging loop itself took: what training pays).

    columnar: ``sink.log_columns(step, NAMES, values)`` (one call per step, the names a tuple built once, as
    a vectorised agent logs); else ``sink.log_many(step, {name: value})`` (a dict per step)."""
    from rlbench_cli.sink import ShardSink, list_shards
    from rlbench_cli.store import Store

    store = Store(tmp / "rlbench.duckdb")
    with store.writer() as con:  # set-up, untimed: schema, run row, sink (as a worker does before training)
        store.add_runs(con, [{"run_id": "r", "suite": "bench", "algo": "a", "algo_name": "random", "env": "E",
                              "seed": 0, "config": {}}])  # fmt: skip
        store.start_attempt(con, "r", 1, {"started_at": time.time()})
    sink = ShardSink(tmp / "shards")
    t0 = time.perf_counter()
    if columnar:
        log, names, width = sink.log_columns, tuple(NAMES), len(NAMES)
        for step in range(n // len(NAMES)):
            log(step, names, [0.001 * step] * width)
    else:
        log_many = sink.log_many
        for step in range(n // len(NAMES)):
            log_many(step, {name: 0.001 * step for name in NAMES})
    t_loop = time.perf_counter() - t0
    sink.close()
    with store.writer() as con:
        store.ingest_shards(con, "r", 1, list_shards(tmp / "shards"))
    with store.reader() as con:
        rows = con.execute("SELECT count(*) FROM metrics").fetchall()[0][0]
    dt = time.perf_counter() - t0
    assert rows == n, (rows, n)
    return dt, t_loop


def bench_tensorboard(n: int, tmp: Path) -> tuple[float, float]:
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(log_dir=str(tmp / "tb"))
    add = w.add_scalar
    t0 = time.perf_counter()
    for step in range(n // len(NAMES)):
        for name in NAMES:
            add(name, 0.001 * step, step)
    t_loop = time.perf_counter() - t0
    w.close()
    return time.perf_counter() - t0, t_loop


def bench_mlflow(n: int, tmp: Path) -> tuple[float, float]:
    import logging

    import mlflow
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    tmp.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(f"sqlite:///{tmp / 'mlflow.db'}")  # MLflow 3: the file store is deprecated
    client = MlflowClient()
    run = client.create_run(client.create_experiment("bench"))
    t0 = time.perf_counter()
    batch: list = []
    ts = int(time.time() * 1000)
    for step in range(n // len(NAMES)):
        for name in NAMES:
            batch.append(Metric(name, 0.001 * step, ts, step))
        if len(batch) >= 1000:
            client.log_batch(run.info.run_id, metrics=batch)
            batch = []
    if batch:
        client.log_batch(run.info.run_id, metrics=batch)
    dt = time.perf_counter() - t0  # log_batch is synchronous: the loop is the whole path
    client.set_terminated(run.info.run_id)
    return dt, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scalars", type=int, default=1_000_000, help="scalars through rlbench")
    ap.add_argument(
        "--peer-scalars", type=int, default=200_000, help="scalars through TensorBoard and MLflow"
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool; the median is reported")
    ap.add_argument("--skip", nargs="*", default=[], choices=["tensorboard", "mlflow"])
    args = ap.parse_args()
    tools = {
        "rlbench": (bench_rlbench, args.scalars),
        "rlbench-dict": (lambda n, tmp: bench_rlbench(n, tmp, columnar=False), args.scalars),
    }
    if "tensorboard" not in args.skip:
        tools["tensorboard"] = (bench_tensorboard, args.peer_scalars)
    if "mlflow" not in args.skip:
        tools["mlflow"] = (bench_mlflow, args.peer_scalars)
    results: dict[str, tuple[int, float, float, float, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        # one untimed round first, a tenth of the stream each: every tool's first call in a process pays
        # one-time set-up (rlbench: DuckDB's and Arrow's first write, ~0.2 s; TensorBoard: its writer thread and
        # protobuf classes), which a training process pays once, not per run; imports stay outside the timing
        for tool, (fn, n) in tools.items():
            fn(max(len(NAMES), n // 10), Path(d) / f"{tool}-warmup")
        for i in range(args.repeat):  # the tools take turns, so a slow spell of the machine hits all of them
            for tool, (fn, n) in tools.items():
                results.setdefault(tool, [])  # type: ignore[arg-type]
                results[tool].append(fn(n, Path(d) / f"{tool}{i}"))  # type: ignore[attr-defined]
    summary = {}
    for tool, runs in results.items():
        totals = sorted(t for t, _ in runs)  # type: ignore[union-attr]
        loops = sorted(lp for _, lp in runs)  # type: ignore[union-attr]
        summary[tool] = (
            tools[tool][1],
            statistics.median(totals),
            statistics.median(loops),
            totals[0],
            totals[-1],
        )
    print(f"median of {args.repeat} runs per tool (taking turns); end to end = logger calls until every row is "
          "stored and queryable; spread = fastest .. slowest end to end")  # fmt: skip
    print(f"{'tool':<13} {'scalars':>10} {'end-to-end s':>13} {'spread s':>13} {'scalars/s':>12} {'ratio':>8}   "
          f"{'in-loop us/scalar':>17} {'ratio':>8}")  # fmt: skip
    n0, t0, l0, _, _ = summary["rlbench"]
    for tool, (n, total, loop, lo, hi) in summary.items():
        ratio = "" if tool == "rlbench" else f"{(n0 / t0) / (n / total):,.1f}x"
        lratio = "" if tool == "rlbench" else f"{(loop / n) / (l0 / n0):,.0f}x"
        print(f"{tool:<13} {n:>10,} {total:>13.2f} {f'{lo:.2f}..{hi:.2f}':>13} {n / total:>12,.0f} {ratio:>8}   "
              f"{1e6 * loop / n:>17.3f} {lratio:>8}")  # fmt: skip
    if "tensorboard" in summary:
        n, total, _, _, _ = summary["tensorboard"]
        ratio = (n0 / t0) / (n / total)
        print(
            f"target: end-to-end throughput at least 100x TensorBoard's: {'met' if ratio >= 100 else 'NOT met'} "
            f"({ratio:,.0f}x; rlbench's columnar log_columns call vs TensorBoard's add_scalar)"
        )


if __name__ == "__main__":
    main()
