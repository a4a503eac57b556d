"""Matplotlib figures of the statistics in ``rlbench_cli.stats``.

Every plot function takes ``ax=None`` (``axes=None`` where it draws several panels), draws into the given
axes or a new figure, and returns the ``matplotlib.figure.Figure``, so figures compose into subplots. New
figures are plain ``Figure`` objects rendered by the Agg canvas: no pyplot state, no GUI backend, no change
to the user's matplotlib backend. Matplotlib is imported inside the functions, so importing this module is
cheap.

Each algorithm has one colour in every figure: ``algo_colors`` maps the sorted algorithm names onto a fixed
colour-blind-safe palette (Okabe-Ito, then Paul Tol's muted set); pass the mapping of the suite's full list of
algorithms (``colors=``) to every function, as ``rlbench plot`` does, so that a figure of some of them keeps
their colours. Lines also differ by style and marker (``algo_styles``), so curves stay apart in greyscale.

Labels say what is drawn in words: ``Return`` or ``Normalised score (0 = random policy, 1 = reference
agent)`` rather than a metric path (``score_label``, ``metric_label``), and ``Environment steps`` or
``Gradient steps`` for the step axis (``steps_label``). ``save_figure`` writes PDF and PS with TrueType fonts
(``pdf.fonttype 42``), which conference submission systems accept, not matplotlib's default Type 3.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
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
    "LINESTYLES",
    "MARKERS",
    "FigureOptions",
    "TaskGroup",
    "algo_colors",
    "algo_styles",
    "metric_label",
    "score_label",
    "steps_label",
    "rank_order",
    "task_groups",
    "save_figure",
    "plot_aggregates",
    "plot_performance_profile",
    "plot_probability_of_improvement",
    "plot_sample_efficiency",
    "plot_learning_curves",
    "write_all",
    "write_learning_curves",
]

# Okabe & Ito's colour-blind-safe palette (black and yellow last: yellow is faint on white), then 8 hues of
# Paul Tol's "muted" set. Every pair of the first 8 stays apart under deuteranopia, protanopia and tritanopia
# (CIELAB distance > 15, tested). Past 8 algorithms the line style and marker tell curves apart.
PALETTE = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow
    "#332288",  # indigo
    "#117733",  # green
    "#882255",  # wine
    "#44AA99",  # teal
    "#999933",  # olive
    "#AA4499",  # purple
    "#DDCC77",  # sand
    "#CC6677",  # rose
)
# the second cue of each algorithm's line, so curves stay apart in greyscale: the i-th colour of PALETTE
# takes LINESTYLES[i % 4] and MARKERS[i % 8]
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

# what the x axis of curves counts, by the kinds of task drawn (see ``steps_label``)
STEP_LABELS = {
    "online": "Environment steps",
    "offline": "Gradient steps",
    "mixed": "Training steps (environment steps online, gradient steps offline)",
    None: "Training steps",
}
# readable names of common metrics, for axis labels; other metrics keep their own name
METRIC_NAMES = {
    "eval/return": "Return",
    "eval/success": "Success rate",
    "eval/length": "Episode length",
    "train/episode_return": "Training episode return",
}

TITLE_SIZE = 13
LABEL_SIZE = 11
TICK_SIZE = 10
LEGEND_SIZE = 10


def algo_colors(algos: Sequence[str]) -> dict[str, str]:
    """One colour per algorithm: the sorted unique names take ``PALETTE`` in order (cycling past 16).

    Derive it from the suite's FULL list of algorithms and pass it to every figure: an algorithm then keeps
    its colour in a figure that shows only some of them (a task group, a subset).

    Args:
        algos: Algorithm names, in any order, duplicates allowed.

    Returns:
        ``{algo: hex colour}``; the same list of names always gives the same mapping.
    """
    names = sorted(set(map(str, algos)))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def algo_styles(colors: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The second cue of each algorithm's line, ``{algo: (linestyle, marker)}``, tied to its colour.

    The i-th colour of ``PALETTE`` always gets ``LINESTYLES[i % 4]`` and ``MARKERS[i % 8]``, so the cue is as
    stable as the colour; a colour used again (past 16 algorithms) shifts both, and a colour not in
    ``PALETTE`` takes them by its position in ``colors``.
    """
    index = {c.upper(): i for i, c in enumerate(PALETTE)}
    seen: dict[str, int] = {}
    out = {}
    for pos, (algo, color) in enumerate(colors.items()):
        key = str(color).upper()
        i = index.get(key, pos)
        again = seen.get(key, 0)
        seen[key] = again + 1
        out[algo] = (LINESTYLES[(i + again) % len(LINESTYLES)], MARKERS[(i + 3 * again) % len(MARKERS)])
    return out


def metric_label(metric: str) -> str:
    """A readable axis label for a metric: ``eval/return`` -> ``Return``; unknown names are kept as they are."""
    return METRIC_NAMES.get(metric, metric)


def score_label(table: stats.ScoreTable) -> tuple[str, str | None]:
    """What the scores of a table are, for an axis: ``(name, note)``.

    ``("Return", None)`` for raw returns (``metric_label`` of other metrics), ``("Normalised score", "0 =
    random policy, 1 = reference agent")`` for scores normalised by a reference table, and for a suite's own
    references the range and where they came from.
    """
    if not table.normalized:
        return metric_label(table.metric), None
    desc = table.norm_description
    if "; 0 = " in desc:  # a built-in table: "...; 0 = random policy, 1 = reference agent (x 100, ...)"
        note = desc.rsplit("; ", 1)[1].split(" (")[0]
    elif desc.startswith("suite references (") and "):" in desc:
        note = f"0 to {table.scale:g}: " + desc[len("suite references (") : desc.index("):")]
    else:
        note = f"{table.normalized} references" + (f", x{table.scale:g}" if table.scale != 1 else "")
    return "Normalised score", note


def _score_text(table: stats.ScoreTable, sep: str = " ") -> str:
    name, note = score_label(table)
    return name if note is None else f"{name}{sep}({note})"


def _iqm_label(table: stats.ScoreTable) -> str:
    name, note = score_label(table)
    name = (
        name[:1].lower() + name[1:] if name in METRIC_NAMES.values() or name == "Normalised score" else name
    )
    return f"IQM of {name}" + (f"\n({note})" if note else "")


def steps_label(kinds: Iterable[str | None]) -> str:
    """The x label of curves over training: what a step is for the kinds of task drawn.

    Args:
        kinds: ``"online"`` (environment steps) or ``"offline"`` (gradient steps on a dataset) per task drawn;
            None where unknown.

    Returns:
        ``"Environment steps"`` when every task is online, ``"Gradient steps"`` when every task is offline,
        the mixed text only when both are there, ``"Training steps"`` when it is not known.
    """
    found = {k for k in kinds if k in ("online", "offline")}
    if len(found) == 2:
        return STEP_LABELS["mixed"]
    return STEP_LABELS[found.pop()] if found else STEP_LABELS[None]


@dataclass(frozen=True)
class FigureOptions:
    """What a user sets on the figures of a suite (``rlbench plot --title --xlabel --ylabel --figsize``).

    None keeps the default of each figure.

    Attributes:
        title: The figure title (suptitle) in place of the suite name and counts; a task group's figures add
            the group.
        xlabel: The step axis: x label of the learning curves and of sample efficiency.
        ylabel: The score axis: y label of the learning curves and of sample efficiency, x label of the
            aggregate panels.
        figsize: ``(width, height)`` in inches of every figure.
    """

    title: str | None = None
    xlabel: str | None = None
    ylabel: str | None = None
    figsize: tuple[float, float] | None = None


@dataclass(frozen=True)
class TaskGroup:
    """Tasks run by the same set of algorithms, whose aggregates can be drawn together.

    Attributes:
        name: Short name for file names (``aggregates-<name>.png``); ``""`` for the group of every algorithm,
            whose files keep their plain names.
        algos: The algorithms that ran on every task of the group (sorted).
        tasks: The tasks (sorted).
    """

    name: str
    algos: tuple[str, ...]
    tasks: tuple[str, ...]

    def describe(self) -> str:
        """``Pendulum-v1: 4 algorithms (ddpg, ppo, sac, td3) on 1 task (Pendulum-v1)``."""
        head = f"{self.name}: " if self.name else "all algorithms: "
        return (
            f"{head}{_count(len(self.algos), 'algorithm')} ({', '.join(self.algos)}) on "
            f"{_count(len(self.tasks), 'task')} ({', '.join(self.tasks)})"
        )


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


def _step_axis(ax: Axes) -> None:
    from matplotlib.ticker import EngFormatter, MaxNLocator

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10]))  # fewer on small axes


def _algo_order(frame: pd.DataFrame, column: str, table: stats.ScoreTable | None) -> list[str]:
    present = list(dict.fromkeys(frame[column].astype(str)))
    if table is not None:
        return [a for a in table.algos if a in present] + [a for a in present if a not in table.algos]
    return sorted(present)


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


def _line_kw(color: str, style: tuple[str, str], points: int) -> dict[str, Any]:
    return {"color": color, "linestyle": style[0], "marker": style[1], "markevery": max(1, points // 8),
            "ms": 5, "linewidth": 2.0}  # fmt: skip


def _line(color: str, style: tuple[str, str], label: str) -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], label=label, **_line_kw(color, style, 1))


# --------------------------------------------------------------------------------------------- groups
def task_groups(df: pd.DataFrame, max_name: int = 40) -> list[TaskGroup]:
    """Groups the tasks by the set of algorithms that ran on them.

    rliable's aggregates compare algorithms over the same tasks; when the algorithms do not all share them
    (discrete- and continuous-action algorithms in one suite), each group is one comparison.

    Args:
        df: Metric rows with columns ``algo, env``.
        max_name: Longest name made of algorithm names.

    Returns:
        The groups, most tasks first (then most algorithms, then names). The group of every algorithm (the
        tasks ``leaderboard.common_tasks`` keeps) is named ``""``; another is named by its task when it has
        one, else the tasks' common prefix, else its algorithms joined by ``-`` (up to ``max_name``
        characters), else ``group<N>``; names are unique and safe in file names.
    """
    data = df.assign(algo=df["algo"].astype(str), env=df["env"].astype(str))
    ran = data.groupby("env")["algo"].agg(lambda s: tuple(sorted(set(s))))
    every = tuple(sorted(set(data["algo"])))
    by_algos: dict[tuple[str, ...], list[str]] = {}
    for task, algos in ran.items():
        by_algos.setdefault(algos, []).append(str(task))
    ordered = sorted(by_algos.items(), key=lambda kv: (-len(kv[1]), -len(kv[0]), kv[0]))
    groups: list[TaskGroup] = []
    used: set[str] = {""}
    for i, (algos, tasks) in enumerate(ordered, 1):
        tasks = sorted(tasks)
        if algos == every:
            name = ""
        else:
            prefix = os.path.commonprefix(tasks).rstrip("-_. ")
            joined = "-".join(algos)
            candidates = [tasks[0]] if len(tasks) == 1 else []
            candidates += [prefix] if len(prefix) >= 3 else []
            candidates += [joined] if len(joined) <= max_name else []
            candidates = [_safe(c) for c in candidates]
            name = next((c for c in candidates if c and c not in used), f"group{i}")
        used.add(name)
        groups.append(TaskGroup(name, algos, tuple(tasks)))
    return groups


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._")


# ---------------------------------------------------------------------------------------------- write
SCORE_FIGURES: tuple[str, ...] = ("aggregates", "performance_profile", "probability_of_improvement")
"""The figures ``write_all`` draws from a score table, in the order it writes them."""


def warm_up() -> None:
    """Draws a small titled figure into memory: matplotlib's imports, fonts and text caches, which the first
    figure of a process pays otherwise (about half a second here); ``figure_worker`` runs it in its child."""
    import io

    fig = _new_figure(2.0, 1.5)
    ax = fig.subplots()
    ax.barh([0, 1], [1.0, 2.0], left=[0.0, 0.5])
    _style(ax, title="warm-up", xlabel="x", ylabel="y")
    fig.suptitle("warm-up", fontsize=TITLE_SIZE)
    fig.savefig(io.BytesIO(), format="png", dpi=50, bbox_inches="tight")


def save_figure(fig: Figure, path: str | Path, dpi: int = 150) -> Path:
    """Saves a figure with TrueType fonts in PDF and PS (``pdf.fonttype 42``): many conference submission
    systems reject the Type 3 fonts matplotlib embeds by default. Returns the path."""
    import matplotlib

    path = Path(path)
    with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42}):
        fig.savefig(path, dpi=dpi, bbox_inches="tight", pad_inches=0.15)
    return path


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
    *,
    colors: Mapping[str, str] | None = None,
    group: TaskGroup | None = None,
    step_kinds: Mapping[str, str] | None = None,
    options: FigureOptions | None = None,
    learning_curves: bool = True,
    sample_efficiency: bool = True,
    score_figures: Collection[str] = SCORE_FIGURES,
) -> list[Path]:
    """Writes every figure of a suite (or of one of its task groups) and returns their paths.

    Files: ``aggregates``, ``performance_profile``, ``probability_of_improvement`` (only with two or more
    algorithms), ``sample_efficiency`` and ``learning_curves``, each ``.{fmt}``, in ``out_dir`` (created).
    For a named task group the aggregate figures are ``aggregates-<group>.{fmt}`` and so on, and their title
    says which group. PDF and PS files embed TrueType fonts (``save_figure``).

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
        colors: ``{algo: colour}`` of the whole suite, so that an algorithm keeps its colour in every group;
            default ``algo_colors`` of the algorithms here.
        group: The task group drawn (``task_groups``), for file names and titles; None: the whole table.
        step_kinds: ``{task: "online" | "offline"}``, for the step axis labels (``steps_label``).
        options: Title, labels and size set by the user.
        learning_curves: Also write ``learning_curves`` (from ``curves_df``).
        sample_efficiency: Also write ``sample_efficiency`` (from ``df_metric``). With neither curve,
            ``df_metric`` is only read for algorithm names (per-run scores will do).
        score_figures: Which of the figures drawn from the score table to write (``SCORE_FIGURES``:
            aggregates, performance_profile, probability_of_improvement); the others are not computed.

    Returns:
        Paths of the files written, in the order above.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    opts = options or FigureOptions()
    if colors is None:
        colors = algo_colors(list(table.algos) + list(df_metric["algo"].astype(str).unique()))
    suffix = f"-{group.name}" if group is not None and group.name else ""
    paths: list[Path] = []

    def save(fig: Figure, name: str, reps_used: int) -> None:
        fig.suptitle(_suite_title(suite_name, table, reps_used, group, opts.title), fontsize=TITLE_SIZE)
        paths.append(_save(fig, out / f"{name}{suffix}.{fmt}", dpi, opts))

    unknown = set(score_figures) - set(SCORE_FIGURES)
    if unknown:
        raise ValueError(f"score_figures: unknown {sorted(unknown)}; use some of {', '.join(SCORE_FIGURES)}.")
    if "aggregates" in score_figures:
        if aggregates_df is None:
            aggregates_df = stats.aggregates(table, reps=reps, seed=seed)
        save(plot_aggregates(aggregates_df, table, colors=colors, xlabel=opts.ylabel), "aggregates",
             aggregate_reps or reps)  # fmt: skip

    if "performance_profile" in score_figures:
        profile = stats.performance_profile(table, reps=reps, seed=seed)
        save(plot_performance_profile(profile, table, colors=colors), "performance_profile", reps)

    if len(table.algos) >= 2 and "probability_of_improvement" in score_figures:
        if poi_df is None:
            poi_df = stats.probability_of_improvement(table, reps=reps, seed=seed)
        save(
            plot_probability_of_improvement(poi_df, table, colors=colors), "probability_of_improvement", reps
        )

    if sample_efficiency:
        se = stats.sample_efficiency(df_metric, normalize=table.resolved, reps=reps, seed=seed)
        fig = plot_sample_efficiency(se, table, colors=colors, xlabel=opts.xlabel, ylabel=opts.ylabel,
                                     step_kinds=step_kinds)  # fmt: skip
        save(fig, "sample_efficiency", reps)

    if learning_curves:
        paths.append(write_learning_curves(suite_name, df_metric if curves_df is None else curves_df,
                                           table.metric, out, fmt=fmt, reps=reps, seed=seed, dpi=dpi,
                                           colors=colors, step_kinds=step_kinds, options=opts))  # fmt: skip
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
    step_kinds: Mapping[str, str] | None = None,
    options: FigureOptions | None = None,
) -> Path:
    """Writes ``learning_curves.{fmt}``: raw mean over seeds per environment, bootstrap band. Returns its path.

    ``colors``, ``step_kinds`` and ``options`` as in ``write_all``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    opts = options or FigureOptions()
    colors = colors or algo_colors(list(df_metric["algo"].astype(str).unique()))
    boundaries = None
    if "boundary" in df_metric.columns:  # offline-to-online runs: mark where fine-tuning starts
        marked = df_metric.dropna(subset=["boundary"])
        boundaries = {str(env): list(g.unique()) for env, g in marked.groupby("env")["boundary"]}
    fig = plot_learning_curves(
        stats.learning_curves(df_metric, reps=reps, seed=seed), colors=colors, metric=metric,
        xlabel=opts.xlabel, ylabel=opts.ylabel, step_kinds=step_kinds, boundaries=boundaries,
    )  # fmt: skip
    title = (
        opts.title
        or f"{suite_name}: mean {metric} over seeds, shaded 95% bootstrap CI of the mean (raw scores)"
    )
    fig.suptitle(title, fontsize=TITLE_SIZE)
    return _save(fig, out / f"learning_curves.{fmt}", dpi, opts)


def _save(fig: Figure, path: Path, dpi: int, opts: FigureOptions) -> Path:
    if opts.figsize is not None:
        fig.set_size_inches(*opts.figsize)
    return save_figure(fig, path, dpi)


def _suite_title(
    suite_name: str,
    table: stats.ScoreTable,
    reps: int,
    group: TaskGroup | None = None,
    title: str | None = None,
) -> str:
    runs = int(table.per_run["in_table"].sum())
    where = ""
    if group is not None and group.name:
        who = ", ".join(group.algos) if len(group.algos) <= 4 else f"{len(group.algos)} algorithms"
        where = f"task group {group.name} (the tasks run by {who})"
    if title:
        return f"{title}: {where}" if where else title
    counts = (
        f"{_count(len(table.algos), 'algorithm')}, {_count(len(table.tasks), 'task')}, {_count(runs, 'run')}"
    )
    head = f"{suite_name}, {where}:\n" if where else f"{suite_name}: "
    return f"{head}{counts}; {_rule(table)} {table.metric}, 95% stratified bootstrap CIs ({reps:,} reps)"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
