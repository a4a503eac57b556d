"""Two suites that need the same generated dataset, as a user meets it: two `rlbench run` of different suites
on one store and one fresh datasets folder, started together, both complete and the dataset is built once
(the other run waits for the builder and uses its file); a `rlbench datasets build` killed with -9 mid-build
leaves no file that is later taken as complete, and the next run builds it."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from e2e_cli import RLBENCH, rl

from rlbench_cli.datagen.lock import lock_path
from rlbench_cli.datasets.hdf5 import read_meta

pytestmark = pytest.mark.slow

DATASET = "MountainCar-v0-random"  # no behaviour policy to train: the build is the collection alone
BUILT = f"{DATASET}: wrote "  # the builder's own line, once per build


def _suite(tmp_path: Path, name: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(
        f"name: {name}\nseeds: 1\nbudget: {{steps: 40, eval_every: 40, eval_episodes: 1}}\n"
        f"datasets: [{DATASET}]\nalgorithms: [{{name: bc, params: {{batch_size: 32}}}}]\n"
    )
    return p


def _env(datasets: Path) -> dict[str, str]:
    return {**os.environ, "RLBENCH_DATASETS": str(datasets), "MPLBACKEND": "Agg"}


def _start(args: list, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([RLBENCH, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)  # fmt: skip


def _stop(*procs: subprocess.Popen) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_two_suites_needing_one_dataset_build_it_once_and_both_complete(tmp_path):
    datasets, db = tmp_path / "datasets", tmp_path / "rlbench.duckdb"
    env = _env(datasets)
    a = _start(["run", _suite(tmp_path, "alpha"), "--db", db, "--workers", "1"], env)
    b = _start(["run", _suite(tmp_path, "beta"), "--db", db, "--workers", "1"], env)
    try:
        out_a, _ = a.communicate(timeout=600)
        out_b, _ = b.communicate(timeout=600)
    finally:
        _stop(a, b)
    assert a.returncode == 0, out_a
    assert b.returncode == 0, out_b
    assert "alpha: 1 finished, 0 failed" in out_a and "beta: 1 finished, 0 failed" in out_b
    assert (out_a + out_b).count(BUILT) == 1, out_a + out_b  # built once, by one of them
    builder, other = (out_a, out_b) if BUILT in out_a else (out_b, out_a)
    assert f"building dataset {DATASET}" in builder and f"building dataset {DATASET}" not in other
    if "is building it; waiting" in other:  # it came while the builder was at work: waited, then used it
        assert f"dataset {DATASET}: built by the other process, used as it is" in other
    assert [p.name for p in datasets.iterdir()] == [f"{DATASET}.hdf5"]  # no lock or temporary file left
    assert read_meta(datasets / f"{DATASET}.hdf5")[0]["size"] > 0


def test_a_build_killed_mid_way_leaves_no_complete_looking_file_and_the_next_run_builds_it(tmp_path):
    datasets = tmp_path / "datasets"
    env = _env(datasets)
    proc = _start(["datasets", "build", "MountainCar-v0", "--level", "random", "--size", 300_000,
                   "--datasets", datasets], env)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line or line.startswith("collecting "):
                break
        assert line.startswith("collecting "), line
        os.kill(proc.pid, signal.SIGKILL)  # mid-collection, holding the build lock
        proc.wait(timeout=10)
    finally:
        _stop(proc)
    assert not (datasets / f"{DATASET}.hdf5").exists()  # nothing that looks complete
    out = rl("run", _suite(tmp_path, "after"), "--db", tmp_path / "rlbench.duckdb", env=env).stdout
    assert "is building it; waiting" not in out  # the dead builder's lock held nobody up
    assert out.count(BUILT) == 1 and "after: 1 finished, 0 failed" in out, out
    assert not lock_path(datasets / f"{DATASET}.hdf5").exists()
