"""``rlbench run``'s single writer and what ``rlbench status`` / ``cancel`` do, one module per job:

- ``runlock``: ``RunLock``, one ``rlbench run`` per suite and database (an flock on ``<db>.<suite>.runlock``);
- ``recorder``: ``Recorder``, the batched database writes of a run;
- ``recovery``: runs a dead coordinator left 'running' or started without a record, and re-attaching to
  jobs that outlive the coordinator (Slurm's);
- ``manifest``: what makes a run reproducible (git commit, packages, host);
- ``datasets``: the suite's datasets on disk before its runs start;
- ``loop``: ``run_suite``, the main loop;
- ``control``: ``cancel`` and ``snapshot`` (status), library calls that return data;
- ``validate``: ``validate``, a suite checked as ``run`` checks it, without running anything.
"""

from __future__ import annotations

from .control import SYS_COLUMNS, CancelResult, Snapshot, cancel, live_states, snapshot
from .datasets import prepare_datasets
from .loop import RunSummary, retry_why, run_suite, select_runs
from .manifest import manifest_base
from .recorder import Recorder
from .recovery import detached_rows, mark_started, recover_detached, runs_root, set_aside
from .runlock import RunLock, unless_running

__all__ = [
    "RunSummary", "run_suite", "select_runs", "retry_why", "prepare_datasets", "manifest_base", "Recorder",
    "RunLock", "unless_running", "runs_root", "mark_started", "set_aside", "detached_rows", "recover_detached",
    "CancelResult", "Snapshot", "cancel", "snapshot", "live_states", "SYS_COLUMNS",
]  # fmt: skip
