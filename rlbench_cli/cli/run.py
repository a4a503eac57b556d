from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import RunFailed, UsageError
from ..executors import EXECUTORS, NAMES, executor_kind
from .common import DbOpt, JsonOpt, handle_errors, is_tty, stdout_closed, store_for


class Progress:
    """Prints every start, end and failure at once, plus a status line (live on a terminal); ``quiet``
    (``--json``): only counts them, for the summary of a stopped run."""

    def __init__(self, live: bool, quiet: bool = False):
        self.live, self.quiet = live and not quiet, quiet
        self.total = self.todo = self.skipped = self.done = self.failed = self.interrupted = self.running = 0
        self.durations: list[float] = []
        self.workers = 1
        self.t0 = time.monotonic()
        self.last_line = 0.0
        self.started: set[str] = set()
        self.plans = 0  # an adaptive run plans each batch; a stop's summary counts every batch's runs
        self.earlier = {"total": 0, "skipped": 0, "finished": 0, "failed": 0, "interrupted": 0}

    def _ended(self) -> int:
        return self.done + self.failed + self.interrupted

    def _eta(self) -> str:
        left = self.todo - self._ended()
        if not self.durations or left <= 0:
            return "?"
        secs = sum(self.durations) / len(self.durations) * left / max(1, self.workers)
        return f"{int(secs // 60)}m{int(secs % 60):02d}s"

    def _status(self) -> str:
        stopped = f", interrupted {self.interrupted}" if self.interrupted else ""
        return (f"[{self._ended()}/{self.todo}] running {self.running}, finished {self.done}, "
                f"failed {self.failed}{stopped}, ETA {self._eta()}")  # fmt: skip

    def _running(self, run_id: str) -> None:
        self.started.add(run_id)
        self.running = len(self.started)
        self.workers = max(self.workers, self.running)  # runs seen in flight at once, for the ETA

    def _print(self, line: str) -> None:
        if self.quiet:
            return
        self._write(("\r\033[K" + line + "\n" + self._status()) if self.live else line + "\n")

    def _write(self, text: str) -> None:
        """Writes to stdout; once its reader has gone (``| head``, a closed ``tee``), the run goes on without
        printing: its results are in the database, and a run must not die because nobody reads it."""
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            if not stdout_closed():
                raise
            self.live, self.quiet = False, True

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "plan":
            now = (self.total, self.skipped, self.done, self.failed, self.interrupted)
            for k, v in zip(self.earlier, now):  # the batch before (all zero at the first plan)
                self.earlier[k] += v
            self.plans += 1
            self.total, self.todo, self.skipped = info["total"], info["todo"], info["skipped"]
            self.done = self.failed = self.interrupted = 0  # per plan: an adaptive run plans each batch
            extra = f", {info['recovered']} recovered from an earlier stop" if info["recovered"] else ""
            if info.get("attached"):
                extra += (
                    f", {info['attached']} already in {info['attached_in']} (waited for, not resubmitted)"
                )
            self._print(f"{info['total']} runs in the suite: {info['skipped']} already done, "
                        f"{info['todo']} to run{extra}")  # fmt: skip
        elif event == "start":
            self._print(info["describe"])
        elif event == "dataset":
            self._print(f"building dataset {info['name']} -> {info['path']} (once; later runs reuse it)")
        elif event == "dataset_wait":
            self._print(
                f"dataset {info['name']}: another process (pid {info['pid']}) is building it; waiting"
            )
        elif event == "dataset_ready":
            self._print(f"dataset {info['name']}: built by the other process, used as it is ({info['path']})")
        elif event == "dataset_progress":
            self._print(f"  {info['msg']}")
        elif event == "dataset_provenance":
            self._print(
                f"dataset {info['name']}: " + ", ".join(f"{k} {v}" for k, v in info.items() if k != "name")
            )
        elif event == "note":
            self._print(f"note: {info['msg']}")
        elif event == "adaptive_look":
            for t in info["tests"]:
                left = [c for c in t.comparisons if c.decision == "continue"]
                more = f"next batch for {', '.join(t.needs_more)}" if left and t.needs_more else "decided"
                self._print(f"AdaStop, {t.task}: {t.looks} look(s), {len(left)} of {len(t.comparisons)} pairs "
                            f"undecided; {more}")  # fmt: skip
        elif event == "started":
            s, where = info["spec"], info["placement"]
            again = f" (attempt {info['attempt']})" if info["attempt"] > 1 else ""
            if info.get("resume_step") is not None:
                again = f" (attempt {info['attempt']}, resumed at step {info['resume_step']})"
            job = f" {where.executor} job {where.job_id}" if _outlives(where.executor) else ""
            if not where.host:  # submitted to a queue, not running yet
                self._print(f"  queued {s.algo} {s.env} seed={s.seed} [{s.run_id}]{again}{job}")
            else:
                self._running(s.run_id)
                on = f" on {where.host}" if _outlives(where.executor) else ""
                self._print(f"  start  {s.algo} {s.env} seed={s.seed} [{s.run_id}]{again}{job}{on}")
        elif event == "attached":  # found in Slurm (say), from an earlier (detached or killed) rlbench run
            s, where = info["spec"], info["placement"]
            again = f" (attempt {info['attempt']})" if info["attempt"] > 1 else ""
            if where.host:
                self._running(s.run_id)
            state = f"running on {where.host}" if where.host else "queued"
            self._print(f"  {state} {s.algo} {s.env} seed={s.seed} [{s.run_id}]{again} {where.executor} job {where.job_id}"
                        " (submitted earlier)")  # fmt: skip
        elif event == "requeued":
            s = info["spec"]
            self._print(f"  requeued {s.algo} {s.env} seed={s.seed} [{s.run_id}]: {info['outcome'].error}")
        elif event == "ended":
            self.started.discard(info["spec"].run_id)
            self.running = len(self.started)
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
                if not info["retry"]:  # an interrupted run was stopped (Ctrl-C, cancel), it did not fail
                    self.interrupted += o.status in ("interrupted", "pruned")
                    self.failed += o.status not in ("interrupted", "pruned")
                err = (o.error or o.status).strip().splitlines()[0]
                what = "retrying" if info["retry"] else o.status.upper()
                self._print(f"  {what} {s.algo} {s.env} seed={s.seed} [{s.run_id}]: {err}")
        if self.quiet:
            return
        if self.live:
            self._write("\r\033[K" + self._status())
        elif time.monotonic() - self.last_line > 30 and self._settled(event):
            self.last_line = time.monotonic()
            self._write(self._status() + "\n")

    def _settled(self, event: str) -> bool:
        """Whether the counts hold after ``event`` (for the log's status line): after a start, or after an end
        that no start follows (nothing left to start); a worker whose run ended is about to start the next,
        and a line printed between the two would say one run fewer is running than are."""
        if event == "started":
            return True
        return event == "ended" and self._not_started() <= 0

    def _not_started(self) -> int:
        return self.todo - self._ended() - self.running

    def stopped_counts(self) -> dict[str, int]:
        """A stopped run's runs by what became of them (``cut_short``: still running when a second Ctrl-C
        ended it at once; the next ``rlbench run`` records them interrupted)."""
        e = self.earlier
        return {"total": e["total"] + self.total, "skipped": e["skipped"] + self.skipped,
                "finished": e["finished"] + self.done, "failed": e["failed"] + self.failed,
                "interrupted": e["interrupted"] + self.interrupted, "cut_short": self.running,
                "not_started": self._not_started()}  # fmt: skip

    def stopped(self, suite: str, store: Path, wall: float) -> str:
        """What a run stopped by Ctrl-C (or SIGTERM) leaves, and how to go on."""
        n = self.stopped_counts()
        cut = (
            f", {n['cut_short']} cut short (the next run records them interrupted)" if n["cut_short"] else ""
        )
        batch = f" in batch {self.plans}" if self.plans > 1 else ""
        return (f"{suite}: stopped after {wall:.1f}s{batch}: {n['finished']} finished, {n['interrupted']} interrupted, "
                f"{n['failed']} failed{cut}, {n['not_started']} not started; results in {store}\n"
                "  run the same command again to go on: finished runs are skipped, the others start again "
                "(from their last checkpoint where budget.checkpoint_every is set)")  # fmt: skip

    def close(self) -> None:
        if self.live:
            self._write("\r\033[K")


def _outlives(executor: str) -> bool:
    """Whether runs on ``executor`` are jobs that outlive the coordinator (Slurm's): shown with their job id."""
    kind = EXECUTORS.get(executor)
    return kind is not None and kind.outlives_coordinator


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
    adaptive: Annotated[
        bool, typer.Option("--adaptive", help="run seeds in batches until AdaStop has decided every pair")
    ] = False,
    alpha: Annotated[float, typer.Option("--alpha", help="--adaptive: family-wise error")] = 0.05,
    batch: Annotated[
        int, typer.Option("--batch", help="--adaptive: seeds per algorithm and task per look")
    ] = 5,
    max_batches: Annotated[int, typer.Option("--max-batches", help="--adaptive: looks at most")] = 5,
    permutations: Annotated[
        int, typer.Option("--permutations", help="--adaptive: permutations of the test")
    ] = 10_000,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the grid, run nothing")] = False,
    json_out: JsonOpt = False,
    # -- where runs go (--executor) and Slurm's settings, overriding the suite's resources.slurm ----------
    executor: Annotated[
        str | None,
        typer.Option(
            "--executor", help=" | ".join(NAMES) + " [default: resources.executor]", show_default=False
        ),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            help="Ray cluster: auto | HOST:PORT | ray://HOST:PORT [default: "
            "resources.ray.address, else start Ray here]",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    detach: Annotated[
        bool, typer.Option("--detach", help="slurm: submit and return; follow with rlbench status")
    ] = False,
    partition: Annotated[str | None, typer.Option("--partition", help="slurm partition")] = None,
    time_min: Annotated[
        int | None, typer.Option("--time-min", min=1, help="slurm time limit per run, minutes")
    ] = None,
    cpus_per_task: Annotated[
        int | None, typer.Option("--cpus-per-task", min=1, help="slurm CPUs per run")
    ] = None,
    mem_gb: Annotated[
        float | None, typer.Option("--mem-gb", min=0.001, help="slurm memory per run, GB")
    ] = None,
    gpus_per_task: Annotated[
        int | None, typer.Option("--gpus-per-task", min=0, help="slurm GPUs per run")
    ] = None,
    qos: Annotated[str | None, typer.Option("--qos", help="slurm QOS")] = None,
    account: Annotated[str | None, typer.Option("--account", help="slurm account")] = None,
    sbatch: Annotated[
        list[str] | None,
        typer.Option("--sbatch", help="extra sbatch flag KEY=VALUE (repeatable)", metavar="KEY=VALUE"),
    ] = None,
    mps: Annotated[
        bool | None,
        typer.Option(
            "--mps/--no-mps",
            help="local: runs on GPUs under a CUDA MPS daemon rlbench starts "
            "and stops [default: resources.mps]",
            show_default=False,
        ),
    ] = None,  # fmt: skip
) -> None:
    """Run a suite: every seed x algorithm x environment, skipping runs already finished. With --adaptive,
    seeds run in batches and AdaStop decides after each batch which algorithms need more (rlbench compare
    shows the decisions).

    Example: rlbench run suites/quickstart.yaml --workers 2 --retries 1
    """
    from ..suite.grid import expand, steps_summary
    from ..suite.loader import load_suite

    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {workers})")
    if retries < 0:
        raise UsageError(f"--retries must be 0 or more (got {retries})")
    if timeout is not None and timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds (got {timeout:g})")
    if executor is not None:
        executor_kind(executor)  # a name of the table, or UsageError naming them
    extra = {}
    for item in sbatch or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip().lstrip("-"):
            raise UsageError(f"--sbatch {item!r}: give KEY=VALUE, e.g. --sbatch constraint=a100")
        extra[key.strip().lstrip("-")] = value
    executor_options = {"detach": detach, "partition": partition, "time_min": time_min, "cpus_per_task": cpus_per_task,
                        "mem_gb": mem_gb, "gpus_per_task": gpus_per_task, "qos": qos, "account": account,
                        "additional": extra, "address": address, "mps": mps}  # fmt: skip
    settings = None
    if adaptive:
        from ..adaptive import AdaptiveSettings, check_settings

        settings = AdaptiveSettings(alpha, batch, max_batches, permutations)
        check_settings(settings, 2)  # the flags, before anything else; the suite's algorithms below
    suite = load_suite(suite_file)
    kind = executor_kind(executor or suite.resources.executor)
    if address is not None and not kind.takes_address:
        ours = [e.name for e in EXECUTORS.values() if e.takes_address]
        raise UsageError(f"--address is for the {' or '.join(ours)} executor, and this run uses {kind.name}; "
                         f"add {' or '.join(f'--executor {n}' for n in ours)}")  # fmt: skip
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
            typer.echo(f"{suite.name}: {len(specs)} runs, {steps_summary(specs)}")
            varied = len({s.budget["steps"] for s in specs}) > 1  # entries' budgets: say each run's
            for s in specs:
                p = f" {json.dumps(s.params, sort_keys=True)}" if s.params else ""
                b = f" steps={s.budget['steps']}" if varied else ""
                typer.echo(f"  {s.run_id}  {s.algo:<24} {s.env:<20} seed={s.seed}{b}{p}")
            if suite.resources.seeds_per_job > 1:
                from ..packed import packable, plan_packs, unpackable

                alone, packs = unpackable(specs), packable(specs)
                typer.echo(f"seeds_per_job {suite.resources.seeds_per_job}: {len(plan_packs(specs, suite.resources.seeds_per_job))} "
                           f"jobs" + (f"; note: {', '.join(alone)} cannot be packed, so each of its seeds runs in "
                                      "a job of its own" if alone else ""))  # fmt: skip
                typer.echo(f"  seeds share jobs: {', '.join(packs) or 'none'}")
        return

    from ..coordinator import run_suite

    store = store_for(db)
    progress = Progress(live=is_tty(), quiet=json_out)
    t0 = time.monotonic()
    try:
        with _StopOnSignal() as stopper:
            run_kwargs: dict[str, Any] = dict(
                workers=workers, retries=retries, only_failed=only_failed, timeout=timeout, stop=stopper.event,
                report=progress, executor=executor,
                executor_options=executor_options)  # fmt: skip
            if settings is not None:
                from ..sequential import run_adaptive

                result = run_adaptive(suite, str(suite_file), store, settings, run_suite, **run_kwargs)
                _print_adaptive(suite.name, result, settings, json_out, time.monotonic() - t0)
                return
            summary = run_suite(suite, str(suite_file), store, **run_kwargs)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: runs in flight were stopped (a second Ctrl-C: cut short)
        progress.close()
        wall = time.monotonic() - t0
        if json_out:  # the same keys as a finished run's, with what became of each run
            typer.echo(json.dumps({"suite": suite.name, "db": str(store.path), "stopped": True,
                                   **progress.stopped_counts(), "wall_s": round(wall, 2)}))  # fmt: skip
        else:
            typer.echo(progress.stopped(suite.name, store.path, wall))
        raise
    finally:
        progress.close()
    wall = time.monotonic() - t0
    if json_out:
        typer.echo(json.dumps({
            "suite": suite.name, "db": str(store.path), "stopped": False, "total": summary.total,
            "skipped": summary.skipped, "finished": summary.finished, "failed": summary.failed, "interrupted": summary.interrupted,
            "recovered": summary.recovered, "queued": summary.queued, "wall_s": round(wall, 2),
            "writes": {k: round(v, 4) for k, v in summary.writes.items()},
            "failures": [{"run_id": s.run_id, "algo": s.algo, "env": s.env, "seed": s.seed, "error": e}
                         for s, e in summary.failures]}))  # fmt: skip
    else:
        typer.echo(f"{suite.name}: {summary.finished} finished, {summary.failed} failed, {summary.skipped} skipped "
                   f"in {wall:.1f}s; results in {store.path}")  # fmt: skip
        if summary.queued:
            typer.echo(f"  {summary.queued} runs queued or running in {kind.label}; follow them with: rlbench status "
                       f"{suite.name} (cancel with: rlbench cancel {suite.name})")  # fmt: skip
        if summary.failed:
            typer.echo(f"  see the errors with: rlbench status {suite.name}; re-run them with: "
                       f"rlbench run {suite_file} --only-failed")  # fmt: skip
    if summary.failed:
        raise RunFailed(f"{summary.failed} of {summary.total} runs of suite {suite.name!r} failed")


def _print_adaptive(suite: str, result: Any, settings: Any, json_out: bool, wall: float) -> None:
    from ..sequential import decision_rows
    from .compare import decisions_table

    if json_out:
        typer.echo(json.dumps({"suite": suite, "runs": result.runs, "fixed_budget_runs": result.budget,
                               "runs_saved": result.saved, "batches_run": result.batches_run,
                               "settings": settings.to_dict(), "wall_s": round(wall, 2),
                               "decisions": decision_rows(result.tests)},
                              default=str))  # fmt: skip
        return
    typer.echo(decisions_table(decision_rows(result.tests), settings.to_dict()))
    typer.echo(f"{suite}: AdaStop used {result.runs} runs where a fixed budget of {settings.batch} x "
               f"{settings.max_batches} seeds would use {result.budget} ({result.saved} saved), in {wall:.1f}s")  # fmt: skip
