from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

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


class TableFormat(str, Enum):
    md = "md"
    csv = "csv"
    json = "json"
    latex = "latex"


@handle_errors
def leaderboard(
    suite: SuiteArg,
    db: DbOpt = None,
    metric: MetricOpt = None,
    score: ScoreOpt = None,
    drop_first: DropFirstOpt = None,
    normalize: NormalizeOpt = "auto",
    reps: RepsOpt = 50_000,
    seed: SeedOpt = 0,
    per_task: Annotated[
        bool,
        typer.Option(
            "--per-task",
            help="one row per algorithm and task: runs, mean, std (ddof=0), median, "
            "min, max of the per-run scores",
        ),
    ] = False,  # fmt: skip
    fmt: Annotated[TableFormat, typer.Option("--format", "-f", help="output format")] = TableFormat.md,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write to this file instead of stdout")
    ] = None,
) -> None:
    """A suite's leaderboard: algorithms ranked by IQM with 95% bootstrap CIs, median, mean, optimality gap
    and the probability of improving on the next one (as rlbench plot prints it), or with --per-task one
    row per algorithm and task. The score rule and normalisation are stated with every table: in it for
    md, json and latex; a CSV stays plain (pandas.read_csv(path) reads it as it is), with them in a
    FILE.meta.json next to it (-o FILE.csv), or on stderr.

    Example: rlbench leaderboard quickstart --per-task --score best --drop-first 1 --format latex
    """
    from .. import leaderboard as lb
    from ..analysis import load_suite

    check_score_flags(score, drop_first)
    store = store_for(db)
    # scored in SQL, the rows stay in the database
    s = load_suite(store, suite, metric=metric, rule=score, drop_first=drop_first, normalize=normalize,
                   rows=False, kinds=False)  # fmt: skip
    board = lb.build(suite, s.frame, metric=s.metric, rule=s.rule, drop_first=s.drop_first,
                     normalize=s.normalize, reps=reps, seed=seed, per_task=per_task)  # fmt: skip
    unfinished = s.unfinished
    if unfinished:
        typer.echo(f"warning: {unfinished} runs of {suite!r} are not finished and are left out", err=True)
    for w in board.warnings:
        typer.echo(f"warning: {w}", err=True)
    text = lb.render(board, fmt.value)
    if fmt == TableFormat.md:  # AdaStop's decisions beside the intervals, when the suite ran with --adaptive
        from .compare import decisions_table

        with store.reader() as con:
            decisions, settings = store.decisions(con, suite)
        if decisions:
            text = text.rstrip("\n") + "\n\n" + decisions_table(decisions, settings) + "\n"
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {output} ({len(board.frame)} rows)", err=True)
        if fmt is TableFormat.csv:  # a plain CSV; what it shows goes next to it
            sidecar = output.with_suffix(".meta.json")
            sidecar.write_text(lb.meta_json(board), encoding="utf-8")
            typer.echo(f"wrote {sidecar} (suite, metric, score rule, normalisation, bootstrap)", err=True)
    else:
        if fmt is TableFormat.csv:  # stdout stays a plain CSV; what it shows goes to stderr
            for line in board.header:
                typer.echo(f"# {line}", err=True)
        typer.echo(text, nl=False)
