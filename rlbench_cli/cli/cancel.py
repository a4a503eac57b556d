from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from .common import DbOpt, JsonOpt, handle_errors, store_for

SETTLE_S = 20.0  # how long to wait for cancelled jobs to leave Slurm's queue and write their last metrics


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
    from ..coordinator import _RunLock, recover_slurm, runs_root, slurm_rows
    from ..errors import StoreBusy, UnknownName
    from ..executors.slurm import mark_cancelled, query_states, scancel
    from ..runner import attempt_dir

    store = store_for(db)
    root = runs_root(store)
    with store.reader() as con:
        if suite not in store.suites(con):
            known = ", ".join(store.suites(con)) or "none yet"
            raise UnknownName(f"no suite {suite!r} in {store.path} (suites there: {known})")
        rows = slurm_rows(store.runs(con, suite))
    # jobs that ended since the store last looked (finished, failed) are recorded as they ended, not cancelled
    states = query_states(r["job_id"] for r in rows)
    ended = [r["job_id"] for r in rows if r["job_id"] in states and states[r["job_id"]].ended]
    rows = [r for r in rows if r["job_id"] not in ended]
    ids = [r["job_id"] for r in rows]
    for r in rows:  # before scancel: whoever records the end knows it was asked for
        for k in (r["attempts"], r["attempts"] + 1):  # +1: a task requeued but not recorded yet
            folder = attempt_dir(root, r["suite"], r["run_id"], k)
            if k == r["attempts"] or folder.exists():
                mark_cancelled(folder)
    scancel(ids)
    deadline = time.monotonic() + SETTLE_S
    while ids and time.monotonic() < deadline:
        states = query_states(ids)
        if all(j not in states or states[j].ended for j in ids):
            break
        time.sleep(0.5)
    recorded_by = None
    try:
        lock = _RunLock(store.path).__enter__()
    except StoreBusy as e:  # an attached `rlbench run` sees them end and records them
        recorded_by = str(e)
    else:
        try:
            # the tasks' SIGTERM handlers write their last shards and result.json
            time.sleep(1.0 if ids else 0)
            with store.writer() as con:
                recover_slurm(store, con, root, store.runs(con, suite))
        finally:
            lock.__exit__(None, None, None)
    if json_out:
        typer.echo(json.dumps({"suite": suite, "cancelled": ids, "already_ended": ended,
                               "recorded_by_running_coordinator": bool(recorded_by)}))  # fmt: skip
        return
    before = ""
    if ended:
        who = "the attached 'rlbench run' records" if recorded_by else "recorded"
        before = f"; {len(ended)} other job(s) had already ended ({', '.join(ended)}): {who} how they ended"
    if not ids:
        typer.echo(f"{suite}: no runs queued or running in Slurm{before}")
        return
    typer.echo(f"{suite}: cancelled {len(ids)} Slurm job(s): {', '.join(ids)}{before}")
    if recorded_by:
        typer.echo("  the 'rlbench run' attached to this database records them as interrupted")
