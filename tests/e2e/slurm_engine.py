"""A real single-node Slurm for the tests (slurmctld + slurmd + slurmdbd accounting + MariaDB, fake GPUs),
brought up once per session by ``tests/engines/slurm_up.sh`` and down at the end.

``tests/e2e/conftest.py`` makes the ``slurm`` fixture every e2e module's (one cluster per session). It needs
root (the script installs Debian's packages when they are missing and starts the daemons); without root or
apt-get it skips, saying why. It exports
SLURM_CONF, so every ``rlbench`` subprocess talks to this cluster. Its ports (slurmctld, +1 slurmd, +2
slurmdbd, +3 MariaDB) are the first four free ones from 6917 on; RLBENCH_TEST_SLURM_PORT fixes the first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ENGINES = Path(__file__).resolve().parent.parent / "engines"
UP_TIMEOUT_S = 900  # a first run installs slurm + mariadb from Debian (about a minute on a fast mirror)


@dataclass(frozen=True)
class SlurmCluster:
    base: Path
    conf: Path

    def cmd(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """A Slurm command (squeue, sacct, scontrol, ...) against this cluster."""
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "SLURM_CONF": str(self.conf)})  # fmt: skip

    def requeue(self, *job_ids: str, hold_timeout: float = 20) -> None:
        """``scontrol requeue`` the jobs (what a pre-emption does), then lift Slurm's requeue hold: a requeued
        job waits until ``cred_expire + 1`` s (11 s here) before it may start again; the tests need the
        requeue, not the wait. A job not seen pending in ``hold_timeout`` s keeps its hold."""
        for job in job_ids:
            r = self.cmd("scontrol", "requeue", job)
            assert r.returncode == 0, r.stderr
        self.lift_requeue_hold(*job_ids, hold_timeout=hold_timeout)

    def warn_time_limit(self, *job_ids: str, hold_timeout: float = 60) -> None:
        """Send the jobs' steps SIGUSR2, as Slurm does ahead of the time limit (submitit asks for
        ``--signal=USR2@90``; Slurm may send it up to a minute early, so a real limit is too coarse for a
        test), then lift the hold of the requeue the task asks for."""
        for job in job_ids:
            r = self.cmd("scancel", "--signal=USR2", job)
            assert r.returncode == 0, r.stderr
        self.lift_requeue_hold(*job_ids, hold_timeout=hold_timeout)

    def lift_requeue_hold(self, *job_ids: str, hold_timeout: float = 20) -> None:
        left = set(job_ids)
        deadline = time.monotonic() + hold_timeout
        while left and time.monotonic() < deadline:
            for job in sorted(left):
                state = self.cmd("squeue", "-h", "-j", job, "-o", "%T|%r").stdout.strip()
                if state.startswith("PENDING"):
                    self.cmd("scontrol", "update", f"JobId={job}", "StartTime=now")
                    left.discard(job)
            time.sleep(0.2)


def _first_port() -> int:
    """Where this test worker's search for Slurm's ports starts: 6917, 40 ports further on for each
    pytest-xdist worker (gw0, gw1, ...), so that two workers starting Slurm at the same instant do not both
    find the same ports free."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return 6917 + 40 * (int(worker) if worker.isdigit() else 0)


def _free_ports(first: int | None = None, tries: int = 250) -> int:
    """The first of four consecutive ports, from ``first`` (default ``_first_port()``) on, that nothing on
    127.0.0.1 holds now: another test's server, or another test worker's own Slurm, may hold them."""
    first = _first_port() if first is None else first
    for base in range(first, first + 4 * tries, 4):
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + 4):
                    s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no four free consecutive ports in {first}-{first + 4 * tries}")


def _script_env(base: Path) -> dict[str, str]:
    port = os.environ.get("RLBENCH_TEST_SLURM_PORT") or str(_free_ports())
    return {**os.environ, "SLURM_BASE": str(base), "WITH_DBD": "1", "FAKE_GPUS": "2", "SLURM_CPUS": "8",
            "SLURM_PORT": port}  # fmt: skip


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    if os.geteuid() != 0:
        pytest.skip(
            "the real Slurm engine needs root: it installs Debian's slurm packages and starts daemons"
        )
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        pytest.skip("no slurmctld installed and no apt-get to install it (Debian/Ubuntu needed)")
    base = Path("/tmp") / f"rlbench-test-slurm-{os.getpid()}"  # short: sockets have a path length limit
    env = _script_env(base)
    try:
        r = subprocess.run(["bash", str(ENGINES / "slurm_up.sh")], env=env, capture_output=True, text=True,
                           timeout=UP_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        subprocess.run(["bash", str(ENGINES / "slurm_down.sh")], env=env, timeout=120)
        pytest.fail(f"slurm_up.sh did not finish in {UP_TIMEOUT_S}s")
    if r.returncode != 0:
        subprocess.run(["bash", str(ENGINES / "slurm_down.sh")], env=env, timeout=120)
        pytest.fail(f"slurm_up.sh failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(base / "slurm.conf")
    try:
        yield SlurmCluster(base, base / "slurm.conf")
    finally:
        try:  # a controller that no longer answers is stopped by slurm_down.sh all the same
            subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=10)
        except subprocess.TimeoutExpired:
            pass
        subprocess.run(["bash", str(ENGINES / "slurm_down.sh")], env=env, capture_output=True, timeout=180)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        shutil.rmtree(base, ignore_errors=True)
