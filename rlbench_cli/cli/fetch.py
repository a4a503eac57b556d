from __future__ import annotations

import json
import math
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import UsageError
from .common import DbOpt, handle_errors, store_for

COLUMNS = ["run_id", "suite", "algo", "env", "seed", "step", "name", "value", "wall_time"]


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"
    bundle = "bundle"


def _json_value(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


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
    fmt: Annotated[Format, typer.Option("--format", "-f", help="output format")] = Format.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write to this file instead of stdout")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="at most N rows")] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="import runs another tool wrote, as FORMAT:PATH; formats: d3rlpy "
            "(a d3rlpy_logs folder, or one run folder in it)",
            show_default=False,
        ),
    ] = None,
    into: Annotated[
        str | None,
        typer.Option("--into", help="suite the runs imported with --from go in", show_default=False),
    ] = None,
) -> None:
    """Every metric of every run as tidy rows: run_id, suite, algo, env, seed, step, name, value, wall_time.
    With --from, import runs another tool wrote instead (idempotent: runs already there are skipped).

    Example: rlbench fetch --suite quickstart --metric eval/return --format csv -o returns.csv

    Import: rlbench fetch --from d3rlpy:d3rlpy_logs --into atari

    Bundle (a suite's finished runs and every metric, as Parquet, to share or to import elsewhere):
    rlbench fetch --suite classic-control --format bundle -o results/reference/classic-control ;
    rlbench fetch --from rlbench:results/reference/classic-control --into my-study
    """
    if source is not None or into is not None:
        _import(db, source, into, {"--suite": suite, "--algo": algo, "--env": env, "--seed": seed,
                                   "--metric": metric, "--format": fmt is not Format.table, "--output": output,
                                   "--limit": limit is not None})  # fmt: skip
        return
    if fmt is Format.bundle:
        _bundle(db, suite, output, {"--algo": algo, "--env": env, "--seed": seed, "--metric": metric,
                                    "--limit": limit is not None})  # fmt: skip
        return
    if fmt is Format.parquet and output is None:
        raise UsageError("--format parquet writes a binary file: add --output FILE.parquet")
    if limit is not None and limit < 0:
        raise UsageError(f"--limit must be 0 or more (got {limit})")
    store = store_for(db)
    with store.reader() as con:
        table = store.query_metrics(con, suite=suite, algos=algo or (), envs=env or (), seeds=seed or (),
                                    metrics=metric or ())  # fmt: skip
    table = table.select(COLUMNS)
    if limit is not None:
        table = table.slice(0, limit)
    if table.num_rows == 0:
        typer.echo("rlbench: no metric rows match these filters", err=True)
    if fmt is Format.parquet:
        import pyarrow.parquet as pq

        pq.write_table(table, output)
        typer.echo(f"wrote {table.num_rows} rows to {output}", err=True)
        return
    if fmt is Format.csv:
        import pyarrow.csv as pacsv

        if output is not None:
            pacsv.write_csv(table, output)
        else:
            import io

            buf = io.BytesIO()
            pacsv.write_csv(table, buf)
            sys.stdout.write(buf.getvalue().decode())
        return
    rows = table.to_pylist()
    if fmt is Format.json:
        text = json.dumps([{k: _json_value(v) for k, v in r.items()} for r in rows])
    else:
        widths = {c: max([len(c)] + [len(_cell(r[c])) for r in rows]) for c in COLUMNS}
        lines = ["  ".join(c.ljust(widths[c]) for c in COLUMNS)]
        lines += ["  ".join(_cell(r[c]).ljust(widths[c]) for c in COLUMNS) for r in rows]
        text = "\n".join(lines)
    if output is not None:
        output.write_text(text + "\n")
    else:
        typer.echo(text)


def _bundle(db: Path | None, suite: str | None, output: Path | None, filters: dict[str, Any]) -> None:
    given = [flag for flag, value in filters.items() if value]
    if given:
        raise UsageError(f"--format bundle exports a whole suite: drop {', '.join(given)}")
    if suite is None or output is None:
        raise UsageError("--format bundle writes one suite to a folder: add --suite NAME and --output DIR")
    if output.exists() and not output.is_dir():
        raise UsageError(f"--output {output}: a file; a bundle is a folder, name a new or existing folder")
    store = store_for(db)
    with store.reader() as con:
        if suite not in store.suites(con):
            known = ", ".join(store.suites(con)) or "none yet"
            raise UsageError(f"--suite {suite!r}: no such suite in {store.path} (suites: {known})")
        n_runs, n_rows = store.export_bundle(con, suite, output)
    typer.echo(f"wrote {n_runs} finished runs ({n_rows} metric rows) of suite {suite!r} to {output}/")


def _import(db: Path | None, source: str | None, into: str | None, export_flags: dict[str, Any]) -> None:
    from ..spec import NAME_RE

    if source is None:
        raise UsageError("--into names the suite imported runs go in: add --from FORMAT:PATH, "
                         "e.g. --from d3rlpy:d3rlpy_logs")  # fmt: skip
    given = [flag for flag, value in export_flags.items() if value]
    if given:
        raise UsageError(f"--from imports runs and {', '.join(given)} select what to export: "
                         "import first, then run rlbench fetch again to export")  # fmt: skip
    if into is None:
        raise UsageError(f"--from {source}: add --into SUITE to name the suite the imported runs go in, "
                         "e.g. --into atari")  # fmt: skip
    if not NAME_RE.match(into):
        raise UsageError(f"--into {into!r}: a suite name is letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit")  # fmt: skip
    from ..importers import import_source

    result = import_source(store_for(db), source, into)
    for w in result.warnings:
        typer.echo(f"warning: {w}", err=True)
    typer.echo(result.summary())


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
