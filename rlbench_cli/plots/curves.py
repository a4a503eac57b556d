"""Figures of curves over training: the IQM sample-efficiency curve and the per-task learning curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rlbench_cli import stats
from rlbench_cli.plots.style import (
    LEGEND_SIZE,
    TITLE_SIZE,
    _algo_order,
    _colors,
    _iqm_label,
    _legend,
    _new_figure,
    _step_axis,
    _style,
    algo_styles,
    metric_label,
    steps_label,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


# ---------------------------------------------------------------------------------- sample efficiency
def plot_sample_efficiency(
    se_df: pd.DataFrame,
    table: stats.ScoreTable,
    ax: Axes | None = None,
    colors: Mapping[str, str] | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    step_kinds: Mapping[str, str] | None = None,
) -> Figure:
    """IQM over runs and tasks against training steps, with its bootstrap band.

    Args:
        se_df: ``stats.sample_efficiency`` output, columns ``algo, step, estimate, lower, upper``.
        table: The score table (for the metric name and normalisation in the labels).
        ax: Axes to draw into, or None for a new figure.
        colors: ``{algo: colour}``; each line also takes its algorithm's ``algo_styles`` style and marker.
        xlabel: x label; default ``steps_label`` of the table's tasks in ``step_kinds``.
        ylabel: y label; default ``IQM`` and the ``score_label``.
        step_kinds: ``{task: "online" | "offline"}``, what a step is on each task.

    Returns:
        The Figure drawn into.
    """
    algos = _algo_order(se_df, "algo", table)
    colors = _colors(colors, algos)
    styles = algo_styles(colors)
    own = ax is None
    if own:
        ax = _new_figure(7.0, 4.2).subplots()
    for algo in algos:
        sub = se_df.loc[se_df["algo"] == algo].sort_values("step")
        ax.plot(
            sub["step"],
            sub["estimate"],
            color=colors[algo],
            linestyle=styles[algo][0],
            marker=styles[algo][1],
            markevery=max(1, len(sub) // 10),
            linewidth=2.2,
            ms=5,
            label=algo,
        )
        ax.fill_between(sub["step"], sub["lower"], sub["upper"], color=colors[algo], alpha=0.2, linewidth=0)
    _step_axis(ax)
    kinds = [(step_kinds or {}).get(t) for t in table.tasks]
    _style(
        ax,
        title="Sample efficiency",
        xlabel=xlabel if xlabel is not None else steps_label(kinds),
        ylabel=ylabel if ylabel is not None else _iqm_label(table),
    )
    _legend(ax, outside=own)
    return ax.figure


# ------------------------------------------------------------------------------------ learning curves
def plot_learning_curves(
    lc_df: pd.DataFrame,
    axes: Sequence[Axes] | Axes | None = None,
    colors: Mapping[str, str] | None = None,
    metric: str = "eval/return",
    ncols: int = 3,
    xlabel: str | None = None,
    ylabel: str | None = None,
    step_kinds: Mapping[str, str] | None = None,
    boundaries: Mapping[str, Sequence[float]] | None = None,
) -> Figure:
    """Raw learning curves: one panel per environment, mean over seeds with a shaded 95% bootstrap interval.

    Each algorithm has its colour and, so that curves stay apart in greyscale, its line style and marker
    (``algo_styles``).

    Args:
        lc_df: ``stats.learning_curves`` output, columns ``algo, env, step, mean, lower, upper, n``.
        axes: One Axes per environment (sorted names), a single Axes for one environment, or None for a new
            figure with up to ``ncols`` panels per row.
        colors: ``{algo: colour}``.
        metric: Metric name; the y label is its ``metric_label`` (``eval/return`` -> ``Return``).
        ncols: Panels per row of a new figure.
        xlabel: x label of every panel; default ``steps_label`` of the panel's task in ``step_kinds``.
        ylabel: y label of every panel; default ``metric_label(metric)``.
        step_kinds: ``{task: "online" | "offline"}``, what a step is on each task.
        boundaries: ``{task: [steps]}``: phase boundaries of offline-to-online runs, each drawn as a dotted
            vertical line (offline training to its left, online fine-tuning to its right).

    Returns:
        The Figure drawn into.
    """
    envs = sorted(lc_df["env"].astype(str).unique())
    algos = sorted(lc_df["algo"].astype(str).unique())
    colors = _colors(colors, algos)
    styles = algo_styles(colors)
    new = axes is None
    if new:
        cols = min(ncols, len(envs))
        nrows = -(-len(envs) // cols)
        fig = _new_figure(4.2 * cols + 0.4, 3.3 * nrows + 0.8)
        grid = fig.subplots(nrows, cols, squeeze=False)
        axes = list(grid.ravel())
        for extra in axes[len(envs) :]:
            extra.set_visible(False)
        axes = axes[: len(envs)]
    elif not isinstance(axes, Sequence | np.ndarray):
        axes = [axes]
    axes = list(np.ravel(axes))
    if len(axes) != len(envs):
        raise ValueError(
            f"plot_learning_curves needs {len(envs)} axes (one per environment), got {len(axes)}."
        )
    fig = axes[0].figure
    for ax, env in zip(axes, envs, strict=True):
        sub_env = lc_df.loc[lc_df["env"] == env]
        for algo in algos:
            sub = sub_env.loc[sub_env["algo"] == algo].sort_values("step")
            if sub.empty:
                continue
            ax.plot(sub["step"], sub["mean"], label=algo, **_line_kw(colors[algo], styles[algo], len(sub)))
            ax.fill_between(
                sub["step"], sub["lower"], sub["upper"], color=colors[algo], alpha=0.2, linewidth=0
            )
        for b in sorted(set((boundaries or {}).get(env, ()))):
            ax.axvline(b, color="0.35", linestyle=":", linewidth=1.2, zorder=1)
            ax.annotate("offline | online", (b, 0.02), xycoords=("data", "axes fraction"), ha="center",
                        va="bottom", fontsize=LEGEND_SIZE, color="0.35",
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"})  # fmt: skip
        _step_axis(ax)
        _style(
            ax,
            title=env,
            xlabel=xlabel
            if xlabel is not None
            else "Gradient steps, then env steps"
            if (boundaries or {}).get(env)
            else steps_label([(step_kinds or {}).get(env)]),
            ylabel=ylabel if ylabel is not None else metric_label(metric),
        )
    handles = [_line(colors[a], styles[a], a) for a in algos]
    if new:
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncols=min(len(algos), 6),
            fontsize=LEGEND_SIZE,
            frameon=False,
        )
        fig.suptitle(
            f"Learning curves: mean {metric} over seeds, shaded 95% bootstrap CI", fontsize=TITLE_SIZE
        )
    else:
        axes[0].legend(handles=handles, fontsize=LEGEND_SIZE, frameon=False, loc="best")
    return fig


def _line_kw(color: str, style: tuple[str, str], points: int) -> dict[str, Any]:
    return {"color": color, "linestyle": style[0], "marker": style[1], "markevery": max(1, points // 8),
            "ms": 5, "linewidth": 2.0}  # fmt: skip


def _line(color: str, style: tuple[str, str], label: str) -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], label=label, **_line_kw(color, style, 1))
