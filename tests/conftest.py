import os
import tempfile

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
# Ray reads these when it is imported: set before any test imports it, so every Ray node a test starts in this
# process (ray.cluster_utils.Cluster) advertises loopback and the driver never waits on usage stats or auth
for _key, _value in {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                     "RAY_AUTH_MODE": "disabled"}.items():  # fmt: skip
    os.environ.setdefault(_key, _value)
# Two test workers (pytest-xdist) keep both cores busy: torch's OpenMP threads that spin while they wait for a
# thread the other worker has descheduled made a 2-thread PPO run 2-6x slower; passive waiting avoids that.
# Set before any test imports torch, and inherited by every `rlbench` subprocess and engine the tests start.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


_APT_UPDATED: list[bool] = []
# Every apt-get of the tests and of tests/engines/slurm_up.sh holds this lock: under pytest-xdist two workers
# may install at once, and dpkg refuses a second apt-get rather than waiting for the first
APT_LOCK = os.path.join(tempfile.gettempdir(), "rlbench-apt.lock")


def debian_package(packages: str, present, why: str, component: str = "main") -> None:
    """Make sure Debian's ``packages`` (one, or several separated by spaces) are there for a test that needs
    them (``present()`` says whether they are): installed with apt-get when missing and this runs as root (CI
    machines start bare, as the Slurm and chromium tests find them), else the test is skipped, saying what to
    install. A ``component`` other than main (non-free) is added to apt's sources first if it is not there."""
    import fcntl
    import shutil
    import subprocess

    if present():
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        with open(APT_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not present():  # another worker may have installed them while this one waited
                if component != "main" and _add_component(component):
                    _APT_UPDATED.clear()  # a new source: its package lists are fetched by the update below
                if not _APT_UPDATED:
                    subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
                    _APT_UPDATED.append(True)
                subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages.split()],
                               env=env, capture_output=True, timeout=900)  # fmt: skip
    if not present():
        pytest.skip(f"needs Debian's {packages} ({why}): apt-get install {packages}")


def _add_component(component: str) -> bool:
    """Add Debian's ``component`` (e.g. non-free) of this release to apt's sources unless a source has it
    already: whether one was added."""
    import glob
    import re

    for f in glob.glob("/etc/apt/sources.list.d/*") + ["/etc/apt/sources.list"]:
        try:
            text = open(f).read()
        except OSError:
            continue
        if re.search(rf"^(Components:|deb ).*(?<![\w-]){re.escape(component)}(?![\w-])", text, re.M):
            return False
    release = dict(line.strip().split("=", 1) for line in open("/etc/os-release") if "=" in line)
    codename = release.get("VERSION_CODENAME", "").strip('"')
    if not codename:
        return False
    with open(f"/etc/apt/sources.list.d/rlbench-{component}.sources", "w") as out:
        out.write(
            f"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {codename}\nComponents: {component}\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        )
    return True


@pytest.fixture(scope="session")
def mps_control() -> str:
    """NVIDIA's CUDA MPS control program (Debian's nvidia-cuda-mps, in non-free): its daemon starts, answers
    and quits without a GPU (a CUDA client is what needs one)."""
    import shutil

    debian_package("nvidia-cuda-mps", lambda: shutil.which("nvidia-cuda-mps-control") is not None,
                   "the CUDA MPS daemon rlbench run --mps starts and stops", component="non-free")  # fmt: skip
    return shutil.which("nvidia-cuda-mps-control")


@pytest.fixture(scope="session")
def stockfish():
    """Debian's Stockfish, which the Chess and Endgames envs play against."""
    from rlbench_cli.envs.text.chess_env import find_stockfish

    def present() -> bool:
        try:
            find_stockfish()
        except Exception:  # noqa: BLE001 - rlbench's own "not found" error
            return False
        return True

    debian_package("stockfish", present, "the Chess and Endgames envs play against it")


@pytest.fixture(scope="session")
def wamerican():
    """Debian's word list, Wordle's default five-letter words."""
    debian_package("wamerican", lambda: os.path.exists("/usr/share/dict/american-english"),
                   "Wordle's default word list, /usr/share/dict/american-english")  # fmt: skip


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium (headless, for screenshots of the HTML report) and a font for it: its path."""
    import shutil

    debian_package("chromium fonts-dejavu-core", lambda: shutil.which("chromium") is not None,
                   "to render the report")  # fmt: skip
    return shutil.which("chromium")


@pytest.fixture
def suite_dict():
    return {
        "name": "t",
        "seeds": 2,
        "budget": {"steps": 1000, "eval_every": 500, "eval_episodes": 2},
        "envs": ["CartPole-v1"],
        "algorithms": ["random"],
    }


def _make_results_db(db, runs, suite="s", status="finished", config=None, metric="eval/return"):
    """A results database written the way `rlbench run` writes one: suite row, runs, shards, end status.

    ``runs``: ``(algo, env, seed, [(step, value), ...])`` tuples; ``status``: one for all runs or one per run.
    Returns the ``Store``.
    """
    import time
    from pathlib import Path

    from rlbench_cli.sink import ShardSink, list_shards
    from rlbench_cli.store import Store

    store = Store(db, wait=5)
    with store.writer() as con:
        store.register_suite(con, suite, "", config or {}, f"{suite}.yaml")
        for i, (algo, env, seed, points) in enumerate(runs):
            run_id = f"{suite}-{algo}-{env}-{seed}"
            row = {"run_id": run_id, "suite": suite, "algo": algo, "algo_name": algo, "env": env, "seed": seed,
                   "config": {}}  # fmt: skip
            store.add_runs(con, [row])
            store.start_attempt(con, run_id, 1, {"started_at": time.time()})
            folder = Path(db).parent / "shards" / suite / run_id
            sink = ShardSink(folder, background=False)
            for step, value in points:
                sink.log_scalar(step, metric, value)
            sink.close()
            store.ingest_shards(con, run_id, 1, list_shards(folder))
            run_status = status if isinstance(status, str) else status[i]
            store.end_attempt(con, run_id, run_status, {"exit_code": 0 if run_status == "finished" else 1,
                                                        "duration_s": 1.0})  # fmt: skip
    return store


@pytest.fixture(scope="session")
def make_results_db():
    """``make_results_db(db, runs, suite=..., status=..., config=...)``: see ``_make_results_db``."""
    return _make_results_db
