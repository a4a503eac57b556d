"""From one metric's rows to the figures and leaderboard of a suite (what ``rlbench plot`` writes)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Report", "KeyFigure", "make_report", "plot_suite", "key_figure", "success_by_level", "CURVE_REPS"]

# rliable's own default for performance profiles and probability of improvement; the aggregates use --reps.
CURVE_REPS = 2000


@dataclass
class Report:
    paths: list[Path]
    leaderboard_md: str
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was drawn how (task groups), for stdout
    board: Any = None  # the ranked leaderboard.Board of the common tasks, when there is one
    scored: Any = None  # the analysis.SuiteScores it was made from (plot_suite)


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


def plot_suite(
    store: Any,
    suite: str,
    *,
    metric: str | None,
    rule: str | None,
    drop_first: int | None,
    normalize: str,
    reps: int,
    seed: int,
    out_dir: Path,
    fmt: str = "png",
    options: Any = None,
    curves: bool = True,
    worker: Any = None,
) -> Report:
    """``rlbench plot``: a suite's scores read by ``analysis.load_suite`` (metric, rule and drop_first None:
    the suite's; ``normalize`` a ``--normalize`` value), then ``make_report``. ``Report.scored`` holds what was
    read (the scoring used, the runs left out as unfinished)."""
    from . import analysis

    scored = analysis.load_suite(store, suite, metric=metric, rule=rule, drop_first=drop_first,
                                 normalize=normalize, rows=curves)  # fmt: skip
    made = make_report(suite, scored.frame, metric=scored.metric, rule=scored.rule, drop_first=scored.drop_first,
                       normalize=scored.normalize, reps=reps, seed=seed, out_dir=out_dir, fmt=fmt,
                       step_kinds=scored.step_kinds, options=options, curves=curves, worker=worker)  # fmt: skip
    made.scored = scored
    return made


def success_by_level(
    store: Any, suite: str, rule: str, drop_first: int, out_dir: Path, fmt: str
) -> list[Path]:
    """The ``success_by_level`` figure: per-level success (``eval/success/<level>``, language tasks) when the
    suite logged it, as ``[path]``; ``[]`` otherwise."""
    import pandas as pd

    from . import plots
    from .analysis import load_scores
    from .envs.imagine import LANG_LEVELS
    from .errors import UnknownName

    frames = []
    for level in LANG_LEVELS:
        try:
            df, _ = load_scores(store, suite, f"eval/success/{level}", rule, drop_first)
        except UnknownName:
            continue
        frames.append(df.assign(level=level))
    if not frames:
        return []
    scores = pd.concat(frames)
    levels = [lv for lv in LANG_LEVELS if lv in set(scores["level"])]
    fig = plots.plot_success_by_level(
        scores, levels, title=f"{suite}: success rate per instruction level ({rule})"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    return [plots.save_figure(fig, out_dir / f"success_by_level.{fmt}")]


@dataclass
class KeyFigure:
    """``rlbench plot SUITE --x KEY``: the figure's file, its points (``stats.key_intervals``), a markdown table
    of them, what was scored (``analysis.KeyScores``) and warnings."""

    path: Path
    points: Any
    table_md: str
    scored: Any
    warnings: list[str] = field(default_factory=list)


def key_file_name(key: str, metric: str) -> str:
    """``by-params.n_layer-eval_em``: the figure's file name (no suffix) for a key and a metric."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"by-{key}-{metric}")
    return safe.strip("._") or "by-key"


def key_points(scored: Any, stat: str, reps: int, seed: int) -> Any:
    """``stats.key_intervals`` of ``analysis.KeyScores``' runs."""
    from . import stats

    return stats.key_intervals(scored.runs, stat=stat, reps=reps, seed=seed)


def key_labels(scored: Any, stat: str) -> tuple[str, str]:
    """(y label, title) of the figure against a key."""
    from . import plots

    name, note = plots.score_label(scored.table)
    what = f"{key_stat_name(stat)} of {name}"
    ylabel = what + (f"\n({note})" if note else "")
    return ylabel, key_title(scored, what)


def key_stat_name(stat: str) -> str:
    """``IQM`` or ``Mean``: the statistic as a figure against a key names it."""
    return stat.upper() if stat == "iqm" else stat.capitalize()


def key_title(scored: Any, what: str) -> str:
    """The title of a figure against a key: suite, what is drawn, the key, the score rule."""
    return f"{scored.suite}: {what} against {scored.key}\n{scored.rule} score, 95% bootstrap CI over seeds"


def draw_key_figure(scored: Any, points: Any, stat: str, options: Any = None) -> Any:
    """The figure against a key (``plots.plot_by_key``), labelled; ``options`` a ``plots.FigureOptions``."""
    from . import plots

    ylabel, title = key_labels(scored, stat)
    opts = options or plots.FigureOptions()
    return plots.plot_by_key(points, scored.key, ylabel=opts.ylabel or ylabel, xlabel=opts.xlabel,
                             title=opts.title or title, figsize=opts.figsize, share_y=opts.share_y)  # fmt: skip


def key_table_md(points: Any, key: str, stat: str) -> str:
    """The points as a markdown table: task, legend, the key's value, estimate [95% CI], runs (and first the
    metric, where the points have a ``metric`` column: several metrics' points)."""
    many = "metric" in points.columns
    lines = [f"| {'metric | ' if many else ''}task | legend | {key} | {stat} [95% CI] | runs |",
             f"|---{'|---' if many else ''}|---|---|---|---|"]  # fmt: skip
    for r in points.itertuples():
        lines.append(
            f"| {f'{r.metric} | ' if many else ''}{r.env} | {r.legend} | {r.x} | "
            f"{r.estimate:.4g} [{r.lower:.4g}, {r.upper:.4g}] | {r.runs} |"
        )
    return "\n".join(lines)


def key_figure(
    store: Any,
    suite: str,
    key: str,
    *,
    metric: str | None | Sequence[str],
    rule: str | None,
    drop_first: int | None,
    normalize: str,
    reps: int,
    seed: int,
    out_dir: Path,
    fmt: str = "png",
    stat: str = "iqm",
    options: Any = None,
) -> KeyFigure:
    """``rlbench plot SUITE --x KEY``: per-run scores against a config key (``analysis.key_scores``), their
    IQM (or mean) per task, legend entry and value with a 95% stratified bootstrap interval
    (``stats.key_intervals``), drawn by ``plots.plot_by_key`` into ``out_dir/by-KEY-METRIC.FMT``.

    ``metric`` a list of several metrics (``--metric eval/em --metric eval/cr``): each scored the same way, a
    row of panels each (``plots.plot_by_key_rows``), into ``by-KEY-METRIC1-METRIC2.FMT``; the points (and
    the table) get a ``metric`` column, and ``scored`` is the first metric's."""
    from . import analysis, plots, stats

    metrics = [metric] if metric is None or isinstance(metric, str) else list(metric)
    scoreds, pointss = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        for m in metrics:
            scored = analysis.key_scores(store, suite, key, metric=m, rule=rule, drop_first=drop_first,
                                         normalize=normalize)  # fmt: skip
            scoreds.append(scored)
            pointss.append(key_points(scored, stat, reps, seed))
    said = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, stats.StatsWarning)))
    for scored in scoreds:
        if scored.left_out:
            which = ", ".join(f"{a} ({n})" for a, n in scored.left_out.items())
            said.append(f"runs without {scored.key} are left out: {which}")
        for base, values in scored.single.items():
            said.append(f"{base} has one value of {scored.key} ({', '.join(values)}) and is left out")
    said = list(dict.fromkeys(said))
    first = scoreds[0]
    if len(scoreds) == 1:
        fig, points = draw_key_figure(first, pointss[0], stat, options), pointss[0]
    else:
        opts = options or plots.FigureOptions()
        rows = [(p, opts.ylabel or key_labels(sc, stat)[0]) for sc, p in zip(scoreds, pointss, strict=True)]
        title = opts.title or key_title(first, key_stat_name(stat))
        fig = plots.plot_by_key_rows(rows, first.key, xlabel=opts.xlabel, title=title, figsize=opts.figsize,
                                     share_y=opts.share_y)  # fmt: skip
        import pandas as pd

        points = pd.concat([p.assign(metric=sc.metric) for sc, p in zip(scoreds, pointss, strict=True)],
                           ignore_index=True)  # fmt: skip
        points = points[["metric", *[c for c in points.columns if c != "metric"]]]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = key_file_name(first.key, "-".join(sc.metric for sc in scoreds))
    path = plots.save_figure(fig, out_dir / f"{name}.{fmt}")
    return KeyFigure(path=path, points=points, table_md=key_table_md(points, first.key, stat), scored=first,
                     warnings=said)  # fmt: skip
