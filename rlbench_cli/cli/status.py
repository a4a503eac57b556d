from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

from .common import DbOpt, JsonOpt, handle_errors, is_tty, store_for


def _snapshot(store: Any, suite: str | None) -> Any:
    """``coordinator.snapshot``, saying on stderr when the executor could not be asked."""
    from ..coordinator import snapshot

    snap = snapshot(store, suite)
    if snap.note:
        typer.echo(f"rlbench: note: {snap.note}", err=True)
    return snap


def _fmt(v: float | None, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def _run_cells(r: dict[str, Any], m: dict[str, float]) -> list[str]:
    dur = f"{r['duration_s']:.1f}s" if r["duration_s"] is not None else "-"
    return [
        r["run_id"], r["algo"], r["env"], str(r["seed"]), r["status"], str(r["attempts"]), dur,
        r.get("executor") or "-", r.get("host") or "-", r.get("device") or "-", r.get("job_id") or "-",
        _fmt(m.get("sys/steps_per_second"), ".0f"), _fmt(m.get("sys/cpu_percent"), ".0f"),
        _fmt(m.get("sys/rss_mb"), ".0f"), _fmt(m.get("eval/return")),
    ]  # fmt: skip


HEADERS = ["run_id", "algo", "env", "seed", "status", "tries", "time", "executor", "host", "device", "job",
           "steps/s", "cpu%", "rss MB", "eval/return"]  # fmt: skip


def _print_plain(snap: Any, suite: str | None, path: Any) -> None:
    if not snap.counts:
        typer.echo(f"{path}: no runs yet")
        return
    for name, c in snap.counts.items():
        parts = ", ".join(f"{n} {k}" for k, n in sorted(c.items()))
        typer.echo(f"{name}: {sum(c.values())} runs: {parts}")
    if suite is None:
        return
    rows = [_run_cells(r, snap.latest.get(r["run_id"], {})) for r in snap.runs]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(HEADERS)]
    right = {3, 5, 6, 11, 12, 13, 14}
    line = lambda cells: "  ".join(c.rjust(w) if i in right else c.ljust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths))).rstrip()  # fmt: skip
    typer.echo(line(HEADERS))
    for r, row in zip(snap.runs, rows):
        typer.echo(line(row))
        if r["status"] in ("failed", "interrupted") and r["error"]:
            typer.echo(f"    {r['error'].strip().splitlines()[0]}")


def _rich_table(snap: Any, suite: str, path: Any) -> Any:
    from rich.table import Table

    c = snap.counts.get(suite, {})
    parts = ", ".join(f"{n} {k}" for k, n in sorted(c.items()))
    table = Table(title=f"{suite}: {sum(c.values())} runs: {parts}   ({path}, {time.strftime('%H:%M:%S')})",
                  title_justify="left", expand=False, pad_edge=False)  # fmt: skip
    for h in HEADERS:
        table.add_column(h, justify="right" if h in ("seed", "tries", "time", "steps/s", "cpu%", "rss MB",
                                                     "eval/return") else "left", no_wrap=True)  # fmt: skip
    colour = {
        "finished": "green",
        "failed": "red",
        "interrupted": "yellow",
        "running": "cyan",
        "pruned": "magenta",
    }
    for r in snap.runs:
        cells = _run_cells(r, snap.latest.get(r["run_id"], {}))
        cells[4] = f"[{colour.get(r['status'], 'white')}]{cells[4]}[/]"
        table.add_row(*cells)
    return table


@handle_errors
def status(
    suite: Annotated[str | None, typer.Argument(help="suite name; omit for a summary of every suite")] = None,
    db: DbOpt = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="keep the view of SUITE on screen, refreshed, until its runs end")
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", help="seconds between refreshes with --watch")
    ] = 2.0,
    json_out: JsonOpt = False,
) -> None:
    """Show how far suites have got: counts per status, and each run of one suite with where it runs
    (executor, host, device, job id) and its latest system metrics.

    Example: rlbench status quickstart --watch
    """
    from ..coordinator import SYS_COLUMNS
    from ..errors import UsageError

    if watch and suite is None:
        raise UsageError("--watch needs a suite: rlbench status SUITE --watch")
    if interval <= 0:
        raise UsageError(f"--interval must be a positive number of seconds (got {interval:g})")
    store = store_for(db)
    snap = _snapshot(store, suite)
    if watch and not json_out:
        _watch(store, suite, snap, interval)  # type: ignore[arg-type]
        return
    if json_out:
        out: dict[str, Any] = {
            "db": str(store.path),
            "suites": {
                name: {"total": sum(c.values()), **c, "all_finished": set(c) == {"finished"}}
                for name, c in snap.counts.items()
            },
        }
        if suite is not None:
            out["runs"] = []
            for r in snap.runs:
                m = snap.latest.get(r["run_id"], {})
                out["runs"].append({
                    "run_id": r["run_id"], "algo": r["algo"], "env": r["env"], "seed": r["seed"],
                    "status": r["status"], "attempts": r["attempts"], "exit_code": r["exit_code"],
                    "duration_s": r["duration_s"], "executor": r["executor"], "host": r["host"],
                    "device": r["device"], "job_id": r["job_id"], "final_eval_return": m.get("eval/return"),
                    "sys": {k: m[k] for k in SYS_COLUMNS if k in m}, "error": r["error"]})  # fmt: skip
        typer.echo(json.dumps(out, indent=1, default=str))
        return
    _print_plain(snap, suite, store.path)


def _watch(store: Any, suite: str, snap: Any, interval: float) -> None:
    """Redraw the suite's table every ``interval`` seconds until no run is pending or running (Ctrl-C ends
    it earlier). Without a terminal, print the plain table each time something changes."""
    from ..store import TERMINAL

    def done(s: Any) -> bool:
        return bool(s.runs) and all(r["status"] in TERMINAL for r in s.runs)

    try:
        if is_tty():
            from rich.console import Console
            from rich.live import Live

            with Live(_rich_table(snap, suite, store.path), console=Console(), auto_refresh=False) as live:
                while not done(snap):
                    time.sleep(interval)
                    snap = _snapshot(store, suite)
                    live.update(_rich_table(snap, suite, store.path), refresh=True)
        else:
            last = None
            while True:
                key = [(r["run_id"], r["status"], r["attempts"]) for r in snap.runs]
                if key != last:
                    _print_plain(snap, suite, store.path)
                    last = key
                if done(snap):
                    break
                time.sleep(interval)
                snap = _snapshot(store, suite)
    except KeyboardInterrupt:
        pass
