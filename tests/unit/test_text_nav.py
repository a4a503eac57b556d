"""Text-Nav after LMRL-Gym: the house, its commands, winning by closing the stale food in the fridge, losing by
eating it, and the scripted walkthrough."""

from __future__ import annotations

import pytest

from rlbench_cli.datagen.text import build_text_dataset
from rlbench_cli.datasets.text import episode_returns
from rlbench_cli.envs import make_env
from rlbench_cli.envs.text.textnav import DOORS, ROOMS, admissible_from, shortest_path

pytestmark = pytest.mark.fast


def test_house_doors_are_symmetric_and_connected():
    for room, exits in DOORS.items():
        for d, other in exits.items():
            assert (
                DOORS[other][{"north": "south", "south": "north", "east": "west", "west": "east"}[d]] == room
            )
    assert all(shortest_path("garden", r) is not None for r in ROOMS)
    assert shortest_path("bedroom", "kitchen") == ["west", "west", "west"]


def test_walkthrough_wins_with_reward_one():
    env = make_env("rlbench/TextNav-v0")
    obs, info = env.reset(seed=0, options={"room": "bedroom"})
    assert obs.startswith("Your objective is to put the stale food") and info["room"] == "bedroom"
    assert admissible_from(obs) == env.unwrapped.valid_actions()
    steps = ["go west", "take stale food from table", "go west", "go west", "open fridge",
             "insert stale food into fridge"]  # fmt: skip
    for cmd in steps:
        obs, r, term, trunc, info = env.step(cmd)
        assert (r, term) == (0.0, False), (cmd, obs)
    obs, r, term, trunc, info = env.step("close fridge")
    assert (r, term, info["success"]) == (1.0, True, True) and obs.endswith("You won!")


def test_eating_the_stale_food_loses_and_bad_commands_change_nothing():
    env = make_env("rlbench/TextNav-v0")
    env.reset(seed=0, options={"room": "living room"})
    obs, r, term, _, info = env.step("fly away")
    assert "You can't do that." in obs and (r, term) == (0.0, False) and info["room"] == "living room"
    env.step("take stale food from table")
    obs, r, term, _, info = env.step("eat stale food")
    assert (r, term, info["success"]) == (0.0, True, False) and obs.endswith("You lost!")


def test_max_steps_truncates():
    env = make_env("rlbench/TextNav-v0", {"max_steps": 3})
    env.reset(seed=0, options={"room": "garden"})
    results = [env.step("go south"), env.step("go north"), env.step("go south")]
    assert [r[3] for r in results] == [False, False, True]


def test_scripted_optimal_always_wins_and_random_rarely():
    opt = build_text_dataset("rlbench/TextNav-v0", "optimal", 30, seed=0)
    assert episode_returns(opt) == [1.0] * 30
    rand = build_text_dataset("rlbench/TextNav-v0", "random", 30, seed=0)
    assert sum(episode_returns(rand)) <= 3
    assert len({ep[0]["observation"].split("\n")[1] for ep in opt}) > 1  # seeded start rooms differ


@pytest.mark.parametrize("level", ["noisy", "mixed"])
def test_noisy_and_mixed_lie_between(level):
    mean = sum(episode_returns(build_text_dataset("rlbench/TextNav-v0", level, 60, seed=1))) / 60
    assert 0.2 < mean < 1.0
