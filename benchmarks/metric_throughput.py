"""Metric throughput: rlbench's metric path vs TensorBoard's SummaryWriter vs MLflow's log_batch.

Each tool receives the same stream: S steps x 10 named scalars (train/loss/0 .. train/loss/9).
rlbench is timed end to end: logger calls -> Parquet shards (background flush each second) -> ingest into
DuckDB -> a COUNT(*) query that sees every row. TensorBoard: add_scalar per scalar, then close (flushes
the event file). MLflow: log_batch of 1,000 metrics at a time to a local SQLite store (MLflow 3's default backend).

    pip install -e ".[bench]"
    python benchmarks/metric_throughput.py                 # 1M scalars through rlbench, 200k through peers
    python benchmarks/metric_throughput.py --peer-scalars 1000000   # the full million through peers too (slow)

Peers are slower by orders of magnitude, so by default they get a smaller stream; every tool is compared by
throughput (scalars per second), which does not depend on the stream length for these append-only writers.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

NAMES = [f"train/loss/{i}" for i in range(10)]


def bench_rlbench(n: int, tmp: Path) -> float:
    from rlbench_cli.sink import ShardSink, list_shards
    from rlbench_cli.store import Store

    store = Store(tmp / "rlbench.duckdb")
    with store.writer() as con:  # schema creation is not part of the metric path
        store.add_runs(con, [{"run_id": "r", "suite": "bench", "algo": "a", "algo_name": "random", "env": "E",
                              "seed": 0, "config": {}}])  # fmt: skip
        store.start_attempt(con, "r", 1, {"started_at": time.time()})
    t0 = time.perf_counter()
    sink = ShardSink(tmp / "shards")
    log = sink.log_many
    for step in range(n // len(NAMES)):
        log(step, {name: 0.001 * step for name in NAMES})
    sink.close()
    with store.writer() as con:
        store.ingest_shards(con, "r", 1, list_shards(tmp / "shards"))
    with store.reader() as con:
        rows = con.execute("SELECT count(*) FROM metrics").fetchall()[0][0]
    dt = time.perf_counter() - t0
    assert rows == n, (rows, n)
    return dt


def bench_tensorboard(n: int, tmp: Path) -> float:
    from torch.utils.tensorboard import SummaryWriter

    t0 = time.perf_counter()
    w = SummaryWriter(log_dir=str(tmp / "tb"))
    add = w.add_scalar
    for step in range(n // len(NAMES)):
        for name in NAMES:
            add(name, 0.001 * step, step)
    w.close()
    return time.perf_counter() - t0


def bench_mlflow(n: int, tmp: Path) -> float:
    import logging

    import mlflow
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    tmp.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(f"sqlite:///{tmp / 'mlflow.db'}")  # MLflow 3: the file store is deprecated
    client = MlflowClient()
    exp = client.create_experiment("bench")
    run = client.create_run(exp)
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
    client.set_terminated(run.info.run_id)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scalars", type=int, default=1_000_000, help="scalars through rlbench")
    ap.add_argument("--peer-scalars", type=int, default=200_000, help="scalars through TensorBoard and MLflow")
    ap.add_argument("--skip", nargs="*", default=[], choices=["tensorboard", "mlflow"])
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        dt = bench_rlbench(args.scalars, tmp / "r")
        results["rlbench"] = (args.scalars, dt)
        if "tensorboard" not in args.skip:
            results["tensorboard"] = (args.peer_scalars, bench_tensorboard(args.peer_scalars, tmp / "t"))
        if "mlflow" not in args.skip:
            results["mlflow"] = (args.peer_scalars, bench_mlflow(args.peer_scalars, tmp / "m"))
    print(f"{'tool':<12} {'scalars':>10} {'seconds':>9} {'scalars/s':>12}  rlbench is")
    ours = args.scalars / results["rlbench"][1]
    for tool, (n, dt) in results.items():
        rate = n / dt
        ratio = "" if tool == "rlbench" else f"{ours / rate:,.0f}x faster"
        print(f"{tool:<12} {n:>10,} {dt:>9.2f} {rate:>12,.0f}  {ratio}")
    if "tensorboard" in results:
        tb_rate = results["tensorboard"][0] / results["tensorboard"][1]
        target = "met" if ours >= 100 * tb_rate else "NOT met"
        print(f"target: at least 100x TensorBoard's throughput: {target} ({ours / tb_rate:,.0f}x)")


if __name__ == "__main__":
    main()
