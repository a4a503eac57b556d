"""Score rules, normalisation and the rliable statistics of rlbench_cli.stats."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlbench_cli import stats
from rlbench_cli.errors import UsageError
from rlbench_cli.stats import StatsError, StatsWarning, curves
from rlbench_cli.stats.scores import _clean

CARTPOLE = stats.REFERENCES["classic-control"]["CartPole-v1"]
ACROBOT = stats.REFERENCES["classic-control"]["Acrobot-v1"]
COLS = ["run_id", "algo", "env", "seed", "step", "value"]


def synthetic(
    algos: tuple[str, ...] = ("dqn", "ppo", "random"),
    envs: tuple[str, ...] = ("Acrobot-v1", "CartPole-v1"),
    seeds: tuple[int, ...] = (0, 1, 2),
    points: int = 11,
    noise: float = 0.05,
    seed: int = 0,
) -> pd.DataFrame:
    """Learning curves that rise to a per-algorithm final fraction of the reference, plus noise."""
    rng = np.random.default_rng(seed)
    finals = {"dqn": 0.9, "ppo": 0.6, "random": 0.02}
    rows = []
    for algo in algos:
        final = finals.get(algo, 0.5)
        for env in envs:
            low, high = stats.REFERENCES["classic-control"][env]
            for s in seeds:
                for k in range(points):
                    frac = final * (1 - np.exp(-3.0 * k / (points - 1))) / (1 - np.exp(-3.0))
                    frac += rng.normal(0.0, noise)
                    rows.append((f"{algo}/{env}/{s}", algo, env, s, k * 5000, low + frac * (high - low)))
    return pd.DataFrame(rows, columns=COLS)


def hand_runs() -> pd.DataFrame:
    rows = [
        # run a: rows out of step order on purpose
        ("a", "x", "CartPole-v1", 0, 20, 2.0),
        ("a", "x", "CartPole-v1", 0, 0, 1.0),
        ("a", "x", "CartPole-v1", 0, 10, 3.0),
        # run b: a single evaluation
        ("b", "x", "CartPole-v1", 1, 5, 7.0),
        # run c: five evaluations, unequal spacing
        ("c", "x", "CartPole-v1", 2, 0, 0.0),
        ("c", "x", "CartPole-v1", 2, 10, 10.0),
        ("c", "x", "CartPole-v1", 2, 30, 10.0),
        ("c", "x", "CartPole-v1", 2, 40, 4.0),
        ("c", "x", "CartPole-v1", 2, 50, 6.0),
    ]
    return pd.DataFrame(rows, columns=COLS)


def scores_by_run(df: pd.DataFrame, rule: str, drop_first: int = 0) -> dict[str, float]:
    out = stats.run_scores(df, rule, drop_first)
    return dict(zip(out["run_id"], out["score"], strict=True))


# ----------------------------------------------------------------------------------------------- rules
@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("final", ("final", None)),
        ("best", ("best", None)),
        ("auc", ("auc", None)),
        ("mean_last:5", ("mean_last", 5)),
        (" mean_last:1 ", ("mean_last", 1)),
    ],
    ids=["final", "best", "auc", "mean_last5", "spaces"],
)
def test_parse_rule_accepts(rule: str, expected: tuple[str, int | None]) -> None:
    assert stats.parse_rule(rule) == expected


@pytest.mark.parametrize(
    "rule", ["last", "mean_last", "mean_last:0", "mean_last:-2", "mean_last:x", "", "Final"]
)
def test_parse_rule_rejects(rule: str) -> None:
    with pytest.raises(ValueError, match="Unknown score rule") as err:
        stats.parse_rule(rule)
    assert isinstance(err.value, UsageError)  # the CLI prints it as a one-line usage error
    assert "final, best, mean_last:N (N >= 1), auc" in str(err.value)


def test_rules_on_hand_made_runs_of_unequal_length() -> None:
    df = hand_runs()
    assert scores_by_run(df, "final") == {"a": 2.0, "b": 7.0, "c": 6.0}
    assert scores_by_run(df, "best") == {"a": 3.0, "b": 7.0, "c": 10.0}
    with pytest.warns(StatsWarning, match="fewer than 2 evaluation points"):
        assert scores_by_run(df, "mean_last:2") == {"a": 2.5, "b": 7.0, "c": 5.0}
    auc = scores_by_run(df, "auc")
    # a: trapezoids (1+3)/2*10 + (3+2)/2*10 = 45 over span 20; b: one point -> its value
    # c: 50 + 200 + 70 + 50 = 370 over span 50
    assert auc == pytest.approx({"a": 45 / 20, "b": 7.0, "c": 370 / 50})


def test_auc_equals_numpy_trapezoid_over_span() -> None:
    df = synthetic(algos=("ppo",), envs=("CartPole-v1",), seeds=(0,))
    got = stats.run_scores(df, "auc")["score"].iloc[0]
    x, y = df["step"].to_numpy(float), df["value"].to_numpy()
    assert got == pytest.approx(np.trapezoid(y, x) / (x[-1] - x[0]))


def test_drop_first_removes_first_points_by_step() -> None:
    df = hand_runs()
    with pytest.warns(StatsWarning, match="dropped by drop_first=1: b"):
        got = scores_by_run(df, "auc", drop_first=1)
    assert got == pytest.approx({"a": 2.5, "c": (200 + 70 + 50) / 40})
    with pytest.warns(StatsWarning):
        assert scores_by_run(df, "best", drop_first=2) == {"a": 2.0, "c": 10.0}
    with pytest.raises(StatsError, match="No evaluation points left after drop_first=9"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stats.run_scores(df, "final", drop_first=9)
    with pytest.raises(StatsError, match="drop_first must be a non-negative integer"):
        stats.run_scores(df, "final", drop_first=-1)


def test_non_finite_values_are_dropped_with_a_count() -> None:
    df = hand_runs()
    df.loc[(df["run_id"] == "c") & (df["step"] == 50), "value"] = np.nan
    df.loc[(df["run_id"] == "a") & (df["step"] == 10), "value"] = np.inf
    with pytest.warns(
        StatsWarning, match=r"Dropped 2 non-finite value\(s\) \(NaN/inf\) from 2 run\(s\): a, c"
    ):
        got = scores_by_run(df, "final")
    assert got == {"a": 2.0, "b": 7.0, "c": 4.0}
    with pytest.warns(StatsWarning):
        assert scores_by_run(df, "best")["a"] == 2.0  # inf is not "best"


def test_drop_first_counts_evaluations_even_non_finite_ones() -> None:
    df = hand_runs()
    df.loc[(df["run_id"] == "c") & (df["step"] == 0), "value"] = np.nan
    with pytest.warns(StatsWarning):
        got = scores_by_run(df, "best", drop_first=2)
    assert got == {"a": 2.0, "c": 10.0}  # c's first two evaluations are steps 0 (NaN) and 10


def test_run_scores_output_columns_and_order() -> None:
    out = stats.run_scores(synthetic(), "final")
    assert list(out.columns) == ["run_id", "algo", "env", "seed", "score"]
    assert len(out) == 3 * 2 * 3
    assert out.equals(out.sort_values(["algo", "env", "seed"]).reset_index(drop=True))


def test_bad_input_tables_say_what_is_wrong() -> None:
    with pytest.raises(StatsError, match="lacks column\\(s\\) seed"):
        stats.run_scores(hand_runs().drop(columns="seed"), "final")
    with pytest.raises(StatsError, match="Metric table is empty"):
        stats.run_scores(pd.DataFrame(columns=COLS), "final")
    mixed = hand_runs().assign(name=["eval/return"] * 8 + ["sys/sps"])
    with pytest.raises(
        StatsError, match="mixes 2 metrics \\(eval/return, sys/sps\\); pass rows of one metric"
    ):
        stats.score_table(mixed)
    all_nan = hand_runs().assign(value=np.nan)
    with pytest.raises(StatsError, match="no finite values"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats.run_scores(all_nan, "final")


# ---------------------------------------------------------------------------------------- normalisation
def test_normalisation_uses_fixed_references() -> None:
    low, high = CARTPOLE
    df = pd.DataFrame(
        [
            ("r0", "x", "CartPole-v1", 0, 0, low + 0.5 * (high - low)),
            ("r1", "x", "CartPole-v1", 1, 0, low),
            ("r2", "y", "CartPole-v1", 0, 0, high),
        ],
        columns=COLS,
    )
    table = stats.score_table(df)
    assert table.normalized == "classic-control"
    assert table.references == {"CartPole-v1": CARTPOLE}
    norm = dict(zip(table.per_run["run_id"], table.per_run["norm_score"], strict=True))
    assert norm == pytest.approx({"r0": 0.5, "r1": 0.0, "r2": 1.0})

    # a run far above the reference maximum changes nobody else's normalised score
    above = pd.concat([df, pd.DataFrame([("r3", "y", "CartPole-v1", 1, 0, 3 * high)], columns=COLS)])
    table2 = stats.score_table(above)
    norm2 = dict(zip(table2.per_run["run_id"], table2.per_run["norm_score"], strict=True))
    assert {k: norm2[k] for k in norm} == norm
    assert norm2["r3"] > 1.0


def test_normalize_modes() -> None:
    df = synthetic(algos=("ppo",), envs=("CartPole-v1",))
    raw = stats.score_table(df, normalize=None)
    assert raw.normalized is None and raw.references == {}
    assert stats.score_table(df, normalize="none").normalized is None
    assert (raw.per_run["norm_score"] == raw.per_run["score"]).all()
    named = stats.score_table(df, normalize="classic-control")
    assert named.normalized == "classic-control"

    custom = pd.concat([df, df.assign(env="MyEnv-v0", run_id=df["run_id"] + "/my")])
    with pytest.warns(StatsWarning, match="No built-in reference scores cover every task .*reporting RAW"):
        auto = stats.score_table(custom, normalize="auto")
    assert auto.normalized is None
    with pytest.raises(StatsError, match="reference set 'classic-control' has no scores for MyEnv-v0"):
        stats.score_table(custom, normalize="classic-control")
    with pytest.raises(StatsError, match="reference set 'd4rl' has no scores for CartPole-v1"):
        stats.score_table(df, normalize="d4rl")
    with pytest.raises(StatsError, match="unknown reference set 'd5rl'"):
        stats.score_table(df, normalize="d5rl")


def test_references_are_ordered_and_documented() -> None:
    for name, refs in stats.REFERENCES.items():
        for task, ref in refs.items():  # (low, high) or (low, mid, high)
            assert all(a < b for a, b in zip(ref, ref[1:])), f"{name}/{task}: references must increase"


# ----------------------------------------------------------------------------------------- score table
def test_score_table_shapes_and_layout() -> None:
    df = synthetic()
    df["name"] = "eval/return"
    table = stats.score_table(df, rule="mean_last:3")
    assert table.metric == "eval/return"
    assert table.rule == "mean_last:3" and table.drop_first == 0
    assert table.tasks == ["Acrobot-v1", "CartPole-v1"]
    assert table.algos == ["dqn", "ppo", "random"]
    assert table.num_runs == {"dqn": 3, "ppo": 3, "random": 3}
    for algo in table.algos:
        assert table.scores[algo].shape == (3, 2)
        assert table.scores[algo].dtype == np.float64
        assert table.seeds[algo] == [0, 1, 2]
    pr = table.per_run.set_index(["algo", "seed", "env"])
    assert table.scores["ppo"][2, 1] == pr.loc[("ppo", 2, "CartPole-v1"), "norm_score"]
    assert table.per_run["in_table"].all()
    assert {"run_id", "algo", "env", "seed", "score", "norm_score"} <= set(table.per_run.columns)


def test_runs_are_matched_by_seed_across_tasks() -> None:
    df = synthetic(seeds=(0, 1, 2, 3))
    df = df.loc[~((df["algo"] == "ppo") & (df["seed"] == 1) & (df["env"] == "CartPole-v1"))]
    df = df.loc[~((df["algo"] == "ppo") & (df["seed"] == 3) & (df["env"] == "Acrobot-v1"))]
    with pytest.warns(StatsWarning) as record:
        table = stats.score_table(df)
    message = " ".join(str(w.message) for w in record)
    assert "Algorithm 'ppo'" in message
    assert "seed 1 (missing on CartPole-v1)" in message and "seed 3 (missing on Acrobot-v1)" in message
    assert table.scores["ppo"].shape == (2, 2) and table.seeds["ppo"] == [0, 2]
    assert table.scores["dqn"].shape == (4, 2)
    left_out = table.per_run.loc[~table.per_run["in_table"], ["algo", "seed"]]
    assert sorted(map(tuple, left_out.to_numpy().tolist())) == [("ppo", 1), ("ppo", 3)]


def test_algorithm_without_a_task_is_left_out() -> None:
    df = synthetic()
    df = df.loc[~((df["algo"] == "random") & (df["env"] == "Acrobot-v1"))]
    with pytest.warns(StatsWarning, match="'random' has no runs on task\\(s\\) Acrobot-v1"):
        table = stats.score_table(df)
    assert table.algos == ["dqn", "ppo"]


def test_two_runs_in_one_cell_is_an_error() -> None:
    df = synthetic(algos=("ppo",), envs=("CartPole-v1",), seeds=(0,))
    twin = df.assign(run_id="other")
    with pytest.raises(StatsError, match="2 runs share algo=ppo env=CartPole-v1 seed=0"):
        stats.score_table(pd.concat([df, twin]))


# ----------------------------------------------------------------------------------- rliable agreement
@pytest.fixture(scope="module")
def table() -> stats.ScoreTable:
    return stats.score_table(synthetic(noise=0.15, seeds=(0, 1, 2, 3)))


def rliable_aggregates(scores: np.ndarray, reps: int, seed: list[int]):
    from rliable import library as rly
    from rliable import metrics

    def func(x: np.ndarray) -> np.ndarray:
        return np.array(
            [
                metrics.aggregate_median(x),
                metrics.aggregate_iqm(x),
                metrics.aggregate_mean(x),
                metrics.aggregate_optimality_gap(x, 1.0),
            ]
        )

    np.random.seed(seed)
    point, interval = rly.get_interval_estimates({"k": scores}, func, reps=reps)
    return point["k"], interval["k"]


def test_aggregates_match_rliable(table: stats.ScoreTable) -> None:
    """Point estimates equal rliable's; intervals are the vectorised bootstrap's (checked against rliable's
    own resampling, replicate for replicate and within Monte Carlo error, in test_bootstrap.py)."""
    from rlbench_cli import bootstrap

    agg = stats.aggregates(table, reps=2000, seed=3)
    assert list(agg.columns) == ["algo", "metric", "estimate", "lower", "upper"]
    assert len(agg) == 3 * 4
    direct = bootstrap.interval_estimates(table.scores, stats.METRICS, reps=2000, seed=3)
    for algo in table.algos:
        point, interval = rliable_aggregates(table.scores[algo], 2000, stats.bootstrap_seed(3, algo))
        got = agg.loc[agg["algo"] == algo].set_index("metric").loc[list(stats.METRICS)]
        np.testing.assert_allclose(got["estimate"].to_numpy(), point, rtol=1e-12)
        np.testing.assert_array_equal(got["lower"].to_numpy(), direct[algo].lower)
        np.testing.assert_array_equal(got["upper"].to_numpy(), direct[algo].upper)
        width = interval[1] - interval[0]
        assert np.all(np.abs(got["lower"].to_numpy() - interval[0]) <= 0.25 * width + 1e-12)
        assert np.all(np.abs(got["upper"].to_numpy() - interval[1]) <= 0.25 * width + 1e-12)


def test_aggregates_same_seed_same_intervals_and_global_state_restored(table: stats.ScoreTable) -> None:
    np.random.seed(12345)
    before = np.random.get_state()[1].copy()
    a = stats.aggregates(table, reps=300, seed=7)
    after = np.random.get_state()[1]
    np.testing.assert_array_equal(before, after)  # the caller's global generator is untouched
    b = stats.aggregates(table, reps=300, seed=7)
    c = stats.aggregates(table, reps=300, seed=8)
    pd.testing.assert_frame_equal(a, b)
    assert (a["estimate"] == c["estimate"]).all()
    assert not np.array_equal(a[["lower", "upper"]].to_numpy(), c[["lower", "upper"]].to_numpy())


def test_an_algorithms_interval_does_not_depend_on_the_others(table: stats.ScoreTable) -> None:
    alone = stats.ScoreTable(
        rule=table.rule,
        drop_first=0,
        normalized=table.normalized,
        tasks=table.tasks,
        algos=["ppo"],
        scores={"ppo": table.scores["ppo"]},
        per_run=table.per_run,
    )
    full = stats.aggregates(table, reps=200, seed=0)
    pd.testing.assert_frame_equal(
        stats.aggregates(alone, reps=200, seed=0), full.loc[full["algo"] == "ppo"].reset_index(drop=True)
    )


def test_optimality_gap_is_nan_on_raw_scores() -> None:
    raw = stats.score_table(synthetic(algos=("ppo",)), normalize=None)
    agg = stats.aggregates(raw, reps=100).set_index("metric")
    assert agg.loc["optimality_gap", ["estimate", "lower", "upper"]].isna().all()
    assert agg.loc["iqm", ["estimate", "lower", "upper"]].notna().all()


def test_probability_of_improvement_matches_rliable(table: stats.ScoreTable) -> None:
    from rliable import library as rly
    from rliable import metrics

    poi = stats.probability_of_improvement(table, reps=2000, seed=1)
    assert list(poi.columns) == ["algo_x", "algo_y", "estimate", "lower", "upper"]
    assert len(poi) == 3 * 2
    got = poi.set_index(["algo_x", "algo_y"])
    for i, x in enumerate(table.algos):
        for y in table.algos[i + 1 :]:
            sx, sy = table.scores[x], table.scores[y]
            np.random.seed(stats.bootstrap_seed(1, f"{x}|{y}"))
            point, interval = rly.get_interval_estimates(
                {"k": [sx, sy]}, metrics.probability_of_improvement, reps=2000
            )
            lo, hi = np.ravel(interval["k"])
            ours = got.loc[(x, y)]
            assert ours["estimate"] == pytest.approx(point["k"], abs=1e-12)
            assert abs(ours["lower"] - lo) <= 0.25 * (hi - lo) + 1e-12
            assert abs(ours["upper"] - hi) <= 0.25 * (hi - lo) + 1e-12
            reverse = got.loc[(y, x)]
            assert reverse["estimate"] == pytest.approx(metrics.probability_of_improvement(sy, sx), abs=1e-12)
            assert reverse["estimate"] == pytest.approx(1.0 - ours["estimate"], abs=1e-12)
            assert (reverse["lower"], reverse["upper"]) == (1.0 - ours["upper"], 1.0 - ours["lower"])
    assert got.loc[("ppo", "dqn"), "estimate"] < 0.5 < got.loc[("dqn", "ppo"), "estimate"]


def test_probability_of_improvement_seeding() -> None:
    two = stats.score_table(synthetic(algos=("dqn", "ppo"), noise=0.3, seeds=(0, 1, 2)))
    a = stats.probability_of_improvement(two, reps=100, seed=0)
    b = stats.probability_of_improvement(two, reps=100, seed=0)
    c = stats.probability_of_improvement(two, reps=100, seed=1)
    pd.testing.assert_frame_equal(a, b)
    assert not np.array_equal(a[["lower", "upper"]].to_numpy(), c[["lower", "upper"]].to_numpy())
    one = stats.score_table(synthetic(algos=("dqn",)))
    assert stats.probability_of_improvement(one, reps=10).empty


def test_performance_profile_matches_rliable(table: stats.ScoreTable) -> None:
    from rliable import library as rly

    taus = np.linspace(0.0, 1.2, 13)
    prof = stats.performance_profile(table, taus, reps=100, seed=2)
    assert list(prof.columns) == ["algo", "tau", "estimate", "lower", "upper"]
    assert len(prof) == 3 * 13
    from rlbench_cli import bootstrap

    np.random.seed(stats.bootstrap_seed(2, "dqn"))
    point, _ = rly.create_performance_profile({"dqn": table.scores["dqn"]}, taus, reps=100)
    got = prof.loc[prof["algo"] == "dqn"]
    np.testing.assert_array_equal(got["estimate"], point["dqn"])
    direct = bootstrap.performance_profile(table.scores, taus, reps=100, seed=2)["dqn"]
    np.testing.assert_array_equal(got["lower"], direct.lower)
    np.testing.assert_array_equal(got["upper"], direct.upper)
    mean_variant = stats.performance_profile(table, taus, reps=100, seed=2, variant="mean")
    # the average-score variant: fraction of tasks whose mean score is above tau
    means = table.scores["dqn"].mean(axis=0)
    expected = [(means > t).mean() for t in taus]
    np.testing.assert_allclose(mean_variant.loc[mean_variant["algo"] == "dqn", "estimate"], expected)
    default = stats.performance_profile(table, reps=20)
    assert default["tau"].min() <= 0.0 and default["tau"].max() >= 1.0


# ------------------------------------------------------------------------------------------------ curves
def test_sample_efficiency_iqm_per_point_matches_rliable() -> None:
    from rliable import library as rly
    from rliable import metrics

    df = synthetic(algos=("dqn", "ppo"), noise=0.1, points=6)
    se = stats.sample_efficiency(df, reps=100, seed=4)
    assert list(se.columns) == ["algo", "step", "estimate", "lower", "upper"]
    assert se.groupby("algo").size().to_dict() == {"dqn": 6, "ppo": 6}
    assert se.loc[se["algo"] == "dqn", "step"].tolist() == [0, 5000, 10000, 15000, 20000, 25000]

    table = stats.score_table(df)  # final point of the curve == IQM of the final scores
    final_iqm = metrics.aggregate_iqm(table.scores["ppo"])
    assert se.loc[se["algo"] == "ppo", "estimate"].iloc[-1] == pytest.approx(final_iqm, abs=1e-12)

    sub = df.loc[df["algo"] == "dqn"].sort_values(["seed", "env", "step"])
    low = sub["env"].map(lambda e: stats.REFERENCES["classic-control"][e][0])
    high = sub["env"].map(lambda e: stats.REFERENCES["classic-control"][e][1])
    cube = ((sub["value"] - low) / (high - low)).to_numpy().reshape(3, 2, 6)

    def per_point(x: np.ndarray) -> np.ndarray:  # rliable's own formulation, one IQM per point
        return np.array([metrics.aggregate_iqm(x[..., j]) for j in range(x.shape[-1])])

    np.random.seed(stats.bootstrap_seed(4, "dqn"))
    point, interval = rly.get_interval_estimates({"dqn": cube}, per_point, reps=100)
    got = se.loc[se["algo"] == "dqn"]
    np.testing.assert_allclose(got["estimate"], point["dqn"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["lower"], interval["dqn"][0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["upper"], interval["dqn"][1], rtol=0, atol=1e-12)


def test_sample_efficiency_cuts_to_shortest_run() -> None:
    df = synthetic(algos=("ppo",), points=8)
    df = df.loc[~((df["seed"] == 1) & (df["step"] >= 25000))]
    with pytest.warns(StatsWarning, match="runs have 5 to 8 evaluation points.*keeps the 5 evaluation"):
        se = stats.sample_efficiency(df, normalize=None, reps=20)
    assert len(se) == 5


def test_sample_efficiency_skips_an_evaluation_missing_in_one_run() -> None:
    df = synthetic(algos=("ppo",), points=6)
    df.loc[(df["seed"] == 2) & (df["step"] == 10000), "value"] = np.inf
    with pytest.warns(StatsWarning) as record:
        se = stats.sample_efficiency(df, reps=20)
    assert "keeps the 5 evaluation indices every run has" in " ".join(str(w.message) for w in record)
    assert se["step"].tolist() == [0, 5000, 15000, 20000, 25000]


def test_learning_curves_mean_and_bootstrap_interval() -> None:
    df = hand_runs().assign(seed=lambda d: d["run_id"].map({"a": 0, "b": 1, "c": 2}))
    lc = stats.learning_curves(df)
    assert list(lc.columns) == ["algo", "env", "step", "mean", "lower", "upper", "n"]
    assert lc["n"].tolist() == [3, 2, 2, 1, 1]
    first = lc.iloc[0]  # index 0: a@0 = 1, b@5 = 7, c@0 = 0
    assert first["step"] == 0 and first["mean"] == pytest.approx(8 / 3)
    # a percentile bootstrap of the mean stays inside the observed values, unlike a t interval on 3 runs
    assert 0.0 <= first["lower"] < 8 / 3 < first["upper"] <= 7.0
    rng = np.random.default_rng(0)
    vals = np.array([1.0, 7.0, 0.0])
    means = vals[rng.integers(0, 3, size=(2000, 3))].mean(axis=1)
    assert (first["lower"], first["upper"]) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    last = lc.iloc[-1]  # one run: the band collapses onto the mean
    assert last["lower"] == last["upper"] == last["mean"]
    assert lc["step"].tolist() == [0.0, 10.0, 25.0, 40.0, 50.0]  # median step of the k-th evaluations
    assert stats.learning_curves(df, seed=0).equals(lc)
    many = pd.DataFrame(
        [(f"r{i}", "x", "E", i, 0, v) for i, v in enumerate(np.random.default_rng(3).normal(size=10))],
        columns=COLS,
    )
    a, b = stats.learning_curves(many, seed=0), stats.learning_curves(many, seed=1)
    assert a["mean"].equals(b["mean"]) and a["lower"].iloc[0] != b["lower"].iloc[0]


def learning_curves_one_point_at_a_time(df: pd.DataFrame, confidence: float, reps: int, seed: int):
    """The definition of ``learning_curves``' bands, point by point: one seeded generator, and for each
    (env, algo, index) in sorted order with n > 1 runs one draw of shape (reps, n) and the quantiles of the
    resampled means."""
    data = _clean(df)
    data["env"] = data["env"].astype(str)
    data["algo"] = data["algo"].astype(str)
    rng = np.random.default_rng(seed)
    alpha = (1.0 - confidence) / 2.0
    rows = []
    for (env, algo, _), grp in data.groupby(["env", "algo", "index"], sort=True):
        values = grp["value"].to_numpy(dtype=float)
        n = len(values)
        mean = float(values.mean())
        lower = upper = mean
        if n > 1:
            means = values[rng.integers(0, n, size=(reps, n))].mean(axis=1)
            lower, upper = (float(q) for q in np.quantile(means, [alpha, 1.0 - alpha]))
        rows.append((algo, env, float(grp["step"].median()), mean, lower, upper, n))
    return pd.DataFrame(rows, columns=["algo", "env", "step", "mean", "lower", "upper", "n"])


@pytest.mark.parametrize("batch", [None, 1, 50, 7000])
@pytest.mark.parametrize("ragged", [False, True])
def test_learning_curves_all_points_at_once_equal_the_definition_bit_for_bit(
    monkeypatch, batch, ragged
) -> None:
    """Every point's bootstrap is drawn in batches of points (one generator call a batch): the same
    numbers as one point at a time, whatever the batch size, with every run present at every point or
    with runs of different lengths, missing evaluations, single-run points and a non-finite value."""
    if batch is not None:
        monkeypatch.setattr(curves, "_POINT_DRAWS", batch)
    rng = np.random.default_rng(7)
    rows = []
    for algo in ("ppo", "dqn", "sac"):
        for env in ("CartPole-v1", "Acrobot-v1", "zz"):
            for s in range(1 if ragged and algo == "sac" else 5):
                points = 9 - (s % 3) if ragged else 9
                for k in range(points):
                    if ragged and rng.random() < 0.1:
                        continue
                    rows.append((f"{algo}/{env}/{s}", algo, env, s, k * 500 + int(rng.integers(0, 3)),
                                 float(rng.normal(k, 3))))  # fmt: skip
    df = pd.DataFrame(rows, columns=COLS)
    if ragged:
        df.loc[3, "value"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StatsWarning)
        for confidence, reps, seed in ((0.95, 300, 0), (0.9, 37, 3), (0.5, 1, 1)):
            got = stats.learning_curves(df, confidence=confidence, reps=reps, seed=seed)
            want = learning_curves_one_point_at_a_time(df, confidence, reps, seed)
            pd.testing.assert_frame_equal(got, want, check_exact=True)
    ns = set(got["n"])  # ragged: batches mix points of different n, single-run points among them
    assert ns == {5} if not ragged else ({1, 5} <= ns and len(ns) >= 3)


def test_learning_curves_of_single_runs_have_no_band() -> None:
    """One seed everywhere (every point has n = 1): nothing is drawn, the bounds are the values."""
    df = synthetic(algos=("dqn",), seeds=(0,), points=3)
    got = stats.learning_curves(df, reps=50)
    pd.testing.assert_frame_equal(got, learning_curves_one_point_at_a_time(df, 0.95, 50, 0), check_exact=True)
    assert (got["n"] == 1).all() and got["lower"].equals(got["mean"]) and got["upper"].equals(got["mean"])


def test_learning_curves_step_is_median_over_runs() -> None:
    df = pd.DataFrame(
        [
            ("a", "x", "E", 0, 0, 1.0),
            ("a", "x", "E", 0, 100, 2.0),
            ("b", "x", "E", 1, 0, 3.0),
            ("b", "x", "E", 1, 120, 4.0),
        ],
        columns=COLS,
    )
    lc = stats.learning_curves(df)
    assert lc["step"].tolist() == [0.0, 110.0]
    assert lc["mean"].tolist() == [2.0, 3.0]


def test_heavy_imports_are_lazy() -> None:
    code = (
        "import sys, rlbench_cli.stats, rlbench_cli.plots, rlbench_cli.leaderboard\n"
        "heavy = [m for m in ('rliable', 'arch', 'scipy', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_statistic_of_plot_runs_without_rliable_arch_or_scipy() -> None:
    """The vectorised bootstrap replaces rliable's per-replicate Python calls (proven equal above and in
    test_bootstrap.py): ``plot``'s statistics, the sample-efficiency curve included, import none of rliable,
    arch (4 s on its own) or scipy."""
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_stats import synthetic\n"
        "from rlbench_cli import stats\n"
        "df = synthetic(points=4)\n"
        "table = stats.score_table(df)\n"
        "stats.aggregates(table, reps=50); stats.probability_of_improvement(table, reps=50)\n"
        "stats.performance_profile(table, reps=50); stats.learning_curves(df, reps=50)\n"
        "se = stats.sample_efficiency(df, reps=50)\n"
        "assert len(se) == 3 * 4, se\n"
        "heavy = [m for m in ('rliable', 'arch', 'scipy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
