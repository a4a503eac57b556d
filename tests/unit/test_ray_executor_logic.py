"""The Ray executor's pure logic, without a cluster: address parsing, how many runs a node holds, the cause
named for an actor that died, and the checks made before anything is recorded. (Everything that needs Ray
runs against a real head in tests/e2e/test_ray_executor.py.)"""

from pathlib import Path

import pytest

from rlbench_cli.errors import UsageError
from rlbench_cli.executors.ray import actor, cluster, failures, transfer
from rlbench_cli.executors.ray.executor import create
from rlbench_cli.suite.models import Suite


def test_addresses_parse_with_ray_defaults():
    assert cluster._host_port("10.0.0.5:6380") == ("10.0.0.5", 6380)
    assert cluster._host_port("head") == ("head", 6379)
    assert cluster._host_port("ray://head") == ("head", 10001)
    assert cluster._host_port("ray://head:10002") == ("head", 10002)
    with pytest.raises(UsageError, match="expected auto, HOST:PORT or ray://HOST:PORT"):
        cluster._host_port("head:port")


def test_runs_per_node_follow_cpus_and_fractional_gpus():
    node = {"CPU": 16.0, "GPU": 2.0}
    assert cluster.fit(node, 1, 0) == 16
    assert cluster.fit(node, 1, 0.25) == 8  # four per GPU
    assert cluster.fit(node, 0.25, 0.25) == 8
    assert cluster.fit(node, 4, 0.25) == 4  # CPUs bound first
    assert cluster.fit(node, 1, 3) == 0
    assert cluster.fit({"CPU": 2.0}, 1, 0.5) == 0  # a CPU-only node holds no GPU run


class _DiedError(Exception):
    pass


def test_a_dead_actor_is_named_by_the_fatal_signal_it_reported(tmp_path: Path):
    ray_text = ("The actor died unexpectedly before finishing this task. Worker exit type: SYSTEM_ERROR Worker "
                "exit detail: Worker unexpectedly exits with a connection error code 2. End of file. Some...")  # fmt: skip
    log = tmp_path / "output.log"
    log.write_text(
        "training...\n*** SIGSEGV received at time=1 on cpu 1 ***\nFatal Python error: Segmentation fault\n"
    )
    cause, code = failures.death_cause(_DiedError(ray_text), log)
    assert cause.startswith("worker killed by SIGSEGV (segmentation fault in native code); Ray: _DiedError")
    assert "connection error code 2" in cause and code == -11
    log.write_text("training...\n")  # SIGKILL leaves no report
    cause, code = failures.death_cause(_DiedError(ray_text), log)
    assert cause.startswith("worker died: the Ray actor's process exited without a fatal-signal report")
    assert code is None
    cause, _ = failures.death_cause(
        _DiedError("The actor died because its node has died. Node ID: ab"), tmp_path / "none"
    )
    assert cause.startswith("node lost: the Ray node running this job died or left the cluster")


def test_checks_before_anything_is_recorded():
    base = {"name": "t", "envs": ["CartPole-v1"], "algorithms": ["random"]}
    with pytest.raises(UsageError, match=r"resources.gpus_per_job=1.5: Ray shares a GPU only below 1"):
        create(Suite(**base, resources={"gpus_per_job": 1.5}), 4, None, None, {})
    pytest.importorskip("ray")
    with pytest.raises(UsageError, match=r"--address 127.0.0.1:1: no Ray cluster answers at 127.0.0.1:1"):
        create(Suite(**base), 4, None, None, {"address": "127.0.0.1:1"})


def _save(run: Path, step: int) -> None:
    d = run / "checkpoint"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"step-{step}.pt").write_bytes(f"{run.name} at {step}".encode())


def _prune(run: Path, below: int) -> None:
    for p in (run / "checkpoint").glob("step-*.pt"):
        if int(p.stem.split("-")[1]) < below:
            p.unlink()


def test_a_packs_seeds_keep_a_common_checkpoint_on_the_coordinator_whenever_the_polls_land(tmp_path: Path):
    # on the node a pack saves seed 0's checkpoint, then seed 1's, and drops the older ones once both have the
    # new one (algos.base.resume_together); the actor's polls may land mid-save and skip whole saves. Here
    # polls land in the middle of the save at step 2 and of the one at step 4 (step 3 never polled): the
    # coordinator's copies (its newest two per seed) must still hold a step both seeds have, or the pack
    # starts over when its node is lost
    from rlbench_cli.checkpoint import list_checkpoints

    node = [tmp_path / "node" / f"seed{k}" / "attempt-1" for k in (0, 1)]
    coord = [tmp_path / "coordinator" / f"seed{k}" / "attempt-1" for k in (0, 1)]
    sent: list[set[str]] = [set(), set()]
    for f in node + coord:
        (f / "metrics").mkdir(parents=True)

    def poll() -> None:
        for k in (0, 1):
            transfer.write_files(
                coord[k],
                actor.RlbenchWorker._collect(node[k], sent[k], final=False),
                keep=transfer.KEEP_PACKED,
            )

    def pack_save(step: int, then_poll_after_seed0: bool = False) -> None:
        _save(node[0].parent, step)
        if then_poll_after_seed0:
            poll()
        _save(node[1].parent, step)
        for f in node:
            _prune(f.parent, step)

    pack_save(1)
    poll()
    pack_save(2, then_poll_after_seed0=True)
    pack_save(3)
    pack_save(4, then_poll_after_seed0=True)
    kept = [{step for step, _ in list_checkpoints(f.parent / "checkpoint")} for f in coord]
    assert kept[0] & kept[1] == {3}, kept  # the newest step both seeds had on the node at the last poll
    assert (coord[1].parent / "checkpoint" / "step-3.pt").read_bytes() == b"seed1 at 3"


def test_a_starting_actor_leaves_a_just_dead_actors_folder_to_its_salvage(tmp_path: Path, monkeypatch):
    """Two actors die at once; the first one's replacement starts while the coordinator still salvages the
    second's output.log and shards from its node-local folder: the new actor must not remove that folder.
    Folders of dead actors that nothing wrote to for ORPHAN_AGE_S are removed; a live actor's never."""
    import os
    import tempfile
    import time

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = tmp_path / "rlbench-ray"
    dead_pid = "99999999"  # above any pid_max: no such process
    assert not Path(f"/proc/{dead_pid}").exists()
    just_died = base / dead_pid / "suite" / "run" / "attempt-1"
    just_died.mkdir(parents=True)
    (just_died / "output.log").write_text("*** SIGSEGV received at time=1 on cpu 0 ***\n")
    orphan = base / "99999998" / "suite" / "run" / "attempt-1"
    orphan.mkdir(parents=True)
    (orphan / "output.log").write_text("long ago\n")
    alive = base / str(os.getppid()) / "suite"
    alive.mkdir(parents=True)
    old = time.time() - transfer.ORPHAN_AGE_S - 60
    for folder in (base / "99999998", base / str(os.getppid())):
        for where, _, files in os.walk(folder):
            for path in [where, *(os.path.join(where, f) for f in files)]:
                os.utime(path, (old, old))

    root = transfer.actor_root()

    assert root == base / str(os.getpid()) and root.is_dir()
    assert (just_died / "output.log").read_text().startswith("*** SIGSEGV")  # left for the salvage
    assert not (base / "99999998").exists()  # an orphan nobody salvaged
    assert alive.is_dir()  # a running actor's
    found = transfer.leftovers(str(just_died), have=[])
    assert dict(found)["output.log"].startswith(b"*** SIGSEGV")
    assert not just_died.parent.exists()  # the salvage removes what it took
