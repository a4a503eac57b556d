"""Checkpoints and resume: the pure checkpoint file module, RunContext's checkpoint API, and per algorithm a
run interrupted after a checkpoint and resumed by a second ``run_one`` (the stop-event path, as any executor
ends an attempt) that ends with the same curve as an uninterrupted run of the same seed."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from rlbench_cli import checkpoint
from rlbench_cli.algos.base import RunContext
from rlbench_cli.runner import attempt_dir, read_result, run_one
from rlbench_cli.sink import ShardSink, list_shards
from rlbench_cli.suite.grid import RunSpec


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _spec(algo: str = "ppo", env: str | None = "CartPole-v1", steps: int = 2048, eval_every: int = 512,
          every: int | str | None = 512, params: dict[str, Any] | None = None, dataset: str | None = None,
          dataset_path: str | None = None, eval_episodes: int = 2) -> RunSpec:  # fmt: skip
    return RunSpec(
        suite="t",
        algo=algo,
        algo_name=algo,
        params=params or {},
        env_id=env,
        env_kwargs={},
        seed=3,
        budget={
            "steps": steps,
            "eval_every": eval_every,
            "eval_episodes": eval_episodes,
            "timeout": None,
            "checkpoint_every": every,
        },  # fmt: skip
        dataset=dataset,
        dataset_path=dataset_path,
    )


class StopAfterCheckpoint(threading.Event):
    """A stop event that turns itself on ``after`` polls once the run has saved a checkpoint: the attempt
    then ends as 'interrupted' some way past its checkpoint, with rows logged that the resume must drop."""

    def __init__(self, folder: Path, after: int):
        super().__init__()
        self.folder, self.after, self.polls = folder, after, 0

    def is_set(self) -> bool:
        if super().is_set():
            return True
        if checkpoint.latest_step(self.folder) is not None:
            self.polls += 1
            if self.polls > self.after:
                self.set()
        return super().is_set()


def metrics_of(folder: Path) -> pd.DataFrame:
    """The rows of an attempt folder, as the store ends up with them (sys/* timings left out)."""
    df = pd.concat([pq.read_table(p).to_pandas() for p in list_shards(folder / "metrics")])
    df["name"] = df["name"].astype(str)
    df = df[~df["name"].str.startswith("sys/")]
    return df.sort_values(["name", "step"], kind="stable").reset_index(drop=True)[["step", "name", "value"]]


def interrupted_and_resumed(
    tmp_path: Path, spec: RunSpec, after: int = 1, on_stop: bool = False
) -> tuple[dict, dict, Path]:
    """Attempt 1 stops ``after`` polls past its first checkpoint; attempt 2 resumes. Returns both results
    and attempt 2's folder. Unless ``on_stop``, attempt 1 saves no checkpoint when it stops, as a job killed
    without warning: what it logged after its last checkpoint must not reach the resumed curve."""
    root = tmp_path / "resumed"
    a1 = attempt_dir(root, spec, attempt=1)
    saved = RunContext.checkpoint_on_stop
    RunContext.checkpoint_on_stop = on_stop
    try:
        r1 = run_one(spec, a1, stop_event=StopAfterCheckpoint(a1.parent / "checkpoint", after))
    finally:
        RunContext.checkpoint_on_stop = saved
    assert r1["status"] == "interrupted", r1
    assert checkpoint.latest_step(a1.parent / "checkpoint") is not None
    a2 = attempt_dir(root, spec, attempt=2)
    r2 = run_one(spec, a2)
    assert r2["status"] == "finished", r2
    return r1, r2, a2


def uninterrupted(tmp_path: Path, spec: RunSpec) -> Path:
    a = attempt_dir(tmp_path / "straight", spec, attempt=1)
    r = run_one(spec, a)
    assert r["status"] == "finished", r
    return a


def assert_continuous(df: pd.DataFrame, spec: RunSpec) -> None:
    """No duplicate (step, name) and every evaluation step present. (Episode rows are left out of the
    duplicate check: two envs can end an episode at the same step; the equality with an uninterrupted run
    checks them.)"""
    per_step = df[~df["name"].str.startswith("train/episode_")]
    dup = per_step.duplicated(["step", "name"], keep=False)
    assert not dup.any(), per_step[dup]
    from rlbench_cli.algos.base import eval_points

    steps = sorted(df[df["name"] == "eval/return"]["step"])
    expected = eval_points(spec.budget["steps"], spec.budget["eval_every"])
    assert steps == expected


# -- the checkpoint module -----------------------------------------------------------------------------------


def test_save_load_keeps_only_the_latest_and_restores_rng(tmp_path: Path) -> None:
    d = tmp_path / "checkpoint"
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    checkpoint.save(d, 10, {"a": np.arange(3), "t": torch.ones(2), "obj": {"x": [1, 2]}}, {"m": 1})
    expect = (random.random(), np.random.rand(), torch.rand(1).item())
    checkpoint.save(d, 20, {"a": np.arange(4)})
    assert [s for s, _ in checkpoint.list_checkpoints(d)] == [20]
    assert checkpoint.latest_step(d) == 20
    (d / "step-30.pt").write_bytes(b"not a checkpoint")  # a damaged newer file: set aside, older one used
    ck = checkpoint.load_latest(d)
    assert ck is not None and ck["step"] == 20 and (d / "step-30.bad").exists()
    np.testing.assert_array_equal(ck["state"]["a"], np.arange(4))
    checkpoint.save(d, 10, {"a": 0})  # (older step written later replaces it: only the newest write stays)
    ck = checkpoint.load(d / "step-10.pt")
    random.random(), np.random.rand(), torch.rand(1)
    checkpoint.set_rng_state(ck["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) != expect  # rng of the later save
    assert not list(d.glob("*.tmp"))


def test_minutes_or_steps() -> None:
    assert checkpoint.minutes_or_steps(None) == (None, None)
    assert checkpoint.minutes_or_steps(500) == (500, None)
    assert checkpoint.minutes_or_steps("1.5m") == (None, 90.0)


def test_checkpoint_due_by_steps_and_minutes(tmp_path: Path) -> None:
    sink = ShardSink(tmp_path / "attempt-1" / "metrics", background=False)
    ctx = RunContext(spec=_spec(every=100, steps=1000), sink=sink, run_dir=tmp_path / "attempt-1")
    assert not ctx.checkpoint_due(0) and not ctx.checkpoint_due(99) and ctx.checkpoint_due(128)
    assert ctx.save_checkpoint(128, {"x": 1})
    assert not ctx.checkpoint_due(199) and ctx.checkpoint_due(200) and not ctx.checkpoint_due(1000)
    off = RunContext(spec=_spec(every=None), sink=sink, run_dir=tmp_path / "attempt-1")
    assert not off.checkpoint_due(512) and off.resume() is None
    timed = RunContext(spec=_spec(every="0.001m"), sink=sink, run_dir=tmp_path / "attempt-1")
    time.sleep(0.1)
    assert timed.checkpoint_due(5)


def test_resume_carries_the_rows_logged_before_the_checkpoint(tmp_path: Path) -> None:
    spec = _spec(every=10, steps=100)
    a1 = tmp_path / "attempt-1"
    sink = ShardSink(a1 / "metrics", background=False)
    ctx = RunContext(spec=spec, sink=sink, run_dir=a1)
    sink.log(5, **{"train/x": 1.0})
    ctx.save_checkpoint(10, {"k": "v"})
    sink.log(10, **{"train/x": 2.0})  # after the checkpoint: not carried over
    sink.close()
    a2 = tmp_path / "attempt-2"
    sink2 = ShardSink(a2 / "metrics", background=False)
    ctx2 = RunContext(spec=spec, sink=sink2, run_dir=a2)
    state = ctx2.resume()
    assert state == {"k": "v", "step": 10} and ctx2.resumed_from_step == 10
    sink2.close()
    df = metrics_of(a2)
    assert df[["step", "value"]].values.tolist() == [[5, 1.0]]


def test_checkpoint_of_an_unpicklable_state_switches_checkpoints_off(tmp_path: Path) -> None:
    sink = ShardSink(tmp_path / "attempt-1" / "metrics", background=False)
    ctx = RunContext(spec=_spec(every=10, steps=100), sink=sink, run_dir=tmp_path / "attempt-1")
    assert not ctx.save_checkpoint(10, {"lock": threading.Lock()})
    assert not ctx.checkpoint_due(20) and checkpoint.latest_step(ctx.checkpoint_dir) is None


# -- algorithms: interrupted + resumed == uninterrupted --------------------------------------------------------


def test_ppo_resumes_bitwise(tmp_path: Path) -> None:
    spec = _spec("ppo", steps=2048, eval_every=512, every=1024)
    r1, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=1)
    assert r2["resumed_from_step"] == 1024 and r1.get("resumed_from_step") is None
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert_continuous(resumed, spec)
    pd.testing.assert_frame_equal(resumed, straight)  # bitwise: every train/* and eval/* row
    assert not (a2.parent / "checkpoint").exists()  # a finished run's checkpoint is removed
    assert read_result(a2)["resumed_from_step"] == 1024
    plain = _spec("ppo", steps=2048, eval_every=512, every=None)  # taking checkpoints changes nothing
    pd.testing.assert_frame_equal(metrics_of(uninterrupted(tmp_path / "plain", plain)), straight)


def test_ppo_with_values_on_the_host_resumes_bitwise_and_starts_as_torch_values_do(
    tmp_path: Path, monkeypatch
) -> None:
    """Away from the CPU ppo computes the batch's values with its NumPy copy of the critic (one wait for the
    device an iteration); the same path forced on CPU: resumed equals uninterrupted bitwise (the copy is
    refreshed from the resumed weights), and the first iteration's losses equal torch's values' to float
    rounding (the runs then drift apart as float runs do)."""
    from rlbench_cli.algos.ppo import transfer

    spec = _spec("ppo", steps=2048, eval_every=512, every=1024)
    on_torch = metrics_of(uninterrupted(tmp_path / "torch", spec))
    monkeypatch.setattr(transfer, "host_side", lambda device: True)
    _, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=1)
    assert r2["resumed_from_step"] == 1024
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert_continuous(resumed, spec)
    pd.testing.assert_frame_equal(resumed, straight)

    def first(df: pd.DataFrame) -> pd.Series:
        return df[(df["step"] == 512) & df["name"].str.startswith("train/")].set_index("name")["value"]

    host, torch_ = first(straight), first(on_torch)
    assert len(host) >= 7 and host.index.equals(torch_.index)
    np.testing.assert_allclose(host.values, torch_.values, rtol=1e-4, atol=1e-6)


def test_ppo_on_mujoco_resumes_bitwise(tmp_path: Path) -> None:
    """MuJoCo envs are EzPickle (pickled as constructor arguments): the checkpoint keeps their state."""
    pytest.importorskip("mujoco")
    params = {
        "num_envs": 2,
        "num_steps": 64,
        "hidden_sizes": [16],
        "normalize_obs": True,
        "normalize_reward": True,
    }
    spec = _spec("ppo", "Hopper-v5", steps=640, eval_every=256, every=256, params=params, eval_episodes=1)
    _, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=1)
    assert r2["resumed_from_step"] == 256
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert_continuous(resumed, spec)
    pd.testing.assert_frame_equal(resumed, straight)


def test_a_stopped_ppo_run_checkpoints_where_it_stops_and_resumes_bitwise(tmp_path: Path) -> None:
    """Ctrl-C or a scheduler's SIGTERM (pre-emption, cancellation) sets the stop event: the run saves a
    checkpoint there, and the next attempt goes on from that step."""
    spec = _spec("ppo", steps=2048, eval_every=512, every=1024)
    _, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=1, on_stop=True)
    assert r2["resumed_from_step"] == 1536
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert_continuous(resumed, spec)
    pd.testing.assert_frame_equal(resumed, straight)


def test_checkpoint_due_once_when_stopping(tmp_path: Path) -> None:
    sink = ShardSink(tmp_path / "attempt-1" / "metrics", background=False)
    stop = threading.Event()
    ctx = RunContext(
        spec=_spec(every=100, steps=1000), sink=sink, run_dir=tmp_path / "attempt-1", stop_event=stop
    )
    assert not ctx.checkpoint_due(50)
    stop.set()
    assert ctx.checkpoint_due(50) and not ctx.checkpoint_due(51)
    off = RunContext(spec=_spec(every=None), sink=sink, run_dir=tmp_path / "attempt-1", stop_event=stop)
    assert not off.checkpoint_due(50)


def test_without_checkpoint_every_a_run_starts_over(tmp_path: Path) -> None:
    spec = _spec("ppo", steps=1024, eval_every=512, every=None)
    root = tmp_path / "r"
    a1 = attempt_dir(root, spec, attempt=1)
    stop = threading.Event()
    stop.set()
    assert run_one(spec, a1, stop_event=stop)["status"] == "interrupted"
    assert not (a1.parent / "checkpoint").exists()
    a2 = attempt_dir(root, spec, attempt=2)
    r2 = run_one(spec, a2)
    assert r2["status"] == "finished" and r2["resumed_from_step"] is None
    assert_continuous(metrics_of(a2), spec)


@pytest.mark.parametrize(
    "algo,env,params",
    [
        ("dqn", "CartPole-v1", {"hidden_units": [32, 32], "batch_size": 16, "logging_steps": 50}),
        pytest.param(
            "sac",
            "Pendulum-v1",
            {"hidden_units": [16, 16], "batch_size": 16, "logging_steps": 50},
            marks=pytest.mark.slow,
        ),  # fmt: skip
        pytest.param(
            "double_dqn",
            "CartPole-v1",
            {"hidden_units": [16], "batch_size": 16, "replay_buffer": "d3rlpy"},
            marks=pytest.mark.slow,
        ),  # fmt: skip
    ],
)
def test_d3rlpy_online_resumes_bitwise(tmp_path: Path, algo: str, env: str, params: dict[str, Any]) -> None:
    # checkpoint at 300, stopped at 350 with rows 301..350 logged, which the resumed attempt must drop
    spec = _spec(algo, env, steps=500, eval_every=250, every=300, params=params, eval_episodes=1)
    _, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=50)
    assert r2["resumed_from_step"] == 300
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert_continuous(resumed, spec)
    pd.testing.assert_frame_equal(resumed, straight)


@pytest.fixture(scope="module")
def cartpole_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small CartPole dataset in a D4RL-format file, as a suite names one."""
    from offline_helpers import cartpole_controller, rollouts

    from rlbench_cli.datasets.hdf5 import write_hdf5

    path = tmp_path_factory.mktemp("data") / "cartpole-ckpt.hdf5"
    write_hdf5(path, rollouts("CartPole-v1", cartpole_controller, episodes=3, epsilon=0.3))
    return str(path)


@pytest.mark.parametrize(
    "algo,params",
    [
        ("bc", {"hidden_units": [16], "batch_size": 16, "logging_steps": 7}),
        ("discrete_cql", {"hidden_units": [16], "batch_size": 16, "logging_steps": 7}),
        (
            "decision_transformer",
            {
                "batch_size": 8,
                "context_size": 4,
                "num_layers": 1,
                "num_heads": 1,
                "logging_steps": 7,
                "hidden_units": [16],
            },
        ),  # fmt: skip
    ],
)
def test_d3rlpy_offline_resumes_bitwise(tmp_path: Path, cartpole_file: str, algo: str, params: dict) -> None:
    # checkpoint at 20 with 6 updates' losses not yet logged, stopped 3 updates later
    spec = _spec(algo, "CartPole-v1", steps=60, eval_every=20, every=20, params=params,
                 dataset="cartpole-ckpt", dataset_path=cartpole_file)  # fmt: skip
    _, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=3)
    assert r2["resumed_from_step"] == 20
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert_continuous(resumed, spec)
    pd.testing.assert_frame_equal(resumed, straight)


def test_offline_to_online_resumes_bitwise_in_the_online_phase(tmp_path: Path, cartpole_file: str) -> None:
    """cql fine-tuned online after 60 offline steps: checkpoints at steps 100 and 200 fall in the online phase
    (replay buffer with the dataset and the online transitions, the env mid-episode, the losses not yet
    logged); stopped past the first, the resumed run ends with the uninterrupted run's every row."""
    import dataclasses

    params = {"hidden_units": [16], "batch_size": 16, "logging_steps": 7}
    spec = _spec("cql", "CartPole-v1", steps=60, eval_every=20, every=100, params=params,
                 dataset="cartpole-ckpt", dataset_path=cartpole_file, eval_episodes=1)  # fmt: skip
    spec = dataclasses.replace(spec, finetune={"steps": 240, "eval_every": 80})
    r1, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=30)
    assert r2["resumed_from_step"] == 100  # online step 40
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert (resumed["name"] == "train/phase").sum() == 2  # 0 at step 0, 1 at step 60: logged once each
    per_step = resumed[~resumed["name"].str.startswith("train/episode_")]
    assert not per_step.duplicated(["step", "name"]).any()
    assert sorted(resumed[resumed["name"] == "eval/return"]["step"]) == [0, 20, 40, 60, 140, 220, 300]
    pd.testing.assert_frame_equal(resumed, straight)


def test_hf_decision_transformer_resumes_bitwise(tmp_path: Path, cartpole_file: str) -> None:
    pytest.importorskip("transformers")
    params = {"hidden_size": 16, "n_layer": 1, "context_length": 4, "batch_size": 8, "logging_steps": 7}
    spec = _spec("hf_decision_transformer", "CartPole-v1", steps=60, eval_every=20, every=20, params=params,
                 dataset="cartpole-ckpt", dataset_path=cartpole_file)  # fmt: skip
    _, r2, a2 = interrupted_and_resumed(tmp_path, spec, after=3)
    assert r2["resumed_from_step"] == 20
    resumed, straight = metrics_of(a2), metrics_of(uninterrupted(tmp_path, spec))
    assert_continuous(resumed, spec)
    pd.testing.assert_frame_equal(resumed, straight)


def test_an_attempt_folder_run_again_resumes_without_duplicates(tmp_path: Path) -> None:
    """A job requeued as the same attempt (same folder): rows after the checkpoint are moved out of metrics/."""
    spec = _spec(every=10, steps=100)
    a1 = tmp_path / "attempt-1"
    sink = ShardSink(a1 / "metrics", background=False)
    ctx = RunContext(spec=spec, sink=sink, run_dir=a1)
    sink.log(5, **{"train/x": 1.0})
    ctx.save_checkpoint(10, {"k": "v"})
    sink.log(10, **{"train/x": 2.0})
    sink.close()
    sink2 = ShardSink(a1 / "metrics", background=False)
    ctx2 = RunContext(spec=spec, sink=sink2, run_dir=a1)
    assert ctx2.resume() is not None
    sink2.log(10, **{"train/x": 3.0})
    sink2.close()
    df = metrics_of(a1)
    assert df[["step", "value"]].values.tolist() == [[5, 1.0], [10, 3.0]]
    (aside,) = a1.glob("metrics.after-checkpoint-*")
    assert len(list_shards(aside)) == 1  # kept, not lost


# -- packed jobs (resources.seeds_per_job): every seed resumes at one step ----------------------------------


def _pack(env: str, params: dict[str, Any], steps: int, eval_every: int, every: int | None) -> list[RunSpec]:
    from dataclasses import replace

    base = _spec("ppo", env, steps=steps, eval_every=eval_every, every=every, params=params, eval_episodes=1)
    return [replace(base, seed=s) for s in (3, 7)]


def _run_pack(
    root: Path, specs: list[RunSpec], attempt: int, stop: threading.Event | None = None
) -> list[Path]:
    from rlbench_cli.packed import run_packed

    folders = [attempt_dir(root, s, attempt=attempt) for s in specs]
    results = run_packed(specs, folders, stop_event=stop)
    expected = "interrupted" if stop is not None else "finished"
    assert [r["status"] for r in results] == [expected] * len(specs), results
    return folders


@pytest.mark.parametrize(
    "env, params",
    [
        ("CartPole-v1", {"num_steps": 64}),  # the NumPy-vectorised CartPole block
        ("Pendulum-v1", {"num_envs": 2, "num_steps": 64, "normalize_obs": True, "normalize_reward": True}),
    ],
)
def test_a_packed_job_resumes_every_seed_bitwise(tmp_path: Path, env: str, params: dict[str, Any]) -> None:
    specs = _pack(env, params, steps=512, eval_every=256, every=256)
    root = tmp_path / "resumed"
    first = attempt_dir(root, specs[0], attempt=1)
    saved = RunContext.checkpoint_on_stop
    RunContext.checkpoint_on_stop = False  # as a job killed without warning: rows after the checkpoint go
    try:
        _run_pack(root, specs, 1, StopAfterCheckpoint(first.parent / "checkpoint", after=1))
    finally:
        RunContext.checkpoint_on_stop = saved
    steps = [checkpoint.latest_step(attempt_dir(root, s, attempt=1).parent / "checkpoint") for s in specs]
    assert steps[0] is not None and steps == [steps[0]] * 2  # one step for the pack, older ones pruned
    assert all(
        len(checkpoint.list_checkpoints(attempt_dir(root, s, 1).parent / "checkpoint")) == 1 for s in specs
    )
    resumed = _run_pack(root, specs, 2)
    straight = _run_pack(tmp_path / "straight", specs, 1)
    plain = _run_pack(tmp_path / "plain", _pack(env, params, 512, 256, None), 1)  # no checkpoints at all
    for a2, a, p in zip(resumed, straight, plain):
        assert read_result(a2)["resumed_from_step"] == steps[0]
        assert not (a2.parent / "checkpoint").exists()  # a finished run's checkpoint is removed
        got = metrics_of(a2)
        assert_continuous(got, specs[0])
        pd.testing.assert_frame_equal(got, metrics_of(a))  # bitwise, every seed
        pd.testing.assert_frame_equal(metrics_of(p), metrics_of(a))  # taking checkpoints changes nothing


def _ctx(tmp_path: Path, spec: RunSpec, attempt: int = 1) -> RunContext:
    folder = attempt_dir(tmp_path, spec, attempt=attempt)
    return RunContext(spec=spec, sink=ShardSink(folder / "metrics", background=False), run_dir=folder)


def test_a_pack_resumes_at_the_latest_step_every_seed_has_or_not_at_all(tmp_path: Path) -> None:
    from rlbench_cli.algos.base import resume_together

    specs = _pack("CartPole-v1", {}, steps=1000, eval_every=500, every=100)
    a, b = (_ctx(tmp_path, s) for s in specs)
    for step in (100, 200):
        for c in (a, b):
            c.sink.log(step, **{"train/x": float(step)})
            assert c.save_checkpoint(step, {"v": step, "seed": c.seed}, layout="packed", prune=False)
    a.sink.log(300, **{"train/x": 300.0})
    a.save_checkpoint(300, {"v": 300}, layout="packed", prune=False)  # killed before b saved 300
    a2, b2 = (_ctx(tmp_path, s, attempt=2) for s in specs)
    states = resume_together([a2, b2])
    assert [(st["v"], st["seed"]) for st in states] == [(200, 3), (200, 7)]
    assert a2.resumed_from_step == b2.resumed_from_step == 200
    for c in (a2, b2):  # the rows up to the common step came along, none after it
        c.sink.flush()
        assert sorted(metrics_of(c.run_dir)["step"]) == [100, 200]
    # a seed with no checkpoint (or one of another layout): nobody resumes, nothing is carried over
    lone = _ctx(tmp_path / "other", specs[1])
    a3 = _ctx(tmp_path, specs[0], attempt=3)
    assert resume_together([a3, lone]) is None
    assert a3.resumed_from_step is None and list_shards(a3.run_dir / "metrics") == []


def test_one_seed_jobs_and_packs_do_not_resume_each_others_checkpoints(tmp_path: Path, capsys) -> None:
    from rlbench_cli.algos.base import resume_together

    spec = _spec("ppo", steps=1000, eval_every=500, every=100)
    c = _ctx(tmp_path, spec)
    c.save_checkpoint(100, {"v": 1}, layout="packed")
    assert _ctx(tmp_path, spec, attempt=2).resume() is None  # ppo.py's own layout: starts over
    assert (
        "the checkpoint is of a packed job (resources.seeds_per_job), this job is a job of one seed"
        in capsys.readouterr().out
    )
    c.save_checkpoint(200, {"v": 2})
    assert resume_together([_ctx(tmp_path, spec, attempt=3)]) is None
    assert _ctx(tmp_path, spec, attempt=4).resume()["v"] == 2
