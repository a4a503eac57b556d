"""Every command of ``rlbench`` (sub-commands of groups too) has ``--help``, and its help shows an
``Example:`` line, as sqlite-utils checks its own commands."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

pytestmark = pytest.mark.fast


def commands(group=None, path=()):
    """``(path, click command)`` of every leaf command under ``group``, e.g. ``(("datasets", "build"), cmd)``."""
    group = group or typer.main.get_command(app)
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def test_the_walk_finds_every_command():
    found = {" ".join(path) for path, _ in commands()}
    assert {"run", "status", "cancel", "fetch", "plot", "leaderboard", "validate", "compare", "report", "sql",
            "export", "datasets build", "datasets list", "datasets show", "datasets export",
            "datasets import"} <= found  # fmt: skip


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in commands()])
def test_every_command_has_help_with_an_example(path):
    cmd = dict((" ".join(p), c) for p, c in commands())[path]
    assert cmd.help and "Example:" in cmd.help, f"rlbench {path}: its docstring has no 'Example:' line"
    r = CliRunner().invoke(app, [*path.split(), "--help"])
    assert r.exit_code == 0, r.output
    assert f"rlbench {path}" in r.output and "Example:" in r.output
