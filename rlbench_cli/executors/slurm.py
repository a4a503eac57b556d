"""Slurm executor: one submitit job array per batch of runs, on a cluster that shares a filesystem with us.

Each array task runs ``run_one`` for its run straight into the run's attempt folder (next to the database,
so on the shared filesystem): metric shards, ``result.json``, ``output.log``, and ``placement.json``, written
first, which says where the task landed (node, device, Slurm job id ``ARRAYID_TASK``, restart count). The
coordinator never talks to the task: it polls Slurm (``squeue``, then ``sacct`` for jobs that have left the
queue) about once a second and reads the attempt folders.

- ``resources.seeds_per_job`` packs seeds of one cell into one array task (``packed.run_packed``): each seed
  keeps its own attempt folder with its own ``placement.json`` and ``result.json``, and its own end.
- A task that Slurm requeues (pre-emption, node failure, ``scontrol requeue``, or submitit's own requeue at
  the time limit) starts again with ``SLURM_RESTART_COUNT`` one higher and writes into the NEXT attempt
  folder, so a requeue is a new attempt, recorded as such, and the earlier attempt's files stay as they are.
- ``--detach`` submits, records each run as started with its job id, and returns. ``rlbench status`` and a
  later ``rlbench run`` re-attach through ``survey``: what has ended is ingested and closed, what is still
  queued or running in Slurm is left alone (and a later ``run`` waits for it instead of submitting it again).
- A run that overruns ``--timeout`` is cancelled (scancel) and fails; on Ctrl-C every job of this run is
  cancelled and ends 'interrupted'. ``rlbench cancel`` leaves a ``cancelled`` marker in the attempt folder
  before it scancels, so whoever records the end knows it was asked for.

Nothing here opens the database: the coordinator records what ``run`` reports and what ``survey`` finds.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..packed import run_job
from ..runner import attempt_dir, configure_torch, read_result, uses_torch, write_json_atomic
from ..suite.grid import RunSpec
from .base import Job, OnEnd, OnStart, OnTick, Outcome, Placement, output_to, signal_name

__all__ = [
    "SlurmExecutor", "SlurmState", "Survey", "create", "query_states", "survey", "scancel", "describe_state",
    "mark_cancelled", "peek", "cancel", "ALIVE", "PLACEMENT", "CANCEL_MARKER",
]  # fmt: skip

PLACEMENT = "placement.json"
CANCEL_MARKER = "cancelled"
INSTALL_HINT = 'pip install "rlbench-cli[slurm]"'
# States after which Slurm will not run the job again; every other state (PENDING, RUNNING, COMPLETING,
# REQUEUED, SUSPENDED, ...) is a job still alive in Slurm.
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
                   "DEADLINE", "PREEMPTED", "REVOKED"})  # fmt: skip
ALIVE = "alive"
UNKNOWN = "UNKNOWN"
STOP_GRACE_S = 15.0  # after scancel, how long to wait for tasks to flush their last metrics
RESULT_GRACE_S = 10.0  # a job Slurm calls finished, whose result.json is not visible yet (NFS caching)
FORGOTTEN_GRACE_S = 60.0  # a job Slurm does not know at all (cancelled while pending, purged): ended
SLURM_CMD_TIMEOUT_S = 30.0
MAX_QUERY_FAILURES = 20  # squeue / sacct failing this many times in a row ends the wait (the jobs live on)
_OPTION_FIELDS = ("partition", "time_min", "cpus_per_task", "mem_gb", "gpus_per_task", "qos", "account",
                  "array_parallelism", "folder")  # fmt: skip


# -- talking to Slurm -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlurmState:
    """What Slurm says about one job (array task): its state, exit code and signal, node."""

    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, ... or UNKNOWN
    exit_code: int | None = None
    signal: int | None = None
    node: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def _slurm(args: list[str], what: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which(args[0])
    if exe is None:
        raise UsageError(f"{what}: no {args[0]!r} on PATH; run this on a Slurm login node, or add Slurm's bin "
                         "folder to PATH")  # fmt: skip
    try:
        return subprocess.run([exe, *args[1:]], capture_output=True, text=True, timeout=SLURM_CMD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"{what}: {args[0]} did not answer in {SLURM_CMD_TIMEOUT_S:g}s; is slurmctld up?"
        ) from None


def _first_line(text: str) -> str:
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return lines[0] if lines else "no output"


def _exit_pair(text: str) -> tuple[int | None, int | None]:
    m = re.fullmatch(r"(\d+):(\d+)", text.strip())
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def query_states(job_ids: Iterable[str]) -> dict[str, SlurmState]:
    """Slurm's state of each job id (``ARRAYID_TASK`` or a plain id): ``squeue`` for jobs it still holds,
    ``sacct`` (accounting) for the others and for exit codes. A job neither knows is left out."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    bases = sorted({j.split("_")[0] for j in ids})
    out: dict[str, SlurmState] = {}
    r = _slurm(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(bases), "-o", "%i|%T|%N"], "squeue")
    if r.returncode != 0 and "invalid job id" not in r.stderr.lower():  # controller down: know nothing
        raise UsageError(f"squeue failed: {_first_line(r.stderr)}")
    if r.returncode == 0:  # non-zero when every id is unknown to it ("Invalid job id specified")
        for line in r.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) >= 2 and parts[0] in ids:
                out[parts[0]] = SlurmState(parts[1].split()[0], node=parts[2] if len(parts) > 2 else "")
    need = [j for j in ids if j not in out or out[j].ended]  # exit codes come from accounting
    if need and shutil.which("sacct"):
        r = _slurm(
            ["sacct", "-n", "-P", "-j", ",".join(need), "-o", "JobID,State,ExitCode,NodeList"], "sacct"
        )
        steps: dict[str, int] = {}
        if r.returncode != 0 and any(j not in out for j in need):  # no accounting: cannot tell it ended
            raise UsageError(f"sacct failed: {_first_line(r.stderr)}")
        if r.returncode == 0:  # else squeue's state, without the exit code
            for line in r.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) < 4:
                    continue
                jid, state, code = parts[0], parts[1].split()[0] if parts[1] else UNKNOWN, parts[2]
                base, _, step = jid.partition(".")
                if step:  # srun's step: a signal that killed the python process shows here
                    _, sig = _exit_pair(code)
                    if base in need and sig:
                        steps[base] = sig
                    continue
                if jid in need:
                    ec, sig = _exit_pair(code)
                    out[jid] = SlurmState(state, ec, sig or None, parts[3])
        for jid, sig in steps.items():
            s = out.get(jid)
            if s is not None and s.signal is None:
                out[jid] = SlurmState(s.state, s.exit_code, sig, s.node)
    return out


def scancel(job_ids: Iterable[str]) -> None:
    ids = sorted(set(job_ids))
    if ids:
        _slurm(["scancel", *ids], "scancel")


def describe_state(state: str) -> str:
    """A Slurm state as ``rlbench status`` shows a live run: queued or running."""
    if state in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"):
        return "queued"
    return "running" if state not in ENDED else state.lower()


# -- pre-flight: is there a node that can run this at all? ------------------------------------------------
def _minutes(text: str) -> int | None:
    """Slurm's time limit ``[D-]HH:MM:SS`` / ``MM:SS`` / ``MM`` in minutes; None for infinite."""
    text = text.strip()
    if not text or text.upper() in ("INFINITE", "UNLIMITED", "N/A"):
        return None
    days, h, m, sec = 0, 0, 0, 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
        h, m, sec = ([int(x) for x in text.split(":")] + [0, 0])[:3]
    else:
        parts = [int(x) for x in text.split(":")]
        if len(parts) == 3:
            h, m, sec = parts
        elif len(parts) == 2:
            m, sec = parts
        else:
            m = parts[0]
    return days * 1440 + h * 60 + m + (1 if sec else 0)


def _gpus(gres: str) -> int:
    total = 0
    for item in gres.split(","):
        item = re.sub(r"\(.*?\)", "", item.strip())
        if not item.startswith("gpu"):
            continue
        tail = item.split(":")[-1]
        total += int(tail) if tail.isdigit() else 1
    return total


def _check_cluster(partition: str | None, cpus: int, mem_gb: float | None, gpus: int,
                   time_min: int | None) -> tuple[str, int | None]:  # fmt: skip
    """Fail with one line unless some node of the partition has the CPUs, memory and GPUs a task asks for.
    Returns the partition used and its time limit in minutes (None: infinite)."""
    r = _slurm(["sinfo", "-h", "-N", "-o", "%P|%N|%c|%m|%G|%l"], "--executor slurm")
    if r.returncode != 0:
        raise UsageError(f"--executor slurm: cannot reach Slurm (sinfo: {_first_line(r.stderr)}); is slurmctld "
                         "up, and SLURM_CONF right?")  # fmt: skip
    nodes: dict[str, list[tuple[str, int, float, int]]] = {}
    limits: dict[str, int | None] = {}
    default = None
    for line in r.stdout.splitlines():
        p = line.strip().split("|")
        if len(p) < 6:
            continue
        name = p[0].rstrip("*")
        if p[0].endswith("*"):
            default = name
        mem = float(p[3].rstrip("+")) if p[3].rstrip("+").isdigit() else 0.0
        nodes.setdefault(name, []).append((p[1], int(p[2].rstrip("+") or 0), mem, _gpus(p[4])))
        limits[name] = _minutes(p[5])
    if not nodes:
        raise UsageError("--executor slurm: Slurm reports no partitions with nodes (sinfo is empty)")
    part = partition or default
    if part is None:
        raise UsageError(f"--executor slurm: this cluster has no default partition; choose one with --partition "
                         f"(partitions: {', '.join(sorted(nodes))})")  # fmt: skip
    if part not in nodes:
        raise UsageError(
            f"--partition {part}: no such partition (partitions here: {', '.join(sorted(nodes))})"
        )
    members = nodes[part]
    checks = [("cpus_per_task", "--cpus-per-task", cpus, 1, "CPUs"),
              ("mem_gb", "--mem-gb", mem_gb, 1 / 1024, "GB of memory"),
              ("gpus_per_task", "--gpus-per-task", gpus, 1, "GPUs")]  # fmt: skip
    for fld, flag, want, unit, what in checks:
        col = {"cpus_per_task": 1, "mem_gb": 2, "gpus_per_task": 3}[fld]
        if not want:
            continue
        most = max(n[col] for n in members) * unit
        if most + 1e-9 < want:
            raise UsageError(
                f"resources.slurm.{fld} ({flag}) {want:g}: no node of partition {part} has {want:g} {what} "
                f"(the most any has: {most:g}); ask for less, or choose another --partition"
            )
    if not any(
        n[1] >= cpus and (not mem_gb or n[2] / 1024 + 1e-9 >= mem_gb) and n[3] >= gpus for n in members
    ):
        raise UsageError(f"resources.slurm: no single node of partition {part} has {cpus} CPUs, "
                         f"{mem_gb or 0:g} GB and {gpus} GPUs together; ask for less")  # fmt: skip
    limit = limits.get(part)
    if time_min is not None and limit is not None and time_min > limit:
        raise UsageError(f"resources.slurm.time_min (--time-min) {time_min}: partition {part} allows at most "
                         f"{limit} minutes per job")  # fmt: skip
    return part, limit


def create(suite: Any, n_jobs: int, workers: int | None, timeout: float | None,
           options: dict[str, Any]) -> SlurmExecutor:  # fmt: skip
    """Check that Slurm can run ``suite``'s runs (submitit installed, ``sbatch`` on PATH, a node with the
    resources asked for) and build the executor. Raises UsageError, one line, before anything is submitted.

    ``options`` (command-line flags) override ``suite.resources.slurm``: partition, time_min, cpus_per_task,
    mem_gb, gpus_per_task, qos, account, array_parallelism, folder, additional (extra sbatch flags, merged),
    detach (submit and return) and runs_root (the absolute runs folder, next to the database).
    """
    res = suite.resources
    cfg = res.slurm.model_dump()
    for key in _OPTION_FIELDS:
        if options.get(key) is not None:
            cfg[key] = options[key]
    additional = {**cfg.get("additional", {}), **(options.get("additional") or {})}
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise UsageError(f"--executor slurm needs the submitit package: {INSTALL_HINT}") from None
    if shutil.which("sbatch") is None:
        raise UsageError("--executor slurm: no 'sbatch' on PATH; run from a Slurm login node, or add Slurm's "
                         "bin folder to PATH")  # fmt: skip
    cpus = cfg["cpus_per_task"] or res.threads_per_job or max(1, math.ceil(res.cpus_per_job or 1))
    gpus = cfg["gpus_per_task"] if cfg["gpus_per_task"] is not None else math.ceil(res.gpus_per_job)
    partition, limit = _check_cluster(cfg["partition"], cpus, cfg["mem_gb"], gpus, cfg["time_min"])
    time_min = cfg["time_min"]
    if time_min is None:  # Slurm's own limit kills a run: make it comfortably longer than --timeout
        time_min = math.ceil(timeout / 60) + 5 if timeout else 24 * 60
        if limit is not None:
            time_min = min(time_min, limit)
    params: dict[str, Any] = {
        "time": int(time_min), "cpus_per_task": int(cpus), "job_name": f"rlbench-{suite.name}",
        "array_parallelism": int(cfg["array_parallelism"] or workers or 256),
    }  # fmt: skip
    if cfg["partition"]:
        params["partition"] = partition
    if cfg["mem_gb"]:
        mb = int(math.ceil(cfg["mem_gb"] * 1024))
        params["mem"] = f"{mb}MB"
    if gpus:
        params["gpus_per_task"] = int(gpus)
    for key in ("qos", "account"):
        if cfg[key]:
            params[key] = cfg[key]
    extra = {"ntasks": 1} if gpus else {}  # sbatch takes --gpus-per-task only with a task count
    extra.update({str(k).replace("_", "-"): v for k, v in additional.items()})
    if extra:
        params["additional_parameters"] = extra
    root = options.get("runs_root")
    if root is None:
        raise UsageError("--executor slurm: internal: no runs folder given")
    folder = Path(cfg["folder"]) if cfg["folder"] else Path(root).parent / "slurm"
    return SlurmExecutor(Path(root).resolve(), folder.resolve(), params, timeout=timeout,
                         detach=bool(options.get("detach")), threads=int(cpus))  # fmt: skip


# -- inside the Slurm job ---------------------------------------------------------------------------------
def _job_id_here() -> str:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID", "?")


class _Task:
    """What each array task runs: ``run_one`` into attempt ``first_attempt + SLURM_RESTART_COUNT``; for a
    pack of seeds (``resources.seeds_per_job``: ``spec`` and ``first_attempt`` are lists) ``run_packed``, each
    seed into its own attempt folder, each folder with its own ``placement.json`` and ``result.json``.

    Checkpointable in submitit's sense (``checkpoint`` resubmits the same call), so submitit requeues a task
    that reaches Slurm's time limit or is pre-empted instead of losing it; the requeued task is a new attempt.
    """

    def __call__(self, spec: RunSpec | list[RunSpec], runs_root: str, first_attempt: int | list[int],
                 threads: int) -> dict[str, Any]:  # fmt: skip
        restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        specs = spec if isinstance(spec, list) else [spec]
        firsts = first_attempt if isinstance(first_attempt, list) else [first_attempt]
        attempts = [a + restarts for a in firsts]
        folders = [attempt_dir(Path(runs_root), s, attempt=a) for s, a in zip(specs, attempts)]
        for f in folders:
            f.mkdir(parents=True, exist_ok=True)
        folder, attempt = folders[0], attempts[0]
        visible = [
            v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip() not in ("", "-1")
        ]
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RLBENCH_TORCH_THREADS"):
            os.environ[var] = str(threads)
        device = "cpu"
        # torch before placement.json (--timeout counts from there, as it does on a warm local worker), and not
        # at all when no run of the task uses it and there is no GPU to check, as on a Ray actor (seconds saved)
        if visible or any(uses_torch(s) for s in specs):
            import torch

            configure_torch(torch)
            device = "cuda:0" if visible and torch.cuda.is_available() else "cpu"
        for f, attempt in zip(folders, attempts):
            write_json_atomic(f / PLACEMENT, {
                "job_id": _job_id_here(), "host": os.environ.get("SLURMD_NODENAME") or os.environ.get(
                    "SLURM_NODELIST") or os.uname().nodename, "device": device, "attempt": attempt,
                "restart_count": restarts, "cuda_visible_devices": ",".join(visible) or None,
                "started_at": time.time(),
            })  # fmt: skip
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())  # scancel: flush, write result.json, end
        submitits = signal.getsignal(signal.SIGUSR2)  # submitit's: checkpoint, requeue, exit at once
        if callable(submitits):
            signal.signal(signal.SIGUSR2, functools.partial(_near_time_limit, submitits, stop))
        with output_to(folder / "output.log"):
            return run_job(specs, folders, device=device, stop_event=stop)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


def _near_time_limit(submitits: Any, stop: threading.Event, signum: int, frame: Any) -> None:
    """Slurm's warning before the time limit (``--signal=USR2@90``), or a pre-emption's: submitit's handler
    pickles the call and requeues the task, but then exits with SystemExit wherever training happens to be,
    which a run records as its failure. Here it requeues without exiting, and the run stops at its next safe
    point, saving a checkpoint where it stops, as on SIGTERM (the requeue's own SIGTERM follows); the requeued
    task resumes from it as the next attempt. Past submitit's ``max_num_timeout`` requeues the run just stops
    (interrupted: the next ``rlbench run`` goes on from its checkpoint)."""
    print("rlbench: Slurm's time-limit warning (SIGUSR2): stopping at a checkpoint, then requeued",
          file=sys.stderr, flush=True)  # fmt: skip
    stop.set()
    handler = getattr(submitits, "__self__", None)
    if handler is not None and hasattr(handler, "_exit"):
        handler._exit = lambda: None  # the run ends by itself once stopped, with its result.json
    try:
        submitits(signum, frame)
    except Exception as e:  # noqa: BLE001 - submitit will not requeue (timed out too many times)
        print(f"rlbench: not requeued: {e}", file=sys.stderr, flush=True)


# -- what happened to a job -------------------------------------------------------------------------------
def read_placement(folder: Path) -> dict[str, Any] | None:
    import json

    try:
        return json.loads((folder / PLACEMENT).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def mark_cancelled(folder: Path) -> None:
    """Leave the marker that says 'rlbench cancel' asked for this job's end (it ends interrupted)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CANCEL_MARKER).write_text(str(time.time()))


def latest_attempt(runs_root: Path, suite: str, run_id: str, attempt: int, job_id: str) -> int:
    """The attempt Slurm job ``job_id`` is on now: ``attempt``, or a later one its requeued task started."""
    k = attempt
    while True:
        p = read_placement(attempt_dir(runs_root, suite, run_id, k + 1))
        if p is None or p.get("job_id") != job_id:
            return k
        k += 1


def outcome_of(state: SlurmState, folder: Path, time_limit: int | None = None) -> Outcome:
    """The outcome of an ended job: its result.json when it finished or raised, else the cause Slurm gives."""
    result = read_result(folder) or {}
    duration = float(result.get("duration_s") or 0.0)
    if not result:
        p = read_placement(folder)
        if p and p.get("started_at"):
            duration = max(0.0, time.time() - float(p["started_at"]))
    if result.get("status") in ("finished", "failed", "pruned"):  # pruned: rlbench tune stopped it
        return Outcome(result["status"], result.get("exit_code"), result.get("error"), duration, result)
    if (folder / CANCEL_MARKER).exists():
        return Outcome("interrupted", None, "interrupted: cancelled (rlbench cancel)", duration, result)
    where = f"Slurm job {state.state}"
    if state.state == "CANCELLED":
        cause = "cancelled in Slurm (scancel, or an administrator)"
    elif state.state == "TIMEOUT":
        limit = f" of {time_limit} min" if time_limit else ""
        cause = f"Slurm time limit{limit} reached; raise it with --time-min / resources.slurm.time_min"
    elif state.state == "OUT_OF_MEMORY":
        cause = "out of memory (Slurm OUT_OF_MEMORY); ask for more with --mem-gb / resources.slurm.mem_gb"
    elif state.state in ("NODE_FAIL", "BOOT_FAIL"):
        cause = f"node failure ({state.state} on {state.node or '?'})"
    elif state.state == "PREEMPTED":
        cause = "pre-empted by Slurm and not requeued"
    elif state.signal:
        cause = f"killed by {signal_name(state.signal)}"
        if state.signal == signal.SIGKILL:
            cause += " (out of memory, or killed by hand?)"
        elif state.signal == signal.SIGSEGV:
            cause += " (segmentation fault in native code)"
    elif state.exit_code:
        cause = f"exited with code {state.exit_code}"
    elif state.state == UNKNOWN:
        cause = "Slurm has no record of this job any more (cancelled before it started, or purged)"
    else:
        cause = "the job ended without writing result.json"
    return Outcome("failed", state.exit_code, f"{cause} [{where}]", duration, result)


@dataclass
class Survey:
    """Where one run that the store says is in Slurm really is (``survey``)."""

    run_id: str
    job_id: str
    attempt: int  # the attempt the job is on now (one higher per requeue)
    folder: Path
    placement: dict[str, Any] | None  # placement.json of that attempt, once the task has started
    state: str  # Slurm's state, UNKNOWN when Slurm has forgotten the job
    outcome: Outcome | None  # None while the job is alive in Slurm
    executor: str = "slurm"  # where the job is (the coordinator's recovery treats every executor's alike)

    @property
    def shown(self) -> str:
        """What ``rlbench status`` calls a job alive in Slurm: queued or running."""
        return describe_state(self.state)


def survey(runs_root: Path, runs: list[dict[str, Any]]) -> list[Survey]:
    """Ask Slurm (one squeue, one sacct) where each run stands. ``runs``: rows with run_id, suite, attempts,
    job_id. A job still queued or running gets ``outcome`` None; an ended one the outcome to record."""
    states = query_states(r["job_id"] for r in runs if r.get("job_id"))
    out = []
    for r in runs:
        jid = r.get("job_id") or ""
        attempt = latest_attempt(runs_root, r["suite"], r["run_id"], int(r["attempts"] or 1), jid)
        folder = attempt_dir(runs_root, r["suite"], r["run_id"], attempt)
        st = states.get(jid, SlurmState(UNKNOWN))
        outcome = outcome_of(st, folder) if st.ended or st.state == UNKNOWN else None
        out.append(Survey(r["run_id"], jid, attempt, folder, read_placement(folder), st.state, outcome))
    return out


def peek(runs: list[dict[str, Any]]) -> dict[str, str]:
    """Only look (another ``rlbench run`` records them): {run_id: queued | running} for the runs of ``runs``
    (rows with run_id and job_id) whose job Slurm still knows."""
    states = query_states(r["job_id"] for r in runs)
    return {r["run_id"]: describe_state(states[r["job_id"]].state) for r in runs if r["job_id"] in states}


def cancel(
    runs_root: Path, runs: list[dict[str, Any]], settle_s: float = 20.0
) -> tuple[list[str], list[str]]:
    """``rlbench cancel``'s part in Slurm: scancel the jobs of ``runs`` (rows with run_id, suite, attempts,
    job_id) that have not ended, after leaving the ``cancelled`` marker in their attempt folders (whoever
    records the end knows it was asked for), then wait up to ``settle_s`` seconds for them to leave Slurm's
    queue. Returns (the job ids cancelled, the job ids that had already ended: they are recorded as they
    ended, not as cancelled)."""
    states = query_states(r["job_id"] for r in runs)
    ended = [r["job_id"] for r in runs if r["job_id"] in states and states[r["job_id"]].ended]
    runs = [r for r in runs if r["job_id"] not in ended]
    ids = [r["job_id"] for r in runs]
    for r in runs:  # before scancel
        for k in (r["attempts"], r["attempts"] + 1):  # +1: a task requeued but not recorded yet
            folder = attempt_dir(runs_root, r["suite"], r["run_id"], k)
            if k == r["attempts"] or folder.exists():
                mark_cancelled(folder)
    scancel(ids)
    deadline = time.monotonic() + settle_s
    while ids and time.monotonic() < deadline:
        states = query_states(ids)
        if all(j not in states or states[j].ended for j in ids):
            break
        time.sleep(0.5)
    return ids, ended


# -- the executor -----------------------------------------------------------------------------------------
@dataclass
class _Tracked:
    job: Job
    job_id: str
    announced: bool = False  # on_start called with the real node (placement.json seen)
    started: float = 0.0  # monotonic time the task started running (for --timeout)
    submitted: float = field(default_factory=time.monotonic)
    ended_seen: float | None = None  # when Slurm first said it ended (grace for result.json)


class SlurmExecutor:
    """Runs jobs as Slurm job-array tasks through submitit; see the module docstring.

    Args:
        runs_root: absolute runs folder (every job's attempt folder is under it), on the shared filesystem.
        folder: where submitit keeps its submission files and Slurm logs (shared too).
        params: submitit's SlurmExecutor parameters (time, cpus_per_task, partition, mem, gpus_per_task, ...).
        timeout: seconds a run may run (from its start on a node) before it is cancelled and fails.
        detach: submit, report each job as started (queued), and return without waiting.
        poll: seconds between two looks at Slurm.
    """

    name = "slurm"

    def __init__(self, runs_root: Path, folder: Path, params: dict[str, Any], timeout: float | None = None,
                 detach: bool = False, threads: int = 1, poll: float = 1.0):  # fmt: skip
        self.runs_root = runs_root
        self.folder = folder
        self.params = params
        self.timeout = timeout
        self.detach = detach
        self.threads = threads
        self.poll = poll
        self._adopted: list[tuple[Job, str, bool]] = []

    def describe(self) -> str:
        p = self.params
        bits = [f"partition {p.get('partition', '(default)')}", f"{p['cpus_per_task']} CPU(s)",
                f"{p['time']} min"]  # fmt: skip
        if p.get("gpus_per_task"):
            bits.append(f"{p['gpus_per_task']} GPU(s)")
        if p.get("mem"):
            bits.append(p["mem"])
        how = "submitted, not waited for (--detach)" if self.detach else "one job-array task per run"
        return f"Slurm: {', '.join(bits)} per run; {how}"

    def adopt(self, jobs: list[tuple[Job, str, float | None]]) -> None:
        """Jobs already in Slurm (submitted by an earlier, detached or killed, ``rlbench run``): (job, Slurm
        job id, the wall-clock time its task started running, None while it is queued). ``run`` waits for
        them with its own; ``--timeout`` counts from that start, not from this run's."""
        self._adopted.extend(jobs)

    def _submit(self, jobs: list[Job], on_start: OnStart) -> list[_Tracked]:
        import submitit

        self.folder.mkdir(parents=True, exist_ok=True)
        ex = submitit.SlurmExecutor(folder=str(self.folder / "%j"), max_num_timeout=3)
        ex.update_parameters(**self.params)
        try:
            sjobs = ex.map_array(_Task(), [[m.spec for m in j.pack] if j.pack else j.spec for j in jobs],
                                 [str(self.runs_root)] * len(jobs),
                                 [[m.attempt for m in j.pack] if j.pack else j.attempt for j in jobs],
                                 [self.threads] * len(jobs))  # fmt: skip
        except Exception as e:  # sbatch refused (bad QOS, account, flag): nothing was submitted
            text = str(e)
            m = re.search(r"sbatch: error: (.*)", text)
            raise UsageError(f"sbatch refused the jobs: {m.group(1).strip() if m else _first_line(text)}; check "
                             "the Slurm flags (--partition, --qos, --account, --sbatch)") from None  # fmt: skip
        tracked = []
        for job, sj in zip(jobs, sjobs):
            on_start(job, Placement("", "", self.name, str(sj.job_id)))  # queued: node not known yet
            tracked.append(_Tracked(job, str(sj.job_id)))
        return tracked

    def run(
        self,
        jobs: list[Job],
        on_start: OnStart,
        on_end: OnEnd,
        on_tick: OnTick = lambda running: None,
        tick_every: float = 1.0,
        stop: threading.Event | None = None,
    ) -> None:
        """Submit ``jobs`` as one array (and retries as further arrays), follow them and the adopted ones
        until each has ended; with ``detach``, return once submitted."""
        live: dict[str, _Tracked] = {}
        for job, jid, started_at in self._adopted:  # runs sharing a task (seeds_per_job) are one pack again
            if jid in live:
                t = live[jid]
                t.job = Job(t.job.spec, t.job.folder, t.job.attempt, pack=[*t.job.members, job])
            elif started_at is None:
                live[jid] = _Tracked(job, jid)
            else:  # running already: its start on this run's monotonic clock
                live[jid] = _Tracked(
                    job, jid, announced=True, started=time.monotonic() - max(0.0, time.time() - started_at)
                )
        self._adopted = []
        queue = list(jobs)
        last_tick = time.monotonic()
        failures = 0
        try:
            while queue or live:
                if stop is not None and stop.is_set():
                    raise KeyboardInterrupt
                if queue:
                    batch, queue = queue, []
                    for t in self._submit(batch, on_start):
                        live[t.job_id] = t
                    if self.detach:
                        return
                t0 = time.monotonic()
                try:
                    states = query_states(live)
                    failures = 0
                except UsageError:  # slurmctld / slurmdbd busy or restarting: look again, conclude nothing
                    failures += 1
                    if failures > MAX_QUERY_FAILURES:
                        raise
                    self._sleep(min(10.0, self.poll * failures), stop)
                    continue
                for jid, t in list(live.items()):
                    again = self._follow(t, states.get(jid), on_start, on_end)
                    if again is not _KEEP:
                        del live[jid]
                        if again is not None:
                            queue.append(again)
                if time.monotonic() - last_tick >= tick_every:
                    on_tick([t.job for t in live.values() if t.announced])
                    last_tick = time.monotonic()
                if not queue:
                    self._sleep(self.poll - (time.monotonic() - t0), stop)
        except KeyboardInterrupt:
            self._interrupt(live, on_end)
            raise

    @staticmethod
    def _sleep(seconds: float, stop: threading.Event | None) -> None:
        end = time.monotonic() + max(0.0, seconds)
        while time.monotonic() < end:
            if stop is not None and stop.is_set():
                return
            time.sleep(min(0.25, end - time.monotonic()) if end > time.monotonic() else 0)

    def _follow(self, t: _Tracked, st: SlurmState | None, on_start: OnStart, on_end: OnEnd) -> Any:
        """Look at one job; returns _KEEP while it is alive, else what ``on_end`` returned (a retry or None)."""
        job = t.job
        nxt = latest_attempt(self.runs_root, job.spec.suite, job.spec.run_id, job.attempt, t.job_id)
        if nxt > job.attempt:  # Slurm requeued the task: the old attempt is over, a new one has started
            on_end(job, Outcome("interrupted", None, f"requeued by Slurm (time limit, pre-emption, node failure or requeue) as "
                                f"attempt {nxt}", time.monotonic() - (t.started or t.submitted),
                                {"requeued": True}))  # fmt: skip
            moved = [Job(m.spec, attempt_dir(self.runs_root, m.spec, attempt=m.attempt + nxt - job.attempt),
                         m.attempt + nxt - job.attempt) for m in job.members]  # fmt: skip
            t.job = job = (
                moved[0] if len(moved) == 1 else Job(moved[0].spec, moved[0].folder, nxt, pack=moved)
            )
            t.announced, t.ended_seen = False, None
        if not t.announced:
            p = read_placement(job.folder)
            if p is not None and p.get("job_id") == t.job_id:
                on_start(job, Placement(p.get("device") or "cpu", p.get("host") or "?", self.name, t.job_id))
                t.announced, t.started = True, time.monotonic()
        if st is None:
            st = SlurmState(UNKNOWN)
            if time.monotonic() - t.submitted < FORGOTTEN_GRACE_S:
                return _KEEP
        elif not st.ended:
            if t.announced and self.timeout and time.monotonic() - t.started > self.timeout:
                scancel([t.job_id])
                return on_end(job, Outcome("failed", None, f"timeout: cancelled after {self.timeout:g}s (--timeout / "
                                           "budget.timeout)", time.monotonic() - t.started))  # fmt: skip
            return _KEEP
        if any(read_result(m.folder) is None for m in job.members) and st.state != UNKNOWN:
            if t.ended_seen is None:
                t.ended_seen = time.monotonic()
            if time.monotonic() - t.ended_seen < (RESULT_GRACE_S if st.state == "COMPLETED" else 2.0):
                return _KEEP  # result.json may be a moment behind Slurm (NFS), or being written after SIGTERM
        if not job.pack:
            return on_end(job, outcome_of(st, job.folder, self.params.get("time")))
        each = [outcome_of(st, m.folder, self.params.get("time")) for m in job.pack]
        return on_end(job, _pack_of(each))

    def _interrupt(self, live: dict[str, _Tracked], on_end: OnEnd) -> None:
        """Ctrl-C / stop: cancel every job of this run, give them a moment to flush, report them interrupted."""
        if not live:
            return
        try:
            scancel(live)
        except UsageError:
            pass
        deadline = time.monotonic() + STOP_GRACE_S
        while live and time.monotonic() < deadline:
            try:
                states = query_states(live)
            except UsageError:
                break
            for jid, t in list(live.items()):
                st = states.get(jid)
                if st is None or st.ended:
                    del live[jid]
                    each = []
                    for m in t.job.members:
                        r = read_result(m.folder) or {}
                        status = "finished" if r.get("status") == "finished" else "interrupted"
                        each.append(Outcome(status, r.get("exit_code"), r.get("error") if status == "finished"
                                            else "interrupted: cancelled in Slurm (Ctrl-C / stop)",
                                            float(r.get("duration_s") or 0.0), r))  # fmt: skip
                    on_end(t.job, _pack_of(each) if t.job.pack else each[0])
            time.sleep(0.5)
        for t in live.values():
            on_end(
                t.job, Outcome("interrupted", None, "interrupted: cancelled in Slurm (Ctrl-C / stop)", 0.0)
            )


_KEEP = object()


def _pack_of(each: list[Outcome]) -> Outcome:
    """One outcome for a packed task from each seed's own (what the coordinator records per run, as
    ``packed.pack_outcome`` gives it for a local or Ray job)."""
    results = [{**o.result, "status": o.status, "exit_code": o.exit_code, "error": o.error,
                "duration_s": o.duration_s} for o in each]  # fmt: skip
    statuses = {o.status for o in each}
    status = (
        "finished" if statuses == {"finished"} else "interrupted" if "interrupted" in statuses else "failed"
    )
    failed = [o for o in each if o.status == "failed"]
    return Outcome(status, 0 if status == "finished" else 1, failed[0].error if failed else None,
                   max(o.duration_s for o in each), {"pack_results": results})  # fmt: skip
