from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer

from .common import (
    AlternativeOpt,
    DbOpt,
    DropFirstOpt,
    JsonOpt,
    MetricOpt,
    PairedOpt,
    PairedStepsOpt,
    ScoreOpt,
    SuiteArg,
    check_paired_flags,
    check_score_flags,
    handle_errors,
    store_for,
)

SYMBOL = {"larger": ">", "smaller": "<", "equal": "=", "continue": "?"}
WORD = {"algo": "algorithm", "task": "task"}


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


def holm_family(settings: dict[str, Any]) -> str:
    """E.g. ``3 tests (1 comparison with no seed off level: no test)``."""
    tested, untested = settings["tested"], settings["comparisons"] - settings["tested"]
    out = f"{tested} test{'s' if tested != 1 else ''}"
    if untested:
        out += f" ({untested} comparison{'s' if untested != 1 else ''} with no seed off level or none paired: no test)"
    return out


def paired_table(rows: list[dict[str, Any]], settings: dict[str, Any], alpha: float) -> str:
    """``rlbench compare --paired``'s comparisons as a markdown table, with what they were computed from."""

    def num(v: Any) -> str:
        return "-" if v is None else f"{v:.4g}"

    def p(v: Any) -> str:
        return "-" if v is None else (f"{v:.2g}" if v < 0.001 else f"{v:.3f}")

    held, across = ("algo", "task") if settings["dimension"] == "task" else ("task", "algo")
    steps = settings.get("step_max")
    several = isinstance(steps, list)
    at = "" if steps is None else f" at step {steps}"
    if several:
        at = f" at steps {', '.join(map(str, steps))} (one family)"
    sided = {"two-sided": "two-sided", "greater": f"one-sided (the other {WORD[across]} above the baseline)",
             "less": f"one-sided (the other {WORD[across]} below the baseline)"}[settings["alternative"]]  # fmt: skip
    lines = [
        f"Paired by seed: each {WORD[across]} against {settings['baseline']} within each {WORD[held]}; "
        f"{settings['metric']} scored by {settings['rule']}{at}; difference = other - baseline, its mean with a 95% "
        f"bootstrap interval ({settings['reps']:,} reps, seed {settings['seed']}); {sided} sign and Wilcoxon "
        f"signed-rank tests; Holm's correction over the {holm_family(settings)} (* below {alpha:g})",
        "",
        f"{'| step ' if several else ''}| {held} | {across} | seeds | baseline mean | mean | difference [95% CI] "
        f"| above / below / level | sign p | Wilcoxon p | Holm p |",
        f"{'|--:' if several else ''}|---|---|--:|--:|--:|--:|:-:|--:|--:|--:|",
    ]
    blind = 0
    for r in rows:
        unpaired = f" ({len(r['unpaired'])} unpaired)" if r["unpaired"] else ""
        lead = f"| {r['step']} " if several else ""
        if not r["pairs"]:
            lines.append(f"{lead}| {r['group']} | {r['other']} | 0{unpaired} | - | - | - | - | - | - | - |")
            continue
        star = " *" if r["holm_p"] is not None and r["holm_p"] < alpha else ""
        if r["min_p"] >= alpha:
            star, blind = " †", blind + 1
        lines.append(f"{lead}| {r['group']} | {r['other']} | {r['pairs']}{unpaired} | {num(r['mean_a'])} | "
                     f"{num(r['mean_b'])} | {num(r['mean_diff'])} [{num(r['lower'])}, {num(r['upper'])}] | "
                     f"{r['above']} / {r['below']} / {r['tied']} | {p(r['sign_p'])} | {p(r['wilcoxon_p'])} | "
                     f"{p(r['holm_p'])}{star} |")  # fmt: skip
    if blind:
        lines += ["", f"† too few seeds off level for these tests to reach {alpha:g} whatever their outcome (the "
                      f"smallest p possible with n of them is 2 / 2^n two-sided, 1 / 2^n one-sided): run more seeds"]  # fmt: skip
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
    seed: Annotated[
        int | None, typer.Option("--seed", help="seed of the permutations or bootstrap [default: 0]")
    ] = None,
    paired: PairedOpt = None,
    alternative: AlternativeOpt = None,
    reps: Annotated[
        int | None, typer.Option("--reps", help="with --paired: bootstrap replicates [default: 50000]")
    ] = None,
    step_max: PairedStepsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Which algorithms differ, per task, by AdaStop's sequential permutation test: the decisions
    `rlbench run --adaptive` stored, or, given settings or for a suite run without --adaptive (imported runs
    too), the test applied to the finished runs in seed order.

    With --paired BASELINE: each task against the baseline task within each algorithm (or each algorithm
    against the baseline algorithm within each task), seed by seed, for configurations whose seeds fix what
    both are scored on (the same evaluation episodes or datasets).

    Example: rlbench compare quickstart --alpha 0.05 --batch 5 --max-batches 2

    Example: rlbench compare mixes --paired 'TextNav-v0-noisy[mix=real]' --metric eval/success --alternative greater
    """
    from ..adaptive import AdaptiveSettings
    from ..errors import UsageError
    from ..sequential import compare_suite, paired_suite

    check_score_flags(score, drop_first)
    check_paired_flags(paired, alternative, **{"--reps": reps, "--step-max": step_max})
    if paired is not None:
        adastop = [flag for flag, v in {"--batch": batch, "--max-batches": max_batches,
                                        "--permutations": permutations}.items() if v is not None]  # fmt: skip
        if adastop:
            raise UsageError(
                f"{', '.join(adastop)}: AdaStop's settings do not apply with --paired; drop them"
            )
        rows, settings = paired_suite(store_for(db), suite, paired, metric, score, drop_first,
                                      alternative or "two-sided", 50_000 if reps is None else reps,
                                      0 if seed is None else seed, step_max)  # fmt: skip
        level = 0.05 if alpha is None else alpha
        if json_out:
            typer.echo(json.dumps({"suite": suite, "paired": settings, "alpha": level, "comparisons": rows},
                                  indent=1, default=str))  # fmt: skip
        else:
            typer.echo(paired_table(rows, settings, level))
        return
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
