"""Score rules applied in SQL (``Store.run_scores`` + ``stats.finish_run_scores``) equal ``stats.run_scores``
bit for bit, with the same warnings and errors, on ragged runs with NaN / inf / NULL values."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from rlbench_cli import stats
from rlbench_cli.store import Store

RULES = ["final", "best", "mean_last:1", "mean_last:3", "mean_last:50", "auc"]


def _store(tmp_path, seed: int = 0, bad: bool = True) -> Store:
    """A suite of 3 algorithms x 4 tasks x 3 seeds, runs of 1 to 40 evaluations at irregular steps, some
    values NaN / inf / NULL (one run entirely non-finite), another metric and an unfinished suite beside."""
    rng = np.random.default_rng(seed)
    runs, cols = [], {"run_id": [], "step": [], "name": [], "value": [], "wall_time": []}
    for a in range(3):
        for t in range(4):
            for s in range(3):
                rid = f"r{a}{t}{s}"
                runs.append({"run_id": rid, "suite": "s", "algo": f"algo{a}", "algo_name": "x",
                             "env": f"Task{t}-v0", "seed": s, "config": {}})  # fmt: skip
                n = int(rng.integers(1, 40))
                steps = np.sort(rng.choice(100_000, size=n, replace=False))
                values = rng.normal(100 * a, 50, size=n) * 10.0 ** rng.integers(-3, 6)
                if bad and rng.random() < 0.3:
                    values[rng.integers(0, n, size=max(1, n // 5))] = rng.choice([np.nan, np.inf, -np.inf])
                if bad and rid == "r121":
                    values[:] = np.nan
                order = rng.permutation(n)  # stored in any order
                for name, vals in (("eval/return", values), ("train/loss", -values)):
                    cols["run_id"] += [rid] * n
                    cols["step"] += steps[order].tolist()
                    cols["name"] += [name] * n
                    cols["value"] += vals[order].tolist()
                    cols["wall_time"] += [0.0] * n
    value = pa.array(cols["value"], pa.float64())
    if bad:  # a NULL value too
        mask = np.zeros(len(cols["value"]), bool)
        mask[5] = True
        value = pa.array(cols["value"], pa.float64(), mask=mask)
    table = pa.table({**{k: v for k, v in cols.items() if k != "value"}, "value": value})
    table = table.select(["run_id", "step", "name", "value", "wall_time"])
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        store.import_runs(con, "s", "test", runs, table)
    return store


def _rows(store: Store) -> pd.DataFrame:
    with store.reader() as con:
        table = store.query_metrics(con, suite="s", metrics=["eval/return"], statuses=["finished"])
    return table.to_pandas()[["run_id", "algo", "env", "seed", "step", "value"]]


def _sql(store: Store, rule: str, drop_first: int, envs=()) -> pd.DataFrame:
    name, n = stats.parse_rule(rule)
    with store.reader() as con:
        return store.run_scores(con, suite="s", metric="eval/return", rule=name, n=n, drop_first=drop_first,
                                envs=envs).to_pandas()  # fmt: skip


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        out = fn()
    return out, [str(w.message) for w in caught if issubclass(w.category, stats.StatsWarning)]


@pytest.mark.parametrize("bad", [True, False])
@pytest.mark.parametrize("drop_first", [0, 1, 5])
@pytest.mark.parametrize("rule", RULES)
def test_sql_scores_equal_run_scores_bitwise(tmp_path, rule, drop_first, bad):
    store = _store(tmp_path, bad=bad)
    ref, ref_warn = _caught(lambda: stats.run_scores(_rows(store), rule, drop_first))
    got, got_warn = _caught(lambda: stats.finish_run_scores(_sql(store, rule, drop_first), rule, drop_first))
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
    assert np.array_equal(got["score"].to_numpy(), ref["score"].to_numpy())  # bitwise, NaN-free
    assert got_warn == ref_warn
    if bad:
        assert any("non-finite" in w for w in got_warn)


@pytest.mark.parametrize("rule", RULES)
def test_score_table_from_sql_scores_equals_rows(tmp_path, rule):
    store = _store(tmp_path, bad=False)
    ref = stats.score_table(_rows(store), rule=rule, drop_first=1, normalize=None)
    got = stats.score_table(_sql(store, rule, 1), rule=rule, drop_first=1, normalize=None)
    assert got.algos == ref.algos and got.tasks == ref.tasks and got.seeds == ref.seeds
    for algo in ref.algos:
        assert np.array_equal(got.scores[algo], ref.scores[algo])
    pd.testing.assert_frame_equal(got.per_run, ref.per_run, check_exact=True)


def test_sql_scores_errors_match(tmp_path):
    store = _store(tmp_path, bad=False)
    for call in (lambda: stats.run_scores(_rows(store), "final", 100),
                 lambda: stats.finish_run_scores(_sql(store, "final", 100), "final", 100)):  # fmt: skip
        with pytest.raises(stats.StatsError, match="No evaluation points left after drop_first=100"):
            _caught(call)
    empty = _sql(store, "final", 0, envs=["nope"])
    with pytest.raises(stats.StatsError, match="Metric table is empty"):
        stats.finish_run_scores(empty, "final", 0)
    assert stats.is_scored(_sql(store, "best", 0)) and not stats.is_scored(_rows(store))


def test_sql_scores_filter_tasks(tmp_path):
    store = _store(tmp_path)
    got, _ = _caught(lambda: stats.finish_run_scores(_sql(store, "auc", 0, envs=["Task1-v0"]), "auc"))
    rows = _rows(store)
    ref, _ = _caught(lambda: stats.run_scores(rows.loc[rows["env"] == "Task1-v0"], "auc"))
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
