"""CUDA MPS for runs that share a GPU (``resources.mps`` / ``rlbench run --mps``, the local executor).

Runs packed on one GPU (``gpus_per_job`` < 1) each hold a CUDA context of their own, and the GPU time-slices
between contexts: their kernels take turns. Under NVIDIA's Multi-Process Service the runs' kernels go to one
server and run side by side (measured: ``benchmarks/gpu_packing.py``, docs/benchmarks.md). ``MpsDaemon`` is
one store's control daemon (``nvidia-cuda-mps-control -d``), its pipe and log folders in a folder named after the store
and the suite, so that the workers of that suite's ``rlbench run`` on that store connect to it and nothing
else does (a coordinator of another suite on the same store has its own). ``rlbench run`` starts it before its
workers and tells it to quit after them; a coordinator killed with -9 leaves it running, and the next run of
that suite on that store finds it by the same folder, uses it and stops it (or just stops it, when that run
does not ask for MPS). A daemon the user already runs (``CUDA_MPS_PIPE_DIRECTORY``, or CUDA's default
``/tmp/nvidia-mps``) is used as it is, neither started nor stopped.

No torch here: the control program is driven through its standard input, as NVIDIA documents it, and a
daemon is known to run by the POSIX lock it holds on its pipe folder's ``control_lock`` (it answers one
client at a time, so a query can fail while it runs).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .errors import UsageError

__all__ = [
    "CONTROL",
    "DEFAULT_PIPE",
    "MpsDaemon",
    "answers",
    "require_control",
    "stop_left_behind",
    "store_daemon",
    "store_folder",
    "user_daemon",
]

CONTROL = "nvidia-cuda-mps-control"
DEFAULT_PIPE = Path("/tmp/nvidia-mps")  # where CUDA clients look when CUDA_MPS_PIPE_DIRECTORY is not set
WAIT_S = 10.0  # for a daemon to answer after -d, or to be gone after quit


def require_control() -> str:
    """The control program's path; a one-line UsageError when it is not on PATH."""
    path = shutil.which(CONTROL)
    if path is None:
        raise UsageError(f"resources.mps / --mps: {CONTROL} is not on PATH (it comes with NVIDIA's driver "
                         f"utilities, e.g. Debian's nvidia-cuda-mps); install it, or run without MPS (--no-mps)")  # fmt: skip
    return path


def _run(args: list[str], env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess:
    """The control program, run to its end; one that hangs (a wedged daemon) ends as exit code 124."""
    try:
        return subprocess.run(args, input=stdin, env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"{CONTROL} did not answer within 30 s")


def _ask(control: str, pipe: Path, command: str) -> subprocess.CompletedProcess:
    return _run([control], {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(pipe)}, command + "\n")


GONE = "Cannot find MPS control daemon"  # what the control program says where no daemon runs


def _locked(path: Path) -> bool:
    """Whether another process holds a POSIX lock on ``path`` (a running control daemon holds one on its
    ``control_lock``); False also where the file cannot be opened (the daemon is then asked instead)."""
    try:
        f = open(path, "rb")
    except OSError:
        return False
    with f:
        try:
            fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # EAGAIN / EACCES: held
            return True
    return False


def _tell(control: str, pipe: Path, command: str, patience: float = 2.0) -> subprocess.CompletedProcess:
    """``command`` to the daemon at ``pipe``, said again for up to ``patience`` seconds while the daemon is
    busy with another client (any failure but "no daemon")."""
    deadline = time.monotonic() + patience
    while True:
        r = _ask(control, pipe, command)
        if r.returncode == 0 or GONE in r.stderr + r.stdout or time.monotonic() > deadline:
            return r
        time.sleep(0.02)


def answers(pipe: Path, control: str | None = None) -> bool:
    """Whether a control daemon runs at ``pipe``: it holds its lock, else it answers ``get_server_list``.
    The lock is asked first because the daemon talks to one client at a time: a query that meets another
    client's (a run asking at the same moment) fails, so a failed query other than "no daemon" is retried
    for up to 2 s."""
    if not (pipe / "control").exists():
        return False
    if _locked(pipe / "control_lock"):
        return True
    return _tell(control or require_control(), pipe, "get_server_list").returncode == 0


def user_daemon() -> Path | None:
    """The pipe folder of an MPS daemon the user runs, if one answers: ``CUDA_MPS_PIPE_DIRECTORY``, else CUDA's
    default. Workers inherit the environment, so they reach it without rlbench doing anything."""
    pipe = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or DEFAULT_PIPE)
    return pipe if answers(pipe) else None


class MpsDaemon:
    """A control daemon with its pipe and log folders in ``folder`` (``start``, ``stop``, ``env`` for the
    processes that are to use it)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.pipe, self.log = folder / "pipe", folder / "log"
        self.control = require_control()

    @property
    def env(self) -> dict[str, str]:
        """What points a CUDA process at this daemon."""
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe), "CUDA_MPS_LOG_DIRECTORY": str(self.log)}

    def running(self) -> bool:
        return answers(self.pipe, self.control)

    def start(self) -> bool:
        """Start the daemon, unless it already runs (left by a killed coordinator): whether it was started
        now. Raises UsageError, with the daemon's own words, if it does not come up."""
        if self.running():
            return False
        for d in (self.pipe, self.log):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        r = _run([self.control, "-d"], {**os.environ, **self.env})
        if r.returncode != 0 or not self._until(True, WAIT_S):
            raise UsageError(f"resources.mps / --mps: '{CONTROL} -d' did not start a daemon in {self.pipe} "
                             f"({self._why(r)}); run without MPS (--no-mps)")  # fmt: skip
        return True

    def _why(self, r: subprocess.CompletedProcess) -> str:
        said = (r.stderr or r.stdout).strip().splitlines()
        if not said:
            logged = self.log / "control.log"
            said = logged.read_text(errors="replace").strip().splitlines() if logged.exists() else []
        return said[-1] if said else f"exit code {r.returncode}"

    def stop(self) -> bool:
        """Tell the daemon (and its server) to quit, and wait for it to go: whether it is gone. The control
        program's exit status does not say whether the daemon took the command (it serves one client at a
        time, and may turn ``quit`` away), so ``quit`` is said again each second until the lock is free."""
        deadline = time.monotonic() + WAIT_S
        while self.running():
            if time.monotonic() > deadline:
                return False
            _ask(self.control, self.pipe, "quit")
            self._until(False, 1.0)
        return True

    def _until(self, running: bool, seconds: float) -> bool:
        """Wait up to ``seconds`` for ``running()`` to be ``running``: whether it is."""
        deadline = time.monotonic() + seconds
        while self.running() != running:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


def store_folder(db: Path, suite: str) -> Path:
    """The folder of the daemon of ``suite``'s runs on ``db``: short (a Unix socket's path has at most 107
    bytes), per user, store and suite (the holder of the suite's run lock owns it), the same every time so
    that a daemon left by a killed coordinator is found."""
    key = hashlib.sha1(f"{Path(db).resolve()}\0{suite}".encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"rlbench-mps-{os.getuid()}-{key}"


def store_daemon(db: Path, suite: str) -> MpsDaemon:
    """The daemon of ``suite``'s runs on ``db`` (not started)."""
    return MpsDaemon(store_folder(db, suite))


def stop_left_behind(db: Path, suite: str) -> bool:
    """Stop the daemon of ``suite``'s runs on ``db`` if a killed coordinator left it running (a run without
    MPS): whether one was."""
    folder = store_folder(db, suite)
    if not (folder / "pipe" / "control").exists() or shutil.which(CONTROL) is None:
        return False
    daemon = MpsDaemon(folder)
    return daemon.running() and daemon.stop()
