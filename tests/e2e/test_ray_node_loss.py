"""A Ray node lost mid-run, for real: a multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``,
what Ray's own test suite uses: one real GCS and several real raylets, each a node of its own), the real
`rlbench run --executor ray` pointed at it, and the node running the runs killed mid-training. The runs come
back as new attempts with the cause recorded, are not counted against --retries (0 here), go on from their
last checkpoint on the surviving node and finish, still listing the first attempt's episode videos (sent to
the survivor with the checkpoint); also when both seeds share one packed job (``resources.seeds_per_job``),
which resumes them at one step.

Every subprocess has a timeout and every wait a deadline: nothing here can hang CI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import duckdb
import pytest
from e2e_cli import RLBENCH

pytestmark = [pytest.mark.slow, pytest.mark.engine]  # a Ray cluster of its own

RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
}
PPO = "{name: ppo, params: {num_envs: 2, num_steps: 64, update_epochs: 2, num_minibatches: 2}}"
# 3.5 s of training on a quiet machine, 15 s on a busy one: the kill lands mid-run
STEPS, CKPT_EVERY = 16384, 512


@pytest.fixture(scope="module")
def cluster():
    """A head with no CPUs (it runs nothing); the test adds the nodes. Ray's default health checks: the GCS
    declares a killed node dead only after 5 missed checks 3 s apart, so rlbench must tell before it does."""
    for k, v in RAY_ENV.items():  # before Ray is imported (it reads them then): nodes on 127.0.0.1
        os.environ.setdefault(k, v)  # the raylets and the `rlbench run` started below inherit them
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test]'")
    from ray.cluster_utils import Cluster

    tmp = tempfile.mkdtemp(prefix="rlnl-")  # private (no ray_current_cluster in /tmp/ray); short socket paths
    Path(tempfile.gettempdir(), "ray").mkdir(exist_ok=True)  # Ray writes the head's address there anyway
    c = Cluster(initialize_head=True, connect=False, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "temp_dir": tmp})  # fmt: skip
    try:
        yield c
    finally:
        c.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def _runs(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT run_id, status, attempts, error, job_id FROM runs ORDER BY run_id"
        ).fetchall()
    finally:
        con.close()


def _wait(what: str, cond, timeout: float, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc.poll() is not None:
            raise AssertionError(f"rlbench run ended before {what}: {proc.communicate()[0]}")
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout:g}s")


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _crash(node) -> None:
    """SIGKILL every process the node's raylet started (its workers, the runs' actors) before the raylet:
    a machine that dies takes them all at once; a worker that outlived its raylet by a second could still
    finish a short job and report it."""
    from ray._private import ray_constants

    raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
    todo, found = [raylet], []
    while todo:
        kids = [int(k) for p in todo
                for k in subprocess.run(["pgrep", "-P", str(p)], capture_output=True, text=True).stdout.split()]  # fmt: skip
        found += kids
        todo = kids
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("seeds_per_job", [1, 2], ids=["a-job-per-seed", "both-seeds-in-one-packed-job"])
def test_runs_of_a_node_lost_mid_training_are_retried_on_a_surviving_node(tmp_path, cluster, seeds_per_job):
    for node in list(cluster.list_all_nodes()):  # an earlier case's survivor would take the runs
        if node is not cluster.head_node:
            cluster.remove_node(node)
    victim = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    suite, db = tmp_path / "nl.yaml", tmp_path / "db.duckdb"
    # a pack steps CartPole NumPy-vectorised, 2 seeds in a few seconds: too fast for the kill to land mid-run;
    # with an env kwarg it steps plain gymnasium envs one by one, as long as two one-seed jobs take
    env = "CartPole-v1" if seeds_per_job == 1 else "{id: CartPole-v1, kwargs: {max_episode_steps: 500}}"
    videos = ", video_every: 1" if seeds_per_job == 1 else ""  # a video of each evaluation (one-seed jobs)
    suite.write_text(
        f"name: nl\nseeds: 2\nbudget: {{steps: {STEPS}, eval_every: 2048, eval_episodes: 1, "
        f"checkpoint_every: {CKPT_EVERY}{videos}}}\nenvs: [{env}]\nalgorithms: [{PPO}]\n"
        f"resources: {{seeds_per_job: {seeds_per_job}}}\n"
    )
    proc = subprocess.Popen([RLBENCH, "run", str(suite), "--db", str(db), "--executor", "ray", "--address",
                             cluster.address, "--workers", "2"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        runs = tmp_path / "runs" / "nl"
        # both runs placed on the victim (the only node with CPUs), each with a checkpoint on the coordinator's
        # side (so that the retries can resume): then the victim dies, and only then a survivor joins (starting
        # a raylet takes seconds, longer than a run takes on a quiet machine); the retries wait for it
        _wait("both runs started", lambda: len(list(runs.glob("*/attempt-1"))) == 2, 120, proc)
        ckpts = lambda: len({p.parent.parent for p in runs.glob("*/checkpoint/step-*.pt")}) == 2  # noqa: E731
        _wait("a checkpoint of both runs", ckpts, 180, proc)
        if videos:  # the first evaluation's video is listed at the second (step 2048), before its checkpoint
            _wait("attempt 1's first video listed and a checkpoint after it, in both runs", lambda: all(
                "eval-000000000.mp4" in _text(r / "attempt-1" / "artifacts.jsonl")
                and any(int(p.stem[5:]) >= 2048 for p in r.glob("checkpoint/step-*.pt"))
                for r in runs.iterdir()), 180, proc)  # fmt: skip
        _crash(victim)
        cluster.remove_node(victim, allow_graceful=False)  # SIGKILL of its raylet: gone, as in a crash
        cluster.add_node(num_cpus=2)  # the survivor
        out = proc.communicate(timeout=240)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.returncode == 0, out
    rows = _runs(db)
    assert [(status, attempts, error) for _, status, attempts, error, _ in rows] == [
        ("finished", 2, None)
    ] * 2, out
    victim_id = victim.node_id[:8]  # job_id is <actor>@<node> of the attempt that finished: the survivor's
    assert all(job_id.split("@")[1] != victim_id for *_, job_id in rows), (rows, victim_id)
    lost = [line for line in out.splitlines() if "retrying" in line and "node lost: Ray node" in line]
    assert len(lost) == 2, out
    assert out.count("resumed at step") >= 2, out  # attempt 2 started from the checkpoint, not from step 0
    resumed = [json.loads((runs / run_id / "attempt-2" / "result.json").read_text())["resumed_from_step"]
               for run_id, *_ in rows]  # fmt: skip
    assert resumed[0] is not None and resumed[0] > 0, out
    if seeds_per_job == 2:  # a pack resumes its seeds at one step, in one job again
        assert resumed[0] == resumed[1], resumed
        assert len({job_id for *_, job_id in rows}) == 1, rows
    if videos:  # attempt 2 ran on another node than attempt 1 and still lists attempt 1's files up to its
        # checkpoint (sent to the survivor with the checkpoint): the first video, kept in the store
        with duckdb.connect(str(db), read_only=True) as con:
            listed = con.execute("SELECT run_id, step, kind, path FROM artifacts ORDER BY ALL").fetchall()
        for run_id, *_ in rows:
            mine = [(step, kind, path) for r, step, kind, path in listed if r == run_id]
            assert (0, "video", "attempt-1/videos/eval-000000000.mp4") in mine, mine
            videos_at = [step for step, kind, _ in mine if kind == "video"]
            assert videos_at == sorted(set(videos_at)) and videos_at[-1] == STEPS, mine  # none doubled
            assert all((runs / run_id / path).is_file() for *_, path in mine)  # every listed file is here
    for run_id, *_ in rows:
        log = (runs / run_id / "attempt-1" / "output.log").read_text()
        assert "[rlbench] node lost: Ray node" in log  # the cause stays with the attempt it ended
        assert (runs / run_id / "attempt-2" / "result.json").is_file()
    assert cluster.address.startswith("127.0.0.1:") and "at 127.0.0.1 died" in lost[0], out
