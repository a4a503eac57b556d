"""rlbench_cli.analysis on a small store written through Store: the rows, scores and score tables it returns
equal what stats computes from the same metric rows, and its errors name what is missing."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from rlbench_cli import analysis, stats
from rlbench_cli.errors import UnknownName, UsageError
from rlbench_cli.store import Store

pytestmark = pytest.mark.fast

TASKS = ["A-v0", "B-v0"]


def _store(tmp_path, values=None, config=None) -> Store:
    """Suite ``s``: algorithms ``x`` and ``y`` on two tasks, 3 seeds, 6 evaluations each (run ``x-A-v0-0``
    has a NaN); a pending run; ``x``'s runs on ``B-v0`` trained on a dataset; ``y-A-v0-*`` fine-tuned (a
    ``train/phase`` metric, 1 from step 300)."""
    runs, cols = [], {"run_id": [], "step": [], "name": [], "value": [], "wall_time": []}
    rng = np.random.default_rng(0)
    for algo in ("x", "y"):
        for task in TASKS:
            for seed in range(3):
                rid = f"{algo}-{task}-{seed}"
                dataset = {"name": "d"} if (algo, task) == ("x", "B-v0") else None
                runs.append({"run_id": rid, "suite": "s", "algo": algo, "algo_name": algo, "env": task,
                             "seed": seed, "config": {"dataset": dataset}})  # fmt: skip
                vals = rng.normal(10 if algo == "x" else 20, 3, size=6) if values is None else values(rid)
                if rid == "x-A-v0-0":
                    vals[2] = np.nan
                for i, v in enumerate(vals):
                    cols["run_id"].append(rid)
                    cols["step"].append(100 * (i + 1))
                    cols["name"].append("eval/return")
                    cols["value"].append(float(v))
                    cols["wall_time"].append(0.0)
                if algo == "y" and task == "A-v0":
                    for step in (100, 300, 500):
                        cols["run_id"].append(rid)
                        cols["step"].append(step)
                        cols["name"].append("train/phase")
                        cols["value"].append(0.0 if step < 300 else 1.0)
                        cols["wall_time"].append(0.0)
    table = pa.table(cols).select(["run_id", "step", "name", "value", "wall_time"])
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        store.register_suite(con, "s", "test", config or {}, "s.yaml")
        store.import_runs(con, "s", "test", runs, table)
        store.add_runs(con, [{"run_id": "pending", "suite": "s", "algo": "x", "algo_name": "x", "env": "A-v0",
                              "seed": 9, "config": {}}])  # fmt: skip
    return store


def _warned(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        out = fn(*args)
    return out, [str(w.message) for w in caught if issubclass(w.category, stats.StatsWarning)]


def test_load_metric_returns_the_finished_runs_rows_with_their_phase_boundary(tmp_path):
    store = _store(tmp_path)
    df, unfinished = analysis.load_metric(store, "s", "eval/return")
    assert unfinished == 1
    assert list(df.columns) == ["run_id", "algo", "env", "seed", "step", "value", "boundary"]
    assert len(df) == 12 * 6 and "pending" not in set(df["run_id"])
    assert set(df.loc[df["run_id"].str.startswith("y-A-v0"), "boundary"]) == {300.0}
    assert df.loc[~df["run_id"].str.startswith("y-A-v0"), "boundary"].isna().all()
    assert analysis.metric_rows(store, "s", "eval/return").equals(df)


@pytest.mark.parametrize(("rule", "drop_first"), [("final", 0), ("best", 1), ("mean_last:3", 0), ("auc", 2),
                                                  ("final@online", 0), ("best@offline", 0)])  # fmt: skip
def test_load_scores_equal_stats_run_scores_on_the_same_rows(tmp_path, rule, drop_first):
    store = _store(tmp_path)
    rows, _ = analysis.load_metric(store, "s", "eval/return")
    scores, unfinished = analysis.load_scores(store, "s", "eval/return", rule, drop_first)
    assert unfinished == 1
    assert list(scores.columns) == [*stats.SCORED_COLUMNS, "status"]
    expected, said = _warned(stats.run_scores, rows, rule, drop_first)
    got, said_sql = _warned(stats.per_run_scores, scores, rule, drop_first)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True))
    assert said_sql == said  # the NaN of x-A-v0-0 is dropped, both ways, outside the online phase
    assert bool(said) == (rule != "final@online")
    if rule == "final@online":  # only the fine-tuned runs have an online phase
        assert set(got["run_id"]) == {f"y-A-v0-{s}" for s in range(3)}


def test_score_table_is_rliables_runs_by_tasks_per_algorithm(tmp_path):
    store = _store(tmp_path, values=lambda rid: np.arange(6.0) + (1 if rid.startswith("y") else 0)
                   + int(rid[-1]))  # fmt: skip
    with pytest.warns(stats.StatsWarning):
        table = analysis.score_table(store, "s", rule="best", normalize="none")
    assert table.algos == ["x", "y"] and list(table.tasks) == TASKS
    assert table.scores["x"].shape == table.scores["y"].shape == (3, 2)
    # best of 0..5 + seed (+1 for y); x-A-v0-0's NaN is at step 300, not its best
    np.testing.assert_array_equal(table.scores["x"], [[5.0, 5.0], [6.0, 6.0], [7.0, 7.0]])
    np.testing.assert_array_equal(table.scores["y"], [[6.0, 6.0], [7.0, 7.0], [8.0, 8.0]])
    rows, _ = analysis.load_metric(store, "s", "eval/return")
    with pytest.warns(stats.StatsWarning):
        expected = stats.score_table(rows, rule="best", normalize="none", metric="eval/return")
    for algo in ("x", "y"):
        np.testing.assert_array_equal(table.scores[algo], expected.scores[algo])


def test_suite_scoring_and_normalize_read_the_suite_and_flags_win(tmp_path):
    block = {"references": {"A-v0": [0, 10], "B-v0": [0, 20]}}
    store = _store(tmp_path, config={"score": {"metric": "eval/return", "rule": "best", "drop_first": 1,
                                               "phase": "offline"}, "normalize": block})  # fmt: skip
    assert analysis.suite_scoring(store, "s", None, None, None) == ("eval/return", "best@offline", 1)
    assert analysis.suite_scoring(store, "s", "m", "final@all", 0) == ("m", "final", 0)
    assert analysis.suite_normalize(store, "s", "auto", "eval/return") == block
    assert analysis.suite_normalize(store, "s", "auto", "eval/success") is None
    for rate in ("eval/em", "eval/em_end", "eval/real", "eval/wm", "eval/w2r", "eval/cr"):  # on [0, 1]
        assert analysis.suite_normalize(store, "s", "auto", rate) is None
    assert analysis.suite_normalize(store, "s", "auto", "eval/emissions") == block
    assert analysis.suite_normalize(store, "s", "suite", "eval/em") == block  # asked for: as asked
    assert analysis.suite_normalize(store, "s", "d4rl") == "d4rl"
    bare = _store(tmp_path / "bare")
    assert analysis.suite_scoring(bare, "s", None, None, None) == ("eval/return", "final", 0)
    with pytest.raises(UsageError, match="no normalize block"):
        analysis.suite_normalize(bare, "s", "suite")


def test_load_suite_reads_everything_on_one_connection(tmp_path, monkeypatch):
    store = _store(tmp_path)
    opened = []
    reader = Store.reader

    def counting(self):
        opened.append(1)
        return reader(self)

    monkeypatch.setattr(Store, "reader", counting)
    data = analysis.load_suite(store, "s", rule="final", rows=False)
    assert len(opened) == 1
    assert (data.metric, data.rule, data.drop_first, data.unfinished) == ("eval/return", "final", 0, 1)
    assert data.step_kinds == {"A-v0": "online", "B-v0": "offline"}
    assert data.normalize == "auto" and len(data.frame) == 12
    rows = analysis.load_suite(store, "s", rule="final", kinds=False)
    assert rows.step_kinds == {} and len(rows.frame) == 12 * 6 and len(opened) == 2


def test_step_kinds_leave_out_tasks_whose_runs_do_not_say(tmp_path):
    store = _store(tmp_path)
    assert analysis.step_kinds(store, "s") == {"A-v0": "online", "B-v0": "offline"}


def test_score_runs_is_fetch_scores_table(tmp_path):
    store = _store(tmp_path)
    table, said = analysis.score_runs(
        store, {"suite": None, "statuses": ["finished"]}, None, "mean_last:2", 1
    )
    assert table.column_names == analysis.SCORE_COLUMNS
    rows, _ = analysis.load_metric(store, "s", "eval/return")
    expected, warned = _warned(stats.run_scores, rows, "mean_last:2", 1)
    assert (
        said
        == [f"suite 's': {w}" for w in warned]
        == ["suite 's': Dropped 1 non-finite value(s) (NaN/inf) from 1 run(s): x-A-v0-0."]
    )
    expected = expected.set_index("run_id")["score"]
    got = dict(zip(table["run_id"].to_pylist(), table["score"].to_pylist()))
    assert got == expected.to_dict()
    assert set(table["rule"].to_pylist()) == {"mean_last:2"} and set(table["drop_first"].to_pylist()) == {1}


def test_errors_name_what_is_missing(tmp_path):
    store = _store(tmp_path)
    with pytest.raises(UnknownName, match=r"no suite 'nope' .*suites there: s"):
        analysis.load_scores(store, "nope", "eval/return", "final", 0)
    with pytest.raises(UnknownName, match=r"metrics there: eval/return, train/phase"):
        analysis.load_metric(store, "s", "eval/success")
    with pytest.raises(UnknownName, match=r"metrics there: eval/return, train/phase"):
        analysis.load_scores(store, "s", "eval/success", "final", 0)
    nan = _store(tmp_path / "nan", values=lambda rid: np.full(6, math.nan))
    for load in (lambda: analysis.load_metric(nan, "s", "eval/return"),
                 lambda: analysis.load_scores(nan, "s", "eval/return", "final", 0)):  # fmt: skip
        with pytest.raises(UsageError, match="NaN or inf"):
            load()
