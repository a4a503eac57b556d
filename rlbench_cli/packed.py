"""Runs N RunSpecs that differ only by seed as ONE job: what ``runner.run_one`` does for one, for a pack.

``resources.seeds_per_job: N`` packs the seeds of one (algorithm, task, params) cell N at a time into one
job; the job calls ``run_packed(specs, folders)``. Inside it the algorithm trains the N seeds in lock step,
batched across seeds (its adapter's ``train_packed``: ``algos.ppo``, ``algos.gymnax``; or a user's
``entrypoint:`` function marked ``@rlbench_cli.seeds_per_job``, called with the list of contexts, see
``algos.entrypoint``), but each seed stays its own run everywhere else: its own attempt folder
(``runner.attempt_dir``), ``spec.json``, metric shards (one ``ShardSink`` per seed),
system metrics, evaluation and ``result.json`` (written atomically, status ``finished`` / ``failed`` /
``interrupted``, the same record ``run_one`` writes plus ``pack``: the run ids that shared the job).
The threads are the job's, not the seeds': one ``sink.Flusher`` writes every seed's shards and one
``SystemMonitor.of_runs`` logs every seed's system metrics (a 256-seed job had 2 x 256 of them).
With ``budget.checkpoint_every`` packed PPO checkpoints every seed at the same step and an interrupted pack
resumes all its seeds there (``algos.base.resume_together``), bitwise on CPU. A
seed that diverges (or whose context was marked with ``ctx.fail(reason)``) is ``failed`` with the reason (``diverged: NaN in policy loss at step S``) while the
others finish; an exception in the job fails every seed that had not failed already, each with the
traceback's tail.

Seeding: ``run_one`` calls ``seed_everything(seed)``; one process cannot do that for N seeds. Packed
algorithms draw every random number of seed ``s`` from streams derived from ``s`` alone (see
``algos.ppo.train_packed``: torch's generator reseeded with ``s`` before building that seed's network, a NumPy
generator and a torch generator seeded ``s``, env ``i`` seeded ``s + i``, evaluation episodes seeded by
``eval_seeds(s)``), so a seed's numbers do not depend on which seeds share its job. The global ``random``
/ NumPy / torch generators are seeded with the pack's first seed, for code (a user's env) that uses them:
such code is reproducible for the same pack but not independent of it.
"""

from __future__ import annotations

import shutil
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from .algos.registry import is_packable
from .runner import (
    ERROR_TAIL_LINES,
    SYSMON_INTERVAL_S,
    run_one,
    seed_everything,
    uses_torch,
    write_json_atomic,
)
from .sink import Flusher, ShardSink
from .suite.grid import RunSpec
from .suite.ids import canonical_json
from .sysmon import SystemMonitor

PACK_SHARDS_PER_S = 256  # a pack's seeds write about this many shards a second at most ...
MAX_PACK_FLUSH_S = 30.0  # ... but each seed at least this often

__all__ = [
    "can_pack",
    "pack_key",
    "plan_packs",
    "packable",
    "unpackable",
    "run_packed",
    "pack_flush_interval",
    "pack_outcome",
    "run_job",
]


def can_pack(spec: RunSpec) -> bool:
    """Whether ``spec``'s seeds can share a job: a registered packable algorithm, or an ``entrypoint:``
    function marked ``@rlbench_cli.seeds_per_job`` (imported here to see the mark; see algos.entrypoint)."""
    if spec.entrypoint is not None:
        from .algos.entrypoint import entrypoint_packs

        return spec.command is None and entrypoint_packs(spec.entrypoint)
    return is_packable(spec.algo_name) and spec.command is None


def pack_key(spec: RunSpec) -> str:
    """Specs with equal keys may be packed together: everything but the seed (and the run id) is equal."""
    d = spec.to_dict()
    d.pop("seed", None)
    d.pop("run_id", None)
    return canonical_json(d)


def plan_packs(specs: list[RunSpec], seeds_per_job: int) -> list[list[RunSpec]]:
    """Group runs into jobs: packable runs of one cell (``pack_key``), by seed, ``seeds_per_job`` at a time;
    every other run alone. Pure; the order follows ``specs`` (each pack where its first run was)."""
    if seeds_per_job <= 1:
        return [[s] for s in specs]
    cells: dict[str, list[RunSpec]] = {}
    order: list[str | RunSpec] = []
    for s in specs:
        if not can_pack(s):
            order.append(s)
            continue
        key = pack_key(s)
        if key not in cells:
            cells[key] = []
            order.append(key)
        cells[key].append(s)
    jobs: list[list[RunSpec]] = []
    for item in order:
        if isinstance(item, RunSpec):
            jobs.append([item])
            continue
        cell = sorted(cells[item], key=lambda s: s.seed)
        jobs += [cell[i : i + seeds_per_job] for i in range(0, len(cell), seeds_per_job)]
    return jobs


def unpackable(specs: list[RunSpec]) -> list[str]:
    """Algorithm labels whose runs cannot share a job (they run one seed per job)."""
    return sorted({s.algo for s in specs if not can_pack(s)})


def packable(specs: list[RunSpec]) -> list[str]:
    """Algorithm labels whose seeds share jobs under ``resources.seeds_per_job``."""
    return sorted({s.algo for s in specs if can_pack(s)})


def run_job(specs: list[RunSpec], folders: list[Path], device: str = "cpu",
            stop_event: threading.Event | None = None) -> dict[str, Any]:  # fmt: skip
    """What every executor's worker runs for a job: its one run (``run_one``), or the seeds of a pack trained
    together (``run_packed``) and reported as one record (``pack_outcome``). A job that left its process
    unfit for another one (``algos.base.spoil_process``: a wedged JAX runtime) says why in
    ``restart_worker``: its executor replaces the worker."""
    from .algos.base import process_spoiled

    if len(specs) > 1:
        result = pack_outcome(run_packed(specs, folders, device=device, stop_event=stop_event))
    else:
        result = run_one(specs[0], folders[0], device=device, stop_event=stop_event)
    why = process_spoiled()
    if why is not None:
        result["restart_worker"] = why
    return result


def pack_outcome(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One record for a packed job, as an executor reports a job's end: the job's status (finished only if
    every seed finished; interrupted if any was), its duration, and each seed's own record in
    ``pack_results`` (what the coordinator records per run)."""
    statuses = {r["status"] for r in results}
    status = (
        "finished" if statuses == {"finished"} else "interrupted" if "interrupted" in statuses else "failed"
    )
    failed = [r for r in results if r["status"] == "failed"]
    return {"status": status, "exit_code": 0 if status == "finished" else 1,
            "error": failed[0]["error"] if failed else None,
            "duration_s": max((r.get("duration_s") or 0.0) for r in results), "pack_results": results}  # fmt: skip


def pack_flush_interval(seeds: int, interval: float = 1.0) -> float:
    """Seconds between a packed seed's shards: ``interval``, or longer for a big pack (a shard a second for each
    of thousands of seeds is thousands of files a second, and the coordinator ingests each): 2,048 seeds
    flush every 8 s, never less often than every ``MAX_PACK_FLUSH_S``. A checkpoint flushes them first."""
    return max(interval, min(seeds / PACK_SHARDS_PER_S, MAX_PACK_FLUSH_S))


def run_packed(
    specs: list[RunSpec],
    folders: list[Path],
    device: str = "cpu",
    stop_event: threading.Event | None = None,
    flush_interval: float = 1.0,
) -> list[dict[str, Any]]:
    """Train and evaluate the seeds of one cell in one process; never raises for a run's failure.

    ``folders[i]`` is ``specs[i]``'s attempt folder. Returns (and writes to each folder's ``result.json``)
    one result record per spec, in order. Raises ValueError at once if the specs cannot be packed (they
    differ in more than the seed, or the algorithm is not packable): that is the caller's mistake.
    """
    from .algos.base import RunContext

    if len(specs) != len(folders) or not specs:
        raise ValueError(
            f"run_packed needs one folder per spec, got {len(specs)} specs, {len(folders)} folders"
        )
    keys = {pack_key(s) for s in specs}
    if len(keys) != 1 or not all(can_pack(s) for s in specs):
        raise ValueError("run_packed: the specs must be one packable cell (same everything but the seed)")

    t0 = time.time()
    ids = [s.run_id for s in specs]
    flusher = Flusher()  # one thread writes every seed's shards
    flush_interval = pack_flush_interval(len(specs), flush_interval)
    sinks: list[ShardSink] = []
    ctxs: list[RunContext] = []
    results: list[dict[str, Any]] = []
    try:
        for spec, folder in zip(specs, folders):
            folder.mkdir(parents=True, exist_ok=True)
            write_json_atomic(folder / "spec.json", spec.to_dict())
            sink = ShardSink(folder / "metrics", flush_interval=flush_interval, flusher=flusher)
            sinks.append(sink)
            ctxs.append(
                RunContext(spec=spec, sink=sink, device=device, run_dir=folder, stop_event=stop_event)
            )
            ctxs[-1].keep_artifacts = True  # its best and final policy, its episodes (algos.keep)
            results.append({"run_id": spec.run_id, "started_at": t0, "device": device, "pack": ids})
    except BaseException:  # a folder that cannot be made: the caller's trouble, with no thread left behind
        flusher.close()
        raise
    try:
        # for code outside the per-seed streams (see the module docstring); a JAX pack does not import torch
        seed_everything(specs[0].seed, torch_too=uses_torch(specs[0]))
        if specs[0].entrypoint is not None:  # user code marked @seeds_per_job: it gets the list
            from .algos.entrypoint import load_entrypoint

            train: Any = load_entrypoint(specs[0].entrypoint)
        else:  # the registered algorithm's packed trainer (ppo, ppo_jax: AlgoInfo.packable)
            from .algos import get_algorithm

            train = get_algorithm(specs[0].algo_name, specs[0].env_id).train_packed

        runs = [(sink, lambda c=ctx: c.current_step) for ctx, sink in zip(ctxs, sinks)]
        with SystemMonitor.of_runs(runs, device, interval=SYSMON_INTERVAL_S):  # one thread for the pack
            returned = train(ctxs)
        # a seed failed if its context says so (ctx.fail) or the trainer's {seed: reason} return does
        outcome = {c.seed: c.failure for c in ctxs}
        if isinstance(returned, dict):
            outcome.update({k: v for k, v in returned.items() if v is not None})
        stopped = stop_event is not None and stop_event.is_set()
        for ctx, result in zip(ctxs, results):
            failure = outcome.get(ctx.seed)
            if failure is not None:
                result.update(status="failed", exit_code=1, error=failure)
            elif stopped:
                result.update(
                    status="interrupted", exit_code=None, error="stopped before the end of its budget"
                )
            else:
                result.update(status="finished", exit_code=0, error=None, final_eval=ctx.last_eval)
            result["resumed_from_step"] = ctx.resumed_from_step
    except BaseException as e:  # noqa: BLE001 - a pack's failure is data, not a crash of the worker
        tb = traceback.format_exc().rstrip().splitlines()
        tail = "\n".join(tb[-ERROR_TAIL_LINES:])
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        for result in results:
            if result.get("status") != "failed":
                result.update(status=status, exit_code=1, error=f"{type(e).__name__}: {e}\n{tail}")
    for ctx in ctxs:
        ctx.wait_artifacts()
    for sink, folder, result in zip(sinks, folders, results):
        try:
            sink.close()
        except Exception as e:  # noqa: BLE001
            result.update(status="failed", exit_code=1, error=f"could not write metrics: {e}")
        result["ended_at"] = time.time()
        result["duration_s"] = result["ended_at"] - t0
        result["rows"] = sink.rows_written
        write_json_atomic(folder / "result.json", result)
        if result["status"] == "finished":  # its checkpoint has served (run_one's rule)
            shutil.rmtree(folder.parent / "checkpoint", ignore_errors=True)
    flusher.close()
    return results
