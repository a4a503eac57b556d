"""``rlbench run``'s main loop: the single writer. Expands a suite, skips what is finished, runs the rest on
an executor, ingests metric shards as they appear, and records every outcome.

Crash safety: state changes are recorded in short transactions, several runs' starts, shard ingests and ends
in one (``recorder.Recorder``). Nothing a worker writes depends on them: shards and ``result.json`` are on
disk before their record. If this process dies, the next ``rlbench run`` of the same suite first recovers
(``recovery``). Coordinators of different suites run on one store at once: each holds its suite's run lock
(``runlock``) and touches only its suite's runs; they take turns at the file (``store.locks``). The loop
asks the executor table (``executors.EXECUTORS``) what an executor does, never its name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..algos import first_refusal, to_check
from ..errors import UsageError
from ..executors import EXECUTORS, ExecutorKind, executor_kind, make_executor
from ..executors.base import NODE_LOSS_RETRIES, Job, Outcome, Placement
from ..packed import pack_flush_interval, plan_packs
from ..runner import attempt_dir, uses_torch
from ..store import Store
from ..suite.grid import RunSpec, expand
from ..suite.models import Suite
from .datasets import prepare_datasets
from .manifest import manifest_base
from .recorder import Recorder
from .recovery import mark_started, recover, runs_root, set_aside, started_at
from .runlock import RunLock

__all__ = ["RunSummary", "run_suite", "select_runs", "retry_why", "ingest_every", "TICK_S", "INGEST_S"]

TICK_S = 0.25  # how often executors call on_tick: flushes and releases; running runs' shards each INGEST_S
INGEST_S = 1.0


def ingest_every(job: Job) -> float:
    """Seconds between looks for a running job's new shards: ``INGEST_S``; a big pack's seeds write shards only
    every ``pack_flush_interval`` (2,048 seeds: 8 s), so its thousands of folders are looked at twice in that
    time, not every second."""
    return max(INGEST_S, pack_flush_interval(len(job.members)) / 2) if job.pack else INGEST_S


@dataclass
class RunSummary:
    total: int
    skipped: int = 0
    finished: int = 0
    failed: int = 0
    interrupted: int = 0
    pruned: int = 0
    recovered: int = 0
    queued: int = 0  # runs left queued or running where they were sent (--detach)
    failures: list[tuple[RunSpec, str]] = field(default_factory=list)
    writes: dict[str, float] = field(default_factory=dict)  # the run's database writes (Recorder.stats)


def select_runs(specs: list[RunSpec], status: dict[str, str], only_failed: bool) -> list[RunSpec]:
    """Which runs to launch: everything not finished, or with only_failed just failed/interrupted ones."""
    if only_failed:
        return [s for s in specs if status.get(s.run_id) in ("failed", "interrupted")]
    return [s for s in specs if status.get(s.run_id) != "finished"]


def _resume_step(job: Job) -> int | None:
    """The step an attempt will resume from: its run's latest checkpoint, when the run takes them; for the
    seeds of a packed job the latest step all of them have (``algos.base.resume_together``)."""
    if job.attempt < 2 or job.spec.budget.get("checkpoint_every") is None:
        return None
    from ..checkpoint import list_checkpoints

    common: set[int] | None = None
    for m in job.members:
        steps = {step for step, _ in list_checkpoints(m.folder.parent / "checkpoint")}
        common = steps if common is None else common & steps
    return max(common) if common else None


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
    watch: Callable[[list[Job]], None] | None = None,
) -> RunSummary:
    """Run every unfinished cell of ``suite``; see the module docstring. ``report`` gets progress events;
    setting ``stop`` (from a signal handler) ends the run cleanly, runs in flight marked interrupted.
    ``executor`` (a name of ``executors.EXECUTORS``; default the suite's ``resources.executor``) places the runs;
    ``executor_options`` are its command-line settings (e.g. ``{"address": "auto"}``). ``select`` keeps only
    some runs of the grid (``rlbench run --adaptive`` runs a batch of seeds at a time): only those are
    recorded and run. ``extra_config`` is stored with the suite's config (the adaptive settings). ``watch`` is
    called every tick with the jobs running (``rlbench tune``'s pruner reads their folders)."""
    specs = [s for s in expand(suite) if select is None or select(s)]
    root = runs_root(store)
    summary = RunSummary(total=len(specs))
    kind = executor_kind(executor or suite.resources.executor)
    timeout = timeout or suite.budget.timeout
    options = dict(executor_options or {})
    options.setdefault("db", str(store.path))  # the local pool's CUDA MPS daemon is this store's
    if kind.shared_filesystem:  # its jobs write straight into the attempt folders
        options["runs_root"] = str(root.resolve())
    if options.get("detach") and not kind.outlives_coordinator:
        can = " or ".join(f"--executor {e.name}" for e in EXECUTORS.values() if e.outlives_coordinator)
        raise UsageError(f"--detach works with {can} only (this run uses {kind.name})")
    with RunLock(store.path, suite.name):  # coordinators of other suites write to the store beside this one
        # Built (and checked: extra installed, cluster reachable, resources satisfiable) before the store is
        # written to, so bad input changes nothing; sized for the runs that may need launching.
        planned = _planned(store, suite.name, specs, only_failed)
        # their params, as each run would check them when it starts: a typo is exit 2 with nothing recorded or
        # submitted. The local pool's workers check (they import the adapters anyway); for a cluster, here.
        checks = to_check(planned)
        if checks and not kind.checks_params and (refused := first_refusal(checks)):
            raise UsageError(f"{source}: {refused}")
        runner = None
        if planned:
            runner = make_executor(kind.name, suite, len(planned), workers, timeout, options)
        try:
            if runner is not None and hasattr(runner, "start"):  # workers start while the store is prepared
                runner.start(preload_torch=any(uses_torch(s) for s in specs))
            if checks and kind.checks_params and (refused := runner.check(checks, stop)):
                raise UsageError(f"{source}: {refused}")
            return _run_suite(suite, source, store, specs, summary, runner, kind, root, retries,
                              only_failed, timeout, options, report, stop, workers, extra_config, watch)  # fmt: skip
        finally:
            if runner is not None and hasattr(runner, "close"):
                runner.close()


def _run_suite(suite: Suite, source: str, store: Store, specs: list[RunSpec], summary: RunSummary, runner: Any,
               kind: ExecutorKind, root: Path, retries: int, only_failed: bool, timeout: float | None,
               options: dict[str, Any], report: Callable[[str, dict[str, Any]], None],
               stop: threading.Event | None, workers: int | None, extra_config: dict[str, Any] | None,
               watch: Callable[[list[Job]], None] | None = None) -> RunSummary:  # fmt: skip
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
        summary.recovered, live = recover(store, con, root, rows)
    if elsewhere := [s for s in live if s.executor != kind.name]:
        other = EXECUTORS[elsewhere[0].executor]
        raise UsageError(f"{len(elsewhere)} runs of suite {suite.name!r} are still queued or running in {other.label}; "
                         f"wait for them with --executor {other.name}, or stop them with: rlbench cancel {suite.name}")  # fmt: skip
    status = {r["run_id"]: r["status"] for r in rows}
    attempts = {r["run_id"]: r["attempts"] or 0 for r in rows}
    attached = {s.run_id for s in live}  # still where an earlier run sent them: waited for, not sent again
    todo = [s for s in select_runs(specs, status, only_failed) if s.run_id not in attached]
    summary.skipped = len(specs) - len(todo) - len(attached)
    report("plan", {"total": len(specs), "todo": len(todo) + len(attached), "skipped": summary.skipped,
                    "recovered": summary.recovered, "attached": len(attached), "attached_in": kind.label})  # fmt: skip
    if not todo and not (live and not options.get("detach")):
        summary.queued = len(live)
        return summary

    runner = runner or make_executor(kind.name, suite, len(todo), workers, timeout, options)
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
    if live:  # already where an earlier run sent them: waited for, never submitted again
        first_attempt.update({s.run_id: s.attempt for s in live})
        runner.adopt([(Job(by_id[s.run_id], s.folder, s.attempt), s.job_id, started_at(s.placement))
                      for s in live])  # type: ignore[attr-defined]  # fmt: skip
    report("start", {"executor": runner.name, "describe": runner.describe()})
    for s in live:  # what this run found there: queued, or running since an earlier rlbench run
        p = s.placement or {}
        where = Placement(p.get("device") or "", p.get("host") or "", s.executor, s.job_id)
        report("attached", {"spec": by_id[s.run_id], "attempt": s.attempt, "placement": where})
    in_flight: set[str] = set()

    # a job that outlives the coordinator is on record once submitted; other executors' writes are batched
    rec = Recorder(store, eager=kind.outlives_coordinator)

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

    last_ingest: dict[int, float] = {}  # id(job) of each running job -> when its shards were last looked for

    def on_tick(running: list[Job]) -> None:
        now = time.monotonic()
        seen = {id(job): last_ingest.get(id(job), now) for job in running}  # ended jobs drop out
        last_ingest.clear()
        last_ingest.update(seen)
        for job in running:
            if now - last_ingest[id(job)] >= ingest_every(job):
                last_ingest[id(job)] = now
                for m in job.members:
                    rec.ingest(m)
        rec.tick()
        if watch is not None:
            watch(running)

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
        requeued = bool(outcome.result.get("requeued"))  # run again (Slurm) as the next attempt: not an end
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
        if requeued:  # still Slurm's: recorded live (as a re-attach records it), so status asks Slurm and no
            # later `rlbench run` takes it for interrupted and runs it beside the requeued task
            end = {"error": outcome.error, "ended_at": None}
        rec.end(rid, "running" if requeued else outcome.status, end, lambda: report(*said))
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
        elif outcome.status == "pruned":  # rlbench tune stopped it: neither finished nor a failure
            summary.pruned += 1
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
