"""`rlbench fetch --scores` never imports pandas (a third of the command's time on 10,000 runs): the per-run
checks run in numpy (``scoring.finish_order``) and the output table is built in Arrow. Its CSV equals the
scores ``stats.run_scores`` computes from the metric rows with pandas."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rlbench_cli.store import Store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("light") / "db.duckdb"
    rng = np.random.default_rng(0)
    runs, cols = [], {"run_id": [], "step": [], "name": [], "value": [], "wall_time": []}
    for a in range(2):
        for t in range(3):
            for s in range(3):
                rid = f"r{a}{t}{s}"
                runs.append({"run_id": rid, "suite": "light", "algo": f"algo{a}", "algo_name": "x",
                             "env": f"Task{t}-v0", "seed": s, "config": {}})  # fmt: skip
                n = 5
                values = rng.normal(10 * a, 3, size=n)
                if rid == "r011":
                    values[2] = np.nan  # a non-finite value: a warning, the run kept
                cols["run_id"] += [rid] * n
                cols["step"] += list(range(100, 100 * (n + 1), 100))
                cols["name"] += ["eval/return"] * n
                cols["value"] += values.tolist()
                cols["wall_time"] += [0.0] * n
    table = pa.table(cols).select(["run_id", "step", "name", "value", "wall_time"])
    store = Store(path)
    with store.writer() as con:
        store.import_runs(con, "light", "test", runs, table)
    return path


def _rlbench(*argv: str) -> subprocess.CompletedProcess:
    """``rlbench ARGV`` in a fresh interpreter, which says on stderr whether it imported pandas."""
    code = (
        "import sys\nfrom rlbench_cli.cli.app import main\n"
        f"sys.argv = ['rlbench', *{list(argv)!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('PANDAS' if 'pandas' in sys.modules else 'NO-PANDAS', file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_fetch_scores_without_pandas(db: Path) -> None:
    proc = _rlbench("fetch", "--db", str(db), "--scores", "--score", "mean_last:2", "--format", "csv")
    assert "NO-PANDAS" in proc.stderr, proc.stderr
    assert "Dropped 1 non-finite value(s) (NaN/inf) from 1 run(s): r011" in proc.stderr

    import pandas as pd

    from rlbench_cli import stats

    got = pd.read_csv(io.StringIO(proc.stdout), float_precision="round_trip")
    assert list(got.columns) == ["run_id", "suite", "algo", "env", "seed", "status", "metric", "rule",
                                 "drop_first", "score"]  # fmt: skip
    store = Store(db)
    with store.reader() as con:
        rows = store.query_metrics(con, suite="light", metrics=["eval/return"]).to_pandas()
    want = stats.run_scores(rows[["run_id", "algo", "env", "seed", "step", "value"]], "mean_last:2")
    assert got["run_id"].tolist() == want["run_id"].tolist()
    np.testing.assert_array_equal(got["score"].to_numpy(), want["score"].to_numpy())
    assert set(got["rule"]) == {"mean_last:2"} and set(got["suite"]) == {"light"}


def test_fetch_from_d3rlpy_without_pandas(tmp_path: Path) -> None:
    """``fetch --from d3rlpy:`` reads the CSVs in bulk into numpy and builds its Arrow tables from buffers:
    pandas is never imported (0.3-0.8 s of the command), and the rows are the CSVs' numbers."""
    run = tmp_path / "logs" / "CQL_hopper-medium-v2_0_20220101000000"
    run.mkdir(parents=True)
    (run / "params.json").write_text('{"gamma": 0.99}')
    (run / "environment.csv").write_text("1,1000,10.5\n2,2000,20.25\n")
    (run / "loss.csv").write_text("1,1000,0.1\n2,2000,0.30000000000000004")
    db = tmp_path / "db.duckdb"
    proc = _rlbench("fetch", "--from", f"d3rlpy:{tmp_path / 'logs'}", "--into", "d4rl", "--db", str(db))
    assert "NO-PANDAS" in proc.stderr, proc.stderr
    with Store(db).reader() as con:
        rows = con.execute("SELECT name, step, value FROM metrics ORDER BY name, step").fetchall()
        runs = con.execute("SELECT algo, env, seed, status FROM runs").fetchall()
    assert rows == [("eval/return", 1000, 10.5), ("eval/return", 2000, 20.25), ("loss", 1000, 0.1),
                    ("loss", 2000, 0.30000000000000004)]  # fmt: skip
    assert runs == [("CQL", "hopper-medium-v2", 0, "finished")]
