from __future__ import annotations

import json
from typing import Annotated

import typer

from .common import DbOpt, JsonOpt, handle_errors, store_for


@handle_errors
def cancel(
    suite: Annotated[str, typer.Argument(help="suite name whose Slurm jobs to cancel")],
    db: DbOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Cancel a suite's runs that are queued or running in Slurm (scancel); they end 'interrupted'.

    What they wrote so far is kept. Re-run them later with: rlbench run SUITE.yaml --executor slurm

    Example: rlbench cancel quickstart
    """
    from ..coordinator import cancel as cancel_suite
    from ..executors import EXECUTORS

    where = " or ".join(e.label for e in EXECUTORS.values() if e.outlives_coordinator)  # Slurm

    r = cancel_suite(store_for(db), suite)
    ids, ended = r.cancelled, r.already_ended
    if json_out:
        typer.echo(json.dumps({"suite": suite, "cancelled": ids, "already_ended": ended,
                               "recorded_by_running_coordinator": bool(r.recorded_by)}))  # fmt: skip
        return
    before = ""
    if ended:
        who = "the attached 'rlbench run' records" if r.recorded_by else "recorded"
        before = f"; {len(ended)} other job(s) had already ended ({', '.join(ended)}): {who} how they ended"
    if not ids:
        typer.echo(f"{suite}: no runs queued or running in {where}{before}")
        return
    typer.echo(f"{suite}: cancelled {len(ids)} {where} job(s): {', '.join(ids)}{before}")
    if r.recorded_by:
        typer.echo("  the 'rlbench run' attached to this database records them as interrupted")
