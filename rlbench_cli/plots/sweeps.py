"""A score against a config key (``rlbench plot SUITE --x KEY``): one panel per task, one line per legend
entry, each point the IQM (or mean) over seeds with its 95% bootstrap interval as a band and error bar."""

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
        ax.set_xticks(axis.positions, axis.values)
        ax.minorticks_off()
        _style(ax, title=env, xlabel=xlabel if xlabel is not None else key, ylabel=ylabel)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[g], linestyle=styles[g][0], marker=styles[g][1], ms=5,
                      linewidth=2.0, label=g) for g in legends]  # fmt: skip
    if new:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(legends), 3),
                   fontsize=LEGEND_SIZE, frameon=False)  # fmt: skip
        if title:
            fig.suptitle(title, fontsize=TITLE_SIZE)
    else:
        axes[0].legend(handles=handles, fontsize=LEGEND_SIZE, frameon=False, loc="best")
    return fig
