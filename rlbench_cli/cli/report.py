from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import (
    AlternativeOpt,
    DbOpt,
    DropFirstOpt,
    MetricOpt,
    NormalizeOpt,
    PairedOpt,
    PairedStepsOpt,
    RepsOpt,
    ScoreOpt,
    SeedOpt,
    ShareYOpt,
    SuiteArg,
    check_paired_flags,
    check_score_flags,
    handle_errors,
    store_for,
)


@handle_errors
def report(
    suite: SuiteArg,
    db: DbOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="the HTML file [default: results/reports/SUITE.html]", show_default=False
        ),
    ] = None,  # fmt: skip
    metric: MetricOpt = None,
    score: ScoreOpt = None,
    drop_first: DropFirstOpt = None,
    normalize: NormalizeOpt = "auto",
    reps: RepsOpt = 50_000,
    seed: SeedOpt = 0,
    curves: Annotated[
        bool,
        typer.Option(
            "--curves/--no-curves",
            help="also draw the curves over training (learning curves and sample efficiency), which read every "
            "metric row; --no-curves scores runs in the database, much faster on large suites",
        ),
    ] = True,
    paired: PairedOpt = None,
    alternative: AlternativeOpt = None,
    step_max: PairedStepsOpt = None,
    share_y: ShareYOpt = False,
) -> None:
    """One self-contained HTML page with a suite's whole result: leaderboard and intervals, AdaStop decisions,
    every figure, per-task table, runs (status, attempts, time, where they ran, score, errors), score rule,
    suite file and reproducibility manifest. It needs no network to view; send it as it is.

    Example: rlbench report quickstart --out quickstart.html

    Large suites (thousands of runs): rlbench report SUITE --no-curves

    Paired by seed at two steps, one family: rlbench report SUITE --paired cold --step-max 0 --step-max 1000

    Tasks on one y range in the figures against the settings: rlbench report wm-scaling-tasks --share-y
    """
    from .. import plots
    from ..figure_worker import running
    from ..htmlreport import suite_page

    check_score_flags(score, drop_first)
    check_paired_flags(paired, alternative, **{"--step-max": step_max})
    store = store_for(db)
    # forked before the store is opened, as in `rlbench plot`: it draws the figures beside the bootstraps
    with running(warm=plots.warm_up) as worker:
        page, notes = suite_page(store, suite, metric=metric, rule=score, drop_first=drop_first,
                                 normalize=normalize, reps=reps, seed=seed, worker=worker, curves=curves,
                                 paired=paired, alternative=alternative or "two-sided",
                                 paired_steps=step_max or (), share_y=share_y)  # fmt: skip
    path = out or store.path.parent / "reports" / f"{suite}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    for n in notes:
        typer.echo(f"note: {n}", err=True)
    typer.echo(f"wrote {path} ({len(page.encode()) / 1024:,.0f} KiB)")
