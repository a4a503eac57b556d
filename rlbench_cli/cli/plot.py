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
        unfinished, finished = con.execute(
            "SELECT count(*) FILTER (status <> 'finished'), count(*) FILTER (status = 'finished') FROM runs "
            "WHERE suite = ?", [suite]
        ).fetchall()[0]  # fmt: skip
        names = [r[0] for r in con.execute(
            "SELECT DISTINCT m.name FROM metrics m JOIN runs r USING (run_id) WHERE r.suite = ? ORDER BY 1",
            [suite]).fetchall()]  # fmt: skip
    df = table.to_pandas()[["run_id", "algo", "env", "seed", "step", "value"]]
    if df.empty:
        if not finished:
            raise UsageError(f"suite {suite!r} has no finished runs yet; see rlbench status {suite}")
        raise UnknownName(f"suite {suite!r} has no finished run with metric {metric!r} "
                          f"(metrics there: {', '.join(names) or 'none'}); pass another --metric")  # fmt: skip
    if not df["value"].astype(float).map(math.isfinite).any():
        raise UsageError(f"suite {suite!r}: every {metric!r} value of its finished runs is NaN or inf, so there is "
                         f"nothing to score; see them with rlbench fetch --suite {suite} --metric {metric}")  # fmt: skip
    return df, unfinished


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
) -> None:
    """rliable figures and a leaderboard for a suite: aggregates with 95% bootstrap CIs, performance
    profile, probability of improvement, sample efficiency, learning curves.

    Example: rlbench plot quickstart --score final --reps 50000 --seed 0
    """
    from .. import report

    store = store_for(db)
    check_score_flags(score, drop_first)
    metric, rule, drop_first = report.suite_scoring(store, suite, metric, score, drop_first)
    df, unfinished = load_metric(store, suite, metric)
    out_dir = out or store.path.parent / "figures" / suite
    result = report.make_report(suite, df, metric=metric, rule=rule, drop_first=drop_first,
                                normalize=report.suite_normalize(store, suite, normalize), reps=reps, seed=seed,
                                out_dir=out_dir, fmt=fmt.value)  # fmt: skip
    if unfinished:
        typer.echo(f"warning: {unfinished} runs of {suite!r} are not finished and are left out", err=True)
    for w in result.warnings:
        typer.echo(f"warning: {w}", err=True)
    typer.echo(result.leaderboard_md)
    for p in result.paths:
        typer.echo(f"wrote {p}")
