"""What a run keeps (``algos.keep``): its best and final policy in its library's format, episode videos at
every K-th evaluation, none of which changes a metric (ppo's reference hashes), and a resumed attempt that
lists the files of the attempt it continues."""

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from ppo_reference import digest, expected, rows_of, run, spec_of

from rlbench_cli.algos.base import _episodes, eval_seeds
from rlbench_cli.algos.keep import load_saved
from rlbench_cli.artifacts import current, read_index, resolve, sha256_file
from rlbench_cli.envs import make_env
from rlbench_cli.runner import attempt_dir
from rlbench_cli.sink import list_shards

pytestmark = pytest.mark.slow


def _final_return(folder: Path) -> float:
    rows = [pq.read_table(p).to_pylist() for p in list_shards(folder / "metrics")]
    evals = [r for rs in rows for r in rs if r["name"] == "eval/return"]
    return max(evals, key=lambda r: r["step"])["value"]


def _replay(policy_folder: Path, env_id: str, seed: int, episodes: int) -> float:
    policy, _ = load_saved(policy_folder)
    envs = [make_env(env_id) for _ in range(episodes)]
    return float(_episodes(envs, eval_seeds(seed, episodes), policy)[0].mean())


def test_videos_and_saved_policies_change_no_metric_and_the_final_policy_is_the_trained_one(tmp_path):
    assert run("cartpole", tmp_path, video_every=1) in expected("cartpole")
    spec = spec_of("cartpole")
    folder = attempt_dir(tmp_path / "cartpole", spec, attempt=1)
    rows = current(read_index(folder))
    assert [r["step"] for r in rows if r["kind"] == "video"] == [0, 1024, 2048, 3072]
    assert {r["kind"] for r in rows} == {"video", "policy_best", "policy_final"}
    for r in rows:  # every listed file is there, as listed
        f = resolve(folder.parent, r["path"])
        assert f.stat().st_size == r["bytes"] and sha256_file(f) == r["sha256"]
    import imageio.v3 as iio

    frames = iio.imread(folder / "videos" / "eval-000003072.mp4")
    assert frames.ndim == 4 and frames.shape[-1] == 3 and len(frames) > 1
    final = _replay(folder / "policy" / "final", "CartPole-v1", spec.seed, 2)
    assert final == _final_return(folder)


def test_a_resumed_attempt_lists_the_earlier_attempts_files_up_to_its_checkpoint(tmp_path):
    assert run("cartpole-resumed", tmp_path, video_every=1) in expected("cartpole-resumed")
    spec = spec_of("cartpole-resumed")
    a2 = attempt_dir(tmp_path / "cartpole-resumed", spec, attempt=2)
    rows = current(read_index(a2))
    videos = [(r["step"], r["path"].split("/")[0]) for r in rows if r["kind"] == "video"]
    carried = [step for step, where in videos if where == "attempt-1"]
    assert carried and all(where == "attempt-2" for step, where in videos if step > max(carried))
    assert [step for step, _ in videos] == [0, 512, 1024, 1536, 2048]
    for r in rows:
        assert resolve(a2.parent, r["path"]).is_file()


def test_a_d3rlpy_run_keeps_d3rlpys_own_file(tmp_path):
    import d3rlpy

    from rlbench_cli.algos.base import RunSpec
    from rlbench_cli.runner import run_one

    spec = RunSpec(suite="k", algo="dqn", algo_name="dqn", env_id="CartPole-v1", env_kwargs={}, seed=3,
                   params={"update_start_step": 100, "hidden_units": [16, 16]},
                   budget={"steps": 600, "eval_every": 300, "eval_episodes": 2, "timeout": None})  # fmt: skip
    folder = attempt_dir(tmp_path, spec, attempt=1)
    assert run_one(spec, folder)["status"] == "finished"
    kinds = {r["kind"]: r["path"] for r in current(read_index(folder)) if r["path"].endswith(".d3")}
    assert set(kinds) == {"policy_best", "policy_final"}
    algo = d3rlpy.load_learnable(str(folder.parent / kinds["policy_final"]))  # d3rlpy alone reads it
    assert algo.predict(np.zeros((1, 4), np.float32)).shape == (1,)
    assert _replay(folder / "policy" / "final", "CartPole-v1", spec.seed, 2) == _final_return(folder)


def test_a_text_run_keeps_transcripts_and_its_policy_with_save_pretrained(tmp_path):
    import torch

    from rlbench_cli.algos.base import RunSpec
    from rlbench_cli.runner import run_one

    torch.set_num_threads(1)
    params = {"n_embd": 32, "n_layer": 2, "n_head": 2, "batch_size": 8, "logging_steps": 2, "max_context": 96,
              "num_envs": 2, "vocab_episodes": 2, "n_steps": 8}  # fmt: skip
    spec = RunSpec(suite="k", algo="ppo", algo_name="ppo", env_id="rlbench/MazeFO-v0", env_kwargs={"max_steps": 8},
                   seed=0, params=params, budget={"steps": 16, "eval_every": 8, "eval_episodes": 2, "timeout": None,
                                                  "video_every": 1})  # fmt: skip
    folder = attempt_dir(tmp_path, spec, attempt=1)
    assert run_one(spec, folder)["status"] == "finished"
    rows = current(read_index(folder))
    assert [r["step"] for r in rows if r["kind"] == "transcript"] == [0, 8, 16]
    text = (folder / "videos" / "eval-000000016.txt").read_text()
    assert text.startswith("# seed ") and "\n> " in text and "# return " in text
    final = {r["path"] for r in rows if r["kind"] == "policy_final"}
    assert "attempt-1/policy/final/model/lm/config.json" in final  # transformers' save_pretrained
    plain = dataclasses.replace(spec, budget={**spec.budget, "video_every": None})
    assert run_one(plain, attempt_dir(tmp_path / "plain", plain, attempt=1))["status"] == "finished"
    assert rows_of(folder) == rows_of(
        attempt_dir(tmp_path / "plain", plain, attempt=1)
    )  # transcripts change none
    policy, _ = load_saved(folder / "policy" / "final")
    envs = [make_env("rlbench/MazeFO-v0", {"max_steps": 8}) for _ in range(2)]
    assert float(_episodes(envs, eval_seeds(0, 2), policy)[0].mean()) == _final_return(folder)


@pytest.mark.parametrize("name", ["bc", "decision_transformer"])
def test_an_offline_d3rlpy_run_keeps_its_policy(tmp_path, name):
    from offline_helpers import cartpole_controller, offline_spec, rollouts

    from rlbench_cli.algos import get_algorithm
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.sink import ShardSink

    data = rollouts("CartPole-v1", cartpole_controller, 4, 0.2)
    params = {"hidden_units": [16], "batch_size": 16, "logging_steps": 10}
    if name == "decision_transformer":
        params |= {"context_size": 5, "num_layers": 1, "num_heads": 1}
    spec = offline_spec(name, "CartPole-v1", 20, params, every=10)
    folder = tmp_path / "run" / "attempt-1"
    sink = ShardSink(folder / "metrics", background=False)
    ctx = RunContext(spec=spec, sink=sink, run_dir=folder, _dataset=data, keep_artifacts=True)
    get_algorithm(name)().train(ctx)
    sink.close()
    kinds = {r["kind"] for r in current(read_index(folder))}
    assert kinds == {"policy_best", "policy_final"}
    assert _replay(folder / "policy" / "final", "CartPole-v1", spec.seed, 2) == _final_return(folder)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_an_hf_decision_transformer_run_keeps_save_pretrained_and_its_conditioning(tmp_path, env_id):
    import json

    import torch
    from offline_helpers import cartpole_controller, offline_spec, pendulum_controller, rollouts
    from transformers import DecisionTransformerModel

    from rlbench_cli.algos import get_algorithm
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.sink import ShardSink

    torch.set_num_threads(1)
    cartpole = env_id == "CartPole-v1"
    data = rollouts(
        env_id, cartpole_controller if cartpole else pendulum_controller, 4 if cartpole else 2, 0.2
    )
    params = {"hidden_size": 16, "n_layer": 1, "context_length": 4, "batch_size": 8, "logging_steps": 5,
              "target_return": 321.0}  # fmt: skip
    spec = offline_spec("hf_decision_transformer", env_id, 10, params, every=5, episodes=3)
    folder = tmp_path / "run" / "attempt-1"
    sink = ShardSink(folder / "metrics", background=False)
    ctx = RunContext(spec=spec, sink=sink, run_dir=folder, _dataset=data, keep_artifacts=True)
    get_algorithm("hf_decision_transformer")().train(ctx)
    sink.close()
    rows = current(read_index(folder))
    assert {r["kind"] for r in rows} == {"policy_best", "policy_final"}
    final = folder / "policy" / "final" / "transformer"
    assert "attempt-1/policy/final/transformer/config.json" in {r["path"] for r in rows}  # save_pretrained
    model = DecisionTransformerModel.from_pretrained(str(final), local_files_only=True)  # transformers alone
    assert model.config.hidden_size == 16 and model.config.action_tanh == (not cartpole)
    conditioning = json.loads((final / "conditioning.json").read_text())
    assert conditioning["target_return"] == 321.0 and conditioning["context_length"] == 4
    assert (
        conditioning["discrete"] == cartpole and len(conditioning["obs_mean"]) == data.observations.shape[1]
    )
    assert _replay(folder / "policy" / "final", env_id, spec.seed, 3) == _final_return(folder)


def test_each_seed_of_a_packed_job_keeps_its_own_policies_and_videos(tmp_path):
    import torch

    from rlbench_cli.packed import run_packed

    torch.set_num_threads(1)
    specs = [dataclasses.replace(spec_of("packed-cartpole", seed), budget={**spec_of("packed-cartpole").budget,
                                 "video_every": 1}) for seed in (7, 8)]  # fmt: skip
    folders = [attempt_dir(tmp_path, s, attempt=1) for s in specs]
    assert all(r["status"] == "finished" for r in run_packed(specs, folders))
    assert "/".join(digest(rows_of(f)) for f in folders) in expected(
        "packed-cartpole"
    )  # the videos change nothing
    for spec, folder in zip(specs, folders):
        rows = current(read_index(folder))
        assert [r["step"] for r in rows if r["kind"] == "video"] == [0, 1024, 2048]
        assert _replay(folder / "policy" / "final", "CartPole-v1", spec.seed, 2) == _final_return(folder)
