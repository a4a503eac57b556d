"""``rlbench run --executor ray`` against a real Ray head on loopback (``ray_engine.ray_head``), end to end
through the real ``rlbench`` command. The faults, ``--retries``, ``--only-failed`` and Ctrl-C tests shared with
the local executor are parametrised over both in test_job_faults.py and test_smoke.py."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH, rl

pytestmark = pytest.mark.slow

TINY = (
    "name: tiny\nseeds: 2\nbudget: {steps: 600, eval_every: 300, eval_episodes: 1}\n"
    "envs: [CartPole-v1]\nalgorithms: [random]\n"
)

PACKED = textwrap.dedent(
    """
    import os, time

    import numpy as np


    def packed(ctx):
        # a barrier: every run waits until all 8 are running at once (or 60 s pass)
        barrier = os.environ["RLBENCH_TEST_BARRIER"]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [x for x in visible.split(",") if x.strip()]
        with open(os.path.join(barrier, str(ctx.seed)), "w") as fh:
            fh.write(visible)
        deadline = time.time() + 60
        while len(os.listdir(barrier)) < 8 and time.time() < deadline:
            time.sleep(0.05)
        results = os.path.realpath(os.environ["RLBENCH_TEST_RESULTS"])
        shared = os.path.realpath(str(ctx.run_dir)).startswith(results)
        ctx.sink.log(0, **{"test/n_visible": len(ids), "test/gpu": float(ids[0]) if ids else -1.0,
                           "test/at_once": len(os.listdir(barrier)), "test/shared_folder": float(shared)})
        ctx.finish(ctx.steps, lambda obs: np.zeros(len(obs), dtype=int))
    """
)


def _rows(db, sql):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_suite_on_ray_stores_the_same_metrics_as_local_and_a_rerun_skips_it(tmp_path, ray_head):  # noqa: F811
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    local_db, ray_db = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    rl("run", suite, "--db", local_db, "--workers", "2", timeout=180)
    # --address auto finds the cluster RAY_ADDRESS names, and says which it found
    r = rl("run", suite, "--db", ray_db, "--executor", "ray", "--address", "auto", timeout=180,
           env={**os.environ, "RAY_ADDRESS": ray_head.address})  # fmt: skip
    assert f"Ray actors on the Ray cluster at auto ({ray_head.address})" in r.stdout, r.stdout
    same = ("SELECT run_id, step, name, value FROM metrics WHERE name NOT LIKE 'sys/%' "
            "ORDER BY run_id, name, step, value")  # fmt: skip
    local_rows, ray_rows = _rows(local_db, same), _rows(ray_db, same)
    assert len(ray_rows) > 10 and ray_rows == local_rows
    runs = _rows(ray_db, "SELECT status, attempts, executor, job_id, host, device FROM runs")
    assert len(runs) == 2
    for status, attempts, executor, job_id, host, device in runs:
        assert (status, attempts, executor, device) == ("finished", 1, "ray", "cpu")
        assert job_id and "@" in job_id and host

    out = json.loads(rl("run", suite, "--db", ray_db, "--executor", "ray", "--address", ray_head.address,
                        "--json", timeout=120).stdout)  # fmt: skip
    assert (out["skipped"], out["finished"]) == (2, 0)
    assert _rows(ray_db, "SELECT sum(attempts) FROM runs") == [(2,)]


def test_fractional_gpus_pack_eight_runs_on_two_gpus_and_shards_travel_without_a_shared_folder(
    tmp_path,
    ray_head,  # noqa: F811
):
    (tmp_path / "packing.py").write_text(PACKED)
    (tmp_path / "packed.yaml").write_text(
        "name: packed\nseeds: 8\nbudget: {steps: 200, eval_every: 200, eval_episodes: 1}\n"
        "envs: [CartPole-v1]\nalgorithms: [{name: packed, entrypoint: 'packing:packed'}]\n"
        "resources: {gpus_per_job: 0.25, cpus_per_job: 0.25, executor: ray}\n"
    )
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    results = tmp_path / "results"
    env = {**os.environ, "RLBENCH_TEST_BARRIER": str(barrier), "RLBENCH_TEST_RESULTS": str(results)}
    cmd = ["rlbench", "run", "packed.yaml", "--db", str(results / "db.duckdb"), "--address", ray_head.address]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "8 Ray actors" in r.stdout
    got = dict(_rows(results / "db.duckdb", "SELECT name, list(value ORDER BY value) FROM metrics "
                                            "WHERE name LIKE 'test/%' GROUP BY name"))  # fmt: skip
    assert got["test/n_visible"] == [1.0] * 8  # each run sees exactly one GPU
    assert got["test/gpu"] == [0.0] * 4 + [1.0] * 4  # four runs on each of the two GPUs
    assert got["test/at_once"] == [8.0] * 8  # all eight ran at once
    assert got["test/shared_folder"] == [0.0] * 8  # the actors never wrote into the coordinator's folder
    folders = sorted((results / "runs" / "packed").glob("*/attempt-1"))
    assert len(folders) == 8
    for f in folders:  # ...and yet everything the runs wrote is here, on the coordinator's side
        assert list((f / "metrics").glob("*.parquet")) and (f / "result.json").exists()
        assert json.loads((f / "result.json").read_text())["status"] == "finished"
    assert ray_head.wait_all_free(), "actors outlived the run"


def test_bad_input_is_one_line_exit_2_and_changes_nothing(tmp_path, ray_head, make_results_db):  # noqa: F811
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    db = tmp_path / "db.duckdb"
    r = rl("run", suite, "--db", db, "--executor", "ray", "--address", "127.0.0.1:1", check=False, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "127.0.0.1:1" in r.stderr and "ray start --head" in r.stderr
    assert not db.exists()

    make_results_db(
        db, [("random", "CartPole-v1", 0, [(0, 10.0), (300, 20.0)])], suite="tiny"
    )  # a store in use
    before = _rows(db, "SELECT run_id, status, attempts FROM runs ORDER BY run_id")
    for field, value in (("gpus_per_job", 4), ("cpus_per_job", 16)):
        big = tmp_path / f"big_{field}.yaml"
        big.write_text(
            TINY.replace("name: tiny", f"name: big{field[0]}") + f"resources: {{{field}: {value}}}\n"
        )
        r = rl(
            "run",
            big,
            "--db",
            db,
            "--executor",
            "ray",
            "--address",
            ray_head.address,
            check=False,
            timeout=120,
        )
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        line = r.stderr.strip()
        assert "\n" not in line and f"resources.{field}" in line and "2 CPUs, 2 GPUs" in line, line
        assert _rows(db, f"SELECT count(*) FROM runs WHERE suite = 'big{field[0]}'") == [(0,)]
    assert _rows(db, "SELECT run_id, status, attempts FROM runs ORDER BY run_id") == before


def test_ray_not_installed_is_one_line_with_the_install_command(tmp_path):
    """A Python where `import ray` fails (a package named ray that raises ImportError, first on the path)."""
    blocker = tmp_path / "blocker" / "ray"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    db = tmp_path / "db.duckdb"
    path = os.pathsep.join([str(blocker.parent), os.environ.get("PYTHONPATH", "")])
    main = "import sys; from rlbench_cli.cli.app import main; sys.argv[0] = 'rlbench'; main()"
    r = subprocess.run([sys.executable, "-c", main, "run", str(suite), "--db", str(db), "--executor", "ray"],
                       env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == (
        "rlbench: error: --executor ray needs Ray, which is not installed here; install it: "
        'pip install "rlbench-cli[ray]"'
    )
    assert not db.exists()


@pytest.mark.engine  # the Ray instance `rlbench run` starts
def test_a_local_ray_instance_started_by_run_stops_with_it_leaving_no_process(tmp_path):
    """No --address: `rlbench run` starts Ray on this machine and stops it at the end (its autoscaler monitor
    killed outright, the rest through ray.shutdown): none of that instance's processes outlives the command.
    Its processes are told apart from any other Ray on the machine by the RAY_TMPDIR they inherit (a short one:
    Ray's socket paths must fit in 107 characters)."""
    import shutil
    import tempfile
    import time

    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    ray_tmp = tempfile.mkdtemp(prefix="rlr", dir="/tmp")
    try:
        cmd = [
            RLBENCH,
            "run",
            str(suite),
            "--db",
            str(tmp_path / "db.duckdb"),
            "--executor",
            "ray",
            "--workers",
            "1",
        ]
        r = subprocess.run(
            cmd, capture_output=True, text=True, timeout=180, env={**os.environ, "RAY_TMPDIR": ray_tmp}
        )
        assert r.returncode == 0 and "2 finished, 0 failed" in r.stdout, r.stdout + r.stderr
        assert list(Path(ray_tmp).glob("ray/session_*")), "the local instance did not use RAY_TMPDIR"

        def ours() -> list[str]:
            """Processes whose environment has this RAY_TMPDIR: every one the command started, also those
            that renamed themselves (ray::IDLE, ray::DashboardAgent, ...)."""
            found = []
            for proc in Path("/proc").glob("[0-9]*"):
                try:
                    if f"RAY_TMPDIR={ray_tmp}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                        found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
                except OSError:  # gone meanwhile, or not ours to read
                    pass
            return found

        deadline = time.monotonic() + 10  # a process SIGKILLed a moment ago may still be reaped
        while ours() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not ours(), ours()
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_rlbench_does_not_import_ray_until_asked():
    code = "import sys, rlbench_cli.cli.app, rlbench_cli.executors, rlbench_cli.coordinator; print('ray' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stderr


def test_adaptive_seeds_run_on_ray_to_the_same_decisions_as_local(tmp_path, ray_head):  # noqa: F811
    suite = tmp_path / "ada.yaml"
    suite.write_text("name: ada\nbudget: {steps: 300, eval_every: 300, eval_episodes: 1}\n"
                     "envs: [CartPole-v1]\nalgorithms: [random, {name: random, label: same}]\n")  # fmt: skip
    flags = ["--adaptive", "--batch", "2", "--max-batches", "2", "--permutations", "200", "--json"]
    on_ray = json.loads(rl("run", suite, "--db", tmp_path / "r" / "ray.duckdb", "--executor", "ray", "--address",
                           ray_head.address, *flags, timeout=300).stdout.strip().splitlines()[-1])  # fmt: skip
    local = json.loads(rl("run", suite, "--db", tmp_path / "l" / "local.duckdb", *flags, timeout=300)
                       .stdout.strip().splitlines()[-1])  # fmt: skip
    assert on_ray["decisions"] == local["decisions"] and on_ray["runs"] == 8 and on_ray["batches_run"] == 2
    assert {e for (e,) in _rows(tmp_path / "r" / "ray.duckdb", "SELECT executor FROM runs")} == {"ray"}


_LEAN_START_PROBE = """
from rlbench_cli.executors.ray import RayExecutor
from rlbench_cli.executors.ray.cluster import import_ray, kill_monitor
ray = import_ray()
hooks = (ray._private.services.get_node, ray._private.utils.get_dashboard_dependency_error,
         ray._private.node.Node.start_api_server)
executor = RayExecutor(None, 1, 1, 0, 1, local_cpus=1)
executor._connect()  # starts the local instance as `rlbench run` does
node = ray._private.worker._global_node
print(sorted(node.all_processes))
raylet = node.all_processes["raylet"][0].process.pid
args = open(f"/proc/{raylet}/cmdline", "rb").read().split(b"\\0")
agents = [b"--minimal" in a for a in args if a.startswith(b"--dashboard_agent_command=")]
print(agents)
print(hooks == (ray._private.services.get_node, ray._private.utils.get_dashboard_dependency_error,
                ray._private.node.Node.start_api_server))
print(executor._actor_cls._default_options.get("enable_task_events"))
print(ray.get(ray.remote(lambda: 41 + 1).remote()))
kill_monitor(ray)
ray.shutdown()
"""


@pytest.mark.engine  # the Ray instance `rlbench run` starts
@pytest.mark.parametrize("keep", [False, True])
def test_rlbenchs_own_ray_instance_starts_lean_unless_asked(tmp_path, keep):
    """The instance `rlbench run` starts for itself runs tasks without Ray's API-server ("dashboard") process
    and with its agents in minimal mode (both wait on every start), Ray's own functions are back after the
    start, and the actors' calls record no task events; RLBENCH_RAY_API_SERVER=1 keeps Ray's own start."""
    import tempfile

    ray_tmp = tempfile.mkdtemp(prefix="rlr", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RLBENCH_RAY_API_SERVER": "1" if keep else "0"}
    try:
        r = subprocess.run([sys.executable, "-c", _LEAN_START_PROBE], capture_output=True, text=True, timeout=120,
                           env=env, cwd=tmp_path)  # fmt: skip
    finally:
        import shutil

        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-2000:]
    processes, agents, restored, task_events, answer = r.stdout.strip().splitlines()[-5:]
    assert answer == "42" and restored == "True"
    assert task_events == str(keep)  # the actors' calls record task events only on Ray's own start
    assert "gcs_server" in processes and "raylet" in processes
    assert ("'dashboard'" in processes) is keep, processes
    assert keep or agents == "[True]", agents  # Ray's own start: minimal or not, as the install allows


SALVAGE = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import ray

    from rlbench_cli.executors.base import Job
    from rlbench_cli.executors.ray.transfer import salvage

    address, here, there = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    ray.init(address=address, log_to_driver=False, include_dashboard=False)
    node = ray.get_runtime_context().get_node_id()
    gone = "ab" * 28  # a node id no node of the cluster has
    kept, lost = Job(None, here / "kept" / "attempt-1", 1), Job(None, here / "lost" / "attempt-1", 1)
    salvage(ray, [(kept, node, [str(there / "kept" / "attempt-1")]), (lost, gone, [str(there / "lost" / "attempt-1")])],
            timeout=60)
    print("salvaged")
    """
)


def test_what_a_dead_actor_left_comes_back_or_its_log_says_where_it_stayed(tmp_path, ray_head):  # noqa: F811
    """The coordinator's salvage of a dead actor's last files, against a real head: from a node that answers they
    come to the attempt folder here (and leave the node); from one that does not, the attempt's output.log here
    says which node and folder still hold them (a run interrupted or failed that way is not silently short)."""
    here, there = tmp_path / "coordinator", tmp_path / "node"
    for name in ("kept", "lost"):
        (there / name / "attempt-1" / "metrics").mkdir(parents=True)
        (there / name / "attempt-1" / "metrics" / "00001.parquet").write_bytes(
            b"PAR1 rows of " + name.encode()
        )
        (there / name / "attempt-1" / "output.log").write_text(f"{name}: asked to stop, dying while saving\n")
    (tmp_path / "salvage.py").write_text(SALVAGE)
    r = subprocess.run([sys.executable, str(tmp_path / "salvage.py"), ray_head.address, str(here), str(there)],
                       capture_output=True, text=True, timeout=180, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})  # fmt: skip
    assert r.returncode == 0 and "salvaged" in r.stdout, r.stderr[-3000:]
    kept = here / "kept" / "attempt-1"
    assert (kept / "metrics" / "00001.parquet").read_bytes() == b"PAR1 rows of kept"
    assert (kept / "output.log").read_text() == "kept: asked to stop, dying while saving\n"
    assert not (there / "kept").exists()  # taken from the node
    said = (here / "lost" / "attempt-1" / "output.log").read_text()
    assert f"could not be fetched from Ray node {'ab' * 28}" in said, said
    assert str(there / "lost" / "attempt-1") in said and said.count("\n[rlbench] ") == 1, said
    assert (there / "lost" / "attempt-1" / "metrics" / "00001.parquet").is_file()  # left where it was
