from __future__ import annotations

import json
from enum import Enum
from typing import Annotated

import typer

from ..errors import UsageError
from .common import DbOpt, JsonOpt, RepsOpt, SeedOpt, SuiteArg, handle_errors, store_for


class GateRule(str, Enum):
    iqm = "iqm"
    poi = "poi"


@handle_errors
def check(
    suite: SuiteArg,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="what to compare with: a bundle folder (rlbench fetch --format bundle), an "
            "http(s):// or s3:// bundle URL, another store (.duckdb), or commit:SHA (the suite's runs "
            "recorded at that git commit with --record; a prefix of 4+ hex digits will do)",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="instead of checking: move the suite's finished runs into SUITE.commit-<sha12>, one suite "
            "per git commit they ran at (nothing lost), so the suite runs again at the next commit and "
            "--baseline commit:SHA finds them",
        ),
    ] = False,  # fmt: skip
    db: DbOpt = None,
    rule: Annotated[
        GateRule,
        typer.Option(
            "--rule",
            help="iqm: worse when the candidate's IQM interval lies entirely below the "
            "baseline's; poi: worse when the interval of P(candidate run beats baseline run) lies "
            "entirely below 0.5",
        ),
    ] = GateRule.iqm,  # fmt: skip
    reps: RepsOpt = 50_000,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
) -> None:
    """A regression gate for CI: the suite's finished runs (the candidate, e.g. this commit) against a
    baseline, per algorithm, on the suite's score rule and normalisation, with IQM intervals and the
    probability of improvement. Exit 0 when no algorithm got worse, 1 when one did, 2 on bad input. Prints a
    markdown summary fit for a pull-request comment (or --json).

    A commit as the baseline: main's CI runs the suite and records it (--record); a pull request's CI runs
    the suite again and checks it with --baseline commit:SHA of main.

    Example: rlbench check ppo-gate --baseline results/reference/ppo-gate --rule iqm ;
    rlbench check ppo-gate --record ; rlbench check ppo-gate --baseline commit:3f2a9c1
    """
    from ..gate import check_suite, record_baseline, recorded_text, to_markdown

    if record == (baseline is not None):
        raise UsageError("rlbench check: give --baseline SOURCE to check the suite, or --record to record its "
                         "runs as their commit's baseline (not both)")  # fmt: skip
    if record:
        rec = record_baseline(store_for(db), suite)
        typer.echo(json.dumps(rec.to_dict(), indent=1) if json_out else recorded_text(rec))
        return
    assert baseline is not None
    result = check_suite(store_for(db), suite, baseline, rule=rule.value, reps=reps, seed=seed)
    typer.echo(json.dumps(result.to_dict(), indent=1) if json_out else to_markdown(result))
    if result.worse:
        raise typer.Exit(1)
