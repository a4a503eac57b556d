"""A score against a config key (``rlbench plot SUITE --x KEY``): one panel per task, one line per legend
entry, each point the IQM (or mean) over seeds with its 95% bootstrap interval as a band and error bar; with
several metrics (``--metric eval/em --metric eval/cr``), one row of panels per metric."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rlbench_cli import stats
from rlbench_cli.plots.style import (
    LEGEND_SIZE,
    TITLE_SIZE,
    _colors,
    _new_figure,
    _style,
    algo_styles,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_by_key(
    points: pd.DataFrame,
    key: str,
    axes: Sequence[Axes] | Axes | None = None,
    colors: Mapping[str, str] | None = None,
    ylabel: str = "Score",
    xlabel: str | None = None,
    title: str | None = None,
    ncols: int = 3,
    figsize: tuple[float, float] | None = None,
    share_y: bool = False,
) -> Figure:
    """The score against a key's values, per task.

    Args:
        points: ``stats.key_intervals`` output (``env, legend, x, position, estimate, lower, upper, runs``).
        key: The key on the x axis (its label, unless ``xlabel``).
        axes: One Axes per task (sorted names), a single Axes for one task, or None for a new figure with up
            to ``ncols`` panels per row and one legend below them.
        colors: ``{legend entry: colour}``; each line also takes its entry's ``algo_styles`` style and marker.
        ylabel: The score axis, e.g. ``IQM of EM``.
        xlabel: The x label; default the key.
        title: The figure's title (a new figure only).
        ncols: Panels per row of a new figure.
        figsize: Size of a new figure in inches; default fitted to the panels.
        share_y: One y range for every task's panel (the union of their own), so that tasks compare by
            eye; default each panel fitted to its task.

    Returns:
        The Figure drawn into. A numeric key is drawn at its values (a log axis when ``stats.x_axis`` says
        so, the values as ticks); a categorical one at 0, 1, 2, ... labelled with its values.
    """
    envs = sorted(points["env"].astype(str).unique())
    legends = stats.natural_order(points["legend"].astype(str))
    axis = stats.x_axis(points["x"].astype(str))
    colors = _colors(colors, legends)
    styles = algo_styles(colors)
    new = axes is None
    if new:
        cols = max(1, min(ncols, len(envs)))
        nrows = -(-len(envs) // cols)
        fig = _new_figure(*(figsize or (4.4 * cols + 0.4, 3.4 * nrows + 0.9 + 0.25 * len(legends) / 3)))
        grid = fig.subplots(nrows, cols, squeeze=False)
        axes = list(grid.ravel())
        for extra in axes[len(envs) :]:
            extra.set_visible(False)
        axes = axes[: len(envs)]
    axes = list(np.ravel(axes))  # type: ignore[arg-type]
    if len(axes) != len(envs):
        raise ValueError(f"plot_by_key needs {len(envs)} axes (one per task), got {len(axes)}.")
    fig = axes[0].figure
    for ax, env in zip(axes, envs, strict=True):
        panel = points.loc[points["env"].astype(str) == env]
        for legend in legends:
            sub = panel.loc[panel["legend"].astype(str) == legend].sort_values("position")
            if sub.empty:
                continue
            x = sub["position"].to_numpy(float)
            y, lo, hi = (sub[c].to_numpy(float) for c in ("estimate", "lower", "upper"))
            ax.errorbar(x, y, yerr=[y - lo, hi - y], color=colors[legend], linestyle=styles[legend][0],
                        marker=styles[legend][1], ms=5, linewidth=2.0, capsize=3, label=legend)  # fmt: skip
            ax.fill_between(x, lo, hi, color=colors[legend], alpha=0.15, linewidth=0)
        if axis.log:
            ax.set_xscale("log")
        if not axis.crowded:
            ax.set_xticks(axis.positions, axis.values)
            ax.minorticks_off()
        elif not axis.log:  # values a label each would overlap (logged sizes: 50,112 and 50,880)
            ax.ticklabel_format(axis="x", style="plain", useOffset=False)
        _style(ax, title=env, xlabel=xlabel if xlabel is not None else key, ylabel=ylabel)
    if share_y:
        lows, highs = zip(*(ax.get_ylim() for ax in axes), strict=True)
        for ax in axes:
            ax.set_ylim(min(lows), max(highs))
    handles = _handles(legends, colors, styles)
    if new:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(legends), 3),
                   fontsize=LEGEND_SIZE, frameon=False)  # fmt: skip
        if title:
            fig.suptitle(title, fontsize=TITLE_SIZE)
    else:
        axes[0].legend(handles=handles, fontsize=LEGEND_SIZE, frameon=False, loc="best")
    return fig


def _handles(
    legends: Sequence[str], colors: Mapping[str, str], styles: Mapping[str, tuple[str, str]]
) -> list:
    from matplotlib.lines import Line2D

    return [Line2D([], [], color=colors[g], linestyle=styles[g][0], marker=styles[g][1], ms=5, linewidth=2.0,
                   label=g) for g in legends]  # fmt: skip


def plot_by_key_rows(
    rows: Sequence[tuple[pd.DataFrame, str]],
    key: str,
    colors: Mapping[str, str] | None = None,
    xlabel: str | None = None,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
    share_y: bool = False,
) -> Figure:
    """Several scores against one key: a row of panels per score (``plot_by_key``'s), a column per task.

    Args:
        rows: ``(points, ylabel)`` per row, top first: ``stats.key_intervals`` output and its score's label.
        key: The key on the x axis (its label, unless ``xlabel``), shown under the bottom row.
        colors: ``{legend entry: colour}``, the same in every row; default one colour per entry of any row.
        xlabel: The x label; default the key.
        title: The figure's title.
        figsize: Size in inches; default fitted to the panels.
        share_y: One y range across each row's panels (a score's, over the tasks), not across rows.

    Returns:
        The Figure, with one legend below the panels. A task a row has no points for leaves its panel empty
        (hidden).
    """
    if not rows:
        raise ValueError("plot_by_key_rows needs at least one row.")
    envs = sorted(set().union(*(set(p["env"].astype(str)) for p, _ in rows)))
    legends = stats.natural_order(pd.concat([p["legend"].astype(str) for p, _ in rows]).unique())
    colors = _colors(colors, legends)
    fig = _new_figure(*(figsize or (4.4 * len(envs) + 0.4, 3.4 * len(rows) + 0.9 + 0.25 * len(legends) / 3)))
    grid = fig.subplots(len(rows), len(envs), squeeze=False)
    for r, (points, ylabel) in enumerate(rows):
        have = set(points["env"].astype(str))
        for ax, env in zip(grid[r], envs, strict=True):
            ax.set_visible(env in have)
        last = r == len(rows) - 1
        panel_axes = [ax for ax, env in zip(grid[r], envs, strict=True) if env in have]
        plot_by_key(points, key, axes=panel_axes, colors=colors, ylabel=ylabel, share_y=share_y,
                    xlabel=(xlabel if xlabel is not None else key) if last else "")  # fmt: skip
        legend = panel_axes[0].get_legend()
        if legend is not None:
            legend.remove()
    fig.legend(handles=_handles(legends, colors, algo_styles(colors)), loc="outside lower center",
               ncols=min(len(legends), 3), fontsize=LEGEND_SIZE, frameon=False)  # fmt: skip
    if title:
        fig.suptitle(title, fontsize=TITLE_SIZE)
    return fig
