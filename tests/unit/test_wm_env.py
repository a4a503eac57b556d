"""A world model played as a text env (``algos.text.wm_env``): with the real env's own dynamics as its world
model it replays the real env's trajectories; a model whose outputs cannot be parsed ends episodes, counted,
never raising; turns are capped; ``step_many`` asks each world model once for all its envs."""

from __future__ import annotations

import copy

import pytest

from rlbench_cli.algos.text.wm_env import WorldModelEnv, step_many
from rlbench_cli.envs import make_env
from rlbench_cli.envs.text.policies import scripted_policy

pytestmark = pytest.mark.fast


class Exact:
    """The real env's own dynamics as a world model: every observation seen maps to a copy of the env in
    that state (Maze FO's observation is its state), stepped on a copy for each prediction."""

    def __init__(self, env, obs: str):
        self.at = {obs: copy.deepcopy(env)}
        self.calls = 0

    def __call__(self, obs: list[str], actions: list[str]):
        self.calls += 1
        out = []
        for o, a in zip(obs, actions):
            twin = copy.deepcopy(self.at[o])
            nxt, r, term, _, _ = twin.step(a)
            self.at[str(nxt)] = twin
            out.append((str(nxt), float(r), bool(term)))
        return out


@pytest.mark.parametrize(("seed", "quality"), [(0, "optimal"), (1, "noisy"), (2, "random"), (3, "optimal")])
def test_an_exact_world_model_replays_the_real_envs_trajectory(seed, quality):
    real = make_env("rlbench/MazeFO-v0", None, seed)
    obs, info = real.reset(seed=seed)
    wm = WorldModelEnv(Exact(real, obs), [obs], max_turns=100, actions=real.unwrapped.valid_actions())
    assert wm.reset(seed=7)[0] == obs and wm.valid_actions() == real.unwrapped.valid_actions()
    policy = scripted_policy("rlbench/MazeFO-v0", quality, seed=seed)
    ended = False
    for k in range(40):
        action = "jump" if k == 3 else policy(obs, info)  # an invalid action too: -4, nothing moves
        want = real.step(action)
        got = wm.step(action)
        assert got[:3] == (str(want[0]), float(want[1]), bool(want[2])), (k, action)
        assert not got[3]  # 100 turns are far off
        obs, info = want[0], want[4]
        if want[2]:
            assert got[4]["success"] is True  # the goal's reward 0 is the success reward
            ended = True
            break
    assert ended or quality != "optimal"
    assert wm.errors == 0 and wm.turns == k + 1


def test_a_model_that_emits_garbage_ends_each_episode_with_a_counted_error():
    garbage = lambda obs, actions: [None for _ in obs]  # noqa: E731 - nothing parsable, ever
    envs = [WorldModelEnv(garbage, ["a", "b"], max_turns=5, error_reward=-3.0, seed=i) for i in range(3)]
    for env in envs:
        env.reset()
    for _ in range(4):
        out = step_many(envs, ["move up"] * 3)
        for env, (o, r, term, trunc, info) in zip(envs, out):
            assert (r, term, trunc, info["wm_error"]) == (-3.0, False, True, True)
            assert o == env.obs and o in ("a", "b")  # the observation stays as it was
            env.reset()
    assert [e.errors for e in envs] == [4, 4, 4] and [e.episodes for e in envs] == [4, 4, 4]


def test_turns_are_capped_and_a_predicted_end_is_judged_by_its_reward():
    loop = lambda obs, actions: [(o + ".", -1.0, False) for o in obs]  # noqa: E731 - never ends
    env = WorldModelEnv(loop, ["s"], max_turns=3)
    env.reset(seed=0)
    steps = [env.step("x") for _ in range(3)]
    assert [s[3] for s in steps] == [False, False, True] and steps[-1][0] == "s..."
    assert env.episodes == 1 and env.errors == 0
    env.reset()
    lose = WorldModelEnv(lambda o, a: [("end", -2.0, True)], ["s"], max_turns=3, success_reward=0.0)
    lose.reset()
    assert lose.step("x")[2:] == (True, False, {"imagined": True, "success": False})


def test_step_many_asks_each_world_model_once_and_keeps_the_envs_order():
    real = make_env("rlbench/MazeFO-v0", None, 0)
    starts = [str(real.reset(seed=s)[0]) for s in range(4)]
    models = [Exact(real, starts[0]), Exact(real, starts[0])]
    for m in models:  # both know every start
        for s in range(4):
            real.reset(seed=s)
            m.at[starts[s]] = copy.deepcopy(real)
    envs = [WorldModelEnv(models[i % 2], [starts[i]], max_turns=10) for i in range(4)]
    for env in envs:
        env.reset()
    out = step_many(envs, ["move up", "move down", "move left", "move right"])
    assert [m.calls for m in models] == [1, 1]
    for i, o in enumerate(out):
        alone = WorldModelEnv(Exact(models[i % 2].at[starts[i]], starts[i]), [starts[i]], max_turns=10)
        alone.reset()
        assert alone.step(["move up", "move down", "move left", "move right"][i])[:3] == o[:3]


def test_a_world_model_env_needs_a_start_and_a_turn():
    with pytest.raises(ValueError, match="start observation"):
        WorldModelEnv(lambda o, a: [], [], max_turns=3)
    with pytest.raises(ValueError, match="max_turns"):
        WorldModelEnv(lambda o, a: [], ["s"], max_turns=0)


def test_inside_a_world_model_of_textnav_the_policy_is_offered_the_predicted_rooms_commands():
    # TextNav's commands change with the room: a world-model env offers those its predicted observation lists
    # (the real env's actions_in), not the start room's, and an env that lists none keeps its fixed list
    from rlbench_cli.algos.text.offered import Offered, offered_to

    real = make_env("rlbench/TextNav-v0", None, 0)
    obs, _ = real.reset(seed=0)
    wm = WorldModelEnv(Exact(real, obs), [obs], max_turns=10, actions=real.unwrapped.valid_actions(),
                       actions_in=real.unwrapped.actions_in)  # fmt: skip
    wm.reset(seed=0)
    first = wm.valid_actions()
    assert first == real.unwrapped.valid_actions()
    move = next(a for a in first if a.startswith("go "))
    real.step(move)
    wm.step(move)
    assert wm.valid_actions() == real.unwrapped.valid_actions() != first  # another room, other commands
    offered = offered_to([real])[0]
    offered.obs = obs
    assert offered.valid_actions() == first
    maze = make_env("rlbench/MazeFO-v0", None, 0)
    fixed = offered_to([maze])[0]
    fixed.obs = "any text at all"
    assert fixed.valid_actions() == maze.unwrapped.valid_actions()  # a maze's moves do not change
    assert Offered(None).valid_actions() is None  # an open action set: the policy decodes its action
