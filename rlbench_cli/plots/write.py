"""A suite's figures to files: task groups (the tasks each set of algorithms ran), ``save_figure`` with
TrueType fonts, and ``write_all`` / ``write_learning_curves``, which compute the statistics and draw them."""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from rlbench_cli import stats
from rlbench_cli.plots.curves import plot_learning_curves, plot_sample_efficiency
from rlbench_cli.plots.scores import (
    plot_aggregates,
    plot_performance_profile,
    plot_probability_of_improvement,
)
from rlbench_cli.plots.style import TITLE_SIZE, FigureOptions, _new_figure, _rule, _style, algo_colors

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
