"""What the commands of ``rlbench`` return, called from Python: ``query`` (fetch's rows, wide rows,
scores, Parquet, --where conditions), ``bundle.export_suite``, ``sequential.compare_suite`` and
``decision_rows``, ``suite.grid.grid_shape`` (validate); and the suite schema's executor names, read from the
executor table."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlbench_cli import query
from rlbench_cli.adaptive import AdaptiveSettings, Comparison, TaskTest
from rlbench_cli.bundle import export_suite
from rlbench_cli.errors import UnknownName, UsageError
from rlbench_cli.sequential import compare_suite, decision_rows

pytestmark = pytest.mark.fast

POINTS = {0: [(1000, 10.0), (2000, 30.0)], 1: [(1000, 5.0), (2000, 25.0), (3000, 45.0)]}


@pytest.fixture(scope="module")
def store(tmp_path_factory, make_results_db):
    path = tmp_path_factory.mktemp("query") / "db.duckdb"
    runs = [(algo, "CartPole-v1", seed, POINTS[seed]) for algo in ("ppo", "dqn") for seed in (0, 1)]
    status = ["failed" if (algo, seed) == ("dqn", 1) else "finished" for algo, _, seed, _ in runs]
    store = make_results_db(path, runs, suite="q", status=status, config={"score": {"rule": "best"}})
    with store.writer() as con:
        con.execute("UPDATE runs SET config = json_object('params', json_object('lr', "
                    "CASE WHEN seed = 0 THEN 0.001 ELSE 0.0003 END))")  # fmt: skip
    return store


def test_where_matches_numbers_as_numbers_and_looks_in_params():
    config = {"params": {"learning_rate": 0.001, "net": [64, 64]}, "env_id": "CartPole-v1", "flag": True}
    assert query.matches(config, query.parse_where(["learning_rate=1e-3"]))
    assert query.matches(config, query.parse_where(["params.learning_rate=0.001", "env_id=CartPole-v1"]))
    assert query.matches(config, query.parse_where(["flag=true", "params.net=[64, 64]"]))
    assert not query.matches(config, query.parse_where(["learning_rate=0.01"]))
    assert not query.matches(config, query.parse_where(["gamma=0.99"]))
    assert query.config_value(config, "learning_rate") == 0.001
    assert query.config_value(config, "params.nope") is not None
    assert query.parse_where(["lr=0.001", "name=x"]) == [("lr", 0.001, "0.001"), ("name", "x", "x")]
    assert query.run_config('{"a": 1}') == {"a": 1} and query.run_config("not json") == {}
    with pytest.raises(UsageError, match="use KEY=VALUE"):
        query.parse_where(["learning_rate"])


def test_metric_rows_tidy_filtered_and_wide(store):
    rows = query.metric_rows(store, {"suite": "q", "algos": ["ppo"]}, ["eval/return"])
    assert rows.column_names == query.COLUMNS
    assert [(r["seed"], r["step"], r["value"]) for r in rows.to_pylist()] == [
        (0, 1000, 10.0), (0, 2000, 30.0), (1, 1000, 5.0), (1, 2000, 25.0), (1, 3000, 45.0)]  # fmt: skip
    kept = query.metric_rows(store, {"suite": "q", "statuses": ["finished"], "step_min": 2000},
                             where=query.parse_where(["lr=0.001"]))  # fmt: skip
    assert [(r["algo"], r["seed"], r["step"]) for r in kept.to_pylist()] == [
        ("dqn", 0, 2000),
        ("ppo", 0, 2000),
    ]
    wide = query.metric_rows(store, {"suite": "q", "seeds": [1], "algos": ["ppo"]}, wide_rows=True)
    assert wide.column_names == query.WIDE_KEYS + ["eval/return"]
    assert wide.column("eval/return").to_pylist() == [5.0, 25.0, 45.0]
    assert query.metric_rows(store, {"suite": "q"}, where=query.parse_where(["lr=9"])).num_rows == 0
    with pytest.raises(UnknownName, match="no suite 'nope' in .* \\(suites there: q\\)"):
        query.metric_rows(store, {"suite": "nope"})


def test_wide_keeps_the_last_value_of_a_step():
    tidy = pa.table({"run_id": ["r"] * 3, "suite": ["s"] * 3, "algo": ["a"] * 3, "env": ["e"] * 3,
                     "seed": [0] * 3, "step": [1, 1, 1], "name": ["x", "x", "y"], "value": [1.0, 2.0, math.nan]})  # fmt: skip
    out = query.wide(tidy).to_pylist()
    assert len(out) == 1 and out[0]["x"] == 2.0 and out[0]["y"] is None  # a NaN logged: a null cell


def test_scores_by_the_suites_rule_or_the_one_given(store):
    table, said = query.scores(store, {"suite": "q", "statuses": ["finished"]}, None, None, None, None)
    assert said == [] and table.column_names == [
        "run_id", "suite", "algo", "env", "seed", "status", "metric", "rule", "drop_first", "score"]  # fmt: skip
    assert [(r["algo"], r["seed"], r["rule"], r["score"]) for r in table.to_pylist()] == [
        ("dqn", 0, "best", 30.0), ("ppo", 0, "best", 30.0), ("ppo", 1, "best", 45.0)]  # fmt: skip
    first, _ = query.scores(store, {"suite": "q", "statuses": ["finished"], "algos": ["ppo"]},
                            query.parse_where(["lr=0.0003"]), "eval/return", "mean_last:2", None)  # fmt: skip
    assert [(r["seed"], r["score"]) for r in first.to_pylist()] == [(1, 35.0)]


def test_rows_to_parquet_writes_the_tidy_rows_or_nothing(store, tmp_path):
    out = tmp_path / "rows.parquet"
    assert query.rows_to_parquet(store, out, {"suite": "q", "algos": ["dqn"]}, ["eval/return"], limit=3) == 3
    assert pq.read_table(out).column_names == query.COLUMNS
    assert (
        query.rows_to_parquet(store, tmp_path / "none.parquet", {"suite": "q", "envs": ["Nope-v0"]}) is None
    )
    assert not (tmp_path / "none.parquet").exists()


def test_export_suite_counts_what_it_wrote(store, tmp_path):
    runs, rows, size = export_suite(store, "q", tmp_path / "bundle")
    assert (runs, rows) == (3, 7) and size == sum(p.stat().st_size for p in (tmp_path / "bundle").iterdir())
    with pytest.raises(UnknownName, match="'nope': no such suite in .* \\(suites: q\\)"):
        export_suite(store, "nope", tmp_path / "other")


def test_decision_rows_and_compare_suite(store):
    c = Comparison("CartPole-v1", "ppo", "dqn", "continue", None, 2, 1, 37.5, 30.0)
    assert decision_rows([TaskTest("CartPole-v1", 1, False, [c])]) == [
        {"task": "CartPole-v1", "algo_a": "ppo", "algo_b": "dqn", "decision": "continue", "look": None,
         "runs_a": 2, "runs_b": 1, "mean_a": 37.5, "mean_b": 30.0}]  # fmt: skip
    with pytest.raises(UsageError, match="--batch must be at least 2"):
        compare_suite(store, "q", AdaptiveSettings(batch=1))
    with pytest.raises(UsageError, match="no finished runs with metric 'nope' to compare"):
        compare_suite(store, "q", None, metric="nope")


def test_the_suite_schema_names_the_executor_tables_executors():
    from rlbench_cli.executors import NAMES
    from rlbench_cli.suite.models import Resources

    assert Resources(executor="slurm").executor == "slurm"
    with pytest.raises(ValueError, match=f"choose one of: {', '.join(NAMES)}"):
        Resources(executor="kubernetes")


def test_grid_shape_says_how_the_runs_make_up_the_grid():
    from pathlib import Path

    from rlbench_cli.suite.grid import expand, grid_shape
    from rlbench_cli.suite.loader import load_suite

    suites = Path(__file__).resolve().parents[2] / "suites"
    smoke, offline = load_suite(suites / "smoke.yaml"), load_suite(suites / "offline-classic.yaml")
    assert grid_shape(smoke, expand(smoke)) == "3 algorithm configs x 1 envs"
    assert (
        grid_shape(offline, expand(offline))
        == "42 (algorithm config, task) pairs of 11 configs and 6 datasets"
    )
