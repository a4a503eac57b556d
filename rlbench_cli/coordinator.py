"""``rlbench run``: the single writer. Expands a suite, skips what is finished, runs the rest on an
executor, ingests metric shards as they appear, and records every outcome.

Crash safety: every state change is a short transaction. If this process dies, the next ``rlbench run`` of
the same suite first recovers: runs left 'running' whose worker wrote ``result.json`` are ingested and closed
with that result (no re-run); the others are restarted as a new attempt.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import StoreBusy, SuiteInvalid, UsageError
from .executors import make_executor
from .executors.base import Job, Outcome, Placement
from .grid import RunSpec, expand
from .packed import plan_packs
from .runner import attempt_dir, read_result
from .sink import list_shards
from .spec import Suite
from .store import Store

__all__ = [
    "RunSummary", "run_suite", "prepare_datasets", "runs_root", "select_runs", "manifest_base", "recover_slurm",
    "slurm_rows",
]  # fmt: skip

PACKAGES = ("rlbench-cli", "torch", "gymnasium", "d3rlpy", "numpy", "duckdb", "rliable", "transformers")


def runs_root(store: Store) -> Path:
    """Run folders live next to the database: results/runs/<suite>/<run_id>/attempt-N/."""
    return store.path.parent / "runs"


@dataclass
class RunSummary:
    total: int
    skipped: int = 0
    finished: int = 0
    failed: int = 0
    interrupted: int = 0
    recovered: int = 0
    queued: int = 0  # runs left queued or running in Slurm (--detach)
    failures: list[tuple[RunSpec, str]] = field(default_factory=list)


def select_runs(specs: list[RunSpec], status: dict[str, str], only_failed: bool) -> list[RunSpec]:
    """Which runs to launch: everything not finished, or with only_failed just failed/interrupted ones."""
    if only_failed:
        return [s for s in specs if status.get(s.run_id) in ("failed", "interrupted")]
    return [s for s in specs if status.get(s.run_id) != "finished"]


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def manifest_base(cwd: Path) -> dict[str, Any]:
    """What makes a run reproducible, besides its config: code version, interpreter, packages, host."""
    from importlib import metadata

    pkgs = {}
    for name in PACKAGES:
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    commit = _git(["rev-parse", "HEAD"], cwd)
    dirty = None
    if commit is not None:
        status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
        dirty = bool(status)
    return {
        "host": socket.gethostname(),
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "packages": pkgs,
    }


class _RunLock:
    """One ``rlbench run`` per database: a second one refuses at once instead of fighting over the file.

    The lock is an flock on ``<db>.runlock``, which holds the owner's PID while it runs and is removed when it
    ends. A coordinator killed with -9 leaves the file behind, but the kernel drops its flock, so the file is
    stale and the next run takes it over. Taking the lock checks that the file locked is still the one at the
    path (an owner that just removed it on exit leaves a locked, unlinked file to whoever opened it first).
    """

    def __init__(self, db: Path):
        self.path = db.with_name(db.name + ".runlock")
        self.fh: Any = None

    def __enter__(self) -> _RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fh = open(self.path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                pid = fh.read().strip() or "?"
                fh.close()
                raise StoreBusy(
                    f"{self.path.with_suffix('')}: another 'rlbench run' (pid {pid}) is writing to this "
                    "database; wait for it to finish, or pass another --db"
                ) from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fh.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            fh.close()  # removed by its last owner between our open and our lock: open the new one
        self.fh = fh
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            os.unlink(self.path)  # while still holding the lock, so nobody takes over a file about to go
        except FileNotFoundError:
            pass
        fcntl.flock(self.fh.fileno(), fcntl.LOCK_UN)
        self.fh.close()


def _recover(store: Store, con: Any, root: Path, rows: list[dict[str, Any]]) -> tuple[int, list[Any]]:
    """Close runs a dead coordinator left 'running'. Returns how many had in fact finished, and the runs
    still queued or running in Slurm (``recover_slurm``: those are left 'running', not interrupted)."""
    recovered, live = recover_slurm(store, con, root, rows)
    for r in rows:
        if r["status"] != "running" or (r.get("executor") == "slurm" and r.get("job_id")):
            continue
        folder = attempt_dir(root, r["suite"], r["run_id"], r["attempts"])
        store.ingest_shards(con, r["run_id"], r["attempts"], list_shards(folder / "metrics"))
        result = read_result(folder)
        if result is not None:
            store.end_attempt(con, r["run_id"], result["status"], result)
            r["status"] = result["status"]
            recovered += result["status"] == "finished"
        else:
            store.end_attempt(con, r["run_id"], "interrupted",
                              {"error": "the coordinator stopped before this run ended"})  # fmt: skip
            r["status"] = "interrupted"
    return recovered, live


def slurm_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the store says are in Slurm: executor 'slurm', not ended."""
    return [r for r in rows if r.get("executor") == "slurm" and r["status"] == "running" and r.get("job_id")]


def recover_slurm(store: Store, con: Any, root: Path, rows: list[dict[str, Any]]) -> tuple[int, list[Any]]:
    """Re-attach to runs on Slurm (after --detach, or a coordinator killed with -9): ask Slurm where each
    stands, record a requeue as the new attempt it is, the node once the task has started, ingest every
    shard written so far, and close the runs that have ended with their result or Slurm's cause.

    Returns (how many had finished, the surveys of runs still queued or running in Slurm). ``rows`` are
    updated in place. Without Slurm commands on PATH it raises UsageError and changes nothing."""
    todo = slurm_rows(rows)
    if not todo:
        return 0, []
    from .executors.slurm import survey

    by_id = {r["run_id"]: r for r in todo}
    finished, live = 0, []
    for s in survey(root, todo):
        r = by_id[s.run_id]
        p = s.placement
        if s.attempt != r["attempts"] or (p is not None and not r.get("host")):
            store.start_attempt(con, s.run_id, s.attempt, {
                "started_at": (p or {}).get("started_at") or time.time(), "host": (p or {}).get("host") or "",
                "device": (p or {}).get("device") or "", "executor": "slurm", "job_id": s.job_id,
                "git_commit": r.get("git_commit"), "git_dirty": r.get("git_dirty"), "python": r.get("python"),
                "packages": json.loads(r["packages"]) if isinstance(r.get("packages"), str) else r.get("packages") or {},
            })  # fmt: skip
            r["attempts"], r["host"] = s.attempt, (p or {}).get("host") or ""
        store.ingest_shards(con, s.run_id, s.attempt, list_shards(s.folder / "metrics"))
        if s.outcome is None:
            live.append(s)
            continue
        o = s.outcome
        store.end_attempt(con, s.run_id, o.status, {"exit_code": o.exit_code, "error": o.error,
                                                   "duration_s": o.duration_s, "ended_at": time.time()})  # fmt: skip
        r["status"] = o.status
        finished += o.status == "finished"
    return finished, live


def _resume_step(job: Job) -> int | None:
    """The step an attempt will resume from: its run's latest checkpoint, when the run takes them."""
    if job.attempt < 2 or job.spec.budget.get("checkpoint_every") is None:
        return None
    from .checkpoint import latest_step

    return latest_step(job.folder.parent / "checkpoint")


def prepare_datasets(
    suite: Suite, source: str = "<suite>", report: Callable[[str, dict[str, Any]], None] = lambda e, i: None
) -> dict[str, list[float]]:
    """Make sure every dataset of ``suite`` is on disk, building the generated ones that are missing (their
    behaviour policy is trained once per environment and reused), and point the workers at them
    (``RLBENCH_DATASETS``, absolute). Returns {dataset: [random return, expert return]} for the datasets that
    record their references: an offline suite is normalised by them (D4RL's convention, x 100)."""
    if not suite.datasets:
        return {}
    from .datagen import ensure_datasets
    from .datasets import dataset_path, datasets_root
    from .datasets.catalog import provenance, summarize

    os.environ["RLBENCH_DATASETS"] = str(datasets_root().resolve())
    paths = {ds.name: dataset_path(ds.name, ds.path) for ds in suite.datasets}
    for i, ds in enumerate(suite.datasets):
        if ds.path and not paths[ds.name].exists():
            raise SuiteInvalid(f"{source}: field 'datasets[{i}].path': dataset {ds.name!r} has no file at "
                               f"{paths[ds.name]}; check the path (relative paths start at the current folder)")  # fmt: skip
    missing = [ds for ds in suite.datasets if ds.generated and not paths[ds.name].exists()]
    for ds in missing:
        report("dataset", {"name": ds.name, "path": paths[ds.name]})
    ensure_datasets(missing, lambda msg: report("dataset_progress", {"msg": msg}))
    refs: dict[str, list[float]] = {}
    for ds in suite.datasets:
        if ds.data_mix or ds.imagined:  # which encoder embedded its instructions, which generator imagined
            report("dataset_provenance", {"name": ds.name, **provenance(paths[ds.name])})
        lo, hi = (summarize(paths[ds.name])[k] for k in ("ref_random", "ref_expert"))
        if lo is not None and hi is not None and lo != hi:
            for task in [f"{ds.name}[mix={m}]" for m in ds.mixes] or [ds.name]:  # tasks as grid labels them
                refs[task] = [float(lo), float(hi)]
    return refs


def _planned(store: Store, suite: str, specs: list[RunSpec], only_failed: bool) -> int:
    """How many runs may need launching, read before anything is written: at least ``len(todo)`` (a run left
    'running' counts, whatever recovery makes of it)."""
    if not store.exists():
        return len(specs)
    with store.reader() as con:
        try:
            status = {r["run_id"]: r["status"] for r in store.runs(con, suite)}
        except Exception:  # noqa: BLE001 - an older schema, migrated by the writer: plan for every run
            return len(specs)
    status = {k: "interrupted" if v == "running" else v for k, v in status.items()}
    return len(select_runs(specs, status, only_failed))


def run_suite(
    suite: Suite,
    source: str,
    store: Store,
    workers: int | None = None,
    retries: int = 0,
    only_failed: bool = False,
    timeout: float | None = None,
    report: Callable[[str, dict[str, Any]], None] = lambda event, info: None,
    stop: threading.Event | None = None,
    executor: str | None = None,
    executor_options: dict[str, Any] | None = None,
    select: Callable[[RunSpec], bool] | None = None,
    extra_config: dict[str, Any] | None = None,
) -> RunSummary:
    """Run every unfinished cell of ``suite``; see the module docstring. ``report`` gets progress events;
    setting ``stop`` (from a signal handler) ends the run cleanly, runs in flight marked interrupted.
    ``executor`` (local | ray | slurm; default the suite's ``resources.executor``) places the runs;
    ``executor_options`` are its command-line settings (e.g. ``{"address": "auto"}``). ``select`` keeps only
    some runs of the grid (``rlbench run --adaptive`` runs a batch of seeds at a time): only those are
    recorded and run. ``extra_config`` is stored with the suite's config (the adaptive settings)."""
    specs = [s for s in expand(suite) if select is None or select(s)]
    root = runs_root(store)
    summary = RunSummary(total=len(specs))
    executor_name = executor or suite.resources.executor
    timeout = timeout or suite.budget.timeout
    options = dict(executor_options or {})
    if executor_name == "slurm":
        options["runs_root"] = str(root.resolve())
    elif options.get("detach"):
        raise UsageError(f"--detach works with --executor slurm only (this run uses {executor_name})")
    with _RunLock(store.path):
        # Built (and checked: extra installed, cluster reachable, resources satisfiable) before the store is
        # written to, so bad input changes nothing; sized for the runs that may need launching. The local pool
        # is built later, once it is known how many runs there are.
        planned = _planned(store, suite.name, specs, only_failed)
        runner = None
        if executor_name != "local" and planned:
            runner = make_executor(executor_name, suite, planned, workers, timeout, options)
        config = {**suite.model_dump(), **(extra_config or {})}
        refs = prepare_datasets(suite, source, report)
        if refs:
            config["dataset_references"] = refs
        with store.writer() as con:
            store.register_suite(con, suite.name, suite.description, config, source)
            store.add_runs(con, [
                {"run_id": s.run_id, "suite": s.suite, "algo": s.algo, "algo_name": s.algo_name, "env": s.env,
                 "seed": s.seed, "config": s.to_dict()} for s in specs
            ])  # fmt: skip
            rows = store.runs(con, suite.name)
            summary.recovered, live = _recover(store, con, root, rows)
        if live and executor_name != "slurm":
            raise UsageError(f"{len(live)} runs of suite {suite.name!r} are still queued or running in Slurm; "
                             f"wait for them with --executor slurm, or stop them with: rlbench cancel {suite.name}")  # fmt: skip
        status = {r["run_id"]: r["status"] for r in rows}
        attempts = {r["run_id"]: r["attempts"] or 0 for r in rows}
        in_slurm = {s.run_id for s in live}
        todo = [s for s in select_runs(specs, status, only_failed) if s.run_id not in in_slurm]
        summary.skipped = len(specs) - len(todo) - len(in_slurm)
        report("plan", {"total": len(specs), "todo": len(todo) + len(in_slurm), "skipped": summary.skipped,
                        "recovered": summary.recovered, "in_slurm": len(in_slurm)})  # fmt: skip
        if not todo and not (live and not options.get("detach")):
            summary.queued = len(live)
            return summary

        runner = runner or make_executor(executor_name, suite, len(todo), workers, timeout, options)
        base = manifest_base(Path(source).resolve().parent if source else Path.cwd())
        first_attempt = {s.run_id: attempts[s.run_id] + 1 for s in todo}

        def job_of(specs_: list[RunSpec], attempt_of: Callable[[RunSpec], int]) -> Job:
            members = [Job(s, attempt_dir(root, s, attempt=attempt_of(s)), attempt_of(s)) for s in specs_]
            if len(members) == 1:
                return members[0]
            return Job(members[0].spec, members[0].folder, members[0].attempt, pack=members)

        per_job = suite.resources.seeds_per_job
        if per_job > 1 and executor_name != "local":
            report("note", {"msg": f"seeds_per_job {per_job}: seeds share a job on the local executor only; on "
                                   f"{executor_name} each seed runs in a job of its own"})  # fmt: skip
            per_job = 1
        jobs = [job_of(group, lambda s: first_attempt[s.run_id]) for group in plan_packs(todo, per_job)]
        by_id = {s.run_id: s for s in specs}
        if live:  # already in Slurm: waited for, never submitted again
            first_attempt.update({s.run_id: s.attempt for s in live})
            runner.adopt([(Job(by_id[s.run_id], s.folder, s.attempt), s.job_id, s.placement is not None)
                          for s in live])  # type: ignore[attr-defined]  # fmt: skip
        report("start", {"executor": runner.name, "describe": runner.describe()})
        in_flight: set[str] = set()

        def on_start(job: Job, where: Placement) -> None:
            with store.writer() as con:
                for m in job.members:
                    store.start_attempt(con, m.spec.run_id, m.attempt, {
                        **base, "started_at": time.time(), "device": where.device, "host": where.host,
                        "executor": where.executor, "job_id": where.job_id})  # fmt: skip
            for m in job.members:
                in_flight.add(m.spec.run_id)
                report("started", {"spec": m.spec, "attempt": m.attempt, "device": where.device,
                                   "placement": where, "resume_step": _resume_step(m)})  # fmt: skip

        def on_tick(running: list[Job]) -> None:
            if not running:
                return
            with store.writer() as con:
                for job in running:
                    for m in job.members:
                        store.ingest_shards(con, m.spec.run_id, m.attempt, list_shards(m.folder / "metrics"))

        def on_end(job: Job, outcome: Outcome) -> Job | None:
            if not job.pack:
                return end_one(job, outcome)
            results = outcome.result.get("pack_results")
            retry = []
            for i, m in enumerate(job.pack):
                r = results[i] if results else None  # none: the job itself died; every seed shares its end
                again = end_one(m, Outcome(r["status"], r.get("exit_code"), r.get("error"), r.get("duration_s", 0.0), r)
                                if r is not None else Outcome(outcome.status, outcome.exit_code, outcome.error,
                                                              outcome.duration_s))  # fmt: skip
                if again is not None:
                    retry.append(again.spec)
            return job_of(retry, lambda s: attempt_of_retry[s.run_id]) if retry else None

        attempt_of_retry: dict[str, int] = {}

        def end_one(job: Job, outcome: Outcome) -> Job | None:
            with store.writer() as con:
                store.ingest_shards(con, job.spec.run_id, job.attempt, list_shards(job.folder / "metrics"))
                store.end_attempt(con, job.spec.run_id, outcome.status, {
                    "exit_code": outcome.exit_code, "error": outcome.error, "duration_s": outcome.duration_s,
                    "ended_at": time.time()})  # fmt: skip
            if outcome.result.get("requeued"):  # Slurm runs it again as the next attempt: not an end
                report("requeued", {"spec": job.spec, "outcome": outcome, "attempt": job.attempt})
                return None
            in_flight.discard(job.spec.run_id)
            tries = job.attempt - first_attempt[job.spec.run_id] + 1
            retry = outcome.status == "failed" and tries <= retries
            report("ended", {"spec": job.spec, "outcome": outcome, "attempt": job.attempt, "retry": retry,
                             "final": outcome.result.get("final_eval")})  # fmt: skip
            if retry:
                nxt = attempt_of_retry[job.spec.run_id] = job.attempt + 1
                return Job(job.spec, attempt_dir(root, job.spec, attempt=nxt), nxt)
            if outcome.status == "finished":
                summary.finished += 1
            elif outcome.status == "interrupted":
                summary.interrupted += 1
            else:
                summary.failed += 1
                summary.failures.append((job.spec, outcome.error or "failed"))
            return None

        runner.run(jobs, on_start, on_end, on_tick, stop=stop)
        summary.queued = len(in_flight) + (len(live) if options.get("detach") else 0)
    return summary
