"""Episode videos of a run on a gymnax task (``budget.video_every`` with ``ppo_jax``/``pqn_jax``) without JAX:
the seed's policy at an evaluation plays the first evaluation seed's episode in the task's gymnasium version,
as ``rlbench enjoy --video`` plays it, and its frames are drawn in a child process (a fresh interpreter where
JAX runs: ``keep._spawn``); a task gymnax has no gymnasium version of is refused by name."""

import numpy as np
import pytest

from rlbench_cli.algos.base import RunContext, eval_seeds
from rlbench_cli.algos.gymnax.policy import GymnaxPolicy, flatten
from rlbench_cli.algos.keep import _spawn, offscreen, play_episode
from rlbench_cli.artifacts import current, read_index
from rlbench_cli.envs import make_env
from rlbench_cli.envs.gymnax import drawn_in
from rlbench_cli.sink import ShardSink
from rlbench_cli.suite.grid import RunSpec

pytestmark = pytest.mark.slow


def _policy(seed: int) -> GymnaxPolicy:
    rng = np.random.default_rng(seed)
    actor = [(rng.normal(size=(a, b)).astype(np.float32), rng.normal(size=b).astype(np.float32))
             for a, b in [(4, 8), (8, 2)]]  # fmt: skip
    meta = {"program": "ppo", "params": {"hidden_sizes": [8], "normalize_obs": False},
            "env_id": "gymnax/CartPole-v1", "continuous": False, "seed": seed}  # fmt: skip
    return GymnaxPolicy(meta, arrays=flatten({"params": {"actor": actor}}))


def _frames(path):
    import imageio.v3 as iio

    return iio.imread(path)


def _enjoyed(policy: GymnaxPolicy, seed: int) -> int:
    """The length of the episode ``rlbench enjoy --video`` plays for the run of ``seed``."""
    env = make_env(drawn_in("gymnax/CartPole-v1"))
    return len(play_episode(env, eval_seeds(seed, 1)[0], policy).actions)


def test_each_kth_evaluation_of_a_gymnax_run_is_drawn_in_gymnasium(tmp_path):
    spec = RunSpec(suite="v", algo="ppo_jax", algo_name="ppo_jax", params={}, env_id="gymnax/CartPole-v1",
                   env_kwargs={}, seed=3, budget={"steps": 300, "eval_every": 100, "eval_episodes": 2,
                                                  "video_every": 2})  # fmt: skip
    ctx = RunContext(spec=spec, sink=ShardSink(tmp_path / "metrics"), run_dir=tmp_path, keep_artifacts=True)
    policies = {step: _policy(step) for step in (0, 100, 200, 300)}
    for step, policy in policies.items():  # what ppo_jax's loop hands over after each compiled chunk
        ctx.log_evaluation(step, np.array([10.0, 12.0]), np.array([10.0, 12.0]), policy)
    ctx.wait_artifacts()
    videos = [r for r in current(read_index(tmp_path)) if r["kind"] == "video"]
    assert [r["step"] for r in videos] == [100, 300]  # the 2nd and the 4th evaluation
    for r in videos:  # the seed's policy at that step, one frame after the reset and one a step
        frames = _frames(tmp_path.parent / r["path"])
        assert frames.shape[1:] == (400, 600, 3) and len(frames) == _enjoyed(policies[r["step"]], 3) + 1


def test_a_fresh_interpreter_draws_the_replay(tmp_path):
    """Where JAX runs, the frames are drawn by ``python -m rlbench_cli.algos.keep``, not a fork."""
    offscreen()
    policy = _policy(1)
    episode = play_episode(make_env("CartPole-v1"), 5, policy)
    out = tmp_path / "eval.mp4"
    ended = _spawn(out, "CartPole-v1", {}, [], 5, episode.actions)
    assert ended(True) == 0 and len(_frames(out)) == len(episode.actions) + 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.mp4"]  # its job file is gone


def test_a_gymnax_task_without_a_gymnasium_version_is_named():
    assert drawn_in("gymnax/Acrobot-v1") == "Acrobot-v1" and drawn_in("CartPole-v1") == "CartPole-v1"
    with pytest.raises(ValueError, match="gymnax/Breakout-MinAtar has no gymnasium version"):
        drawn_in("gymnax/Breakout-MinAtar")
