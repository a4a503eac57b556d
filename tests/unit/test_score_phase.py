"""Score phases of offline-to-online runs (``score: {phase: offline|online}``): the SQL twin
(``Store.run_scores(phase=...)``) equals ``stats.run_scores`` with ``@offline`` / ``@online`` bit for bit, and
the phase is stored with the suite's score settings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from test_sql_scores import RULES, _caught

from rlbench_cli import stats
from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.store import Store
from rlbench_cli.suite.loader import parse_suite


def _store(tmp_path, seed: int = 1) -> tuple[Store, dict[str, int]]:
    """2 algorithms x 2 tasks x 3 seeds; two thirds of the runs fine-tuned (train/phase 0 at step 0, 1 at a
    boundary that is, or is not, an evaluation step), the rest offline only; some values NaN."""
    rng = np.random.default_rng(seed)
    runs, cols, bounds = [], {"run_id": [], "step": [], "name": [], "value": [], "wall_time": []}, {}
    for a in range(2):
        for t in range(2):
            for s in range(3):
                rid = f"r{a}{t}{s}"
                runs.append({"run_id": rid, "suite": "s", "algo": f"algo{a}", "algo_name": "x",
                             "env": f"Task{t}-v0", "seed": s, "config": {}})  # fmt: skip
                steps = np.arange(0, 2000, 100) + (rng.integers(0, 3) if s == 2 else 0)
                values = rng.normal(100 * a, 50, size=len(steps)) + np.where(steps > 1000, 300.0, 0.0)
                if rng.random() < 0.3:
                    values[rng.integers(0, len(steps))] = np.nan
                rows = [("eval/return", int(st), float(v)) for st, v in zip(steps, values)]
                if s < 2:  # fine-tuned: its phase boundary
                    b = 1000 if s == 0 else 1050
                    bounds[rid] = b
                    rows += [("train/phase", 0, 0.0), ("train/phase", b, 1.0), ("train/phase", b + 5, 1.0)]
                for name, st, v in rows:
                    cols["run_id"].append(rid)
                    cols["step"].append(st)
                    cols["name"].append(name)
                    cols["value"].append(v)
                    cols["wall_time"].append(0.0)
    table = pa.table(cols).select(["run_id", "step", "name", "value", "wall_time"])
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        store.import_runs(con, "s", "test", runs, table)
    return store, bounds


@pytest.fixture(scope="module")
def phased(tmp_path_factory) -> tuple[Store, dict[str, int]]:
    return _store(tmp_path_factory.mktemp("db"))


def _rows(store: Store) -> pd.DataFrame:
    with store.reader() as con:
        table = store.query_metrics(con, suite="s", metrics=["eval/return"], statuses=["finished"])
        bounds = store.phase_boundaries(con, "s")
    df = table.to_pandas()[["run_id", "algo", "env", "seed", "step", "value"]]
    return df.assign(boundary=df["run_id"].map(bounds).astype(float))


def _sql(store: Store, rule: str, drop_first: int) -> pd.DataFrame:
    name, n = stats.parse_rule(rule)
    with store.reader() as con:
        return store.run_scores(con, suite="s", metric="eval/return", rule=name, n=n, drop_first=drop_first,
                                phase=stats.rule_phase(rule)[1]).to_pandas()  # fmt: skip


@pytest.mark.parametrize("phase", ["offline", "online"])
@pytest.mark.parametrize("rule", RULES)
def test_phase_scores_in_sql_equal_python(phased, rule, phase):
    store, _ = phased
    drop_first = 2  # evaluations are numbered within the phase, on both sides
    rule = f"{rule}@{phase}"
    ref, ref_warn = _caught(lambda: stats.run_scores(_rows(store), rule, drop_first))
    got, got_warn = _caught(lambda: stats.finish_run_scores(_sql(store, rule, drop_first), rule, drop_first))
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
    assert got_warn == ref_warn


def test_phases_split_each_run_at_its_boundary(phased):
    store, bounds = phased
    rows = _rows(store)
    with store.reader() as con:
        assert store.phase_boundaries(con, "s") == bounds
    final = stats.run_scores(rows, "final").set_index("run_id")["score"]
    online = stats.run_scores(rows, "final@online").set_index("run_id")["score"]
    offline = stats.run_scores(rows, "final@offline").set_index("run_id")["score"]
    assert set(online.index) == set(bounds)  # runs without an online phase are left out of it
    assert set(offline.index) == set(final.index)  # ... and scored whole in the offline one
    for rid, b in bounds.items():
        run = rows.loc[(rows["run_id"] == rid) & rows["value"].notna()].sort_values("step")
        assert offline[rid] == run.loc[run["step"] <= b, "value"].iloc[-1]
        assert online[rid] == final[rid] == run["value"].iloc[-1]
    best_on = stats.run_scores(rows, "best@online").set_index("run_id")["score"]
    assert (
        best_on > stats.run_scores(rows, "best@offline").set_index("run_id")["score"][best_on.index]
    ).all()


def test_online_phase_of_runs_never_fine_tuned_is_an_error(phased):
    store, bounds = phased
    rows = _rows(store)
    plain = rows.loc[~rows["run_id"].isin(bounds)].drop(columns="boundary")
    with pytest.raises(
        stats.StatsError, match="No evaluation points in the online phase: no run has an online"
    ):
        stats.run_scores(plain, "final@online")
    pd.testing.assert_frame_equal(stats.run_scores(plain, "final@offline"), stats.run_scores(plain, "final"))


def test_phase_is_a_score_setting_validated_at_load():
    suite = {
        "name": "p",
        "datasets": ["Pendulum-v1-medium"],
        "algorithms": [{"name": "iql", "finetune": {"steps": 10}}],
    }
    s = parse_suite({**suite, "score": {"phase": "online"}}, "p.yaml")
    assert s.score.model_dump()["phase"] == "online"
    with pytest.raises(
        SuiteInvalid, match=r"^p.yaml: field '\(top level\)': score.phase is online but no algorithm has an"
    ):
        parse_suite({**suite, "algorithms": ["iql"], "score": {"phase": "online"}}, "p.yaml")
    with pytest.raises(SuiteInvalid) as e:
        parse_suite({**suite, "score": {"phase": "later"}}, "p.yaml")
    assert str(e.value) == (
        "p.yaml: field 'score.phase': phase must be offline or online, or left out to score whole runs (got 'later')"
    )
