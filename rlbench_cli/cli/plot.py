from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..errors import UsageError
from .common import (
    DbOpt,
    DropFirstOpt,
    NormalizeOpt,
    RepsOpt,
    ScoreOpt,
    SeedOpt,
    ShareYOpt,
    SuiteArg,
    check_score_flags,
    handle_errors,
    store_for,
)


class FigFormat(str, Enum):
    png = "png"
    pdf = "pdf"
    svg = "svg"


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


def check_metrics(metrics: list[str], x: str | None) -> list[str]:
    """``--metric`` as given: once (or not at all) for the usual figures; with ``--x``, any number of different
    metrics. UsageError naming ``--metric`` otherwise."""
    twice = sorted({m for m in metrics if metrics.count(m) > 1})
    if twice:
        raise UsageError(f"--metric {twice[0]!r} is given twice: give each metric once")
    if len(metrics) > 1 and x is None:
        raise UsageError(
            f"--metric is given {len(metrics)} times ({', '.join(metrics)}): only a figure against a key "
            "(--x KEY) draws several metrics, a row each; give one metric, or add --x"
        )
    return metrics


@handle_errors
def plot(
    suite: SuiteArg,
    db: DbOpt = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="metric to score runs by (default: the suite's, else eval/return); with "
            "--x, give it again for a row of panels per metric, e.g. --metric eval/em --metric eval/cr",
            show_default=False,
        ),
    ] = None,  # fmt: skip
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
    x: Annotated[
        str | None,
        typer.Option(
            "--x",
            metavar="KEY",
            help="draw only the score against this config key instead (e.g. "
            "params.learning_rate, params.n_layer, budget.steps), or against a metric each configuration "
            "logs one value of (e.g. model/parameters_non_embedding, text_world_model's size): per task, "
            "the IQM over seeds of each value with a 95% bootstrap CI, one line per algorithm or per value "
            "of the other keys that vary",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    share_y: ShareYOpt = False,
) -> None:
    """rliable figures and a leaderboard for a suite: aggregates with 95% bootstrap CIs, performance
    profile, probability of improvement, sample efficiency, learning curves.

    Colour-blind-safe colours, one per algorithm in every figure; curves also differ by line style and marker.

    Algorithms that do not all run on the same tasks: aggregate figures per task group (aggregates-GROUP.png, ...).

    Example: rlbench plot quickstart --score final --reps 50000 --seed 0

    Large suites (thousands of runs): rlbench plot SUITE --no-curves (no learning curves, no sample efficiency)

    Example, a score against a swept key: rlbench plot wm-scaling --x params.n_layer --metric eval/cr

    Example, two scores against it, a row each: rlbench plot wm-scaling --x params.train_episodes --metric eval/em --metric eval/cr

    Example, tasks on one y range: rlbench plot wm-scaling --x params.n_layer --metric eval/em --metric eval/cr --share-y

    Example, against the size the runs log: rlbench plot wm-scaling-params-textnav --x model/parameters_non_embedding

    Example, for a paper (TrueType fonts in the PDF): rlbench plot quickstart --format pdf --figsize 6,3.5 --title "Classic control" --ylabel "Normalised return"
    """
    from .. import plots, report
    from ..figure_worker import running

    size = parse_figsize(figsize)
    store = store_for(db)
    check_score_flags(score, drop_first)
    out_dir = out or store.path.parent / "figures" / suite
    options = plots.FigureOptions(title=title, xlabel=xlabel, ylabel=ylabel, figsize=size, share_y=share_y)
    metrics = check_metrics(metric or [], x)
    if share_y and x is None:
        raise UsageError(
            "--share-y shares the y range of the figure against a key: add --x KEY, or leave it out"
        )
    if x is not None:
        made = report.key_figure(store, suite, x, metric=metrics or None, rule=score, drop_first=drop_first,
                                 normalize=normalize, reps=reps, seed=seed, out_dir=out_dir, fmt=fmt.value,
                                 options=options)  # fmt: skip
        for w in made.warnings:
            typer.echo(f"warning: {w}", err=True)
        if made.scored.unfinished:
            typer.echo(f"warning: {made.scored.unfinished} runs of {suite!r} are not finished and are left out",
                       err=True)  # fmt: skip
        typer.echo(made.table_md)
        typer.echo(f"wrote {made.path}")
        return
    one = metrics[0] if metrics else None
    # forked before the store is opened: the worker imports matplotlib and warms up while the scores load here
    with running(warm=plots.warm_up) as worker:
        result = report.plot_suite(store, suite, metric=one, rule=score, drop_first=drop_first,
                                   normalize=normalize, reps=reps, seed=seed, out_dir=out_dir, fmt=fmt.value,
                                   options=options, curves=curves, worker=worker)  # fmt: skip
    scored, unfinished = result.scored, result.scored.unfinished
    if unfinished:
        typer.echo(f"warning: {unfinished} runs of {suite!r} are not finished and are left out", err=True)
    for w in result.warnings:
        typer.echo(f"warning: {w}", err=True)
    for note in result.notes:
        typer.echo(note)
    typer.echo(result.leaderboard_md)
    paths = list(result.paths)
    if scored.metric == "eval/success" or scored.metric.startswith("eval/success/"):
        paths += report.success_by_level(store, suite, scored.rule, scored.drop_first, out_dir, fmt.value)
    for p in paths:
        typer.echo(f"wrote {p}")
