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
) -> None:
    """Every metric of every run as tidy rows: run_id, suite, algo, env, seed, step, name, value, wall_time.

    Example: rlbench fetch --suite quickstart --metric eval/return --format csv -o returns.csv
    """
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


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
