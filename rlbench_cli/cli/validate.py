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
    from ..algos import first_refusal, to_check
    from ..errors import UsageError
    from ..suite.grid import expand, grid_shape, steps_summary
    from ..suite.loader import load_suite

    for f in files:
        suite = load_suite(f)
        runs = expand(suite)
        refused = first_refusal(to_check(runs))
        if refused:
            raise UsageError(f"{f}: {refused}")
        seeds, grid = len(suite.seed_list), grid_shape(suite, runs)
        typer.echo(
            f"ok: {f}: suite {suite.name!r}, {len(runs)} runs = {seeds} seeds x {grid}, {steps_summary(runs)}"
        )
        n = suite.resources.seeds_per_job
        if n > 1:
            from ..packed import plan_packs, unpackable

            alone = unpackable(runs)
            jobs = len(plan_packs(runs, n))
            typer.echo(f"  seeds_per_job {n}: {len(runs)} runs in {jobs} jobs" + (
                f"; {', '.join(alone)} cannot be packed and run one seed per job (packable: ppo and "
                "entrypoints marked @rlbench_cli.seeds_per_job)" if alone else ""))  # fmt: skip
