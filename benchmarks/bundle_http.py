"""Sharing a suite by URL: export a 1,000-run bundle, serve it over loopback HTTP, download + verify it and
import it into a fresh database; prints each phase's seconds and rows per second.

The source store is built through the Store API: ``--runs`` finished runs (default 1,000) with full manifests,
``--rows`` metric rows each (default 200: eval/return, train/loss, sys/steps_per_second, sys/rss_mb at 50
steps), wall times included. Then, timed:

1. export: ``rlbench export`` 's writer (Parquet, zstd, suite.json, bundle.json, MANIFEST.sha256, atomic rename);
2. download + verify: ``bundle.fetch`` from a ThreadingHTTPServer on 127.0.0.1 into a temporary folder, every
   file checked against MANIFEST.sha256;
3. import: reading the Parquet files and one transaction into a fresh DuckDB file;
4. the whole ``rlbench fetch --from bundle:URL`` path once more, into another fresh file (2 + 3 in one call).

The imported runs and rows are compared with the source (every runs column, every metric row).

    python benchmarks/bundle_http.py                 # 1,000 runs x 200 rows
    python benchmarks/bundle_http.py --quick         # 20 runs x 50 rows, a few seconds (the tests run this)
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from rlbench_cli import bundle
from rlbench_cli.importers import import_source
from rlbench_cli.importers.bundle_source import load
from rlbench_cli.store import Store

SUITE = "bench-share"
NAMES = ("eval/return", "train/loss", "sys/steps_per_second", "sys/rss_mb")


def build(db: Path, runs: int, rows: int, seed: int = 0) -> Store:
    """A store with ``runs`` finished runs of ``rows`` metric rows each, manifests filled in."""
    rng = np.random.default_rng(seed)
    store = Store(db)
    per_name = max(1, rows // len(NAMES))
    steps = np.arange(1, per_name + 1, dtype=np.int64) * 1000
    algos, envs = (
        ("ppo", "dqn", "sac", "td3"),
        ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "Hopper-v4", "Ant-v4"),
    )
    rows_meta, ids = [], []
    for i in range(runs):
        run_id = f"{i:016x}"
        ids.append(run_id)
        rows_meta.append({"run_id": run_id, "suite": SUITE, "algo": algos[i % 4], "algo_name": algos[i % 4],
                          "env": envs[(i // 4) % 5], "seed": i // 20, "config": {"params": {"lr": 3e-4}, "i": i}})  # fmt: skip
    n = runs * per_name * len(NAMES)
    metrics = pa.table(
        {
            "run_id": pa.array(np.repeat(np.asarray(ids, dtype=object), per_name * len(NAMES)), pa.string()),
            "step": pa.array(np.tile(steps, runs * len(NAMES))),
            "name": pa.array(
                np.tile(np.repeat(np.asarray(NAMES, dtype=object), per_name), runs), pa.string()
            ),
            "value": pa.array(rng.normal(size=n)),
            "wall_time": pa.array(1.7e9 + np.arange(n, dtype=np.float64) * 0.01),
        }
    )
    with store.writer() as con:
        store.import_runs(con, SUITE, "synthetic runs for benchmarks/bundle_http.py", rows_meta, metrics)
        con.execute(
            """UPDATE runs SET host = 'node-' || (seed % 7), device = 'cuda:0', git_commit = 'abc1234',
               git_dirty = false, python = '3.11.9', packages = ?, executor = 'local',
               job_id = run_id, started_at = now(), ended_at = now(), duration_s = 12.5 WHERE suite = ?""",
            [json.dumps({"torch": "2.13.0", "numpy": "2.1.0", "gymnasium": "1.0.0"}), SUITE],
        )
    return store


def snapshot(store: Store) -> tuple[list, list]:
    """Every runs column and every metric row of the suite, for the lossless check."""
    with store.reader() as con:
        runs = store.runs(con, SUITE)
        rows = con.execute(
            "SELECT run_id, step, name, value, wall_time FROM metrics ORDER BY run_id, name, step"
        ).fetchall()
    return runs, rows


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=200, help="metric rows per run")
    ap.add_argument("--quick", action="store_true", help="20 runs x 50 rows")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.rows = 20, 50
    with tempfile.TemporaryDirectory(prefix="rlbench-bench-share-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        src = build(root / "src.duckdb", args.runs, args.rows)
        t_build = time.perf_counter() - t
        www = root / "www"
        www.mkdir()

        t = time.perf_counter()
        with src.reader() as con:
            n_runs, n_rows = bundle.write_bundle(src, con, SUITE, www / SUITE)
        t_export = time.perf_counter() - t
        size = sum(p.stat().st_size for p in (www / SUITE).iterdir())

        server, base = serve(www)
        url = f"{base}/{SUITE}"
        try:
            dst = Store(root / "dst.duckdb")
            t = time.perf_counter()
            with bundle.fetch(url, timeout=30) as got:
                assert got.manifest
                t_download = time.perf_counter() - t
                t = time.perf_counter()
                suite, runs, metrics = load(got.folder, got.where)
                with dst.writer() as con:
                    new_runs, new_rows = dst.import_bundle(con, suite, runs, metrics, source=f"bundle:{url}")
                t_import = time.perf_counter() - t
            t = time.perf_counter()
            result = import_source(Store(root / "dst2.duckdb"), f"bundle:{url}", None)
            t_e2e = time.perf_counter() - t
        finally:
            server.shutdown()
            server.server_close()
        assert (new_runs, new_rows) == (n_runs, n_rows) == (result.new_runs, result.new_rows)
        same = snapshot(src) == snapshot(dst) == snapshot(Store(root / "dst2.duckdb"))
        assert same, "the imported runs differ from the exported ones"

    def line(what: str, seconds: float) -> str:
        return f"  {what:<34} {seconds:8.3f} s   {n_rows / seconds:12,.0f} rows/s   {n_runs / seconds:9,.0f} runs/s"

    print(f"bundle over loopback HTTP: {n_runs:,} runs x {n_rows // max(n_runs, 1)} rows = {n_rows:,} metric rows, "
          f"bundle {size / 1e6:.2f} MB (source store built in {t_build:.2f} s)")  # fmt: skip
    print(line("export (rlbench export)", t_export))
    print(line("download + verify (sha256)", t_download))
    print(line("import (one transaction)", t_import))
    print(line("fetch --from bundle:URL (2+3)", t_e2e))
    print(line("export + fetch, total", t_export + t_e2e))
    print("  lossless: every runs column and every metric row equal: yes")


if __name__ == "__main__":
    main()
