"""Matplotlib figures of the statistics in ``rlbench_cli.stats``.

Every plot function takes ``ax=None`` (``axes=None`` where it draws several panels), draws into the given
axes or a new figure, and returns the ``matplotlib.figure.Figure``, so figures compose into subplots. New
figures are plain ``Figure`` objects rendered by the Agg canvas: no pyplot state, no GUI backend, no change
to the user's matplotlib backend. Matplotlib is imported inside the functions, so importing this module is
cheap.

Each algorithm has one colour in every figure: ``algo_colors`` maps the sorted algorithm names onto a fixed
colour-blind-friendly palette; pass the same mapping (``colors=``) to every function, as ``write_all`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rlbench_cli import stats

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "PALETTE",
    "algo_colors",
    "plot_aggregates",
    "plot_performance_profile",
    "plot_probability_of_improvement",
    "plot_sample_efficiency",
    "plot_learning_curves",
    "write_all",
]

# seaborn's "colorblind" palette (Okabe-Ito family), then the 10 extra hues of matplotlib's tab20.
PALETTE = (
    "#0173B2",
    "#DE8F05",
    "#029E73",
    "#D55E00",
    "#CC78BC",
    "#CA9161",
    "#FBAFE4",
    "#949494",
    "#ECE133",
    "#56B4E9",
    "#AEC7E8",
    "#FFBB78",
    "#98DF8A",
    "#FF9896",
    "#C5B0D5",
    "#C49C94",
    "#F7B6D2",
    "#C7C7C7",
    "#DBDB8D",
    "#9EDAE5",
)

TITLE_SIZE = 13
LABEL_SIZE = 11
TICK_SIZE = 10
LEGEND_SIZE = 10


def algo_colors(algos: Sequence[str]) -> dict[str, str]:
    """One colour per algorithm: the sorted unique names take ``PALETTE`` in order (cycling past 20).

    Args:
        algos: Algorithm names, in any order, duplicates allowed.

    Returns:
        ``{algo: hex colour}``; the same list of names always gives the same mapping.
    """
    names = sorted(set(map(str, algos)))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


# --------------------------------------------------------------------------------------------- helpers
def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colors(colors: Mapping[str, str] | None, algos: Sequence[str]) -> Mapping[str, str]:
    if colors is None:
        return algo_colors(algos)
    missing = [a for a in algos if a not in colors]
    if missing:
        extra = algo_colors(list(colors) + list(missing))
        return {**extra, **colors}
    return colors


def _style(ax: Axes, title: str | None = None, xlabel: str | None = None, ylabel: str | None = None) -> None:
    if title is not None:
        ax.set_title(title, fontsize=TITLE_SIZE)
    if xlabel is not None:
        ax.set_xlabel(xlabel, fontsize=LABEL_SIZE)
    if ylabel is not None:
        ax.set_ylabel(ylabel, fontsize=LABEL_SIZE)
    ax.tick_params(labelsize=TICK_SIZE)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(True, alpha=0.3, linewidth=0.8)
    ax.set_axisbelow(True)


def _legend(ax: Axes, outside: bool) -> None:
    """Legend outside the plot area (right) on figures made here, inside ("best") on a caller's axes."""
    if outside:
        ax.legend(fontsize=LEGEND_SIZE, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=LEGEND_SIZE, frameon=False, loc="best")


def _rule(table: stats.ScoreTable) -> str:
    return table.rule + (f" (first {table.drop_first} evals dropped)" if table.drop_first else "")


def _norm_note(table: stats.ScoreTable) -> str:
    if table.normalized:
        return f"normalised: {table.normalized} refs" + (f", x{table.scale:g}" if table.scale != 1 else "")
    return "raw, not normalised"


def _step_axis(ax: Axes) -> None:
    from matplotlib.ticker import EngFormatter, MaxNLocator

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6))


def _algo_order(frame: pd.DataFrame, column: str, table: stats.ScoreTable | None) -> list[str]:
    present = list(dict.fromkeys(frame[column].astype(str)))
    if table is not None:
        return [a for a in table.algos if a in present] + [a for a in present if a not in table.algos]
    return sorted(present)


# ------------------------------------------------------------------------------------------ aggregates
def plot_aggregates(
    aggregates_df: pd.DataFrame,
    table: stats.ScoreTable,
    axes: Sequence[Axes] | Axes | None = None,
    colors: Mapping[str, str] | None = None,
    metrics: Sequence[str] = stats.METRICS,
) -> Figure:
    """rliable-style interval plot: one panel per aggregate metric, one horizontal CI bar per algorithm.

    Args:
        aggregates_df: ``stats.aggregates`` output, columns ``algo, metric, estimate, lower, upper``.
        table: The score table the aggregates came from (for the labels: metric, rule, normalisation).
        axes: One Axes per entry of ``metrics`` (a single Axes when there is one metric), or None for a
            new figure with one row of panels.
        colors: ``{algo: colour}``; defaults to ``algo_colors`` of the algorithms shown.
        metrics: Which metrics to draw, in order.

    Returns:
        The Figure drawn into.
    """
    metrics = [m for m in metrics if m in set(aggregates_df["metric"])]
    if table.normalized is None:  # optimality gap is NaN on raw scores
        metrics = [m for m in metrics if m != "optimality_gap"] or metrics
    algos = _algo_order(aggregates_df, "algo", table)
    colors = _colors(colors, algos)
    if axes is None:
        fig = _new_figure(3.6 * len(metrics) + 0.8, max(2.4, 1.3 + 0.45 * len(algos)))
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
        for yi, algo in zip(y, algos, strict=True):
            if algo not in sub.index:
                continue
            row = sub.loc[algo]
            color = colors[algo]
            ax.barh(
                yi,
                row["upper"] - row["lower"],
                left=row["lower"],
                height=0.6,
                color=color,
                alpha=0.75,
                edgecolor=color,
            )
            ax.vlines(row["estimate"], yi - 0.3, yi + 0.3, color="black", linewidth=2.0)
        ax.set_yticks(y, algos)
        ax.set_ylim(-0.6, len(algos) - 0.4)
        ends = sub[["lower", "upper", "estimate"]].to_numpy(dtype=float)
        ends = ends[np.isfinite(ends)]
        if ends.size:  # bars have sticky edges, so margins() cannot pad them: set the limits
            low, high = float(ends.min()), float(ends.max())
            pad = 0.08 * (high - low) if high > low else max(0.05 * abs(high), 0.05)
            ax.set_xlim(low - pad, high + pad)
        label = f"{stats.METRIC_LABELS.get(metric, metric)} of {_rule(table)} {table.metric}\n({_norm_note(table)})"
        _style(ax, title=stats.METRIC_LABELS.get(metric, metric), xlabel=label)
        ax.grid(False, axis="y")
        if metric == "optimality_gap":
            ax.set_title("Optimality gap (lower is better)", fontsize=TITLE_SIZE)
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
        colors: ``{algo: colour}``.

    Returns:
        The Figure drawn into.
    """
    algos = _algo_order(profile_df, "algo", table)
    colors = _colors(colors, algos)
    own = ax is None
    if own:
        ax = _new_figure(8.0, 4.8).subplots()
    for algo in algos:
        sub = profile_df.loc[profile_df["algo"] == algo].sort_values("tau")
        ax.plot(sub["tau"], sub["estimate"], color=colors[algo], linewidth=2.2, label=algo)
        ax.fill_between(sub["tau"], sub["lower"], sub["upper"], color=colors[algo], alpha=0.2, linewidth=0)
    if table.normalized:
        ax.axvline(1.0, color="0.4", linestyle=":", linewidth=1.2)
    ax.set_ylim(-0.02, 1.02)
    _style(
        ax,
        title="Performance profile",
        xlabel=f"Score threshold \u03c4 on {_rule(table)} {table.metric} ({_norm_note(table)})",
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
        ax = _new_figure(7.5, 1.4 + 0.5 * max(len(rows), 1)).subplots()
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows.itertuples(index=False), strict=True):
        color = colors[r.algo_x]
        ax.barh(yi, r.upper - r.lower, left=r.lower, height=0.6, color=color, alpha=0.75, edgecolor=color)
        ax.vlines(r.estimate, yi - 0.3, yi + 0.3, color="black", linewidth=2.0)
    ax.set_yticks(y, [f"P({r.algo_x} > {r.algo_y})" for r in rows.itertuples(index=False)])
    ax.axvline(0.5, color="0.3", linestyle="--", linewidth=1.2)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    _style(
        ax,
        title="Probability of improvement",
        xlabel=(
            f"P(a run of X scores higher than a run of Y), mean over tasks\n"
            f"{_rule(table)} {table.metric} ({_norm_note(table)}; P is unchanged by normalisation)"
        ),
    )
    ax.grid(False, axis="y")
    ax.tick_params(axis="y", labelsize=LABEL_SIZE)
    return ax.figure


# ---------------------------------------------------------------------------------- sample efficiency
def plot_sample_efficiency(
    se_df: pd.DataFrame,
    table: stats.ScoreTable,
    ax: Axes | None = None,
    colors: Mapping[str, str] | None = None,
) -> Figure:
    """IQM over runs and tasks against environment steps, with its bootstrap band.

    Args:
        se_df: ``stats.sample_efficiency`` output, columns ``algo, step, estimate, lower, upper``.
        table: The score table (for the metric name and normalisation in the labels).
        ax: Axes to draw into, or None for a new figure.
        colors: ``{algo: colour}``.

    Returns:
        The Figure drawn into.
    """
    algos = _algo_order(se_df, "algo", table)
    colors = _colors(colors, algos)
    own = ax is None
    if own:
        ax = _new_figure(8.0, 4.8).subplots()
    for algo in algos:
        sub = se_df.loc[se_df["algo"] == algo].sort_values("step")
        ax.plot(
            sub["step"], sub["estimate"], color=colors[algo], linewidth=2.2, marker="o", ms=3.5, label=algo
        )
        ax.fill_between(sub["step"], sub["lower"], sub["upper"], color=colors[algo], alpha=0.2, linewidth=0)
    _step_axis(ax)
    _style(
        ax,
        title="Sample efficiency",
        xlabel="Training steps (env steps online, gradient steps offline)",
        ylabel=f"IQM of {table.metric}\n({_norm_note(table)})",
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
) -> Figure:
    """Raw learning curves: one panel per environment, mean over seeds with a shaded 95% bootstrap interval.

    Args:
        lc_df: ``stats.learning_curves`` output, columns ``algo, env, step, mean, lower, upper, n``.
        axes: One Axes per environment (sorted names), a single Axes for one environment, or None for a new
            figure with up to ``ncols`` panels per row.
        colors: ``{algo: colour}``.
        metric: Metric name for the y label.
        ncols: Panels per row of a new figure.

    Returns:
        The Figure drawn into.
    """
    envs = sorted(lc_df["env"].astype(str).unique())
    algos = sorted(lc_df["algo"].astype(str).unique())
    colors = _colors(colors, algos)
    new = axes is None
    if new:
        cols = min(ncols, len(envs))
        nrows = -(-len(envs) // cols)
        fig = _new_figure(4.6 * cols + 0.4, 3.6 * nrows + 0.7)
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
            ax.plot(sub["step"], sub["mean"], color=colors[algo], linewidth=2.0, label=algo)
            ax.fill_between(
                sub["step"], sub["lower"], sub["upper"], color=colors[algo], alpha=0.2, linewidth=0
            )
        _step_axis(ax)
        _style(
            ax,
            title=env,
            xlabel="Training steps (env steps online, gradient steps offline)",
            ylabel=f"{metric} (raw)",
        )
    handles = [_line(colors[a], a) for a in algos]
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


def _line(color: str, label: str) -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, linewidth=2.0, label=label)


# ---------------------------------------------------------------------------------------------- write
def write_all(
    suite_name: str,
    df_metric: pd.DataFrame,
    table: stats.ScoreTable,
    out_dir: str | Path,
    fmt: str = "png",
    reps: int = 2000,
    seed: int = 0,
    aggregates_df: pd.DataFrame | None = None,
    poi_df: pd.DataFrame | None = None,
    dpi: int = 150,
    aggregate_reps: int | None = None,
    curves_df: pd.DataFrame | None = None,
) -> list[Path]:
    """Writes every figure of a suite and returns their paths.

    Files: ``aggregates``, ``performance_profile``, ``probability_of_improvement`` (only with two or more
    algorithms), ``sample_efficiency`` and ``learning_curves``, each ``.{fmt}``, in ``out_dir`` (created).

    Args:
        suite_name: Suite name for the figure titles.
        df_metric: The metric rows the table was built from (columns ``run_id, algo, env, seed, step,
            value``), for the curves.
        table: Score table.
        out_dir: Folder for the files.
        fmt: File format understood by matplotlib (``png``, ``pdf``, ``svg``).
        reps: Bootstrap replications for every interval computed here.
        seed: Bootstrap seed.
        aggregates_df: Reuse an ``stats.aggregates`` result (e.g. the leaderboard's) instead of recomputing.
        poi_df: Reuse a ``stats.probability_of_improvement`` result.
        dpi: Resolution of raster formats.
        aggregate_reps: Replications behind ``aggregates_df`` when it was computed with another ``reps``
            (named in that figure's title).
        curves_df: Rows for the learning curves when they should show more than the table (e.g. tasks
            left out of the aggregates because not every algorithm ran them); default ``df_metric``.

    Returns:
        Paths of the files written, in the order above.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    colors = algo_colors(list(table.algos) + list(df_metric["algo"].astype(str).unique()))
    paths: list[Path] = []

    def save(fig: Figure, name: str) -> None:
        path = out / f"{name}.{fmt}"
        fig.savefig(path, dpi=dpi, bbox_inches="tight", pad_inches=0.15)
        paths.append(path)

    if aggregates_df is None:
        aggregates_df = stats.aggregates(table, reps=reps, seed=seed)
    fig = plot_aggregates(aggregates_df, table, colors=colors)
    fig.suptitle(_suite_title(suite_name, table, aggregate_reps or reps), fontsize=TITLE_SIZE)
    save(fig, "aggregates")

    fig = plot_performance_profile(
        stats.performance_profile(table, reps=reps, seed=seed), table, colors=colors
    )
    fig.suptitle(_suite_title(suite_name, table, reps), fontsize=TITLE_SIZE)
    save(fig, "performance_profile")

    if len(table.algos) >= 2:
        if poi_df is None:
            poi_df = stats.probability_of_improvement(table, reps=reps, seed=seed)
        fig = plot_probability_of_improvement(poi_df, table, colors=colors)
        fig.suptitle(_suite_title(suite_name, table, reps), fontsize=TITLE_SIZE)
        save(fig, "probability_of_improvement")

    se = stats.sample_efficiency(df_metric, normalize=table.resolved, reps=reps, seed=seed)
    fig = plot_sample_efficiency(se, table, colors=colors)
    fig.suptitle(_suite_title(suite_name, table, reps), fontsize=TITLE_SIZE)
    save(fig, "sample_efficiency")

    paths.append(write_learning_curves(suite_name, df_metric if curves_df is None else curves_df, table.metric,
                                       out, fmt=fmt, reps=reps, seed=seed, dpi=dpi, colors=colors))  # fmt: skip
    return paths


def write_learning_curves(
    suite_name: str,
    df_metric: pd.DataFrame,
    metric: str,
    out_dir: str | Path,
    fmt: str = "png",
    reps: int = 2000,
    seed: int = 0,
    dpi: int = 150,
    colors: Mapping[str, str] | None = None,
) -> Path:
    """Writes ``learning_curves.{fmt}``: raw mean over seeds per environment, bootstrap band. Returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    colors = colors or algo_colors(list(df_metric["algo"].astype(str).unique()))
    fig = plot_learning_curves(
        stats.learning_curves(df_metric, reps=reps, seed=seed), colors=colors, metric=metric
    )
    fig.suptitle(
        f"{suite_name}: mean {metric} over seeds, shaded 95% bootstrap CI of the mean (raw scores)",
        fontsize=TITLE_SIZE,
    )
    path = out / f"learning_curves.{fmt}"
    fig.savefig(path, dpi=dpi, bbox_inches="tight", pad_inches=0.15)
    return path


def _suite_title(suite_name: str, table: stats.ScoreTable, reps: int) -> str:
    runs = int(table.per_run["in_table"].sum())
    return (
        f"{suite_name}: {_count(len(table.algos), 'algorithm')}, {_count(len(table.tasks), 'task')}, "
        f"{_count(runs, 'run')}; 95% stratified bootstrap CIs ({reps:,} reps)"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
