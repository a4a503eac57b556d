from __future__ import annotations

from typing import Annotated

import typer

from .common import DbOpt, handle_errors


@handle_errors
def ui(
    db: DbOpt = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="port (0: a free one)")] = 8765,
    host: Annotated[
        str, typer.Option("--host", help="address to listen on; other than loopback it needs --token")
    ] = "127.0.0.1",
    token: Annotated[
        str | None,
        typer.Option("--token", help="token every request must carry; 'auto' generates one (printed)"),
    ] = None,
) -> None:
    """A local web app over the results: suites, a runs table, live curves grouped by any config key (IQM or
    mean with 95% bootstrap bands), a run's config, log and files, run comparison, a suite's leaderboard.
    Read-only; it never holds the database while rlbench run writes.

    Example: rlbench ui --db results/rlbench.duckdb --port 8765
    """
    from ..ui.server import prepare, serve

    serve(prepare(db, host=host, port=port, token=token), say=lambda line: typer.echo(line, err=True))
