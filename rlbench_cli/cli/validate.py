from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import handle_errors


@handle_errors
def validate(files: Annotated[list[Path], typer.Argument(help="suite files to check")]) -> None:
    """Check suite files without running anything.

    Example: rlbench validate suites/quickstart.yaml
    """
    from ..grid import expand
    from ..spec import load_suite

    for f in files:
        suite = load_suite(f)
        runs = expand(suite)
        variants = len({r.algo for r in runs})
        seeds = len(suite.seed_list)
        if len(runs) == seeds * variants * len(suite.envs):
            grid = f"{variants} algorithm configs x {len(suite.envs)} envs"
        else:  # some algorithms run on some envs only (their `envs:`)
            pairs = len(runs) // seeds
            grid = f"{pairs} (algorithm config, env) pairs of {variants} configs and {len(suite.envs)} envs"
        typer.echo(
            f"ok: {f}: suite {suite.name!r}, {len(runs)} runs = {seeds} seeds x {grid}, "
            f"{suite.budget.steps:,} steps each"
        )
