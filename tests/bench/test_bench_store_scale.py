"""benchmarks/store_scale.py runs to the end in its quick mode (a tiny store, every command timed once) and
prints a line per command, with its verdict (met / NOT met). No timing thresholds: the machine running the
tests decides those."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_store_scale_quick(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "store_scale.py"), "--quick", "--cache", str(tmp_path / "c"),
         "--json", str(tmp_path / "t.json")],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("fetch filtered", "fetch --scores", "fetch --format parquet", "leaderboard", "plot --no-curves",
                 "fetch --from d3rlpy"):  # fmt: skip
        assert any(line.startswith(name + " ") for line in proc.stdout.splitlines()), proc.stdout
    assert (tmp_path / "t.json").is_file()
    lines = {line.split("  ")[0].strip(): line for line in proc.stdout.splitlines()}
    assert all(
        "met" in line for name, line in lines.items() if name.startswith(("fetch ", "leaderboard", "plot"))
    )
    assert "targets met:" in proc.stdout, proc.stdout


def _script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("store_scale", ROOT / "benchmarks" / "store_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_d3rlpy_logs_are_laid_out_as_d3rlpy_writes_them(tmp_path: Path) -> None:
    """Every CSV d3rlpy 2.8.1 writes for the algorithm, ``epoch,step,value`` as Python prints the numbers,
    an indented params.json; the importer reads them all back."""
    from rlbench_cli.importers import d3rlpy_logs

    s = _script()
    files, rows = s.write_d3rlpy_logs(tmp_path / "logs", 20, epochs=7)
    folders = sorted((tmp_path / "logs").iterdir())
    assert len(folders) == 20 and files == sum(
        len(s.D3RLPY_LOSSES[f.name.split("_")[0]]) + 4 for f in folders
    )
    cql = next(f for f in folders if f.name.startswith("CQL_"))
    assert sorted(p.name for p in cql.iterdir()) == sorted(
        [f"{n}.csv" for n in (*s.D3RLPY_LOSSES["CQL"], *s.D3RLPY_TIMINGS, "environment")] + ["params.json"]
    )
    lines = (cql / "time_step.csv").read_text().splitlines()
    assert len(lines) == 7 and lines[2].startswith("3,3000,")
    assert repr(float(lines[2].split(",")[2])) == lines[2].split(",")[2]  # d3rlpy prints f"{value}"
    runs = d3rlpy_logs.read(tmp_path / "logs")
    assert sum(r.num_rows for r in runs) == rows and "eval/return" in runs[0].metrics


def test_store_is_written_by_many_batched_transactions(tmp_path: Path) -> None:
    """The store's runs go in as ``rlbench run`` records them: each run's rows in several shards, each shard
    in the shards table, every run finished with all its rows."""
    import duckdb

    s = _script()
    shape = s.shape_for(40, 40)
    s.build_store(tmp_path / "db.duckdb", shape)
    con = duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT status) FROM runs").fetchall() == [(40, 1)]
        assert con.execute("SELECT count(*) FROM metrics").fetchall() == [(40 * 40,)]
        shards = con.execute("SELECT count(*), min(n), max(n) FROM (SELECT run_id, count(*) n FROM shards "
                             "GROUP BY run_id)").fetchall()  # fmt: skip
        assert shards[0][0] == 40 and 3 <= shards[0][1] and shards[0][2] <= 8
        assert {r[0] for r in con.execute("SELECT DISTINCT name FROM metrics").fetchall()} == {
            name for name, _ in s.RUN_METRICS
        }
    finally:
        con.close()
