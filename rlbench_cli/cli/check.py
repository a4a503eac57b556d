from __future__ import annotations

import json
from enum import Enum
from typing import Annotated

import typer

from .common import DbOpt, JsonOpt, RepsOpt, SeedOpt, SuiteArg, handle_errors, store_for


class GateRule(str, Enum):
    iqm = "iqm"
    poi = "poi"


@handle_errors
def check(
    suite: SuiteArg,
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline",
            help="what to compare with: a bundle folder (rlbench fetch --format bundle), an "
            "http(s):// or s3:// bundle URL, or another store (.duckdb)",
            show_default=False,
        ),
    ],  # fmt: skip
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

    Example: rlbench check ppo-gate --baseline results/reference/ppo-gate --rule iqm
    """
    from ..gate import check_suite, to_markdown

    result = check_suite(store_for(db), suite, baseline, rule=rule.value, reps=reps, seed=seed)
    typer.echo(json.dumps(result.to_dict(), indent=1) if json_out else to_markdown(result))
    if result.worse:
        raise typer.Exit(1)
