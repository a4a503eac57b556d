from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import handle_errors


@handle_errors
def validate(files: Annotated[list[Path], typer.Argument(help="suite files to check")]) -> None:
    """Check suite files without running anything: their fields, and each algorithm's params as its runs
    would check them when they start (this imports the algorithms: torch, d3rlpy or transformers).

    Example: rlbench validate suites/quickstart.yaml
    """
    from ..coordinator.validate import validate as check

    for f in files:
        v = check(f)
        typer.echo(f"ok: {f}: suite {v.suite!r}, {v.runs} runs = {v.seeds} seeds x {v.grid}, {v.steps}")
        if v.seeds_per_job > 1:
            typer.echo(f"  seeds_per_job {v.seeds_per_job}: {v.runs} runs in {v.jobs} jobs" + (
                f"; {', '.join(v.unpackable)} cannot be packed and run one seed per job (packable: "
                f"{', '.join(v.packable)} and entrypoints marked @rlbench_cli.seeds_per_job)"
                if v.unpackable else ""))  # fmt: skip
