from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..errors import UnknownName, UsageError
from .common import (
    DbOpt,
    DropFirstOpt,
    MetricOpt,
    NormalizeOpt,
    RepsOpt,
    ScoreOpt,
    SeedOpt,
    SuiteArg,
    check_score_flags,
    handle_errors,
    shared_reader,
    store_for,
)


class FigFormat(str, Enum):
    png = "png"
    pdf = "pdf"
    svg = "svg"


def load_metric(store, suite: str, metric: str):  # noqa: ANN001, ANN201
    """Finished runs' values of one metric as a pandas DataFrame (run_id, algo, env, seed, step, value)."""
    with store.reader() as con:
        if suite not in store.suites(con):
            known = ", ".join(store.suites(con)) or "none yet"
            raise UnknownName(f"no suite {suite!r} in {store.path} (suites there: {known})")
        table = store.query_metrics(con, suite=suite, metrics=[metric], statuses=["finished"])
        boundaries = store.phase_boundaries(con, suite)
        unfinished, finished = con.execute(
            "SELECT count(*) FILTER (status <> 'finished'), count(*) FILTER (status = 'finished') FROM runs "
            "WHERE suite = ?", [suite]
        ).fetchall()[0]  # fmt: skip
        names = [r[0] for r in con.execute(
            "SELECT DISTINCT m.name FROM metrics m JOIN runs r USING (run_id) WHERE r.suite = ? ORDER BY 1",
            [suite]).fetchall()]  # fmt: skip
    df = table.to_pandas()[["run_id", "algo", "env", "seed", "step", "value"]]
    if boundaries:  # offline-to-online runs: their phase boundary, for score phases and the curves' marker
        df["boundary"] = df["run_id"].map(boundaries).astype(float)
    if df.empty:
        if not finished:
            raise UsageError(f"suite {suite!r} has no finished runs yet; see rlbench status {suite}")
        raise UnknownName(f"suite {suite!r} has no finished run with metric {metric!r} "
                          f"(metrics there: {', '.join(names) or 'none'}); pass another --metric")  # fmt: skip
    if not df["value"].astype(float).map(math.isfinite).any():
        raise UsageError(f"suite {suite!r}: every {metric!r} value of its finished runs is NaN or inf, so there is "
                         f"nothing to score; see them with rlbench fetch --suite {suite} --metric {metric}")  # fmt: skip
    return df, unfinished


def load_scores(store, suite: str, metric: str, rule: str, drop_first: int):  # noqa: ANN001, ANN201
    """Finished runs' scores of one metric by a score rule, computed in SQL (``Store.run_scores``): a pandas
    DataFrame with ``stats.SCORED_COLUMNS``, one row per run, which ``stats.score_table`` and
    ``leaderboard.build`` take in place of the rows ``load_metric`` returns (same tables, same warnings),
    and the number of unfinished runs. Raises what ``load_metric`` raises."""
    from .. import stats

    name, n = stats.parse_rule(rule)
    with store.reader() as con:
        if suite not in store.suites(con):
            known = ", ".join(store.suites(con)) or "none yet"
            raise UnknownName(f"no suite {suite!r} in {store.path} (suites there: {known})")
        table = store.run_scores(con, suite=suite, metric=metric, rule=name, n=n, drop_first=drop_first,
                                 phase=stats.rule_phase(rule)[1])  # fmt: skip
        unfinished, finished = con.execute(
            "SELECT count(*) FILTER (status <> 'finished'), count(*) FILTER (status = 'finished') FROM runs "
            "WHERE suite = ?", [suite]
        ).fetchall()[0]  # fmt: skip
        names = []
        if table.num_rows == 0:
            names = [r[0] for r in con.execute(
                "SELECT DISTINCT m.name FROM metrics m JOIN runs r USING (run_id) WHERE r.suite = ? ORDER BY 1",
                [suite]).fetchall()]  # fmt: skip
    df = table.to_pandas()
    if df.empty:
        if not finished:
            raise UsageError(f"suite {suite!r} has no finished runs yet; see rlbench status {suite}")
        raise UnknownName(f"suite {suite!r} has no finished run with metric {metric!r} "
                          f"(metrics there: {', '.join(names) or 'none'}); pass another --metric")  # fmt: skip
    if not (df["rows"] > df["nonfinite"]).any():
        raise UsageError(f"suite {suite!r}: every {metric!r} value of its finished runs is NaN or inf, so there is "
                         f"nothing to score; see them with rlbench fetch --suite {suite} --metric {metric}")  # fmt: skip
    return df, unfinished


def step_kinds(store, suite: str) -> dict[str, str]:  # noqa: ANN001
    """``{task: "online" | "offline"}`` of a suite's finished runs: offline where a run trained on a dataset,
    online where rlbench recorded none; tasks of runs imported without that (e.g. d3rlpy logs) are left out."""
    with store.reader() as con:
        rows = con.execute(
            "SELECT env, CASE WHEN bool_or(config->>'$.dataset' IS NOT NULL) THEN 'offline' "
            "WHEN bool_and(json_exists(config, '$.dataset')) THEN 'online' END "
            "FROM runs WHERE suite = ? AND status = 'finished' GROUP BY env", [suite]
        ).fetchall()  # fmt: skip
    return {str(env): kind for env, kind in rows if env is not None and kind is not None}


def parse_figsize(value: str | None) -> tuple[float, float] | None:
    """``"6,4"`` -> ``(6.0, 4.0)``; UsageError naming ``--figsize`` unless two positive numbers up to 100."""
    if value is None:
        return None
    parts = value.replace("x", ",").split(",")
    try:
        size = tuple(float(p) for p in parts)
    except ValueError:
        size = ()
    if len(size) != 2 or not all(math.isfinite(v) and 0 < v <= 100 for v in size):
        raise UsageError(
            f"--figsize {value!r}: give WIDTH,HEIGHT in inches, two numbers from 0 to 100 such as 6,4"
        )
    return size  # type: ignore[return-value]


TitleOpt = Annotated[
    str | None, typer.Option("--title", help="title of every figure (a task group's figures add the group)")
]
XlabelOpt = Annotated[
    str | None,
    typer.Option("--xlabel", help="x label of the learning curves and sample efficiency (default: what a "
                 "step is: Environment steps, Gradient steps)", show_default=False),
]  # fmt: skip
YlabelOpt = Annotated[
    str | None,
    typer.Option("--ylabel", help="label of the score axis: y of the learning curves and sample efficiency, x "
                 "of the aggregates (default: Return, or Normalised score and by what)", show_default=False),
]  # fmt: skip
FigsizeOpt = Annotated[
    str | None,
    typer.Option("--figsize", metavar="W,H", help="size of every figure in inches, e.g. 6,4 (default: fitted "
                 "to each figure)", show_default=False),
]  # fmt: skip


@handle_errors
def plot(
    suite: SuiteArg,
    db: DbOpt = None,
    metric: MetricOpt = None,
    score: ScoreOpt = None,
    drop_first: DropFirstOpt = None,
    normalize: NormalizeOpt = "auto",
    reps: RepsOpt = 50_000,
    seed: SeedOpt = 0,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="folder for figures [default: results/figures/SUITE]", show_default=False),
    ] = None,  # fmt: skip
    fmt: Annotated[FigFormat, typer.Option("--format", help="figure file format")] = FigFormat.png,
    title: TitleOpt = None,
    xlabel: XlabelOpt = None,
    ylabel: YlabelOpt = None,
    figsize: FigsizeOpt = None,
    curves: Annotated[
        bool,
        typer.Option(
            "--curves/--no-curves",
            help="also draw the curves over training (learning curves and "
            "sample efficiency), which read every metric row; --no-curves draws the score figures "
            "from per-run scores computed in the database, much faster on large suites",
        ),
    ] = True,  # fmt: skip
) -> None:
    """rliable figures and a leaderboard for a suite: aggregates with 95% bootstrap CIs, performance
    profile, probability of improvement, sample efficiency, learning curves.

    Colour-blind-safe colours, one per algorithm in every figure; curves also differ by line style and marker.

    Algorithms that do not all run on the same tasks: aggregate figures per task group (aggregates-GROUP.png, ...).

    Example: rlbench plot quickstart --score final --reps 50000 --seed 0

    Large suites (thousands of runs): rlbench plot SUITE --no-curves (no learning curves, no sample efficiency)

    Example, for a paper (TrueType fonts in the PDF): rlbench plot quickstart --format pdf --figsize 6,3.5 --title "Classic control" --ylabel "Normalised return"
    """
    from .. import plots, report
    from ..figure_worker import running

    size = parse_figsize(figsize)
    store = store_for(db)
    check_score_flags(score, drop_first)
    # forked before the store is opened: the worker imports matplotlib and warms up while the scores load here
    with running(warm=plots.warm_up) as worker:
        with shared_reader(store) as reads:  # one connection for the reads, closed before the statistics
            metric, rule, drop_first = report.suite_scoring(reads, suite, metric, score, drop_first)
            if curves:
                df, unfinished = load_metric(reads, suite, metric)
            else:
                df, unfinished = load_scores(reads, suite, metric, rule, drop_first)
            norm, kinds = report.suite_normalize(reads, suite, normalize, metric), step_kinds(reads, suite)
        out_dir = out or store.path.parent / "figures" / suite
        options = plots.FigureOptions(title=title, xlabel=xlabel, ylabel=ylabel, figsize=size)
        result = report.make_report(suite, df, metric=metric, rule=rule, drop_first=drop_first, normalize=norm,
                                    reps=reps, seed=seed, out_dir=out_dir, fmt=fmt.value, step_kinds=kinds,
                                    options=options, curves=curves, worker=worker)  # fmt: skip
    if unfinished:
        typer.echo(f"warning: {unfinished} runs of {suite!r} are not finished and are left out", err=True)
    for w in result.warnings:
        typer.echo(f"warning: {w}", err=True)
    for note in result.notes:
        typer.echo(note)
    typer.echo(result.leaderboard_md)
    paths = list(result.paths)
    if metric == "eval/success" or metric.startswith("eval/success/"):
        paths += _success_by_level(store, suite, rule, drop_first, out_dir, fmt.value)
    for p in paths:
        typer.echo(f"wrote {p}")


def _success_by_level(store, suite: str, rule: str, drop_first: int, out_dir: Path, fmt: str) -> list[Path]:  # noqa: ANN001
    """``success_by_level``: per-level success (``eval/success/<level>``, language tasks) when the suite
    logged it; nothing otherwise."""
    import pandas as pd

    from .. import plots
    from ..envs.imagine import LANG_LEVELS
    from ..errors import UnknownName

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
