"""``rlbench sql``: one read-only SQL query against the results database, printed or exported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import DbOpt, handle_errors, store_for
from .output import OutFormat, write_table


@handle_errors
def sql(
    query: Annotated[
        str,
        typer.Argument(
            help="one read-only query: SELECT / WITH / FROM / SHOW / DESCRIBE / SUMMARIZE", show_default=False
        ),
    ],
    db: DbOpt = None,
    fmt: Annotated[OutFormat, typer.Option("--format", "-f", help="output format")] = OutFormat.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write to this file instead of stdout")
    ] = None,
) -> None:
    """Run one read-only SQL query against the results database (tables: suites, runs, metrics, artifacts,
    shards, schema_version) and print the result or write it as CSV, JSON or Parquet. Anything that would
    write (INSERT, UPDATE, DELETE, CREATE, COPY, EXPORT, ATTACH, INSTALL, LOAD, SET, ...) is refused with an
    error; reading other files with read_csv / read_parquet is allowed. Needs no duckdb program.

    Example: rlbench sql "SELECT algo, env, avg(value) FROM metrics JOIN runs USING (run_id) WHERE name = 'eval/return' GROUP BY ALL"

    Export: rlbench sql "FROM runs WHERE status = 'failed'" --format csv -o failed.csv
    """
    store = store_for(db)
    with store.reader() as con:
        table = store.select(con, query)
    write_table(table, fmt, output)
