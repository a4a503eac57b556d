"""The ``rlbench`` command: wires one module per command into one Typer app."""

from __future__ import annotations

import typer

from .. import __version__
from .fetch import fetch
from .leaderboard import leaderboard
from .plot import plot
from .run import run
from .status import status
from .validate import validate

app = typer.Typer(
    name="rlbench",
    help="Run reinforcement-learning benchmark suites, keep every metric in DuckDB, compare with rliable.\n\n"
    "rlbench run suites/quickstart.yaml  ->  rlbench status  ->  rlbench fetch  ->  rlbench plot quickstart",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rlbench {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="show the version"
    ),
) -> None:
    pass


app.command()(run)
app.command()(status)
app.command()(fetch)
app.command()(plot)
app.command()(leaderboard)
app.command()(validate)


def main() -> None:
    app()
