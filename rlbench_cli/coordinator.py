"""``rlbench run``: the single writer. Expands a suite, skips what is finished, runs the rest on an
executor, ingests metric shards as they appear, and records every outcome.

Crash safety: state changes are recorded in short transactions, several runs' starts, shard ingests and ends
in one (``_Recorder``: at most every BATCH_S, on a connection held at most HOLD_S at a time). Nothing a worker
writes depends on them: shards and ``result.json`` are on disk before their record. If this process dies, the
next ``rlbench run`` of the same suite first recovers: runs left 'running' (or whose newest attempt folder was
never recorded as started) whose worker wrote ``result.json`` are ingested and closed with that result (no
re-run); the others are restarted as a new attempt.
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

from .algos import first_refusal, to_check
from .errors import StoreBusy, UsageError
from .executors import make_executor
from .executors.base import NODE_LOSS_RETRIES, Job, Outcome, Placement
from .grid import RunSpec, expand
from .packed import plan_packs
from .runner import attempt_dir, read_result, uses_torch
from .sink import list_shards
from .spec import Suite
from .store import Store

__all__ = [
    "RunSummary", "run_suite", "prepare_datasets", "runs_root", "select_runs", "manifest_base", "recover_slurm",
    "slurm_rows", "retry_why",
]  # fmt: skip

# The writer connection: writes queued within BATCH_S share one transaction; the file is held at most HOLD_S
# in one go, then left free at least GAP_S, so `rlbench fetch` / `plot` (which retry every <= 0.1 s) get in.
BATCH_S = 0.1
HOLD_S = 0.5
GAP_S = 0.25
TICK_S = 0.25  # how often executors call on_tick: flushes and releases; running runs' shards each INGEST_S
INGEST_S = 1.0

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
    writes: dict[str, float] = field(default_factory=dict)  # the run's database writes (_Recorder.stats)


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


@dataclass
class _Op:
    fn: Callable[[Any], None]


@dataclass
class _Ingest:
    run_id: str
    attempt: int
    metrics: Path


@dataclass
class _Start:
    run_id: str
    attempt: int
    manifest: dict[str, Any]


@dataclass
class _End:
    run_id: str
    status: str
    outcome: dict[str, Any]


_Write = _Op | _Ingest | _Start | _End


class _Recorder:
    """The coordinator's writes, batched: ``start``, ``ingest`` and ``end`` queue a run's (``add(op)`` any other
    function of a writer connection); ``tick()``
    runs the queued ones in one transaction once BATCH_S has passed since the last, on a connection kept
    open across a burst of writes (no connect, schema check and close, ~60 ms, per write) and released
    after HOLD_S, then left closed for GAP_S. A reader holding the file never blocks the loop: the writes
    wait in the queue. ``eager``: every write is recorded before ``add`` returns (Slurm: a submitted job must
    be on record before anything else happens). ``close()`` records what is left, waiting for the file."""

    def __init__(self, store: Store, eager: bool = False):
        self.store = store
        self.eager = eager
        self.ops: list[tuple[_Write, Callable[[], None] | None]] = []
        self.con: Any = None
        self.opened = 0.0
        self.released = -1e9
        self.last_flush = -1e9
        self.stats = {"flushes": 0, "ops": 0, "connects": 0, "write_s": 0.0, "connect_s": 0.0, "close_s": 0.0}

    def add(self, op: Callable[[Any], None], after: Callable[[], None] | None = None) -> None:
        """Queue ``op(con)``; ``after()`` runs once it is committed (e.g. the progress line saying so)."""
        self.ops.append((_Op(op), after))
        self._enqueued()

    def start(self, run_id: str, attempt: int, manifest: dict[str, Any],
              after: Callable[[], None] | None = None) -> None:  # fmt: skip
        """Queue ``Store.start_attempt``; the starts, ingests and ends of a transaction go in a few statements
        (``Store.start_attempts``, ``ingest_many``, ``end_attempts``), each run's in the order queued."""
        self.ops.append((_Start(run_id, attempt, manifest), after))
        self._enqueued()

    def end(
        self, run_id: str, status: str, outcome: dict[str, Any], after: Callable[[], None] | None = None
    ) -> None:
        """Queue ``Store.end_attempt`` (see ``start``)."""
        self.ops.append((_End(run_id, status, outcome), after))
        self._enqueued()

    def ingest(self, job: Job) -> None:
        """Queue the ingest of the shards in ``job``'s folder; the ingests of one transaction are one
        statement per table (``Store.ingest_many``)."""
        self.ops.append((_Ingest(job.spec.run_id, job.attempt, job.folder / "metrics"), None))
        self._enqueued()

    def _enqueued(self) -> None:
        if self.eager:  # and the file is released at once: Slurm's loop ticks only every few seconds
            self.flush(wait=True)
            self._release()
        else:
            self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        if self.con is not None and now - self.opened >= HOLD_S:
            self._release()
        if (
            self.ops
            and now - self.last_flush >= BATCH_S
            and (self.con is not None or now - self.released >= GAP_S)
        ):
            self.flush(wait=False)

    def flush(self, wait: bool = True) -> None:
        """Record every queued write in one transaction. ``wait=False``: if another process holds the file,
        leave them queued for the next tick."""
        if not self.ops:
            return
        if self.con is None:
            t0 = time.monotonic()
            try:
                self.con = self.store.open_writer(migrated=True, wait=None if wait else 0)
            except StoreBusy:
                if wait:
                    raise
                return
            self.opened = time.monotonic()
            self.stats["connects"] += 1
            self.stats["connect_s"] += self.opened - t0
        ops, self.ops = self.ops, []
        t0 = time.monotonic()
        try:
            with self.store.batch(self.con) as con:
                self._write(con, [op for op, _ in ops])
        except BaseException:
            self.ops = ops + self.ops  # nothing of them was recorded: still to do
            raise
        self.last_flush = time.monotonic()
        self.stats["write_s"] += self.last_flush - t0
        self.stats["flushes"] += 1
        self.stats["ops"] += len(ops)
        for _, after in ops:
            if after is not None:
                after()

    def _write(self, con: Any, ops: list[_Write]) -> None:
        """Record ``ops`` in segments: a segment's starts, then its ingests, then its ends, a statement or
        three each. Writes of different runs commute, so only each run's own order matters: a run's start
        after anything else of that run (a retry's start after the last attempt's ingest and end) opens a new
        segment, as does an end of a run already ended in this one, or any other write (``add``)."""
        starts: list[_Start] = []
        ingests: list[_Ingest] = []
        ends: list[_End] = []
        seen: set[str] = set()
        ended: set[str] = set()

        def segment() -> None:
            self.store.start_attempts(con, [(o.run_id, o.attempt, o.manifest) for o in starts])
            if ingests:
                self.store.ingest_many(con, [(i.run_id, i.attempt, list_shards(i.metrics)) for i in ingests])
            self.store.end_attempts(con, [(o.run_id, o.status, o.outcome) for o in ends])
            for done in (starts, ingests, ends, seen, ended):
                done.clear()

        for op in ops:
            if isinstance(op, _Op):
                segment()
                op.fn(con)
                continue
            if op.run_id in (seen if isinstance(op, _Start) else ended if isinstance(op, _End) else ()):
                segment()
            if isinstance(op, _Start):
                starts.append(op)
            elif isinstance(op, _Ingest):
                ingests.append(op)
            else:
                ends.append(op)
                ended.add(op.run_id)
            seen.add(op.run_id)
        segment()

    def _release(self) -> None:
        if self.con is None:
            return
        t0 = time.monotonic()
        try:
            self.con.close()
        finally:
            self.con = None
            self.released = time.monotonic()
            self.stats["close_s"] += self.released - t0

    def close(self) -> None:
        try:
            self.flush(wait=True)
        finally:
            if self.con is not None:
                self._release()


STARTED = "started.json"  # in an attempt folder: which database's coordinator started it (before its record)


def mark_started(folder: Path, store: Store) -> None:
    """Note in an attempt folder, before its job is sent, that this database's coordinator started it: so
    the next ``rlbench run`` recovers it even if the start never reached the database (``_recover``)."""
    (folder / STARTED).write_text(json.dumps({"db": str(store.path.resolve())}))


def _unrecorded_attempt(store: Store, root: Path, r: dict[str, Any]) -> int | None:
    """The newest attempt of a run this database's coordinator started beyond what the database says (it
    was killed before it recorded the start): its number, or None. Folders another database's runs left
    (two files next to each other share the runs folder) are not this database's."""
    n, found = (r["attempts"] or 0) + 1, None
    mine = str(store.path.resolve())
    while (folder := attempt_dir(root, r["suite"], r["run_id"], n)).is_dir():
        try:
            if json.loads((folder / STARTED).read_text()).get("db") == mine:
                found = n
        except (OSError, ValueError, AttributeError):
            pass
        n += 1
    return found


def set_aside(folder: Path) -> Path | None:
    """Rename an attempt folder that already holds files, before its attempt starts, to a name beside it
    (``attempt-N.stale-<time>``; nothing is deleted), and return the new path; None if it is empty or absent.
    An attempt starts in an empty folder, so no shard left there by another database's run (two database
    files next to each other share the runs folder) is ingested as this attempt's; and a first attempt
    finds no checkpoint to resume (``checkpoint.stale-<time>``). This database's own started-but-unrecorded
    attempts were recovered before (``_recover``), so they are never planned again."""
    try:
        next(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError, StopIteration):
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S")
    dest, n = folder.with_name(f"{folder.name}.stale-{stamp}"), 1
    while dest.exists():
        n += 1
        dest = folder.with_name(f"{folder.name}.stale-{stamp}-{n}")
    folder.rename(dest)
    return dest


def _started_at(placement: dict[str, Any] | None) -> float | None:
    """When a job found in Slurm started running (its placement.json's wall-clock time), None while queued."""
    if placement is None:
        return None
    t = placement.get("started_at")
    return float(t) if isinstance(t, (int, float)) else time.time()


def _recover(store: Store, con: Any, root: Path, rows: list[dict[str, Any]]) -> tuple[int, list[Any]]:
    """Close runs a dead coordinator left 'running'. Returns how many had in fact finished, and the runs
    still queued or running in Slurm (``recover_slurm``: those are left 'running', not interrupted)."""
    recovered, live = recover_slurm(store, con, root, rows)
    for r in rows:
        if r["status"] not in ("running", "finished") and not (
            r.get("executor") == "slurm" and r.get("job_id")
        ):
            n = _unrecorded_attempt(store, root, r)
            if n is not None:  # started, its start not yet recorded: recorded now, then closed as below
                result = read_result(attempt_dir(root, r["suite"], r["run_id"], n)) or {}
                store.start_attempt(con, r["run_id"], n, {
                    "started_at": result.get("started_at") or time.time(), "device": result.get("device"),
                    "host": socket.gethostname()})  # fmt: skip
                r["status"], r["attempts"] = "running", n
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
    """The step an attempt will resume from: its run's latest checkpoint, when the run takes them; for the
    seeds of a packed job the latest step all of them have (``algos.base.resume_together``)."""
    if job.attempt < 2 or job.spec.budget.get("checkpoint_every") is None:
        return None
    from .checkpoint import list_checkpoints

    common: set[int] | None = None
    for m in job.members:
        steps = {step for step, _ in list_checkpoints(m.folder.parent / "checkpoint")}
        common = steps if common is None else common & steps
    return max(common) if common else None


def prepare_datasets(
    suite: Suite, source: str = "<suite>", report: Callable[[str, dict[str, Any]], None] = lambda e, i: None
) -> dict[str, list[float]]:
    """Make sure every dataset of ``suite`` is on disk, building the generated ones that are missing (their
    behaviour policy is trained once per environment and reused), and point the workers at them
    (``RLBENCH_DATASETS``, absolute). Returns {dataset: [random return, expert return]} for the datasets that
    record their references: an offline suite is normalised by them (D4RL's convention, x 100)."""
    from .datagen import prepare
    from .executors.base import detect_gpus

    return prepare(suite, source, report, gpus=detect_gpus)


def _planned(store: Store, suite: str, specs: list[RunSpec], only_failed: bool) -> list[RunSpec]:
    """The runs that may need launching, read before anything is written: at least ``todo`` (a run left
    'running' counts, whatever recovery makes of it)."""
    if not store.exists():
        return specs
    with store.reader() as con:
        try:
            status = {r["run_id"]: r["status"] for r in store.runs(con, suite)}
        except Exception:  # noqa: BLE001 - an older schema, migrated by the writer: plan for every run
            return specs
    status = {k: "interrupted" if v == "running" else v for k, v in status.items()}
    return select_runs(specs, status, only_failed)


def retry_why(outcome: Outcome, attempts: int, lost: int, retries: int) -> str | None:
    """Why a run's attempt that ended with ``outcome`` is run again, or None. ``attempts``: this run's
    attempts so far in this `rlbench run`, ``lost`` of them lost with their node. "node lost": its node died
    (``outcome.result["node_lost"]``), not the run's fault, so not one of the ``retries`` (--retries), at most
    NODE_LOSS_RETRIES times per run so a flapping cluster cannot loop forever; "retry": one of ``retries``."""
    if outcome.status != "failed":
        return None
    if outcome.result.get("node_lost") and lost < NODE_LOSS_RETRIES:
        return "node lost"
    return "retry" if attempts - lost <= retries else None


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
    options.setdefault("db", str(store.path))  # the local pool's CUDA MPS daemon is this store's
    if executor_name == "slurm":
        options["runs_root"] = str(root.resolve())
    elif options.get("detach"):
        raise UsageError(f"--detach works with --executor slurm only (this run uses {executor_name})")
    with _RunLock(store.path):
        # Built (and checked: extra installed, cluster reachable, resources satisfiable) before the store is
        # written to, so bad input changes nothing; sized for the runs that may need launching.
        planned = _planned(store, suite.name, specs, only_failed)
        # their params, as each run would check them when it starts: a typo is exit 2 with nothing recorded or
        # submitted. The local pool's workers check (they import the adapters anyway); for a cluster, here.
        checks = to_check(planned)
        if checks and executor_name != "local" and (refused := first_refusal(checks)):
            raise UsageError(f"{source}: {refused}")
        runner = None
        if planned:
            runner = make_executor(executor_name, suite, len(planned), workers, timeout, options)
        try:
            if runner is not None and hasattr(runner, "start"):  # workers start while the store is prepared
                runner.start(preload_torch=any(uses_torch(s) for s in specs))
            if checks and hasattr(runner, "check") and (refused := runner.check(checks, stop)):
                raise UsageError(f"{source}: {refused}")
            return _run_suite(suite, source, store, specs, summary, runner, executor_name, root, retries,
                              only_failed, timeout, options, report, stop, workers, extra_config)  # fmt: skip
        finally:
            if runner is not None and hasattr(runner, "close"):
                runner.close()


def _run_suite(suite: Suite, source: str, store: Store, specs: list[RunSpec], summary: RunSummary, runner: Any,
               executor_name: str, root: Path, retries: int, only_failed: bool, timeout: float | None,
               options: dict[str, Any], report: Callable[[str, dict[str, Any]], None],
               stop: threading.Event | None, workers: int | None, extra_config: dict[str, Any] | None) -> RunSummary:  # fmt: skip
    """``run_suite`` once the executor is built (and started): record, recover, run what is left."""
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

    aside: list[Path] = []  # attempt folders found holding files when their attempt was planned

    def say_aside() -> None:
        if aside:
            report("note", {"msg": f"{len(aside)} run folder(s) held files this database never recorded "
                                   f"(another database's runs next to it): kept aside as {aside[0]}"
                                   + (" and the like" if len(aside) > 1 else "")})  # fmt: skip
            aside.clear()

    def job_of(specs_: list[RunSpec], attempt_of: Callable[[RunSpec], int]) -> Job:
        members = [Job(s, attempt_dir(root, s, attempt=attempt_of(s)), attempt_of(s)) for s in specs_]
        # a first attempt resumes nothing: a checkpoint folder there is another database's run's too
        stale = [m.folder for m in members] + [
            m.folder.parent / "checkpoint" for m in members if m.attempt == 1
        ]
        aside.extend(p for f in stale if (p := set_aside(f)) is not None)
        if len(members) == 1:
            return members[0]
        return Job(members[0].spec, members[0].folder, members[0].attempt, pack=members)

    per_job = suite.resources.seeds_per_job
    jobs = [job_of(group, lambda s: first_attempt[s.run_id]) for group in plan_packs(todo, per_job)]
    say_aside()  # one note for all of them
    by_id = {s.run_id: s for s in specs}
    if live:  # already in Slurm: waited for, never submitted again
        first_attempt.update({s.run_id: s.attempt for s in live})
        runner.adopt([(Job(by_id[s.run_id], s.folder, s.attempt), s.job_id, _started_at(s.placement))
                      for s in live])  # type: ignore[attr-defined]  # fmt: skip
    report("start", {"executor": runner.name, "describe": runner.describe()})
    for s in live:  # what this run found in Slurm: queued, or running since an earlier rlbench run
        p = s.placement or {}
        where = Placement(p.get("device") or "", p.get("host") or "", "slurm", s.job_id)
        report("attached", {"spec": by_id[s.run_id], "attempt": s.attempt, "placement": where})
    in_flight: set[str] = set()

    # Slurm records a submitted job at once; local and Ray batch their writes (see _Recorder)
    rec = _Recorder(store, eager=executor_name not in ("local", "ray"))

    def on_start(job: Job, where: Placement) -> None:
        for m in job.members:
            if not rec.eager:  # a start that waits in the queue: noted in the folder, so a kill loses nothing
                mark_started(m.folder, store)
            in_flight.add(m.spec.run_id)
            manifest = {**base, "started_at": time.time(), "device": where.device, "host": where.host,
                        "executor": where.executor, "job_id": where.job_id}  # fmt: skip
            rec.start(m.spec.run_id, m.attempt, manifest,
                      lambda m=m: report("started", {"spec": m.spec, "attempt": m.attempt, "device": where.device,
                                                     "placement": where, "resume_step": _resume_step(job)}))  # fmt: skip

    last_ingest = [time.monotonic()]

    def on_tick(running: list[Job]) -> None:
        if running and time.monotonic() - last_ingest[0] >= INGEST_S:
            last_ingest[0] = time.monotonic()
            for job in running:
                for m in job.members:
                    rec.ingest(m)
        rec.tick()

    def on_end(job: Job, outcome: Outcome) -> Job | None:
        """Record a job's end; its runs to try again, as one job (a pack's seeds stay packed), or None."""
        if not job.pack:
            retry = [job.spec] if end_one(job, outcome) else []
        else:
            results = outcome.result.get("pack_results")
            retry = []
            for i, m in enumerate(job.pack):
                r = results[i] if results else None  # none: the job itself died; every seed shares its end
                if end_one(m, Outcome(r["status"], r.get("exit_code"), r.get("error"), r.get("duration_s", 0.0), r)
                           if r is not None else Outcome(outcome.status, outcome.exit_code, outcome.error,
                                                         outcome.duration_s, outcome.result)):  # fmt: skip
                    retry.append(m.spec)
        if not retry:
            return None
        again = job_of(retry, lambda s: attempt_of_retry[s.run_id])
        say_aside()
        return again

    attempt_of_retry: dict[str, int] = {}
    lost: dict[str, int] = {}  # run id -> attempts lost with their node, retried apart from --retries

    def end_one(job: Job, outcome: Outcome) -> bool:
        """Record one run's end (or requeue); True if it is to be tried again (``attempt_of_retry``)."""
        end = {"exit_code": outcome.exit_code, "error": outcome.error, "duration_s": outcome.duration_s,
               "ended_at": time.time()}  # fmt: skip
        rec.ingest(job)
        requeued = bool(outcome.result.get("requeued"))  # Slurm runs it again as the next attempt: not an end
        rid = job.spec.run_id
        why = (
            None
            if requeued
            else retry_why(outcome, job.attempt - first_attempt[rid] + 1, lost.get(rid, 0), retries)
        )
        if why == "node lost":
            lost[rid] = lost.get(rid, 0) + 1
        retry = why is not None
        if requeued:
            said = ("requeued", {"spec": job.spec, "outcome": outcome, "attempt": job.attempt})
        else:
            said = ("ended", {"spec": job.spec, "outcome": outcome, "attempt": job.attempt, "retry": retry,
                              "final": outcome.result.get("final_eval")})  # fmt: skip
        rec.end(job.spec.run_id, outcome.status, end, lambda: report(*said))
        if requeued:
            return False
        in_flight.discard(job.spec.run_id)
        if retry:
            attempt_of_retry[job.spec.run_id] = job.attempt + 1
            return True
        if outcome.status == "finished":
            summary.finished += 1
        elif outcome.status == "interrupted":
            summary.interrupted += 1
        else:
            summary.failed += 1
            summary.failures.append((job.spec, outcome.error or "failed"))
        return False

    try:
        runner.run(jobs, on_start, on_end, on_tick, tick_every=TICK_S, stop=stop)
    finally:
        rec.close()
    summary.writes = dict(rec.stats)
    summary.queued = len(in_flight) + (len(live) if options.get("detach") else 0)
    return summary
