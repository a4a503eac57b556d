"""Querying the store: `fetch` filters (--status, --steps, --where), --wide, --scores (equal to rlbench_cli.stats'
score rules), a query that matches nothing (exit 2, no file), `rlbench sql` (read-only, writes refused), and
plain CSVs that `pandas.read_csv(path)` reads with no arguments."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from typer.testing import CliRunner

from rlbench_cli import stats
from rlbench_cli.cli.app import app
from rlbench_cli.cli.fetch import parse_steps
from rlbench_cli.errors import UsageError

runner = CliRunner()
POINTS = {0: [(1000, 10.0), (2000, 30.0), (3000, 20.0), (4000, 50.0)],
          1: [(1000, 5.0), (2000, 25.0), (3000, 45.0)],
          2: [(1000, 7.0), (2500, 9.0), (3000, 40.0), (5000, 60.0)]}  # fmt: skip


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output + r.stderr and "internal error" not in r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def db(tmp_path_factory, make_results_db) -> Path:
    path = tmp_path_factory.mktemp("query") / "db.duckdb"
    runs = [(algo, env, seed, POINTS[seed]) for algo in ("ppo", "dqn") for env in ("CartPole-v1", "Acrobot-v1")
            for seed in (0, 1, 2)]  # fmt: skip
    status = ["failed" if (algo, seed) == ("dqn", 2) else "finished" for algo, _, seed, _ in runs]
    store = make_results_db(path, runs, suite="q", status=status,
                            config={"score": {"metric": "eval/return", "rule": "best"}})  # fmt: skip
    with store.writer() as con:
        con.execute("""UPDATE runs SET config = json_object('params', json_object('learning_rate',
                       CASE WHEN seed = 0 THEN 0.001 ELSE 0.0003 END), 'algo', algo)""")  # fmt: skip
    return path


def fetch_json(*args) -> list[dict]:
    r = invoke("fetch", "--format", "json", *args)
    assert r.exit_code == 0, r.output + r.stderr
    return json.loads(r.stdout)


# -- pure helpers ------------------------------------------------------------------------------------------
def test_parse_steps():
    assert parse_steps("0:100000") == (0, 100000)
    assert parse_steps(":5_000") == (None, 5000) and parse_steps("1000:") == (1000, None)
    for bad in ("1000", "a:b", ":", "5:1", "-1:3"):
        with pytest.raises(UsageError, match="--steps"):
            parse_steps(bad)


# -- fetch filters -----------------------------------------------------------------------------------------
def test_status_steps_and_where_filters(db):
    rows = fetch_json("--db", db, "--status", "failed")
    assert {(r["algo"], r["seed"]) for r in rows} == {("dqn", 2)}
    rows = fetch_json("--db", db, "--steps", "2000:3000")
    assert {r["step"] for r in rows} == {2000, 2500, 3000}
    rows = fetch_json("--db", db, "--steps", ":1000", "--algo", "ppo")
    assert {r["step"] for r in rows} == {1000} and len(rows) == 6
    rows = fetch_json("--db", db, "--where", "learning_rate=1e-3")
    assert {r["seed"] for r in rows} == {0} and len(rows) == 16
    rows = fetch_json("--db", db, "--where", "params.learning_rate=0.0003", "--where", "algo=dqn", "--status",
                      "finished")  # fmt: skip
    assert {(r["algo"], r["seed"]) for r in rows} == {("dqn", 1)}


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--suite", "nosuch"], "no suite 'nosuch'"),
        (["--where", "learning_rate=0.5"], "no metric rows match --where 'learning_rate=0.5'"),
        (["--steps", "9000:"], "no metric rows match --steps 9000:"),
        (["--status", "running", "--algo", "ppo"], "no metric rows match --algo 'ppo' --status 'running'"),
        (["--metric", "eval/retrun"], "no metric rows match --metric 'eval/retrun'"),
    ],
)
def test_a_query_that_matches_nothing_is_exit_2_and_writes_no_file(db, tmp_path, args, needle):
    out = tmp_path / "rows.csv"
    line = one_line_error(invoke("fetch", "--db", db, *args, "--format", "csv", "-o", out))
    assert needle in line, line
    assert not out.exists()


def test_wide_pivots_metrics_into_columns_and_reads_back_with_plain_read_csv(tmp_path, make_results_db):
    path = tmp_path / "w.duckdb"
    store = make_results_db(path, [("ppo", "CartPole-v1", 0, [(1, 1.0), (2, 2.0)])], suite="w")
    make_results_db(tmp_path / "w2.duckdb", [], suite="x")
    with store.writer() as con:
        con.execute("INSERT INTO metrics SELECT run_id, step, 'train/loss', value / 10, NULL FROM metrics")
        con.execute("INSERT INTO metrics SELECT run_id, 3, 'train/loss', 'nan'::DOUBLE, NULL FROM runs")
    out = tmp_path / "wide.csv"
    r = invoke("fetch", "--db", path, "--wide", "--format", "csv", "-o", out)
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out)
    assert list(df.columns) == ["run_id", "suite", "algo", "env", "seed", "step", "eval/return", "train/loss"]
    assert df["eval/return"].tolist()[:2] == [1.0, 2.0] and df["train/loss"].tolist()[:2] == [0.1, 0.2]
    assert df["step"].tolist() == [1, 2, 3] and df.iloc[2].isna()[["eval/return", "train/loss"]].all()


def test_tidy_csv_to_stdout_is_plain(db):
    r = invoke("fetch", "--db", db, "--algo", "ppo", "--seed", "1", "--format", "csv")
    assert r.exit_code == 0
    df = pd.read_csv(io.StringIO(r.stdout))
    assert list(df.columns) == [
        "run_id",
        "suite",
        "algo",
        "env",
        "seed",
        "step",
        "name",
        "value",
        "wall_time",
    ]
    assert len(df) == 6


# -- --scores equals stats.run_scores ------------------------------------------------------------------------
def _expected(db: Path, rule: str, drop_first: int, statuses=("finished",)) -> dict[str, float]:
    con = duckdb.connect(str(db), read_only=True)
    df = con.execute(
        "SELECT m.run_id, r.algo, r.env, r.seed, m.step, m.value FROM metrics m JOIN runs r USING (run_id) "
        "WHERE m.name = 'eval/return' AND list_contains(?, r.status)", [list(statuses)]
    ).df()  # fmt: skip
    con.close()
    out = stats.run_scores(df, rule, drop_first)
    return dict(zip(out["run_id"], out["score"]))


@pytest.mark.parametrize(
    "rule, drop_first", [("final", 0), ("best", 0), ("mean_last:2", 0), ("auc", 0), ("final", 1), ("auc", 2)]
)
def test_scores_equal_the_score_rules_of_stats(db, rule, drop_first):
    rows = fetch_json("--db", db, "--scores", "--score", rule, "--drop-first", drop_first)
    got = {r["run_id"]: r["score"] for r in rows}
    assert got == pytest.approx(_expected(db, rule, drop_first), rel=1e-12)
    assert {r["rule"] for r in rows} == {rule} and {r["status"] for r in rows} == {"finished"}
    assert len(rows) == 10  # the 2 failed runs are left out unless --status says otherwise


def test_scores_use_the_suites_rule_and_honour_filters(db, tmp_path):
    rows = fetch_json(
        "--db", db, "--scores", "--status", "finished", "--status", "failed", "--steps", ":3000"
    )
    assert {r["rule"] for r in rows} == {"best"} and {r["metric"] for r in rows} == {"eval/return"}
    assert len(rows) == 12
    assert {r["run_id"]: r["score"] for r in rows}["q-ppo-CartPole-v1-2"] == 40.0  # best up to step 3000
    out = tmp_path / "scores.csv"
    assert invoke("fetch", "--db", db, "--scores", "--format", "csv", "-o", out).exit_code == 0
    df = pd.read_csv(out)
    assert list(df.columns) == ["run_id", "suite", "algo", "env", "seed", "status", "metric", "rule", "drop_first",
                                "score"]  # fmt: skip


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--scores", "--wide"], "--wide and --scores are two different shapes"),
        (["--score", "best"], "add --scores"),
        (["--scores", "--score", "median"], "--score 'median'"),
        (["--scores", "--metric", "a", "--metric", "b"], "give --metric once"),
        (["--steps", "5:1"], "the first step is after the last"),
        (["--where", "x"], "use KEY=VALUE"),
    ],
)
def test_bad_query_flags(db, args, needle):
    assert needle in one_line_error(invoke("fetch", "--db", db, *args))


# -- rlbench sql -----------------------------------------------------------------------------------------------
def _counts(db: Path):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [
            con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("suites", "runs", "metrics")
        ]
    finally:
        con.close()


def test_sql_reads_and_exports(db, tmp_path):
    r = invoke("sql", "SELECT algo, count(*) AS n FROM runs GROUP BY algo ORDER BY algo", "--db", db)
    assert r.exit_code == 0, r.output
    assert r.stdout.split() == ["algo", "n", "dqn", "6", "ppo", "6"]
    r = invoke(
        "sql", "SELECT status, count(*) AS n FROM runs GROUP BY ALL ORDER BY 1", "--db", db, "-f", "json"
    )
    assert json.loads(r.stdout) == [{"status": "failed", "n": 2}, {"status": "finished", "n": 10}]
    out = tmp_path / "runs.csv"
    r = invoke("sql", "FROM runs ORDER BY run_id", "--db", db, "--format", "csv", "-o", out)
    assert r.exit_code == 0 and len(pd.read_csv(out)) == 12
    out = tmp_path / "m.parquet"
    r = invoke("sql", "SELECT * FROM metrics", "--db", db, "--format", "parquet", "-o", out)
    assert r.exit_code == 0 and pd.read_parquet(out).shape[0] == _counts(db)[2]
    r = invoke("sql", "DESCRIBE runs", "--db", db)
    assert r.exit_code == 0 and "run_id" in r.stdout


@pytest.mark.parametrize(
    "query, needle",
    [
        ("DELETE FROM runs", "DELETE statements are refused"),
        ("DROP TABLE metrics", "DROP statements are refused"),
        ("CREATE TABLE x AS SELECT 1", "CREATE statements are refused"),
        ("UPDATE runs SET status = 'x'", "UPDATE statements are refused"),
        ("COPY (SELECT * FROM runs) TO '{tmp}/leak.csv'", "COPY statements are refused"),
        ("EXPORT DATABASE '{tmp}/dump'", "EXPORT statements are refused"),
        ("ATTACH '{tmp}/other.duckdb' AS o", "ATTACH statements are refused"),
        ("INSTALL httpfs", "LOAD statements are refused"),
        ("SET threads = 1", "SET statements are refused"),
        ("PRAGMA enable_profiling", "PRAGMA statements are refused"),
        ("SELECT 1; DELETE FROM runs", "2 statements; rlbench sql runs one query at a time"),
        ("", "no statement to run"),
        ("SELEC 1", "sql: Parser Error"),
        ("SELECT * FROM nosuch", "sql: Catalog Error"),
    ],
)
def test_sql_refuses_anything_but_one_read(db, tmp_path, query, needle):
    before = _counts(db)
    line = one_line_error(invoke("sql", query.format(tmp=tmp_path), "--db", db))
    assert needle in line, line
    assert _counts(db) == before
    assert not (tmp_path / "leak.csv").exists() and not (tmp_path / "dump").exists()
    assert not (tmp_path / "other.duckdb").exists()


def test_sql_needs_a_database(tmp_path):
    line = one_line_error(invoke("sql", "SELECT 1", "--db", tmp_path / "none.duckdb"))
    assert "no results database here" in line
    assert not (tmp_path / "none.duckdb").exists()


# -- leaderboard CSV is plain --------------------------------------------------------------------------------
def test_leaderboard_csv_is_plain_with_a_sidecar(db, tmp_path):
    out = tmp_path / "board.csv"
    r = invoke("leaderboard", "q", "--db", db, "--format", "csv", "-o", out, "--reps", "200")
    assert r.exit_code == 0, r.output + r.stderr
    df = pd.read_csv(out)
    assert list(df.columns)[:3] == ["rank", "algo", "iqm"] and len(df) == 2
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["suite"] == "q" and meta["score_rule"] == "best" and meta["header"][0] == "Suite: q"
    r = invoke("leaderboard", "q", "--db", db, "--format", "csv", "--per-task")
    assert r.exit_code == 0
    assert pd.read_csv(io.StringIO(r.stdout)).columns[0] == "algo"
    assert "# Suite: q" in r.stderr and "#" not in r.stdout


def test_the_text_table_shows_wall_time_as_a_utc_time_and_json_keeps_the_number(db):
    import datetime as dt
    import re

    r = invoke("fetch", "--db", db, "--suite", "q", "--algo", "ppo", "--metric", "eval/return")
    assert r.exit_code == 0, r.output + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[-1] == "wall_time"
    shown = [ln.split("  ")[-1].strip() for ln in lines[1:]]
    assert shown and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", s) for s in shown), shown
    raw = fetch_json("--db", db, "--suite", "q", "--algo", "ppo", "--metric", "eval/return")
    first = dt.datetime.fromtimestamp(raw[0]["wall_time"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert isinstance(raw[0]["wall_time"], float) and first[:-3] in shown
    from rlbench_cli.cli.output import cell

    assert cell(12.5, "wall_time") == "12.5" and cell(1.7957e9, "value") == "1.7957e+09"  # not a Unix time
