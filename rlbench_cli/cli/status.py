from __future__ import annotations

import json
from typing import Annotated

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
        suites = store.suites(con)
        if suite is not None and suite not in suites:
            known = ", ".join(suites) or "none yet"
            raise UnknownName(f"no suite {suite!r} in {store.path} (suites there: {known})")
        runs = store.runs(con, suite)
        finals = dict(con.execute(
            """SELECT run_id, arg_max(value, step) FROM metrics WHERE name = 'eval/return'
               AND run_id IN (SELECT run_id FROM runs WHERE ? IS NULL OR suite = ?) GROUP BY run_id""",
            [suite, suite]).fetchall())  # fmt: skip
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
                 "final_eval_return": finals.get(r["run_id"]), "error": r["error"]}
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
        typer.echo(f"{'run_id':<17} {'algo':<20} {'env':<18} {'seed':>4}  {'status':<11} {'tries':>5} "
                   f"{'time':>7}  final eval/return")  # fmt: skip
        for r in runs:
            dur = f"{r['duration_s']:.1f}s" if r["duration_s"] is not None else "-"
            fin = finals.get(r["run_id"])
            fin_s = f"{fin:.1f}" if fin is not None else "-"
            typer.echo(f"{r['run_id']:<17} {r['algo']:<20} {r['env']:<18} {r['seed']:>4}  {r['status']:<11} "
                       f"{r['attempts']:>5} {dur:>7}  {fin_s}")  # fmt: skip
            if r["status"] in ("failed", "interrupted") and r["error"]:
                typer.echo(f"    {r['error'].strip().splitlines()[0]}")
