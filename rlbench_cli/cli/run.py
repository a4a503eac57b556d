from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import RunFailed, UsageError
from .common import DbOpt, JsonOpt, handle_errors, is_tty, store_for


class Progress:
    """Prints every start, end and failure at once, plus a status line (live on a terminal)."""

    def __init__(self, live: bool):
        self.live = live
        self.total = self.todo = self.done = self.failed = self.running = 0
        self.durations: list[float] = []
        self.workers = 1
        self.t0 = time.monotonic()
        self.last_line = 0.0

    def _eta(self) -> str:
        left = self.todo - self.done - self.failed
        if not self.durations or left <= 0:
            return "?"
        secs = sum(self.durations) / len(self.durations) * left / max(1, self.workers)
        return f"{int(secs // 60)}m{int(secs % 60):02d}s"

    def _status(self) -> str:
        return (f"[{self.done + self.failed}/{self.todo}] running {self.running}, finished {self.done}, "
                f"failed {self.failed}, ETA {self._eta()}")  # fmt: skip

    def _print(self, line: str) -> None:
        if self.live:
            sys.stdout.write("\r\033[K" + line + "\n" + self._status())
        else:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "plan":
            self.total, self.todo = info["total"], info["todo"]
            extra = f", {info['recovered']} recovered from an earlier stop" if info["recovered"] else ""
            self._print(f"{info['total']} runs in the suite: {info['skipped']} already done, "
                        f"{info['todo']} to run{extra}")  # fmt: skip
        elif event == "start":
            self._print(info["describe"])
        elif event == "dataset":
            self._print(f"building dataset {info['name']} -> {info['path']} (once; later runs reuse it)")
        elif event == "dataset_progress":
            self._print(f"  {info['msg']}")
        elif event == "started":
            self.running += 1
            self.workers = max(self.workers, self.running)  # runs seen in flight at once, for the ETA
            s = info["spec"]
            again = f" (attempt {info['attempt']})" if info["attempt"] > 1 else ""
            if info.get("resume_step") is not None:
                again = f" (attempt {info['attempt']}, resumed at step {info['resume_step']})"
            self._print(f"  start  {s.algo} {s.env} seed={s.seed} [{s.run_id}]{again}")
        elif event == "ended":
            self.running -= 1
            s, o = info["spec"], info["outcome"]
            if o.status == "finished":
                self.done += 1
                self.durations.append(o.duration_s)
                final = info.get("final")
                score = f"  eval/return {final:.1f}" if isinstance(final, float) else ""
                resumed = o.result.get("resumed_from_step")
                score += f"  (resumed at step {resumed})" if resumed is not None else ""
                self._print(f"  done   {s.algo} {s.env} seed={s.seed} in {o.duration_s:.1f}s{score}")
            else:
                if not info["retry"]:
                    self.failed += 1
                err = (o.error or o.status).strip().splitlines()[0]
                what = "retrying" if info["retry"] else o.status.upper()
                self._print(f"  {what} {s.algo} {s.env} seed={s.seed} [{s.run_id}]: {err}")
        if self.live:
            sys.stdout.write("\r\033[K" + self._status())
            sys.stdout.flush()
        elif time.monotonic() - self.last_line > 30 and event in ("started", "ended"):
            self.last_line = time.monotonic()
            sys.stdout.write(self._status() + "\n")

    def close(self) -> None:
        if self.live:
            sys.stdout.write("\r\033[K")
            sys.stdout.flush()


class _StopOnSignal:
    """SIGINT and SIGTERM ask the run to stop at its next safe point (never inside a database write); a
    second Ctrl-C stops at once."""

    def __init__(self) -> None:
        import threading

        self.event = threading.Event()
        self.saved: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: object) -> None:
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.event.set()

    def __enter__(self) -> _StopOnSignal:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self.saved.items():
            signal.signal(sig, old)


@handle_errors
def run(
    suite_file: Annotated[Path, typer.Argument(help="suite YAML file, e.g. suites/quickstart.yaml")],
    db: DbOpt = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", "-w", help="parallel runs [default: usable cores]", show_default=False),
    ] = None,  # fmt: skip
    retries: Annotated[int, typer.Option("--retries", help="times to retry a failed run")] = 0,
    only_failed: Annotated[
        bool, typer.Option("--only-failed", help="re-run only failed or interrupted runs")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="seconds before a run is killed [default: budget.timeout, else none]",
            show_default=False,
        ),
    ] = None,
    datasets: Annotated[
        Path | None,
        typer.Option(
            "--datasets",
            help="folder of generated datasets [default: $RLBENCH_DATASETS, else results/datasets]",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the grid, run nothing")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run a suite: every seed x algorithm x environment, skipping runs already finished.

    Example: rlbench run suites/quickstart.yaml --workers 2 --retries 1
    """
    from ..grid import expand
    from ..spec import load_suite

    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {workers})")
    if retries < 0:
        raise UsageError(f"--retries must be 0 or more (got {retries})")
    if timeout is not None and timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds (got {timeout:g})")
    suite = load_suite(suite_file)
    if datasets is not None:
        if datasets.exists() and not datasets.is_dir():
            raise UsageError(f"--datasets {datasets}: a file; name the folder generated datasets live in")
        import os

        os.environ["RLBENCH_DATASETS"] = str(datasets.resolve())
    if dry_run:
        specs = expand(suite)
        if json_out:
            typer.echo(json.dumps([s.to_dict() for s in specs], indent=1))
        else:
            typer.echo(f"{suite.name}: {len(specs)} runs, {suite.budget.steps:,} steps each")
            for s in specs:
                p = f" {json.dumps(s.params, sort_keys=True)}" if s.params else ""
                typer.echo(f"  {s.run_id}  {s.algo:<24} {s.env:<20} seed={s.seed}{p}")
        return

    from ..coordinator import run_suite

    store = store_for(db)
    progress = Progress(live=is_tty() and not json_out)
    t0 = time.monotonic()
    try:
        with _StopOnSignal() as stopper:
            summary = run_suite(suite, str(suite_file), store, workers=workers, retries=retries,
                                only_failed=only_failed, timeout=timeout, stop=stopper.event,
                                report=(lambda e, i: None) if json_out else progress)  # fmt: skip
    finally:
        progress.close()
    wall = time.monotonic() - t0
    if json_out:
        typer.echo(json.dumps({
            "suite": suite.name, "db": str(store.path), "total": summary.total, "skipped": summary.skipped,
            "finished": summary.finished, "failed": summary.failed, "interrupted": summary.interrupted,
            "recovered": summary.recovered, "wall_s": round(wall, 2),
            "failures": [{"run_id": s.run_id, "algo": s.algo, "env": s.env, "seed": s.seed, "error": e}
                         for s, e in summary.failures]}))  # fmt: skip
    else:
        typer.echo(f"{suite.name}: {summary.finished} finished, {summary.failed} failed, {summary.skipped} skipped "
                   f"in {wall:.1f}s; results in {store.path}")  # fmt: skip
        if summary.failed:
            typer.echo(f"  see the errors with: rlbench status {suite.name}; re-run them with: "
                       f"rlbench run {suite_file} --only-failed")  # fmt: skip
    if summary.failed:
        raise RunFailed(f"{summary.failed} of {summary.total} runs of suite {suite.name!r} failed")
