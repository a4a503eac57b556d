"""A score against a config key (``rlbench plot --x``): the intervals against a direct rliable computation on
the same data, the x axis's order and scale, and which keys make the legend."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from rlbench_cli import stats
from rlbench_cli.errors import UsageError

pytestmark = pytest.mark.fast


def _runs(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for env in ("MazeFO", "MazePO"):
        for legend in ("bc", "ilql"):
            for x in ("1e-4", "1e-3", "0.01"):
                for s in range(5 if legend == "bc" else 4):
                    rows.append((env, legend, x, s, float(rng.normal(float(x) * 30, 0.3))))
    return pd.DataFrame(rows, columns=["env", "legend", "x", "seed", "score"])


@pytest.mark.parametrize("stat", ["iqm", "mean"])
def test_key_intervals_equal_rliable_on_the_same_cells(stat):
    rly = pytest.importorskip("rliable.library")
    metrics = pytest.importorskip("rliable.metrics")
    runs = _runs()
    ours = stats.key_intervals(runs, stat=stat, reps=2000, seed=np.random.RandomState(7))
    assert list(ours["x"][:3]) == ["1e-4", "1e-3", "0.01"] and list(ours["position"][:3]) == [
        1e-4,
        1e-3,
        0.01,
    ]
    cells = {f"{r.env}|{r.legend}|{r.x}": runs.loc[(runs.env == r.env) & (runs.legend == r.legend)
                                                  & (runs.x == r.x), "score"].to_numpy()[:, None]
             for r in ours.itertuples()}  # fmt: skip
    func = metrics.aggregate_iqm if stat == "iqm" else metrics.aggregate_mean
    state = np.random.get_state()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.random.seed(7)
            point, interval = rly.get_interval_estimates(cells, lambda s: np.array([func(s)]), reps=2000)
    finally:
        np.random.set_state(state)
    for r, name in zip(ours.itertuples(), cells):
        assert r.estimate == pytest.approx(point[name][0], rel=1e-12)
        assert (r.lower, r.upper) == pytest.approx(tuple(interval[name][:, 0]), rel=1e-9, abs=1e-12)
        assert r.runs == len(cells[name])


def test_key_intervals_are_seeded_per_cell():
    runs = _runs()
    first = stats.key_intervals(runs, reps=500, seed=3)
    again = stats.key_intervals(runs, reps=500, seed=3)
    pd.testing.assert_frame_equal(first, again)
    # a cell's interval depends on its own runs only: without the other task it stays the same
    alone = stats.key_intervals(runs.loc[runs["env"] == "MazeFO"], reps=500, seed=3)
    pd.testing.assert_frame_equal(alone, first.loc[first["env"] == "MazeFO"].reset_index(drop=True))
    assert not stats.key_intervals(runs, reps=500, seed=4)["lower"].equals(first["lower"])
    with pytest.raises(stats.StatsError, match="stat 'median'"):
        stats.key_intervals(runs, stat="median")


def test_x_axis_orders_numbers_by_value_and_takes_a_log_scale_from_two_decades():
    axis = stats.x_axis(["64", "8", "32", "16"])
    assert axis.values == ["8", "16", "32", "64"] and axis.numeric and not axis.log  # 0.9 decades
    axis = stats.x_axis(["800", "8", "80"])
    assert axis.positions == [8.0, 80.0, 800.0] and axis.log  # exactly 2 decades
    assert not stats.x_axis(["10", "900"]).log  # 1.95 decades
    assert stats.x_axis(["0.0003", "0.03", "0.001"]).values == ["0.0003", "0.001", "0.03"]
    assert not stats.x_axis(["0", "10", "1000"]).log  # zero has no place on a log axis
    assert not stats.x_axis(["-1", "100"]).log


def test_x_axis_is_crowded_when_two_neighbours_are_too_close_for_a_label_each():
    sizes = stats.x_axis(["50112", "50880", "100096", "101696"])  # logged parameter counts
    assert sizes.numeric and not sizes.log and sizes.crowded  # 768 apart in a span of 51,584: 1.5%
    assert not stats.x_axis(["8", "16", "32", "64"]).crowded  # 8 apart in 56: 14%
    assert not stats.x_axis(["100", "101"]).crowded  # two values: a label each
    assert stats.x_axis(["1", "1.1", "1000"]).log and stats.x_axis(["1", "1.1", "1000"]).crowded
    assert not stats.x_axis(["1", "10", "100", "1000"]).crowded  # even on the log scale
    assert not stats.x_axis(["a", "b", "c"]).crowded


def test_x_axis_keeps_categories_in_natural_order():
    axis = stats.x_axis(["w16", "w8", "large", "w128"])
    assert axis.values == ["large", "w8", "w16", "w128"] and not axis.numeric
    assert axis.positions == [0.0, 1.0, 2.0, 3.0]
    assert not stats.x_axis(["true", "false"]).numeric  # booleans are categories
    assert stats.x_axis(["1", "two"]).values == ["1", "two"]
    assert stats.natural_order(["n_layer=10", "n_layer=2", "n_layer=2"]) == ["n_layer=2", "n_layer=10"]


def _sweep_db(tmp_path, make_results_db):
    runs = []
    for env in ("CartPole-v1", "Acrobot-v1"):
        for layers in (1, 2, 4):
            for width in (32, 64):
                for seed in range(3):
                    cfg = {"params": {"n_layer": layers, "n_embd": width}, "env_id": env, "seed": seed}
                    runs.append((f"wm[n_layer={layers},n_embd={width}]", env, seed,
                                 [(100, layers * 10.0 + width / 32 + seed)], cfg))  # fmt: skip
        for seed in range(3):  # an algorithm without the keys
            runs.append(("random", env, seed, [(100, 1.0)], {"env_id": env, "seed": seed}))
    return make_results_db(tmp_path / "db.duckdb", runs, suite="sw")


def test_key_scores_legend_is_the_other_key_that_varies(tmp_path, make_results_db):
    from rlbench_cli import analysis

    store = _sweep_db(tmp_path, make_results_db)
    scored = analysis.key_scores(store, "sw", "config.params.n_layer", normalize="none")
    assert scored.key == "params.n_layer" and scored.legend_keys == ["params.n_embd"]
    assert scored.left_out == {"random": 6}
    assert sorted(scored.runs["legend"].unique()) == ["n_embd=32", "n_embd=64"]
    assert len(scored.runs) == 36 and set(scored.runs["x"]) == {"1", "2", "4"}
    points = stats.key_intervals(scored.runs, reps=200, seed=0)
    assert len(points) == 2 * 2 * 3 and (points["runs"] == 3).all()
    row = points.loc[
        (points["env"] == "Acrobot-v1") & (points["legend"] == "n_embd=64") & (points["x"] == "4")
    ]
    assert row["estimate"].item() == pytest.approx(40 + 2 + 1)  # mean of seeds 0..2 (the IQM of 3)


def test_key_scores_refuses_a_missing_or_constant_key_naming_the_keys_that_vary(tmp_path, make_results_db):
    from rlbench_cli import analysis

    store = _sweep_db(tmp_path, make_results_db)
    with pytest.raises(UsageError) as e:
        analysis.key_scores(store, "sw", "params.lr")
    assert str(e.value) == (
        "--x 'params.lr': no run of suite 'sw' has this config key (nor logs it as a metric); the keys that vary "
        "there: params.n_embd, params.n_layer"
    )
    make_results_db(tmp_path / "one.duckdb", [("a", "CartPole-v1", s, [(1, 1.0)], {"params": {"lr": 0.1},
                    "x": s}) for s in range(2)], suite="one")  # fmt: skip
    with pytest.raises(UsageError, match="every run of suite 'one' has the value 0.1, so there is nothing"):
        analysis.key_scores(Store_of(tmp_path / "one.duckdb"), "one", "params.lr")


def test_an_entry_with_one_value_of_the_key_is_left_out_and_missing_keys_stay_out_of_its_legend(
    tmp_path, make_results_db
):
    from rlbench_cli import analysis

    runs = []
    for seed in range(3):
        for eps in (8, 80):
            runs.append((f"data[train_episodes={eps}]", "MazeFO", seed, [(1, eps / 100)],
                         {"params": {"n_layer": 2, "train_episodes": eps}}))  # fmt: skip
        for layers in (1, 2):
            runs.append((f"size[n_layer={layers}]", "MazeFO", seed, [(1, layers / 10)],
                         {"params": {"n_layer": layers}}))  # fmt: skip
    store = make_results_db(tmp_path / "db.duckdb", runs, suite="two")
    by_layers = analysis.key_scores(store, "two", "params.n_layer", normalize="none")
    assert by_layers.single == {"data": ["2"]} and by_layers.legend_keys == []
    assert set(by_layers.runs["legend"]) == {"size"} and len(by_layers.runs) == 6
    by_data = analysis.key_scores(store, "two", "params.train_episodes", normalize="none")
    assert by_data.left_out == {"size[n_layer=1]": 3, "size[n_layer=2]": 3}
    assert set(by_data.runs["legend"]) == {"data"}


def test_setting_keys_leave_out_the_task_the_seed_and_names_no_key_can_take():
    from rlbench_cli.analysis import setting_keys

    varying = ["budget.steps", "data_mix", "env_kwargs.size", "params.lr", "params.net arch", "params.seed"]
    assert setting_keys(varying) == ["budget.steps", "params.lr"]


def Store_of(path):  # noqa: N802 - reads like the class it opens
    from rlbench_cli.store import Store

    return Store(path)


def test_a_logged_x_leaves_out_runs_without_it_and_needs_a_finished_run(tmp_path, make_results_db):
    from rlbench_cli import analysis

    runs = [(f"wm[n_layer={n}]", "MazeFO", s, {"eval/em": [(10, n / 10 + s / 100)], "model/size": [(0, 1000.0 * n)]},
             {"params": {"n_layer": n}, "seed": s}) for n in (1, 2) for s in range(3)]  # fmt: skip
    runs += [("bc", "MazeFO", s, {"eval/em": [(10, 0.5)]}, {"seed": s}) for s in range(3)]  # logs no size
    store = make_results_db(tmp_path / "db.duckdb", runs, suite="lg")
    scored = analysis.key_scores(store, "lg", "model/size", metric="eval/em", normalize="none")
    assert sorted(set(scored.runs["x"])) == ["1000", "2000"] and scored.left_out == {"bc": 3}
    assert scored.legend_keys == [] and set(scored.runs["legend"]) == {"wm"}
    status = ["running" if r[0].startswith("wm") else "finished" for r in runs]
    store = make_results_db(tmp_path / "running.duckdb", runs, suite="lg", status=status)
    with pytest.raises(
        UsageError, match=r"--x 'model/size': no finished run of suite 'lg' logged this metric yet"
    ):
        analysis.key_scores(store, "lg", "model/size", metric="eval/em", normalize="none")
