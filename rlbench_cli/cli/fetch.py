"""``rlbench fetch``: query the results database (tidy rows, --wide, --scores), write a bundle, or import
runs another tool wrote (--from KIND:PATH)."""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from .. import query
from ..errors import UsageError
from ..query import parse_where
from .common import DbOpt, DropFirstOpt, handle_errors, store_for
from .export import WithPoliciesOpt, WithVideosOpt
from .output import OutFormat, write_table

FROM_HELP = (
    "import runs another tool wrote, as KIND:PATH. Kinds: tensorboard:DIR (event files; CleanRL's "
    "runs/ENV__EXP__SEED__TIME/, see --pattern), sb3:DIR (Stable-Baselines3 / rl-baselines3-zoo "
    "monitor.csv + evaluations.npz in ALGO/ENV_N/), csv:FILE and parquet:FILE (tidy run,step,name,value or "
    "one column per metric, e.g. a W&B export; see --columns), duckdb:FILE (another rlbench database: merged, "
    "run ids kept; --into picks one of its suites), d3rlpy:DIR (d3rlpy_logs/ALGO_TASK_SEED_TIME/), "
    "rlbench:DIR (a results bundle, read like other tools' runs), bundle:DIR_OR_URL (a results bundle from a "
    "folder, http(s):// or s3://bucket/prefix, checked against its MANIFEST.sha256; runs keep their ids and "
    "manifests; --into optional)"
)


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"
    bundle = "bundle"


_STEPS = re.compile(r"\s*([0-9_]*)\s*:\s*([0-9_]*)\s*")


def parse_steps(text: str | None) -> tuple[int | None, int | None]:
    """``"0:100000"`` -> ``(0, 100000)``, both ends inclusive; ``":5000"`` / ``"1000:"`` leave one end open."""
    if text is None:
        return None, None
    m = _STEPS.fullmatch(text)
    try:
        lo, hi = (int(g) if g.strip("_") else None for g in m.groups()) if m else (None, None)
    except ValueError:
        m = None
    if m is None or (lo is None and hi is None):
        raise UsageError(
            f"--steps {text!r}: use FIRST:LAST (whole numbers, inclusive), e.g. 0:100000, :5000, 1000:"
        )
    if lo is not None and hi is not None and lo > hi:
        raise UsageError(f"--steps {text!r}: the first step is after the last")
    return lo, hi


@handle_errors
def fetch(
    db: DbOpt = None,
    suite: Annotated[str | None, typer.Option("--suite", help="only this suite")] = None,
    algo: Annotated[
        list[str] | None, typer.Option("--algo", help="only these algorithms (repeatable)")
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", help="only these environments (repeatable)")
    ] = None,
    seed: Annotated[list[int] | None, typer.Option("--seed", help="only these seeds (repeatable)")] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", help="only these metric names, e.g. eval/return (repeatable)"),
    ] = None,  # fmt: skip
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            help="only runs with this status: finished, failed, running, pending, interrupted (repeatable)",
        ),
    ] = None,  # fmt: skip
    steps: Annotated[
        str | None,
        typer.Option(
            "--steps",
            help="only steps FIRST:LAST, inclusive, e.g. 0:100000, :5000, 1000:",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where",
            help="only runs whose config has KEY=VALUE, e.g. lr=0.001 (a plain key is also "
            "looked up in params; dotted keys go deeper: params.gamma=0.99; repeatable: all must hold)",
        ),
    ] = None,  # fmt: skip
    wide: Annotated[
        bool, typer.Option("--wide", help="one row per run and step, one column per metric")
    ] = False,
    scores: Annotated[
        bool,
        typer.Option(
            "--scores",
            help="one row per run: its score by the suite's score rule (or --score, "
            "--drop-first, one --metric); finished runs unless --status says otherwise",
        ),
    ] = False,  # fmt: skip
    score: Annotated[
        str | None, typer.Option("--score", help="with --scores: final | best | mean_last:N | auc")
    ] = None,
    drop_first: DropFirstOpt = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="output format")] = Format.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write to this file instead of stdout")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="at most N rows")] = None,
    source: Annotated[str | None, typer.Option("--from", help=FROM_HELP, show_default=False)] = None,
    into: Annotated[
        str | None,
        typer.Option("--into", help="suite the runs imported with --from go in", show_default=False),
    ] = None,
    pattern: Annotated[
        str | None,
        typer.Option(
            "--pattern",
            help="with --from tensorboard:/csv:/parquet:, how run names read: fields "
            "{algo} {env} {seed}, others ignored, {env=NAME} fixes one, '/' spans folders "
            "[default: {env}__{algo}__{seed}__{time}, CleanRL's]",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    columns: Annotated[
        str | None,
        typer.Option(
            "--columns",
            help="with --from csv:/parquet:, which column is what: ROLE=COLUMN,... with "
            "roles run, step, name, value, algo, env, seed, wall_time, e.g. run=Name,step=_step",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=0.001,
            help="with --from bundle:URL, seconds to wait for the server [default: $RLBENCH_FETCH_TIMEOUT or 30]",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    with_policies: WithPoliciesOpt = False,
    with_videos: WithVideosOpt = False,
) -> None:
    """Every metric of every run as tidy rows: run_id, suite, algo, env, seed, step, name, value, wall_time;
    --wide pivots metrics into columns, --scores gives one score per run. A filter that matches nothing is an
    error (exit code 2), not an empty file. With --from, import runs another tool wrote instead (idempotent:
    runs already there are skipped; the files are only read).

    Example: rlbench fetch --suite quickstart --metric eval/return --format csv -o returns.csv

    Query: rlbench fetch --suite quickstart --status finished --steps 0:100000 --where learning_rate=0.001 --wide

    Scores: rlbench fetch --suite quickstart --scores --format csv -o scores.csv

    Import: rlbench fetch --from tensorboard:runs --into cleanrl ;
    rlbench fetch --from sb3:logs --into zoo ;
    rlbench fetch --from csv:wandb_export.csv --columns run=Name,step=_step --into wandb ;
    rlbench fetch --from duckdb:other/rlbench.duckdb ;
    rlbench fetch --from d3rlpy:d3rlpy_logs --into atari

    Bundle (a suite's finished runs and every metric, as Parquet, to share or to import elsewhere; the same
    as rlbench export): rlbench fetch --suite classic-control --format bundle -o results/reference/classic-control ;
    add --with-policies to carry the runs' saved policies, --with-videos their episode videos ;
    rlbench fetch --from rlbench:results/reference/classic-control --into my-study ;
    rlbench fetch --from bundle:https://example.org/bundles/classic-control ;
    rlbench fetch --from bundle:s3://my-bucket/bundles/classic-control --into my-study
    """
    query_flags = {"--suite": suite, "--algo": algo, "--env": env, "--seed": seed, "--metric": metric,
                   "--status": status, "--steps": steps, "--where": where, "--wide": wide, "--scores": scores,
                   "--score": score, "--drop-first": drop_first is not None, "--format": fmt is not Format.table,
                   "--output": output, "--limit": limit is not None}  # fmt: skip
    if source is not None or into is not None:
        _import(db, source, into, query_flags, {"pattern": pattern, "columns": columns, "timeout": timeout})
        return
    for flag, value in (("--pattern", pattern), ("--columns", columns), ("--timeout", timeout)):
        if value is not None:
            raise UsageError(f"{flag} says how to read files imported with --from: add --from KIND:PATH")
    if with_policies and fmt is not Format.bundle:
        raise UsageError("--with-policies puts saved policies in a bundle: add --format bundle")
    if with_videos and fmt is not Format.bundle:
        raise UsageError("--with-videos puts episode videos in a bundle: add --format bundle")
    if fmt is Format.bundle:
        _bundle(db, suite, output, (with_policies, with_videos), {"--algo": algo, "--env": env, "--seed": seed, "--metric": metric,
                                    "--status": status, "--steps": steps, "--where": where, "--wide": wide,
                                    "--scores": scores, "--limit": limit is not None})  # fmt: skip
        return
    out_fmt = OutFormat(fmt.value)
    if out_fmt is OutFormat.parquet and output is None:
        raise UsageError("--format parquet writes a binary file: add --output FILE.parquet")
    if limit is not None and limit < 0:
        raise UsageError(f"--limit must be 0 or more (got {limit})")
    if wide and scores:
        raise UsageError("--wide and --scores are two different shapes: pick one")
    if not scores and (score is not None or drop_first is not None):
        raise UsageError("--score and --drop-first say how --scores scores runs: add --scores")
    if scores:
        from .common import check_score_flags

        check_score_flags(score, drop_first)
        if metric and len(metric) > 1:
            raise UsageError("--scores scores runs by one metric: give --metric once")
    lo, hi = parse_steps(steps)
    conditions = parse_where(where)
    store = store_for(db)
    filters = {"suite": suite, "algos": algo or (), "envs": env or (), "seeds": seed or (),
               "statuses": status or (["finished"] if scores else ()), "step_min": lo, "step_max": hi}  # fmt: skip
    if scores:
        table, said = query.scores(
            store, filters, conditions, metric[0] if metric else None, score, drop_first
        )
        for w in said:
            typer.echo(f"warning: {w}", err=True)
    elif out_fmt is OutFormat.parquet and not wide:  # DuckDB writes the file, streaming (no pandas)
        n = query.rows_to_parquet(store, output, filters, metric or (), conditions, limit)
        if n is None:
            raise UsageError(_nothing(store, filters, metric, conditions, False))
        typer.echo(f"wrote {n} rows to {output}", err=True)
        return
    else:
        table = query.metric_rows(store, filters, metric or (), conditions, wide)
    if table.num_rows == 0:
        raise UsageError(_nothing(store, filters, metric, conditions, scores))
    if limit is not None:
        table = table.slice(0, limit)
    write_table(table, out_fmt, output)


def _nothing(store: Any, filters: dict[str, Any], metric: list[str] | None, where: list, scores: bool) -> str:
    """The message for a query that matched nothing: which filters were given."""
    given = []
    for flag, key in (("--suite", "suite"), ("--algo", "algos"), ("--env", "envs"), ("--seed", "seeds"),
                      ("--status", "statuses")):  # fmt: skip
        value = filters.get(key)
        if value:
            values = [value] if isinstance(value, str) else value
            given.append(f"{flag} {','.join(map(repr, values))}")
    if metric:
        given.append(f"--metric {','.join(map(repr, metric))}")
    if filters.get("step_min") is not None or filters.get("step_max") is not None:
        lo, hi = filters.get("step_min"), filters.get("step_max")
        given.append(f"--steps {'' if lo is None else lo}:{'' if hi is None else hi}")
    if where:
        given.append("--where " + ",".join(repr(f"{key}={text}") for key, _, text in where))
    what = "runs to score" if scores else "metric rows"
    return (f"no {what} match {' '.join(given) or 'these filters'} in {store.path}; "
            "loosen the filters (see rlbench status for what is there)")  # fmt: skip


def _bundle(
    db: Path | None, suite: str | None, output: Path | None, carry: tuple[bool, bool], filters: dict[str, Any]
) -> None:
    """``--format bundle``: ``suite`` as a bundle at ``output``; ``carry`` is (--with-policies, --with-videos)."""
    given = [flag for flag, value in filters.items() if value]
    if given:
        raise UsageError(f"--format bundle exports a whole suite: drop {', '.join(given)}")
    if suite is None or output is None:
        raise UsageError("--format bundle writes one suite to a folder: add --suite NAME and --output DIR")
    if output.exists() and not output.is_dir():
        raise UsageError(f"--output {output}: a file; a bundle is a folder, name a new or existing folder")
    from .export import write

    write(db, suite, output, "--suite", *carry)


def _import(
    db: Path | None,
    source: str | None,
    into: str | None,
    export_flags: dict[str, Any],
    options: dict[str, Any],
) -> None:
    from ..suite.models import NAME_RE

    if source is None:
        raise UsageError("--into names the suite imported runs go in: add --from FORMAT:PATH, "
                         "e.g. --from d3rlpy:d3rlpy_logs")  # fmt: skip
    given = [flag for flag, value in export_flags.items() if value]
    if given:
        raise UsageError(f"--from imports runs and {', '.join(given)} select what to export: "
                         "import first, then run rlbench fetch again to export")  # fmt: skip
    if into is None and not source.startswith(("duckdb:", "bundle:")):
        raise UsageError(f"--from {source}: add --into SUITE to name the suite the imported runs go in, "
                         "e.g. --into atari")  # fmt: skip
    if into is not None and not NAME_RE.match(into):
        raise UsageError(f"--into {into!r}: a suite name is letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit")  # fmt: skip
    from ..importers import import_source

    result = import_source(store_for(db), source, into, options)
    for w in result.warnings:
        typer.echo(f"warning: {w}", err=True)
    typer.echo(result.summary())
