"""From one metric's rows to the figures and leaderboard of a suite (what ``rlbench plot`` writes)."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Report", "make_report", "suite_scoring", "suite_normalize", "CURVE_REPS"]

# rliable's own default for performance profiles and probability of improvement; the aggregates use --reps.
CURVE_REPS = 2000


@dataclass
class Report:
    paths: list[Path]
    leaderboard_md: str
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was drawn how (task groups), for stdout
    board: Any = None  # the ranked leaderboard.Board of the common tasks, when there is one


def _suite_config(store: Any, suite: str) -> dict[str, Any]:
    with store.reader() as con:
        rows = con.execute("SELECT config FROM suites WHERE name = ?", [suite]).fetchall()
    return json.loads(rows[0][0]) if rows and rows[0][0] else {}


def suite_scoring(
    store: Any, suite: str, metric: str | None, rule: str | None, drop_first: int | None
) -> tuple[str, str, int]:
    """(metric, rule, drop_first): the flags given, else what the suite declared (stored with it), else
    ``eval/return``, ``final``, 0. The suite's ``phase`` rides on the rule (``final@online``) unless the
    flag names a phase itself (``--score final@all`` scores whole runs)."""
    score = _suite_config(store, suite).get("score") or {}
    rule = rule or score.get("rule") or "final"
    if "@" not in rule and score.get("phase"):
        rule = f"{rule}@{score['phase']}"
    return (
        metric or score.get("metric") or "eval/return",
        rule.removesuffix("@all"),
        int(score.get("drop_first", 0)) if drop_first is None else drop_first,
    )


def suite_normalize(
    store: Any, suite: str, flag: str, metric: str | None = None
) -> str | dict[str, Any] | None:
    """What ``--normalize FLAG`` means for a suite: ``auto`` prefers the suite's own normalize block. A
    success rate (``eval/success``, ``eval/success/<level>``) is left raw under ``auto``: it is on [0, 1] already."""
    if flag == "none" or (flag == "auto" and metric is not None and metric.startswith("eval/success")):
        return None  # a success rate is already on [0, 1]
    if flag == "suite" or flag == "auto":
        config = _suite_config(store, suite)
        block = config.get("normalize")
        if block:
            return block
        refs = config.get("dataset_references")
        if refs and not config.get("envs"):  # offline suites: each dataset's random and expert returns, x 100
            return {"references": refs, "scale": 100, "source": "each dataset's random and expert returns"}
        if flag == "suite":
            from .errors import UsageError

            raise UsageError(
                f"suite {suite!r} has no normalize block; use --normalize auto, none or a table name"
            )
    return flag


def make_report(
    suite: str,
    df: Any,
    *,
    metric: str,
    rule: str,
    drop_first: int,
    normalize: str | None,
    reps: int,
    seed: int,
    out_dir: Path,
    fmt: str = "png",
    step_kinds: dict[str, str] | None = None,
    options: Any = None,
    curves: bool = True,
    worker: Any = None,
) -> Report:
    """Score runs, compute rliable statistics, write every figure and the leaderboard (md + csv).

    When the algorithms do not all run on the same tasks, the tasks are grouped by the algorithms that ran
    on them (``plots.task_groups``) and the aggregate figures are drawn per group, ``aggregates-<group>``
    and so on (the group of every algorithm, if any, keeps the plain names); ``Report.notes`` says so. The
    leaderboard keeps its rule (``leaderboard.common_tasks``): ranked on the tasks every algorithm has, else
    the per-task table. Every figure gives an algorithm the same colour (``plots.algo_colors`` of the suite).

    Args:
        step_kinds: ``{task: "online" | "offline"}``, for the step axis labels.
        options: ``plots.FigureOptions`` (title, labels, size) for every figure.
        curves: Also draw the curves over training (``sample_efficiency`` and ``learning_curves``), which need
            the metric rows. With False, ``df`` may instead be per-run scores computed in SQL
            (``stats.SCORED_COLUMNS``, ``Store.run_scores``); every other figure and the leaderboard are the same.
        worker: A ``figure_worker.FigureWorker`` that draws the score figures while the statistics of the next
            ones are computed here; None draws each here, in turn. The files are the same either way.
    """
    from . import leaderboard, plots, stats
    from .figure_worker import submit

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    colors = plots.algo_colors(list(df["algo"].astype(str).unique()))
    groups = plots.task_groups(df)
    kw = {"fmt": fmt, "seed": seed, "colors": colors, "step_kinds": step_kinds, "options": options}
    poi_reps = min(reps, CURVE_REPS)
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        try:  # the same rule as `rlbench leaderboard`: rank on the tasks every algorithm has
            data, _, left_out = leaderboard.common_tasks(df)
        except stats.StatsError as e:
            data, left_out = None, {}
            warnings.warn(f"{e}; the leaderboard is the per-task table and the aggregate figures are drawn per "
                          "task group", stats.StatsWarning, stacklevel=2)  # fmt: skip
        if left_out:
            why = "; ".join(f"{t} (no runs of {', '.join(a)})" for t, a in left_out.items())
            warnings.warn(f"tasks left out of the leaderboard and of aggregates.{fmt}, as not every algorithm has "
                          f"runs there: {why}; their aggregate figures are drawn per task group and their "
                          "learning curves with the others", stats.StatsWarning, stacklevel=2)  # fmt: skip
        if len(groups) > 1:
            notes.append(
                "the algorithms do not all run on the same tasks, so the aggregate figures (aggregates, "
                "performance_profile, probability_of_improvement, sample_efficiency) are drawn per group of "
                "tasks run by the same algorithms, one file per group:"
            )
            notes += [f"  {g.describe()} -> aggregates{'-' + g.name if g.name else ''}.{fmt}" for g in groups]
        paths: list[Path] = []
        drawn: list[tuple[Any, Any, list[Path]]] = []
        frame = md = board = None
        for group in groups:
            rows = df.loc[df["env"].astype(str).isin(group.tasks)]
            try:
                table = stats.score_table(
                    rows, rule=rule, drop_first=drop_first, normalize=normalize, metric=metric
                )
            except stats.StatsError as e:
                if len(groups) == 1:
                    raise
                warnings.warn(f"task group {group.name or 'of every algorithm'}: {e}; its aggregate figures are "
                              "not drawn", stats.StatsWarning, stacklevel=2)  # fmt: skip
                continue
            # each figure is drawn (by the worker, if any) while the next statistic is bootstrapped here
            figure_kw = {"reps": poi_reps, "aggregate_reps": reps, "group": group if len(groups) > 1 else None,
                         "learning_curves": False, "sample_efficiency": False, **kw}  # fmt: skip
            names = rows[["algo"]].drop_duplicates()  # what the score figures read of the rows (colours set)
            poi = (
                stats.probability_of_improvement(table, reps=poi_reps, seed=seed)
                if len(table.algos) > 1
                else None
            )
            later = submit(worker, plots.write_all, suite, names, table, out_dir, poi_df=poi,
                           score_figures=("performance_profile", "probability_of_improvement"), **figure_kw)  # fmt: skip
            agg = stats.aggregates(table, reps=reps, seed=seed)
            first = submit(worker, plots.write_all, suite, names, table, out_dir, aggregates_df=agg,
                           score_figures=("aggregates",), **figure_kw)  # fmt: skip
            curve_paths = []
            if curves:
                curve_paths = plots.write_all(suite, rows, table, out_dir, score_figures=(),
                                              **{**figure_kw, "sample_efficiency": True})  # fmt: skip
            drawn.append((first, later, curve_paths))
            if not group.name:  # the tasks every algorithm has: the leaderboard's table
                board = leaderboard.aggregate_board(suite, table, agg, poi, left_out, reps=reps, seed=seed)
                frame = board.frame
                header = leaderboard.header_lines(suite, table, reps=reps, seed=seed, poi_reps=poi_reps)
                md = leaderboard.to_markdown(frame, header)
        if curves:
            last = plots.write_learning_curves(suite, df, metric, out_dir, reps=CURVE_REPS, **kw)
        for first, later, curve_paths in drawn:  # the files in write_all's order
            paths += first.result() + later.result() + curve_paths
        if curves:
            paths.append(last)
        if data is None or frame is None:
            per_task = leaderboard.build(suite, df, metric=metric, rule=rule, drop_first=drop_first,
                                         normalize=normalize, reps=reps, seed=seed, per_task=True)  # fmt: skip
            frame, md = per_task.frame, leaderboard.render(per_task, "md").rstrip("\n")
    md = md.rstrip("\n")
    (out_dir / "leaderboard.md").write_text(md + "\n")
    leaderboard.to_csv(frame, out_dir / "leaderboard.csv")
    paths += [out_dir / "leaderboard.md", out_dir / "leaderboard.csv"]
    messages = list(
        dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, stats.StatsWarning))
    )
    return Report(paths=paths, leaderboard_md=md, warnings=messages, notes=notes, board=board)
