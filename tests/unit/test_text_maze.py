"""The text Maze (LMRL-Gym's double-T maze), its scripted policies and the text dataset format."""

from __future__ import annotations

import json
import statistics

import pytest

from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset
from rlbench_cli.datasets.episodes import TextEpisodes
from rlbench_cli.datasets.names import parse_text_name, text_dataset_name
from rlbench_cli.datasets.text import episode_returns, load_text_dataset
from rlbench_cli.envs import known_env, make_env
from rlbench_cli.envs.text.policies import scripted_policy
from rlbench_cli.errors import ImportInvalid

pytestmark = pytest.mark.fast


def test_maze_ids_are_known():
    for env_id in ("rlbench/MazeFO-v0", "rlbench/MazePO-v0"):
        assert known_env(env_id) is None


def test_fo_observation_reaching_the_goal_and_rewards():
    env = make_env("rlbench/MazeFO-v0")
    obs, info = env.reset(seed=0, options={"init_position": (6, 6)})
    assert obs == (
        "The goal is at position 8, 6. Your current position is at position 6, 6. "
        "There are walls to your right, to your left."
    )
    assert env.unwrapped.valid_actions() == ["move left", "move right", "move up", "move down"]
    obs, r, term, trunc, info = env.step("move down\n")
    assert (r, term, trunc, info["position"]) == (-1.0, False, False, (7, 6))
    obs, r, term, trunc, info = env.step("move down")
    assert (obs, r, term, trunc, info["success"]) == ("Success", 0.0, True, False, True)


def test_wall_bump_costs_one_invalid_text_costs_four_and_nothing_moves():
    env = make_env("rlbench/MazeFO-v0")
    env.reset(seed=0, options={"init_position": (1, 1)})
    _, r, *_, info = env.step("move up")
    assert (r, info["position"], info["invalid"]) == (-1.0, (1, 1), False)
    _, r, *_, info = env.step("jump")
    assert (r, info["position"], info["invalid"]) == (-4.0, (1, 1), True)
    obs, *_ = env.step("move right")
    assert "position 1, 2." in obs


def test_episode_is_cut_after_100_steps_with_lmrl_failure_penalty():
    env = make_env("rlbench/MazeFO-v0")
    env.reset(seed=0, options={"init_position": (1, 1)})
    total, steps = 0.0, 0
    while True:
        obs, r, term, trunc, _ = env.step("move up")
        total, steps = total + r, steps + 1
        if term or trunc:
            break
    assert (steps, total, term, trunc, obs) == (100, -101.0, False, True, "Failure")


def test_po_observation_is_the_history_of_walls_and_moves():
    env = make_env("rlbench/MazePO-v0")
    obs, _ = env.reset(seed=0, options={"init_position": (1, 1)})
    assert obs == "There are walls to your left, above you, below you."
    obs, *_ = env.step("move right")
    assert obs == (
        "There are walls to your left, above you, below you.\nmove right\nThere are walls above you, below you."
    )
    assert "position" not in obs


def test_reset_is_seeded():
    env = make_env("rlbench/MazeFO-v0")
    starts = [env.reset(seed=s)[1]["position"] for s in range(10)]
    assert starts == [env.reset(seed=s)[1]["position"] for s in range(10)]
    assert len(set(starts)) > 1


@pytest.mark.parametrize("env_id", ["rlbench/MazeFO-v0", "rlbench/MazePO-v0"])
def test_optimal_policy_reaches_the_goal_from_every_start(env_id):
    from rlbench_cli.envs.text.maze import FREE, GOAL

    env = make_env(env_id)
    policy = scripted_policy(env_id, "optimal", seed=0)
    returns = []
    for start in (p for p in FREE if p != GOAL):
        obs, info = env.reset(seed=0, options={"init_position": start})
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, info = env.step(policy(obs, info))
            total, done = total + r, term or trunc
        assert term
        returns.append(total)
    assert statistics.mean(returns) == pytest.approx(-6.84)  # LMRL-Gym's Maze maximum


def test_build_save_load_round_trip(tmp_path):
    data = build_text_dataset("rlbench/MazeFO-v0", "mixed", 12, seed=3)
    assert isinstance(data, TextEpisodes) and len(data) == 12 and data.env == "rlbench/MazeFO-v0"
    assert set(data.meta["qualities"]) <= {"optimal", "noisy", "random"}
    for ep in data:
        assert ep[-1]["done"] and not any(t["done"] for t in ep[:-1])
        assert all(isinstance(t["observation"], str) and isinstance(t["action"], str) for t in ep)
    assert build_text_dataset("rlbench/MazeFO-v0", "mixed", 12, seed=3) == data
    path = save_text_dataset(data, tmp_path / "MazeFO-v0-mixed.jsonl")
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"env", "level", "turns"} and first["level"] == "mixed"
    back = load_text_dataset(path)
    assert back == data and back.env == data.env and back.level == "mixed"


def test_levels_are_ordered_by_return():
    mean = {
        lv: statistics.mean(episode_returns(build_text_dataset("rlbench/MazeFO-v0", lv, 60, seed=0)))
        for lv in ("optimal", "noisy", "random")
    }
    assert mean["optimal"] > mean["noisy"] > mean["random"]


def test_names():
    assert text_dataset_name("rlbench/MazeFO-v0", "mixed") == "MazeFO-v0-mixed"
    assert parse_text_name("MazePO-v0-optimal") == ("rlbench/MazePO-v0", "optimal")
    assert parse_text_name("CartPole-v1-medium") is None
    assert parse_text_name("Nope-v0-mixed") is None


def test_malformed_line_names_file_and_line(tmp_path):
    p = tmp_path / "d.jsonl"
    good = json.dumps({"env": "rlbench/MazeFO-v0", "level": "x", "turns": [
        {"observation": "o", "action": "move up", "reward": -1, "done": True}]})  # fmt: skip
    p.write_text(good + "\n{not json\n")
    with pytest.raises(ImportInvalid, match=r"d\.jsonl:2: not a JSON object"):
        load_text_dataset(p)
    p.write_text(good + "\n" + json.dumps({"env": "e", "level": "x", "turns": [{"observation": "o"}]}) + "\n")
    with pytest.raises(ImportInvalid, match=r"d\.jsonl:2: each turn needs"):
        load_text_dataset(p)
    with pytest.raises(ImportInvalid, match="no such dataset file"):
        load_text_dataset(tmp_path / "missing.jsonl")


def test_suite_dataset_name_resolves_to_the_text_env_and_is_built(tmp_path):
    from rlbench_cli.datagen import ensure_datasets
    from rlbench_cli.suite.models import DatasetSpec

    spec = DatasetSpec(name="MazePO-v0-noisy")
    assert spec.env == "rlbench/MazePO-v0" and spec.generated
    (path,) = ensure_datasets([spec], root=tmp_path)
    assert path == tmp_path / "MazePO-v0-noisy.jsonl"
    data = load_text_dataset(path)
    assert data.env == "rlbench/MazePO-v0" and len(data) == 1000
    assert "\n" in data[0][-1]["observation"] or len(data[0]) == 1  # PO: the history
