from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from .common import DbOpt, JsonOpt, handle_errors, store_for


@handle_errors
def status(
    suite: Annotated[str | None, typer.Argument(help="suite name; omit for a summary of every suite")] = None,
    db: DbOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show how far suites have got: counts per status, and each run of one suite.

    Example: rlbench status quickstart --json
    """
    from ..errors import UnknownName

    store = store_for(db)
    with store.reader() as con:
        pending_slurm = bool(_slurm_rows(store, con, suite))
    slurm_state = _reattach(store, suite) if pending_slurm else {}
    with store.reader() as con:
        suites = store.suites(con)
        if suite is not None and suite not in suites:
            known = ", ".join(suites) or "none yet"
            raise UnknownName(f"no suite {suite!r} in {store.path} (suites there: {known})")
        runs = store.runs(con, suite)
        finals = dict(con.execute(
            """SELECT run_id, arg_max(value, step) FROM metrics WHERE name = 'eval/return'
               AND run_id IN (SELECT run_id FROM runs WHERE ? IS NULL OR suite = ?) GROUP BY run_id""",
            [suite, suite]).fetchall())  # fmt: skip
    for r in runs:  # a run in Slurm shows Slurm's word for it: queued or running
        if r["status"] == "running" and r["run_id"] in slurm_state:
            r["status"] = slurm_state[r["run_id"]]
    counts: dict[str, dict[str, int]] = {}
    for r in runs:
        c = counts.setdefault(r["suite"], {})
        c[r["status"]] = c.get(r["status"], 0) + 1
    if json_out:
        out = {
            "db": str(store.path),
            "suites": {
                name: {"total": sum(c.values()), **c, "all_finished": set(c) == {"finished"}}
                for name, c in counts.items()
            },
        }
        if suite is not None:
            out["runs"] = [
                {"run_id": r["run_id"], "algo": r["algo"], "env": r["env"], "seed": r["seed"], "status": r["status"],
                 "attempts": r["attempts"], "exit_code": r["exit_code"], "duration_s": r["duration_s"],
                 "final_eval_return": finals.get(r["run_id"]), "error": r["error"], "executor": r["executor"],
                 "job_id": r["job_id"], "host": r["host"]}
                for r in runs
            ]  # fmt: skip
        typer.echo(json.dumps(out, indent=1, default=str))
        return
    if not counts:
        typer.echo(f"{store.path}: no runs yet")
        return
    for name, c in counts.items():
        parts = ", ".join(f"{n} {k}" for k, n in sorted(c.items()))
        typer.echo(f"{name}: {sum(c.values())} runs: {parts}")
    if suite is not None:
        jobs = any(r["executor"] == "slurm" for r in runs)  # Slurm's job id and node, as its tools show them
        typer.echo(f"{'run_id':<17} {'algo':<20} {'env':<18} {'seed':>4}  {'status':<11} {'tries':>5} "
                   f"{'time':>7}  final eval/return" + ("  slurm job (node)" if jobs else ""))  # fmt: skip
        for r in runs:
            dur = f"{r['duration_s']:.1f}s" if r["duration_s"] is not None else "-"
            fin = finals.get(r["run_id"])
            fin_s = f"{fin:.1f}" if fin is not None else "-"
            job = ""
            if jobs and r["executor"] == "slurm":
                job = f"{'':<{max(0, 17 - len(fin_s))}}  {r['job_id']}" + (
                    f" ({r['host']})" if r["host"] else ""
                )
            typer.echo(f"{r['run_id']:<17} {r['algo']:<20} {r['env']:<18} {r['seed']:>4}  {r['status']:<11} "
                       f"{r['attempts']:>5} {dur:>7}  {fin_s}{job}")  # fmt: skip
            if r["status"] in ("failed", "interrupted") and r["error"]:
                typer.echo(f"    {r['error'].strip().splitlines()[0]}")


def _slurm_rows(store: Any, con: Any, suite: str | None) -> list[dict[str, Any]]:
    from ..coordinator import slurm_rows

    return slurm_rows(store.runs(con, suite))


def _reattach(store: Any, suite: str | None) -> dict[str, str]:
    """Runs the store says are in Slurm: ask Slurm. When no ``rlbench run`` holds the database, ingest what
    they wrote and close the ones that ended (``recover_slurm``); otherwise only read. Returns {run_id:
    queued | running} for runs still in Slurm. Without Slurm's commands here, says so and shows the store."""
    from ..coordinator import _RunLock, recover_slurm, runs_root
    from ..errors import StoreBusy, UsageError
    from ..executors.slurm import describe_state, query_states

    try:
        try:
            lock = _RunLock(store.path).__enter__()
        except StoreBusy:  # a coordinator is attached and records them: only look
            with store.reader() as con:
                rows = _slurm_rows(store, con, suite)
            states = query_states(r["job_id"] for r in rows)
            return {
                r["run_id"]: describe_state(states[r["job_id"]].state) for r in rows if r["job_id"] in states
            }
        try:
            with store.writer() as con:
                rows = store.runs(con, suite)
                live = recover_slurm(store, con, runs_root(store), rows)[1]
        finally:
            lock.__exit__(None, None, None)
        return {s.run_id: describe_state(s.state) for s in live}
    except UsageError as e:
        typer.echo(
            f"rlbench: note: cannot ask Slurm about its runs ({e}); showing the database as it is", err=True
        )
        return {}
