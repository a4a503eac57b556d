"""``rlbench fetch``: query the results database (tidy rows, --wide, --scores), write a bundle, or import
runs another tool wrote (--from KIND:PATH)."""

from __future__ import annotations

import json
import math
import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..analysis import score_runs, shared_reader
from ..errors import UnknownName, UsageError
from .common import DbOpt, DropFirstOpt, handle_errors, store_for
from .output import OutFormat, write_table

COLUMNS = ["run_id", "suite", "algo", "env", "seed", "step", "name", "value", "wall_time"]
WIDE_KEYS = ["run_id", "suite", "algo", "env", "seed", "step"]
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


def _json_value(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


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


def parse_where(items: list[str] | None) -> list[tuple[str, Any, str]]:
    """``["lr=0.001"]`` -> ``[("lr", 0.001, "0.001")]``: the key, the value as JSON reads it, the text."""
    out = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"--where {item!r}: use KEY=VALUE, e.g. --where lr=0.001 or --where params.gamma=0.99"
            )
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.append((key.strip(), parsed, value))
    return out


_MISSING = object()


def config_value(config: Any, key: str) -> Any:
    """``config[key]`` along a dotted path; a plain key not at the top is looked up in ``params`` (where a
    suite's hyperparameters are). ``_MISSING`` when it is not there."""
    for path in [key.split(".")] + ([["params", key]] if "." not in key else []):
        node = config
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                node = _MISSING
                break
        if node is not _MISSING:
            return node
    return _MISSING


def _same(have: Any, want: Any, text: str) -> bool:
    if isinstance(have, bool) or isinstance(want, bool):
        return have is want or (isinstance(have, str) and have == text)
    if isinstance(have, (int, float)) and isinstance(want, (int, float)):
        return math.isclose(float(have), float(want), rel_tol=1e-9, abs_tol=0.0)
    if isinstance(have, (dict, list)):
        return have == want
    return str(have) == text or have == want


def matches(config: Any, where: list[tuple[str, Any, str]]) -> bool:
    """Whether a run's config has every ``KEY=VALUE`` of ``where`` (numbers compare as numbers)."""
    return all(
        (v := config_value(config, key)) is not _MISSING and _same(v, want, text) for key, want, text in where
    )


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
    if fmt is Format.bundle:
        _bundle(db, suite, output, {"--algo": algo, "--env": env, "--seed": seed, "--metric": metric,
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
    with shared_reader(store) as reads, reads.reader() as con:  # --scores reads each suite's rule on it too
        known = store.suites(con)
        if suite is not None and suite not in known:
            raise UnknownName(
                f"no suite {suite!r} in {store.path} (suites there: {', '.join(known) or 'none yet'})"
            )
        if conditions:
            runs = store.runs(con, suite)
            filters["run_ids"] = [r["run_id"] for r in runs if matches(_config(r["config"]), conditions)]
        if scores:
            table, said = score_runs(reads, filters, metric[0] if metric else None, score, drop_first)
            for w in said:
                typer.echo(f"warning: {w}", err=True)
        elif out_fmt is OutFormat.parquet and not wide:  # DuckDB writes the file, streaming (no pandas)
            _parquet(store, con, {**filters, "metrics": metric or ()}, output, limit, metric, conditions)
            return
        else:
            table = store.query_metrics(con, metrics=metric or (), **filters)
    if table.num_rows == 0:
        raise UsageError(_nothing(store, filters, metric, conditions, scores))
    if not scores:
        table = _wide(table) if wide else table.select(COLUMNS)
    if limit is not None:
        table = table.slice(0, limit)
    write_table(table, out_fmt, output)


def _parquet(store: Any, con: Any, filters: dict[str, Any], output: Path, limit: int | None,
             metric: list[str] | None, conditions: list) -> None:  # fmt: skip
    """Tidy rows to a Parquet file by DuckDB's ``COPY ... TO`` (``Store.metrics_to_parquet``): the file
    ``write_table`` writes from the same query, in seconds for millions of rows."""
    probe = store.query_metrics_exists(con, **filters)
    if not probe:
        raise UsageError(_nothing(store, filters, metric, conditions, False))
    n = store.metrics_to_parquet(con, output, COLUMNS, limit=limit, **filters)
    typer.echo(f"wrote {n} rows to {output}", err=True)


def _config(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return {}
    return value or {}


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


def _wide(table: Any) -> Any:
    """Tidy rows -> one row per (run, step), one column per metric (the last value logged at that step, NaN
    included); rows only for the (run, step) pairs that have rows."""
    import pyarrow as pa

    df = table.select(WIDE_KEYS + ["name", "value"]).to_pandas()
    df = df.drop_duplicates(WIDE_KEYS + ["name"], keep="last")
    wide = df.set_index(WIDE_KEYS + ["name"])["value"].unstack("name").sort_index().reset_index()
    wide.columns.name = None
    return pa.Table.from_pandas(wide, preserve_index=False)


def _bundle(db: Path | None, suite: str | None, output: Path | None, filters: dict[str, Any]) -> None:
    given = [flag for flag, value in filters.items() if value]
    if given:
        raise UsageError(f"--format bundle exports a whole suite: drop {', '.join(given)}")
    if suite is None or output is None:
        raise UsageError("--format bundle writes one suite to a folder: add --suite NAME and --output DIR")
    if output.exists() and not output.is_dir():
        raise UsageError(f"--output {output}: a file; a bundle is a folder, name a new or existing folder")
    from .export import write

    write(db, suite, output, "--suite")


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
