"""The ``rlbench`` command: wires one module per command into one Typer app."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

try:  # typer >= 0.2x carries its own copy of click
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover - older typer on the click package
    from click import exceptions as _click_errors

from .. import __version__
from .cancel import cancel
from .check import check
from .compare import compare
from .datasets import datasets_app
from .enjoy import enjoy
from .export import export
from .fetch import fetch
from .leaderboard import leaderboard
from .plot import plot
from .report import report
from .run import run
from .sql import sql
from .status import status
from .tune import tune
from .ui import ui
from .validate import validate


class _OneLineErrors(TyperGroup):
    """Click's own usage errors (a bad flag value, an unknown option, a missing argument) as one line on
    stderr, exit code 2, like every other error: ``rlbench: error: rlbench plot: Invalid value for ...``."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except getattr(_click_errors, "NoArgsIsHelpError", ()) as e:  # plain `rlbench`: the help
            e.show()
            sys.exit(e.exit_code)
        except _click_errors.ClickException as e:
            msg = " ".join(e.format_message().replace("Value error, ", "").split())
            cmd = e.ctx.command_path if getattr(e, "ctx", None) else "rlbench"
            typer.echo(f"rlbench: error: {cmd}: {msg} (see {cmd} --help)", err=True)
            sys.exit(e.exit_code)
        except (typer.Abort, getattr(_click_errors, "Abort", typer.Abort)):
            typer.echo("rlbench: interrupted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="rlbench",
    cls=_OneLineErrors,
    help="Run reinforcement-learning benchmark suites, keep every metric in DuckDB, compare with rliable.\n\n"
    "rlbench run suites/quickstart.yaml  ->  rlbench status  ->  rlbench fetch  ->  rlbench plot quickstart",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help, as click prints it: Rich's markup took "[default: ...]" in a help text for a tag and dropped it
    rich_markup_mode=None,
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
app.command()(cancel)
app.command()(fetch)
app.command()(plot)
app.command()(leaderboard)
app.command()(validate)
app.command()(compare)
app.command()(check)
app.command()(tune)
app.command()(report)
app.command()(sql)
app.command()(export)
app.command()(ui)
app.command()(enjoy)
app.add_typer(datasets_app, name="datasets")


def main() -> None:
    app()
