"""Figures of a score table's statistics: aggregates with intervals, performance profiles, probability of
improvement, and success rate per instruction level."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rlbench_cli import stats
from rlbench_cli.plots.style import (
    LABEL_SIZE,
    _algo_order,
    _colors,
    _legend,
    _new_figure,
    _rule,
    _score_text,
    _style,
    algo_colors,
    algo_styles,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def rank_order(aggregates_df: pd.DataFrame) -> list[str]:
    """Algorithms best first, as the leaderboard ranks them: IQM, then median (both descending), then name.

    Args:
        aggregates_df: ``stats.aggregates`` output, columns ``algo, metric, estimate, lower, upper``.
    """
    wide = aggregates_df.pivot_table(index="algo", columns="metric", values="estimate", aggfunc="first")
    keys = pd.DataFrame(
        {
            "algo": wide.index.astype(str),
            "iqm": wide["iqm"].to_numpy(float) if "iqm" in wide else np.nan,
            "median": wide["median"].to_numpy(float) if "median" in wide else np.nan,
        }
    )
    keys = keys.sort_values(
        ["iqm", "median", "algo"], ascending=[False, False, True], kind="mergesort", na_position="last"
    )
    return keys["algo"].tolist()


def _estimate(ax: Axes, x: Sequence[float], y: Sequence[float]) -> None:
    """The point estimates on interval bars: black with a white halo, visible on any bar colour (black too)
    and on a bar narrower than the mark. One collection for all of them (drawing is per artist)."""
    from matplotlib import patheffects

    halo = [patheffects.withStroke(linewidth=4.0, foreground="white")]
    y = np.asarray(y, dtype=float)
    ax.vlines(x, y - 0.3, y + 0.3, color="black", linewidth=2.0, path_effects=halo)


def _interval_bars(ax: Axes, y: Sequence[float], lower: Sequence[float], upper: Sequence[float],
                   estimate: Sequence[float], colors: Sequence[str]) -> None:  # fmt: skip
    """Horizontal interval bars at ``y`` from ``lower`` to ``upper``, each in its colour, with its estimate
    marked (``_estimate``): one bar container and one collection for all of them."""
    if len(y) == 0:
        return
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    ax.barh(y, upper - lower, left=lower, height=0.6, color=colors, alpha=0.75, edgecolor=colors)
    _estimate(ax, estimate, y)


# ------------------------------------------------------------------------------------------ aggregates
def plot_aggregates(
    aggregates_df: pd.DataFrame,
    table: stats.ScoreTable,
    axes: Sequence[Axes] | Axes | None = None,
    colors: Mapping[str, str] | None = None,
    metrics: Sequence[str] = stats.METRICS,
    xlabel: str | None = None,
) -> Figure:
    """rliable-style interval plot: one panel per aggregate metric, one horizontal CI bar per algorithm.

    Algorithms are ranked as in the leaderboard (``rank_order``: best IQM at the top). A new figure is compact
    (about 2.4 inches per panel) with one shared x label; given axes each get the label.

    Args:
        aggregates_df: ``stats.aggregates`` output, columns ``algo, metric, estimate, lower, upper``.
        table: The score table the aggregates came from (for the labels: metric, normalisation).
        axes: One Axes per entry of ``metrics`` (a single Axes when there is one metric), or None for a
            new figure with one row of panels.
        colors: ``{algo: colour}``; defaults to ``algo_colors`` of the algorithms shown.
        metrics: Which metrics to draw, in order.
        xlabel: The score axis label; default ``score_label`` (``Normalised score (0 = ..., 1 = ...)``,
            ``Return``).

    Returns:
        The Figure drawn into.
    """
    metrics = [m for m in metrics if m in set(aggregates_df["metric"])]
    if table.normalized is None:  # optimality gap is NaN on raw scores
        metrics = [m for m in metrics if m != "optimality_gap"] or metrics
    present = set(aggregates_df["algo"].astype(str))
    algos = [a for a in rank_order(aggregates_df) if a in present]
    colors = _colors(colors, algos)
    label = xlabel if xlabel is not None else _score_text(table)
    own = axes is None
    if own:
        fig = _new_figure(2.4 * len(metrics) + 1.3, max(1.9, 1.1 + 0.34 * len(algos)))
        axes = fig.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
    elif not isinstance(axes, Sequence | np.ndarray):
        axes = [axes]
    axes = list(np.ravel(axes))
    if len(axes) != len(metrics):
        raise ValueError(f"plot_aggregates needs {len(metrics)} axes (one per metric), got {len(axes)}.")
    fig = axes[0].figure
    y = np.arange(len(algos))[::-1]
    for ax, metric in zip(axes, metrics, strict=True):
        sub = aggregates_df.loc[aggregates_df["metric"] == metric].set_index("algo")
        shown = [(yi, algo) for yi, algo in zip(y, algos, strict=True) if algo in sub.index]
        rows = sub.loc[[algo for _, algo in shown]]
        _interval_bars(ax, [yi for yi, _ in shown], rows["lower"], rows["upper"], rows["estimate"],
                       [colors[algo] for _, algo in shown])  # fmt: skip
        ax.set_yticks(y, algos)
        ax.set_ylim(-0.6, len(algos) - 0.4)
        ends = sub[["lower", "upper", "estimate"]].to_numpy(dtype=float)
        ends = ends[np.isfinite(ends)]
        if ends.size:  # bars have sticky edges, so margins() cannot pad them: set the limits
            low, high = float(ends.min()), float(ends.max())
            pad = 0.08 * (high - low) if high > low else max(0.05 * abs(high), 0.05)
            ax.set_xlim(low - pad, high + pad)
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        title = stats.METRIC_LABELS.get(metric, metric)
        if metric == "optimality_gap":
            title += " \u2193"  # lower is better; said in the x label of a new figure too
        _style(ax, title=title, xlabel=None if own else label)
        ax.grid(False, axis="y")
    if own:
        note = "; optimality gap: lower is better" if "optimality_gap" in metrics and xlabel is None else ""
        fig.supxlabel(label + note, fontsize=LABEL_SIZE)
    axes[0].tick_params(axis="y", labelsize=LABEL_SIZE)
    return fig


# -------------------------------------------------------------------------------- performance profile
def plot_performance_profile(
    profile_df: pd.DataFrame,
    table: stats.ScoreTable,
    ax: Axes | None = None,
    colors: Mapping[str, str] | None = None,
) -> Figure:
    """Performance profile: fraction of runs scoring above tau, with its bootstrap band.

    Args:
        profile_df: ``stats.performance_profile`` output, columns ``algo, tau, estimate, lower, upper``.
        table: The score table (for the labels).
        ax: Axes to draw into, or None for a new figure.
        colors: ``{algo: colour}``; each line also takes its algorithm's ``algo_styles`` line style.

    Returns:
        The Figure drawn into.
    """
    algos = _algo_order(profile_df, "algo", table)
    colors = _colors(colors, algos)
    styles = algo_styles(colors)
    own = ax is None
    if own:
        ax = _new_figure(7.0, 4.2).subplots()
    for algo in algos:
        sub = profile_df.loc[profile_df["algo"] == algo].sort_values("tau")
        ax.plot(
            sub["tau"],
            sub["estimate"],
            color=colors[algo],
            linestyle=styles[algo][0],
            linewidth=2.2,
            label=algo,
        )
        ax.fill_between(sub["tau"], sub["lower"], sub["upper"], color=colors[algo], alpha=0.2, linewidth=0)
    if table.normalized:
        ax.axvline(1.0 * table.scale, color="0.4", linestyle=":", linewidth=1.2)
    ax.set_ylim(-0.02, 1.02)
    _style(
        ax,
        title="Performance profile",
        xlabel=f"Threshold \u03c4: {_score_text(table)}",
        ylabel="Fraction of runs with score > \u03c4",
    )
    _legend(ax, outside=own)
    return ax.figure


# ------------------------------------------------------------------------- probability of improvement
def plot_probability_of_improvement(
    poi_df: pd.DataFrame,
    table: stats.ScoreTable,
    ax: Axes | None = None,
    colors: Mapping[str, str] | None = None,
    pairs: str = "unique",
) -> Figure:
    """Probability of improvement P(X > Y) with its bootstrap interval, one row per pair.

    Args:
        poi_df: ``stats.probability_of_improvement`` output, columns ``algo_x, algo_y, estimate, lower,
            upper``.
        table: The score table (for the labels).
        ax: Axes to draw into, or None for a new figure.
        colors: ``{algo: colour}``; a bar takes the colour of its X algorithm.
        pairs: ``"unique"``: each unordered pair once, oriented so that X is the algorithm with the higher
            estimate (P(Y > X) = 1 - P(X > Y) adds nothing); ``"all"``: every ordered pair.

    Returns:
        The Figure drawn into.
    """
    if pairs not in ("unique", "all"):
        raise ValueError(f"pairs must be 'unique' or 'all', got {pairs!r}.")
    rows = poi_df
    if pairs == "unique":
        order = {a: i for i, a in enumerate(table.algos)}
        keep = []
        for r in poi_df.itertuples(index=False):
            mirror_first = order.get(r.algo_x, 0) > order.get(r.algo_y, 0)
            if (r.estimate > 0.5) or (r.estimate == 0.5 and not mirror_first):
                keep.append(r)
        rows = pd.DataFrame(keep, columns=poi_df.columns).sort_values("estimate", ascending=False)
    algos = sorted(set(poi_df["algo_x"]) | set(poi_df["algo_y"]))
    colors = _colors(colors, algos)
    if ax is None:
        ax = _new_figure(6.5, 1.4 + 0.4 * max(len(rows), 1)).subplots()
    y = np.arange(len(rows))[::-1]
    _interval_bars(ax, y, rows["lower"], rows["upper"], rows["estimate"], [colors[a] for a in rows["algo_x"]])
    ax.set_yticks(y, [f"P({r.algo_x} > {r.algo_y})" for r in rows.itertuples(index=False)])
    ax.axvline(0.5, color="0.3", linestyle="--", linewidth=1.2)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    _style(
        ax,
        title="Probability of improvement",
        xlabel=f"P(a run of X scores higher than a run of Y), mean over tasks ({_rule(table)} {table.metric})",
    )
    ax.grid(False, axis="y")
    ax.tick_params(axis="y", labelsize=LABEL_SIZE)
    return ax.figure


def plot_success_by_level(
    scores: pd.DataFrame, levels: Sequence[str], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Success rate per instruction level (ImagineBench's real / rephrase / easy / hard): one bar per
    algorithm and task (a data_mix is a task), the mean over seeds, with a line from the lowest to the highest
    seed. ``scores``: columns algo, env, seed, level, score (a run's score of ``eval/success/<level>``)."""
    fig = _new_figure(max(6.0, 1.6 * len(levels) + 2.5), 3.6) if ax is None else ax.figure
    ax = ax if ax is not None else fig.add_subplot(1, 1, 1)
    groups = sorted(set(zip(scores["algo"].astype(str), scores["env"].astype(str))))
    colors = algo_colors([f"{a} {e}" for a, e in groups])
    width = 0.8 / max(1, len(groups))
    for g, (algo, env) in enumerate(groups):
        rows = scores[(scores["algo"] == algo) & (scores["env"] == env)]
        x, mean, lo, hi = [], [], [], []
        for i, level in enumerate(levels):
            v = rows.loc[rows["level"] == level, "score"].to_numpy(float)
            if len(v):
                x.append(i - 0.4 + width * (g + 0.5))
                mean.append(v.mean())
                lo.append(max(0.0, v.mean() - v.min()))
                hi.append(max(0.0, v.max() - v.mean()))
        color = colors[f"{algo} {env}"]
        ax.bar(x, mean, width * 0.9, color=color, label=f"{algo} {env}")
        ax.errorbar(x, mean, yerr=[lo, hi], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
    ax.set_xticks(range(len(levels)), list(levels))
    ax.set_ylim(0, 1.05)
    _style(ax, title or "Success rate per instruction level", "instruction level", "success rate")
    _legend(ax, outside=fig is not None and ax is fig.axes[0])
    return fig
