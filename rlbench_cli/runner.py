"""Runs ONE RunSpec inside a worker process: seed, build, train, evaluate, report.

The runner never opens the database. Metrics go to Parquet shards in the attempt folder through a
``ShardSink``; at the end the runner writes ``result.json`` there (atomically) so that a coordinator that
died meanwhile can still tell, on its next start, that the run finished.

Attempt folder: ``<runs_root>/<suite>/<run_id>/attempt-<N>/`` holding ``metrics/*.parquet``,
``spec.json``, ``result.json`` and ``output.log`` (the run's stdout and stderr).

Checkpoints (``budget.checkpoint_every``) live next to the attempts, in ``<run_id>/checkpoint/``: an
algorithm that supports them saves through ``RunContext.save_checkpoint`` and a later attempt continues
through ``RunContext.resume``, which carries the earlier attempt's metric rows up to the checkpoint into the
new attempt folder. ``result.json`` then says ``resumed_from_step``. A finished run's checkpoint is removed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from .algos.registry import needs_torch
from .errors import StoreError
from .sink import ShardSink
from .suite.grid import RunSpec
from .sysmon import SystemMonitor

__all__ = ["attempt_dir", "run_one", "read_result", "write_json_atomic", "uses_torch", "ERROR_TAIL_LINES"]

ERROR_TAIL_LINES = 15
SYSMON_INTERVAL_S = float(os.environ.get("RLBENCH_SYSMON_INTERVAL", "2"))


def attempt_dir(
    runs_root: Path, spec_or_suite: RunSpec | str, run_id: str | None = None, attempt: int = 1
) -> Path:
    if isinstance(spec_or_suite, RunSpec):
        suite, run_id = spec_or_suite.suite, spec_or_suite.run_id
    else:
        suite = spec_or_suite
    for part in (suite, str(run_id)):  # names from a database file too: never a path out of runs_root
        if part in ("", ".", "..") or any(c in part for c in "/\\\0"):
            raise StoreError(f"{part!r} cannot name a run folder (suite names and run ids are single names)")
    return Path(runs_root) / suite / str(run_id) / f"attempt-{attempt}"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def read_result(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "result.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def seed_everything(seed: int, torch_too: bool = True) -> None:
    """Seed Python's, NumPy's and torch's generators. ``torch_too=False`` (a run whose code never uses torch):
    torch is seeded only if this process has already imported it, so the run does not pay its import
    (seconds; a worker imports it on the first run that uses it)."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    if not torch_too and "torch" not in sys.modules:
        return
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return
    configure_torch(torch)
    torch.manual_seed(seed)


def configure_torch(torch: Any) -> None:
    """Apply the worker's torch thread settings (``RLBENCH_TORCH_THREADS``) once, when torch is first used."""
    global _TORCH_CONFIGURED
    threads = os.environ.get("RLBENCH_TORCH_THREADS")
    if _TORCH_CONFIGURED or not threads:
        return
    _TORCH_CONFIGURED = True
    torch.set_num_threads(int(threads))
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or torch's pools already running
        pass


_TORCH_CONFIGURED = False


def uses_torch(spec: RunSpec) -> bool:
    """Whether a run's code may use torch (a user's function may; a script runs in its own process)."""
    if spec.command is not None:
        return False
    if spec.entrypoint is not None:
        return True
    return needs_torch(spec.algo_name)


def run_one(
    spec: RunSpec,
    folder: Path,
    device: str = "cpu",
    stop_event: threading.Event | None = None,
    flush_interval: float = 1.0,
) -> dict[str, Any]:
    """Train and evaluate one run; never raises. Returns (and writes) the result record."""
    from .algos import get_algorithm
    from .algos.base import RunContext

    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / "spec.json", spec.to_dict())
    t0 = time.time()
    sink = ShardSink(folder / "metrics", flush_interval=flush_interval)
    result: dict[str, Any] = {"run_id": spec.run_id, "started_at": t0, "device": device}
    ctx = None
    try:
        seed_everything(spec.seed, torch_too=uses_torch(spec))
        ctx = RunContext(
            spec=spec, sink=sink, device=device, run_dir=folder, stop_event=stop_event, keep_artifacts=True
        )
        with SystemMonitor(sink, lambda: ctx.current_step, device, interval=SYSMON_INTERVAL_S):
            if spec.command is not None:
                from .algos.command import run_command

                run_command(ctx, spec.command)
            elif spec.entrypoint is not None:
                from .algos.entrypoint import load_entrypoint, takes_seeds

                fn = load_entrypoint(spec.entrypoint)
                returned = fn([ctx]) if takes_seeds(fn) else fn(ctx)  # @seeds_per_job: a list of one
                if isinstance(returned, dict) and returned.get(ctx.seed) is not None:
                    ctx.fail(str(returned[ctx.seed]))
            else:
                get_algorithm(spec.algo_name, spec.env_id)().train(ctx)
        if ctx.failure is not None:
            result.update(status="failed", exit_code=1, error=ctx.failure)
        elif ctx.pruned:
            result.update(
                status="pruned",
                exit_code=None,
                error=f"pruned by rlbench tune: its trial fell behind at step {ctx.pruned_at:,}",
            )
        elif stop_event is not None and stop_event.is_set():
            result.update(status="interrupted", exit_code=None, error="stopped before the end of its budget")
        else:
            result.update(status="finished", exit_code=0, error=None, final_eval=ctx.last_eval)
        if ctx._dataset is not None:  # how the data was made: encoder, generator, mix (imagined rollouts)
            from .datasets.catalog import PROVENANCE

            result["data"] = {k: ctx._dataset.meta[k] for k in PROVENANCE if k in ctx._dataset.meta}
        result["resumed_from_step"] = ctx.resumed_from_step
    except BaseException as e:  # noqa: BLE001 - a run's failure is data, not a crash of the worker
        tb = traceback.format_exc().rstrip().splitlines()
        tail = "\n".join(tb[-ERROR_TAIL_LINES:])
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        result.update(status=status, exit_code=1, error=f"{type(e).__name__}: {e}\n{tail}")
    finally:
        if ctx is not None:
            ctx.wait_artifacts()
        try:
            sink.close()
        except Exception as e:  # noqa: BLE001
            result.update(status="failed", exit_code=1, error=f"could not write metrics: {e}")
    result["ended_at"] = time.time()
    result["duration_s"] = result["ended_at"] - t0
    result["rows"] = sink.rows_written
    write_json_atomic(folder / "result.json", result)
    if result["status"] == "finished":  # its checkpoint has served; an unfinished run keeps it to resume
        shutil.rmtree(folder.parent / "checkpoint", ignore_errors=True)
    return result
