from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer

from .common import (
    DbOpt,
    DropFirstOpt,
    JsonOpt,
    MetricOpt,
    ScoreOpt,
    SuiteArg,
    check_score_flags,
    handle_errors,
    store_for,
)

SYMBOL = {"larger": ">", "smaller": "<", "equal": "=", "continue": "?"}


def decisions_table(rows: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    """AdaStop's decisions as a markdown table, with the settings they were made with."""

    def num(v: Any) -> str:
        return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.4g}"

    lines = [
        f"AdaStop decisions (family-wise error {settings['alpha']:g} over every pair, task and look; batches of "
        f"{settings['batch']} runs, at most {settings['max_batches']}; {settings['permutations']:,} permutations, "
        f"seed {settings['seed']})",
        "",
        "| task | A | decision | B | decided at look | runs A | runs B | mean A | mean B |",
        "|---|---|:-:|---|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        look = r["look"] if r["look"] is not None else "undecided"
        lines.append(f"| {r['task']} | {r['algo_a']} | {SYMBOL.get(r['decision'], r['decision'])} {r['decision']} | "
                     f"{r['algo_b']} | {look} | {r['runs_a']} | {r['runs_b']} | {num(r['mean_a'])} | "
                     f"{num(r['mean_b'])} |")  # fmt: skip
    return "\n".join(lines)


@handle_errors
def compare(
    suite: SuiteArg,
    db: DbOpt = None,
    metric: MetricOpt = None,
    score: ScoreOpt = None,
    drop_first: DropFirstOpt = None,
    alpha: Annotated[float | None, typer.Option("--alpha", help="family-wise error [default: 0.05]")] = None,
    batch: Annotated[int | None, typer.Option("--batch", help="runs per look [default: 5]")] = None,
    max_batches: Annotated[
        int | None, typer.Option("--max-batches", help="looks at most [default: 5]")
    ] = None,
    permutations: Annotated[int | None, typer.Option("--permutations", help="[default: 10000]")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="seed of the permutations [default: 0]")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Which algorithms differ, per task, by AdaStop's sequential permutation test: the decisions
    `rlbench run --adaptive` stored, or, given settings or for a suite run without --adaptive (imported runs
    too), the test applied to the finished runs in seed order.

    Example: rlbench compare quickstart --alpha 0.05 --batch 5 --max-batches 2
    """
    from ..adaptive import AdaptiveSettings
    from ..sequential import compare_suite

    check_score_flags(score, drop_first)
    given = {k: v for k, v in dict(alpha=alpha, batch=batch, max_batches=max_batches, permutations=permutations,
                                   seed=seed).items() if v is not None}  # fmt: skip
    rows, settings = compare_suite(store_for(db), suite, AdaptiveSettings(**given) if given else None, metric,
                                   score, drop_first)  # fmt: skip
    if json_out:
        typer.echo(
            json.dumps({"suite": suite, "settings": settings, "decisions": rows}, indent=1, default=str)
        )
    else:
        typer.echo(decisions_table(rows, settings))
