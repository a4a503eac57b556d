"""`rlbench run --mps` (resources.mps): runs sharing a GPU under a CUDA MPS daemon rlbench starts and stops.

The daemon is NVIDIA's real control program (Debian's nvidia-cuda-mps), which starts, answers and quits
without a GPU. The runs are a probe (an entrypoint) that records the environment its worker gave it and whether
the daemon answered there; ``CUDA_VISIBLE_DEVICES=0`` gives the local pool a GPU slot to plan for (the probe
never touches CUDA). The last test, on a machine with an NVIDIA GPU, checks that real ppo runs reach the
daemon's server.
"""

import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import duckdb
import e2e_cli
import pytest
import yaml
from e2e_cli import RLBENCH

from rlbench_cli import mps

PROBE = textwrap.dedent(
    """
    import json, os, subprocess, time
    from pathlib import Path

    import numpy as np


    def ask():  # the daemon serves one client at a time: the other run's probe may be talking to it
        for _ in range(100):
            r = subprocess.run(["nvidia-cuda-mps-control"], input="get_server_list\\n", text=True,
                               capture_output=True)
            if r.returncode == 0 or "Cannot send command" not in r.stderr + r.stdout:
                return r.returncode == 0
            time.sleep(0.02)
        return False


    def train(ctx):
        answers = ask()
        seen = {"pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"), "log": os.environ.get("CUDA_MPS_LOG_DIRECTORY"),
                "answers": answers, "device": ctx.device, "seed": ctx.seed}
        (ctx.run_dir / "mps.json").write_text(json.dumps(seen))
        hold = ctx.params.get("hold")
        while hold and not Path(hold).exists():  # until the test has killed the coordinator
            time.sleep(0.05)
        ctx.finish(ctx.steps, lambda obs: np.zeros(len(obs), dtype=np.int64))
    """
)


def write_suite(tmp_path: Path, name: str = "mpsprobe", **resources) -> Path:
    (tmp_path / "mpsprobe.py").write_text(PROBE)
    params = {"hold": str(tmp_path / "release")}
    suite = {"name": name, "seeds": 2, "budget": {"steps": 10, "eval_episodes": 1}, "envs": ["CartPole-v1"],
             "algorithms": [{"name": "probe", "entrypoint": "mpsprobe:train", "params": params}],
             "resources": {"gpus_per_job": 0.5, **resources}}  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
               CUDA_VISIBLE_DEVICES="0")  # fmt: skip
    env.update(extra)
    return env


def rl(tmp_path: Path, *args, **env: str) -> subprocess.CompletedProcess:
    return e2e_cli.rl(*args, check=False, timeout=300, env=env_for(tmp_path, **env))


def probes(tmp_path: Path) -> list[dict]:
    return sorted((json.loads(p.read_text()) for p in tmp_path.rglob("mps.json")), key=lambda s: s["seed"])


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.duckdb"
    yield path
    for suite in ("mpsprobe", "mpsppo"):
        if shutil.which(mps.CONTROL):
            mps.MpsDaemon(mps.store_folder(path, suite)).stop()
        shutil.rmtree(mps.store_folder(path, suite), ignore_errors=True)


def test_runs_sharing_a_gpu_run_under_the_stores_daemon_which_quits_after_them(mps_control, tmp_path, db):
    (tmp_path / "release").touch()
    r = rl(tmp_path, "run", write_suite(tmp_path, mps=True), "--db", db)
    assert r.returncode == 0, r.stdout + r.stderr
    folder = mps.store_folder(db, "mpsprobe")
    assert (
        f"2 local workers on cuda:0, 1 torch thread(s) each, under CUDA MPS (a daemon started in {folder})"
        in r.stdout
    )
    seen = probes(tmp_path)
    assert [s["seed"] for s in seen] == [0, 1]
    for s in seen:  # each run's worker pointed at the store's daemon, which answered while it ran
        assert s == {"pipe": str(folder / "pipe"), "log": str(folder / "log"), "answers": True, "device": "cuda:0",
                     "seed": s["seed"]}  # fmt: skip
    assert not mps.MpsDaemon(folder).running()  # told to quit once the workers were gone
    assert "Cmd:quit" in (folder / "log" / "control.log").read_text()


def test_a_daemon_a_killed_coordinator_left_is_used_and_stopped_by_the_next_run(mps_control, tmp_path, db):
    suite = write_suite(tmp_path, mps=True)
    proc = subprocess.Popen([RLBENCH, "run", str(suite), "--db", str(db)], env=env_for(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while len(probes(tmp_path)) < 2:  # both runs are inside training, holding
            assert time.monotonic() < deadline and proc.poll() is None, "the runs did not start"
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    left = mps.MpsDaemon(mps.store_folder(db, "mpsprobe"))
    assert left.running()  # kill -9: nobody told it to quit
    (tmp_path / "release").touch()
    for p in tmp_path.rglob("mps.json"):
        p.unlink()
    r = rl(tmp_path, "run", suite, "--db", db)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 finished" in r.stdout
    assert f"under CUDA MPS (a daemon left by an earlier run in {left.folder})" in r.stdout
    assert [(s["pipe"], s["answers"]) for s in probes(tmp_path)] == [(str(left.pipe), True)] * 2
    assert not left.running()  # stopped at the end: nothing left behind


def test_a_run_without_mps_stops_the_daemon_a_killed_coordinator_left(mps_control, tmp_path, db):
    """What a coordinator killed with -9 leaves (the test above): the store's daemon running in its folder."""
    left = mps.store_daemon(db, "mpsprobe")
    assert left.start() is True
    (tmp_path / "release").touch()
    r = rl(tmp_path, "run", write_suite(tmp_path, mps=True), "--db", db, "--no-mps")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MPS" not in r.stdout and [s["pipe"] for s in probes(tmp_path)] == [None, None]
    assert not left.running()


def test_asking_for_mps_where_no_run_uses_a_gpu_starts_no_daemon(mps_control, tmp_path, db):
    (tmp_path / "release").touch()
    r = rl(tmp_path, "run", write_suite(tmp_path, mps=True), "--db", db, CUDA_VISIBLE_DEVICES="")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "local workers on cpu, 1 torch thread(s) each, no CUDA MPS (no run uses a GPU here)" in r.stdout
    assert [s["pipe"] for s in probes(tmp_path)] == [None, None]
    assert not mps.store_folder(db, "mpsprobe").exists()


def test_a_daemon_the_user_runs_is_used_and_left_running(mps_control, tmp_path, db):
    (tmp_path / "release").touch()
    theirs = mps.MpsDaemon(tmp_path / "theirs")
    theirs.start()
    try:
        r = rl(
            tmp_path,
            "run",
            write_suite(tmp_path),
            "--db",
            db,
            "--mps",
            CUDA_MPS_PIPE_DIRECTORY=str(theirs.pipe),
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"under the CUDA MPS daemon already running ({theirs.pipe})" in r.stdout
        assert [(s["pipe"], s["answers"]) for s in probes(tmp_path)] == [(str(theirs.pipe), True)] * 2
        assert theirs.running()  # not rlbench's to stop
        assert not mps.store_folder(db, "mpsprobe").exists()
    finally:
        theirs.stop()


def _nothing_recorded(db: Path) -> bool:
    if not db.exists():
        return True
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    except duckdb.CatalogException:
        return True
    finally:
        con.close()


@pytest.mark.parametrize(
    "args, path, says",
    [
        (["--mps"], "bin-only", "resources.mps / --mps: nvidia-cuda-mps-control is not on PATH (it comes with NVIDIA's "
                                "driver utilities, e.g. Debian's nvidia-cuda-mps); install it, or run without MPS (--no-mps)"),
        (["--mps", "--executor", "slurm"], None, "resources.mps / --mps: rlbench starts CUDA MPS for --executor local "
                                                 "only; on slurm nodes MPS is the cluster's to run"),
    ],
    ids=["no-control-program", "not-local"],
)  # fmt: skip
def test_bad_mps_input_is_one_line_exit_2_and_records_nothing(tmp_path, db, args, path, says):
    extra = {"PATH": str(tmp_path / "bin-only")} if path else {}
    r = rl(tmp_path, "run", write_suite(tmp_path), "--db", db, *args, **extra)
    assert r.returncode == 2, r.stdout + r.stderr
    assert says in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert _nothing_recorded(db)


def _has_gpu() -> bool:
    from rlbench_cli.executors.base import detect_gpus

    return shutil.which("nvidia-smi") is not None and detect_gpus() > 0


@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU")
def test_ppo_runs_sharing_a_real_gpu_are_clients_of_the_daemons_server(mps_control, tmp_path, db):
    suite = {"name": "mpsppo", "seeds": 2, "budget": {"steps": 2048, "eval_episodes": 2}, "envs": ["CartPole-v1"],
             "algorithms": [{"name": "ppo", "params": {"num_envs": 4, "num_steps": 128}}],
             "resources": {"gpus_per_job": 0.5, "mps": True, "threads_per_job": 1}}  # fmt: skip
    path = tmp_path / "mpsppo.yaml"
    path.write_text(yaml.safe_dump(suite))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    r = subprocess.run([RLBENCH, "run", str(path), "--db", str(db)], capture_output=True, text=True,
                       timeout=600, env=env)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 finished" in r.stdout and "under CUDA MPS" in r.stdout
    log = (mps.store_folder(db, "mpsppo") / "log" / "control.log").read_text()
    assert "Starting new server" in log, log[-2000:]  # a CUDA client connected: the server started for it
