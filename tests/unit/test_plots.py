"""Figures of rlbench_cli.plots: they draw into given axes, return figures, and keep one colour per algorithm."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlbench_cli import plots, stats

COLS = ["run_id", "algo", "env", "seed", "step", "value"]


def synthetic(algos: tuple[str, ...] = ("dqn", "ppo", "random"), points: int = 11) -> pd.DataFrame:
    """3 algos x 2 envs x 3 seeds x ``points`` evaluations with distinct learning curves."""
    rng = np.random.default_rng(0)
    finals = {"dqn": 0.9, "ppo": 0.6, "random": 0.02}
    rows = []
    for algo in algos:
        for env in ("Acrobot-v1", "CartPole-v1"):
            low, high = stats.REFERENCES["classic-control"][env]
            for s in range(3):
                for k in range(points):
                    frac = finals[algo] * (1 - np.exp(-3.0 * k / (points - 1))) / (1 - np.exp(-3.0))
                    frac += rng.normal(0.0, 0.1)
                    rows.append((f"{algo}/{env}/{s}", algo, env, s, k * 5000, low + frac * (high - low)))
    df = pd.DataFrame(rows, columns=COLS)
    df["name"] = "eval/return"
    return df


@pytest.fixture(scope="module")
def data() -> dict[str, object]:
    df = synthetic()
    table = stats.score_table(df, rule="final")
    return {
        "df": df,
        "table": table,
        "agg": stats.aggregates(table, reps=100),
        "poi": stats.probability_of_improvement(table, reps=30),
        "profile": stats.performance_profile(table, reps=50),
        "se": stats.sample_efficiency(df, normalize=table.normalized, reps=50),
        "lc": stats.learning_curves(df),
    }


def new_axes(n: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * n, 3))
    return fig, list(np.ravel(fig.subplots(1, n, squeeze=False)))


def rgb(color: object) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    return tuple(round(c, 4) for c in to_rgb(color))


def line_colors(fig) -> dict[str, tuple[float, float, float]]:
    out = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                out[line.get_label()] = rgb(line.get_color())
    return out


# ----------------------------------------------------------------------------------------------- colours
def test_algo_colors_are_deterministic_and_distinct() -> None:
    a = plots.algo_colors(["ppo", "dqn", "random"])
    assert a == plots.algo_colors(["random", "ppo", "dqn", "ppo"])
    assert a == {"dqn": plots.PALETTE[0], "ppo": plots.PALETTE[1], "random": plots.PALETTE[2]}
    many = plots.algo_colors([f"algo{i:02d}" for i in range(20)])
    assert len(set(many.values())) == 20


# ------------------------------------------------------------------------------------- into given axes
def test_plot_aggregates_draws_into_given_axes(data) -> None:
    table = data["table"]
    fig, axes = new_axes(4)
    assert plots.plot_aggregates(data["agg"], table, axes=axes) is fig
    for ax, metric in zip(axes, stats.METRICS, strict=True):
        assert len(ax.patches) == 3  # one CI bar per algorithm
        assert stats.METRIC_LABELS[metric] in ax.get_xlabel()
        assert "final eval/return" in ax.get_xlabel()
        assert "normalised: classic-control refs" in ax.get_xlabel()
    assert [t.get_text() for t in axes[0].get_yticklabels()] == ["dqn", "ppo", "random"]
    fig1, (ax,) = new_axes(1)
    assert plots.plot_aggregates(data["agg"], table, axes=ax, metrics=["iqm"]) is fig1
    with pytest.raises(ValueError, match="needs 4 axes"):
        plots.plot_aggregates(data["agg"], table, axes=axes[:2])


def test_plot_performance_profile_draws_into_given_ax(data) -> None:
    fig, (ax,) = new_axes()
    assert plots.plot_performance_profile(data["profile"], data["table"], ax=ax) is fig
    assert set(line_colors(fig)) == {"dqn", "ppo", "random"}
    assert "\u03c4" in ax.get_xlabel() and "final eval/return" in ax.get_xlabel()
    assert ax.get_legend() is not None


def test_plot_probability_of_improvement_draws_into_given_ax(data) -> None:
    fig, (ax,) = new_axes()
    assert plots.plot_probability_of_improvement(data["poi"], data["table"], ax=ax) is fig
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 3 and all(lbl.startswith("P(") for lbl in labels)
    assert "P(dqn > random)" in labels  # unique pairs, oriented so P >= 0.5
    assert any(line.get_xdata()[0] == 0.5 for line in ax.get_lines())  # the 0.5 reference line
    fig2, (ax2,) = new_axes()
    plots.plot_probability_of_improvement(data["poi"], data["table"], ax=ax2, pairs="all")
    assert len(ax2.get_yticklabels()) == 6


def test_plot_sample_efficiency_draws_into_given_ax(data) -> None:
    fig, (ax,) = new_axes()
    assert plots.plot_sample_efficiency(data["se"], data["table"], ax=ax) is fig
    assert "IQM of eval/return" in ax.get_ylabel() and "normalised" in ax.get_ylabel()
    assert ax.get_xlabel() == "Training steps (env steps online, gradient steps offline)"


def test_plot_learning_curves_draws_into_given_axes(data) -> None:
    fig, axes = new_axes(2)
    assert plots.plot_learning_curves(data["lc"], axes=axes) is fig
    assert [ax.get_title() for ax in axes] == ["Acrobot-v1", "CartPole-v1"]
    assert all(len(ax.get_lines()) == 3 for ax in axes)
    with pytest.raises(ValueError, match="needs 2 axes"):
        plots.plot_learning_curves(data["lc"], axes=axes[:1])


def test_new_figures_compose_without_pyplot(data) -> None:
    fig = plots.plot_learning_curves(data["lc"])
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    fig = plots.plot_aggregates(data["agg"], data["table"])
    assert len(fig.axes) == 4


def test_colours_are_the_same_in_every_figure(data) -> None:
    expected = {a: rgb(c) for a, c in plots.algo_colors(["dqn", "ppo", "random"]).items()}
    figs = [
        plots.plot_performance_profile(data["profile"], data["table"]),
        plots.plot_sample_efficiency(data["se"], data["table"]),
        plots.plot_learning_curves(data["lc"]),
    ]
    for fig in figs:
        assert line_colors(fig) == expected
    agg = plots.plot_aggregates(data["agg"], data["table"])
    bars = [rgb(p.get_facecolor()[:3]) for p in agg.axes[0].patches]
    assert bars == [expected["dqn"], expected["ppo"], expected["random"]]

    # an explicit mapping wins, so a subset of algorithms keeps the suite's colours
    colors = plots.algo_colors(["a2c", "dqn", "ppo", "random"])
    fig = plots.plot_sample_efficiency(data["se"], data["table"], colors=colors)
    assert line_colors(fig)["ppo"] == rgb(colors["ppo"])


# ---------------------------------------------------------------------------------------------- files
def test_write_all_writes_readable_pngs(data, tmp_path: Path) -> None:
    from PIL import Image

    paths = plots.write_all(
        "synthetic", data["df"], data["table"], tmp_path / "figs", reps=40, seed=0, aggregates_df=data["agg"]
    )
    names = [p.name for p in paths]
    assert names == [
        "aggregates.png",
        "performance_profile.png",
        "probability_of_improvement.png",
        "sample_efficiency.png",
        "learning_curves.png",
    ]
    for path in paths:
        assert path.stat().st_size > 10_000
        with Image.open(path) as img:
            img.verify()
        with Image.open(path) as img:
            width, height = img.size
            assert img.format == "PNG"
        assert 800 <= width <= 4000 and 250 <= height <= 3000, (path.name, img.size)


def test_write_all_skips_improvement_with_one_algorithm(tmp_path: Path) -> None:
    df = synthetic(algos=("ppo",), points=5)
    table = stats.score_table(df)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about in clean data
        paths = plots.write_all("one", df, table, tmp_path, fmt="svg", reps=20)
    assert [p.name for p in paths] == [
        "aggregates.svg",
        "performance_profile.svg",
        "sample_efficiency.svg",
        "learning_curves.svg",
    ]
    assert all(p.read_text().lstrip().startswith("<?xml") for p in paths)
