"""The world-model verifier of text agents (``algos.text.verifier``): its veto rule, its veto logic on Maze FO
with a tiny untrained agent and a judge that knows the maze (an exact world model: the real env replayed from
the observed cell), the ``eval/verified/*`` metrics of a tiny bc run, and its bad input."""

from __future__ import annotations

import copy

import pytest
import torch

from rlbench_cli.algos import check_params, get_algorithm
from rlbench_cli.algos.base import RunContext, _episodes
from rlbench_cli.algos.text.policy import TextPolicy, build_model, build_tokenizer
from rlbench_cli.algos.text.verifier import (
    check_verifier,
    play_verified,
    predicted_failure,
    real_failure,
    remembers_episode,
    turn_text,
)
from rlbench_cli.envs import make_env
from rlbench_cli.envs.text.maze import FREE, GOAL, MazeFO, MazePO, describe_fo
from rlbench_cli.suite.grid import RunSpec

TINY = {"n_embd": 16, "n_layer": 1, "n_head": 1, "batch_size": 4, "max_context": 96}


def test_the_veto_rule():
    seen = {"a", "b"}
    assert predicted_failure("a", seen, ("a", -1.0, False), 0.0)  # nothing changes: a wall
    assert predicted_failure("b", seen, ("a", -1.0, False), 0.0)  # back to a seen observation: a loop
    assert not predicted_failure("b", seen, ("c", -1.0, False), 0.0)  # somewhere new
    assert not predicted_failure("b", seen, ("a", 0.0, True), 0.0)  # the goal reached (0 in the mazes)
    assert predicted_failure("b", seen, ("c", -2.0, True), 0.0)  # the end without success


def _po_turn(start, action):
    """Maze PO from ``start``: the first observation, the env, and the real outcome of ``action``."""
    env = MazePO()
    obs, _ = env.reset(seed=0, options={"init_position": start})
    twin = MazePO()
    twin.reset(seed=0, options={"init_position": start})
    nxt, r, term, trunc, _ = twin.step(action)
    return obs, env, (nxt, r, term or trunc)


def test_on_maze_po_a_move_into_a_wall_is_a_predicted_and_a_real_failure_and_a_step_is_not():
    mode = "echo"  # what outcome: auto picks on Maze PO's data
    # (1, 1): walls to the left, above, below; (1, 2): walls above and below
    obs, env, bump = _po_turn((1, 1), "move up")
    seen = {obs}  # the first observation: the first turn's new text
    assert bump[0] != obs and bump[0].startswith(obs)  # a history always grows...
    assert turn_text(obs, "move up", bump[0], "echo") == obs  # ...by the same walls line again
    assert predicted_failure(obs, seen, bump, 0.0, "move up", mode)
    assert real_failure(env, "move up", obs, seen, mode) is True
    _, _, step = _po_turn((1, 1), "move right")
    assert not predicted_failure(obs, seen, step, 0.0, "move right", mode)
    assert real_failure(env, "move right", obs, seen, mode) is False
    # the whole-observation rule misses the bump: a history never repeats
    assert not predicted_failure(obs, seen, bump, 0.0)
    assert real_failure(env, "move up", obs, seen) is False


def _po_judge(env):
    """Maze PO's exact outcome: the real ``env`` copied and stepped."""

    def judge(obs, actions):
        out = []
        for o, a in zip(obs, actions):
            assert o == env.unwrapped._last_obs  # one env, played by one agent
            nxt, r, term, trunc, _ = copy.deepcopy(env).step(a)
            out.append((nxt, r, term or trunc))
        return out

    return judge


def test_an_exact_world_model_of_maze_po_vetoes_moves_into_walls_with_the_new_text_rule():
    settings = {**check_verifier({**TINY, "tries": 4}), "history": 0, "outcome": "echo"}
    vetoes = 0
    for s in range(3):
        env = make_env("rlbench/MazePO-v0", {"max_steps": 12}, s)
        out = play_verified([env], [s], _policy(settings), _po_judge(env), settings)
        assert out["checked"] == out["vetoes"] and out["false_vetoes"] == 0  # judged by the same rule
        vetoes += out["vetoes"]
    assert vetoes > 0  # an untrained agent walks into walls; the whole-observation rule never vetoes here


def _textnav_policy(settings):
    from rlbench_cli.envs.text.textnav import TextNavEnv

    env = TextNavEnv()
    texts = [str(env.reset(seed=s)[0]) for s in range(8)] + ["You go east. You go west. north south"]
    torch.manual_seed(0)
    tok = build_tokenizer(settings, texts)
    return TextPolicy(build_model(settings, tok), tok, settings, "cpu")


def test_loops_episode_vetoes_a_return_to_a_turn_seen_earlier_on_textnav_and_last_does_not():
    # TextNav's new text after a move names the door and the room with what is in it: an agent walking back and
    # forth repeats a turn from two turns before, never the last one; an exact world model (the env copied)
    # vetoes that only when the verifier remembers the episode
    vetoes = {}
    for loops in ("last", "episode"):
        settings = {**check_verifier({**TINY, "max_context": 256, "tries": 4, "success_reward": 1.0,
                                      "loops": loops}), "history": 0, "outcome": "echo"}  # fmt: skip
        assert remembers_episode(settings, "echo") is (loops == "episode")
        vetoes[loops] = 0
        for s in range(3):
            env = make_env("rlbench/TextNav-v0", {"max_steps": 12}, s)
            out = play_verified([env], [s], _textnav_policy(settings), _po_judge(env), settings)
            assert out["checked"] == out["vetoes"] and out["false_vetoes"] == 0  # judged by the same rule
            vetoes[loops] += out["vetoes"]
    assert vetoes["episode"] > vetoes["last"]


def test_loops_auto_remembers_the_episode_for_whole_observations_and_the_last_turn_for_a_history():
    auto = check_verifier({})
    assert auto["loops"] == "auto"
    assert remembers_episode(auto, "full") and not remembers_episode(auto, "echo")
    assert not remembers_episode(auto, "suffix")
    assert not remembers_episode({**auto, "loops": "last"}, "full")
    assert remembers_episode({**auto, "loops": "episode"}, "suffix")
    seen = {"you go east", "you go west"}  # a history's earlier turns, remembered
    assert predicted_failure("h", seen, ("h\ngo east\nyou go east", 0.0, False), 1.0, "go east", "echo")


def _maze_judge(obs: list[str], actions: list[str]) -> list[tuple[str, float, bool]]:
    """Maze FO's exact outcome: the real env started at the cell the observation names."""
    cell = {describe_fo(p): p for p in FREE if p != GOAL}
    out = []
    for o, a in zip(obs, actions):
        env = MazeFO()
        env.reset(seed=0, options={"init_position": cell[o]})
        nxt, r, term, trunc, _ = env.step(a)
        out.append((nxt, r, term or trunc))
    return out


def _policy(settings):
    torch.manual_seed(0)
    texts = [describe_fo(p) for p in FREE] + ["move up", "move down", "move left", "move right"]
    tok = build_tokenizer(settings, texts)
    return TextPolicy(build_model(settings, tok), tok, settings, "cpu")


def test_an_exact_world_model_vetoes_only_bad_actions_and_replaces_them_with_the_next_choice():
    settings = {**check_verifier({**TINY, "tries": 4}), "history": 0}
    envs = [make_env("rlbench/MazeFO-v0", {"max_steps": 12}, s) for s in range(4)]
    out = play_verified(envs, list(range(4)), _policy(settings), _maze_judge, settings)
    assert out["turns"] == int(out["lengths"].sum())
    assert out["turns"] <= out["calls"] <= 4 * out["turns"]
    assert out["vetoes"] > 0  # an untrained agent walks into walls and back
    assert (
        out["checked"] == out["vetoes"] and out["false_vetoes"] == 0
    )  # an exact model vetoes no good action


def test_a_judge_that_predicts_failure_everywhere_leaves_the_agent_as_it_plays_alone():
    settings = {**check_verifier({**TINY, "tries": 3}), "history": 0}
    envs = [make_env("rlbench/MazeFO-v0", {"max_steps": 5}, s) for s in range(2)]
    always = lambda obs, actions: [(o, -1.0, False) for o in obs]  # noqa: E731 - nothing ever changes
    policy = _policy(settings)
    out = play_verified(envs, [0, 1], policy, always, settings)
    assert out["vetoes"] == 0 and out["calls"] == 3 * out["turns"]
    returns, lengths, _, _, _ = _episodes(envs, [0, 1], policy)  # the agent alone, as eval/return plays it
    assert out["returns"].tolist() == returns.tolist() and out["lengths"].tolist() == lengths.tolist()


def _bc_run(path, verifier, max_steps, episodes) -> list[tuple[int, dict]]:
    """The rows a 2-step bc run on Maze FO's dataset at ``path`` logs with ``verifier``."""
    spec = RunSpec(suite="t", algo="bc", algo_name="bc", params={**TINY, "verifier": verifier},
                   env_id="rlbench/MazeFO-v0", env_kwargs={"max_steps": max_steps}, seed=0,
                   budget={"steps": 2, "eval_every": 2, "eval_episodes": episodes},
                   dataset="MazeFO-v0-mixed", dataset_path=str(path))  # fmt: skip
    rows: list[tuple[int, dict]] = []

    class Sink:
        def log(self, step, **values):
            rows.append((step, values))

    get_algorithm("bc", spec.env_id)().train(RunContext(spec=spec, sink=Sink()))
    return rows


@pytest.mark.parametrize("holdout", [0.5, 0.0])
def test_a_bc_run_logs_the_agent_with_and_without_the_verifier(tmp_path, monkeypatch, holdout):
    # and its world model's fidelity, as the other channels log it: EM on the dataset's held-out last episodes
    # (never trained on), Real / WM / W2R / CR of the agent with it; no held-out episodes, no EM
    from rlbench_cli.algos.text import verifier as verifier_mod
    from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset

    path = tmp_path / "MazeFO-v0-mixed.jsonl"
    data = build_text_dataset("rlbench/MazeFO-v0", "mixed", 6, seed=0)
    save_text_dataset(data, path)
    trained_on: list[list] = []
    train = verifier_mod.train_world_model
    monkeypatch.setattr(
        verifier_mod,
        "train_world_model",
        lambda eps, *a, **k: (trained_on.append(eps), train(eps, *a, **k))[1],
    )
    torch.set_num_threads(1)
    verifier = {**TINY, "world_model_steps": 2, "max_outcome_tokens": 40, "holdout_fraction": holdout}
    rows = _bc_run(path, verifier, max_steps=5, episodes=2)
    last = {k: v for _, row in rows for k, v in row.items()}
    assert {"eval/return", "eval/success", "eval/verified/return", "eval/verified/success",
            "eval/verified/normalized_return", "eval/verified/world_model_loss"} <= set(last)  # fmt: skip
    assert 1.0 <= last["eval/verified/calls_per_step"] <= 3.0  # tries: 3 by default
    assert 0.0 <= last["eval/verified/veto_rate"] <= 1.0
    assert [s for s, row in rows if "eval/verified/return" in row] == [2]
    n_train = 3 if holdout else 6
    assert [[ep[0]["observation"] for ep in eps] for eps in trained_on] == [
        [ep[0]["observation"] for ep in list(data)[:n_train]]
    ]
    assert {"eval/world_model/real", "eval/world_model/wm", "eval/world_model/w2r"} <= set(last)
    assert ("eval/world_model/em" in last) == bool(holdout)
    assert 0.0 <= last.get("eval/world_model/em", 0.0) <= 1.0
    assert last["eval/world_model/real"] == last["eval/success"]  # the agent alone, the same episodes


def test_an_oracle_verifier_asks_a_copy_of_the_real_env_and_trains_no_world_model(tmp_path, monkeypatch):
    # the channel's ceiling: an exact world model, flagged, with no world-model metrics to report
    from rlbench_cli.algos.text import verifier as verifier_mod
    from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset

    path = tmp_path / "MazeFO-v0-mixed.jsonl"
    save_text_dataset(build_text_dataset("rlbench/MazeFO-v0", "mixed", 4, seed=0), path)
    monkeypatch.setattr(
        verifier_mod, "train_world_model", lambda *a, **k: pytest.fail("trained a world model")
    )
    torch.set_num_threads(1)
    last = {
        k: v
        for _, row in _bc_run(path, {"oracle": True, "tries": 4}, max_steps=8, episodes=4)
        for k, v in row.items()
    }
    assert last["eval/verified/oracle"] == 1.0 and "eval/verified/world_model_loss" not in last
    assert not [k for k in last if k.startswith("eval/world_model/")]
    assert last["eval/verified/veto_rate"] > 0  # a barely trained agent walks into walls and back
    assert last["eval/verified/false_veto_rate"] == 0.0  # an exact model vetoes no good action


def test_an_oracle_on_an_env_that_cannot_be_copied_is_refused_before_the_agent_trains():
    import threading

    from rlbench_cli.algos.text.verifier import check_oracle

    class Holding:  # an env holding a lock, as Stockfish's holds a process: no deep copy
        def __init__(self):
            self.lock, self.closed = threading.Lock(), False

        def reset(self, seed=None):
            return "start", {}

        def close(self):
            self.closed = True

    made: list[Holding] = []
    make = lambda: made.append(Holding()) or made[-1]  # noqa: E731
    with pytest.raises(ValueError, match=r"verifier.oracle: this env cannot be copied \(TypeError\)"):
        check_oracle({"oracle": True}, make)
    assert made[0].closed
    check_oracle({"oracle": False}, make)  # no oracle: no env made
    assert len(made) == 1


@pytest.mark.parametrize(
    ("algo", "env", "verifier", "says"),
    [
        ("bc", "CartPole-v1", {"world_model_steps": 10}, "only on a text task"),
        ("ppo", "rlbench/MazeFO-v0", {"world_model_steps": 10}, "ppo does not take it"),
        ("text_world_model", "rlbench/MazeFO-v0", {}, "text_world_model does not take it"),
        ("bc", "rlbench/MazeFO-v0", {"world_model_steps": 0}, "verifier.world_model_steps must be 1 to"),
        (
            "ilql",
            "rlbench/MazeFO-v0",
            {"world_model_steps": 10**7},
            "verifier.world_model_steps must be 1 to",
        ),
        ("bc", "rlbench/MazeFO-v0", {"tries": 1}, "verifier.tries must be 2 to"),
        ("bc", "rlbench/MazeFO-v0", {"loops": "all"}, "verifier.loops must be one of auto, episode, last"),
        ("bc", "rlbench/MazeFO-v0", {"oracle": True, "world_model": "runs/x"}, "verifier.oracle: an oracle"),
        ("bc", "rlbench/MazeFO-v0", {"holdout_fraction": 1.0}, "verifier.holdout_fraction must be in [0, 1)"),
        ("filtered_bc", "rlbench/MazeFO-v0", {"steps": 3}, "unknown parameter(s) for verifier: steps"),
        ("bc", "rlbench/MazeFO-v0", 300, "verifier must be a mapping"),
    ],
)
def test_bad_verifiers_are_refused(algo, env, verifier, says):
    with pytest.raises(ValueError, match=None) as e:
        check_params(algo, env, {"verifier": verifier})
    assert says in str(e.value) and "\n" not in str(e.value)
    check_params("ilql", "rlbench/MazeFO-v0", {"verifier": {"world_model_steps": 10, "tries": 2}})
