"""Warm start of text ppo inside a world model (``algos.text.warm_start``), in process on tiny models:
``imagined_steps: 0`` leaves every metric of the cold start bitwise as it was; an imagined phase logs its
turns, returns and errors apart at real step 0 and the world model's fidelity beside them; an untrained world
model (whose outputs are mostly not whole outcomes) ends imagined episodes with counted errors, not a crash;
bad settings are one-line errors naming the field."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from text_ppo_helpers import PPO, TINY, maze_dataset, run_ppo

from rlbench_cli.algos import check_params
from rlbench_cli.algos.text.policy import build_model, build_tokenizer
from rlbench_cli.algos.text.warm_start import ImaginedPool, check_warm_start
from rlbench_cli.algos.text.wm_env import WorldModelEnv, model_predict
from rlbench_cli.algos.text.world_model import outcome_error, outcome_ids


@pytest.fixture(scope="module")
def maze_data(tmp_path_factory):
    return maze_dataset(tmp_path_factory.mktemp("data"), 6)


_run = run_ppo


def _own(rows, drop=("sys/", "eval/world_model/", "train/world_model", "train/imagined")):
    """The rows' metrics less the machine's and the warm start's own, in order."""
    out = []
    for step, values in rows:
        kept = {k: v for k, v in values.items() if not k.startswith(drop)}
        if kept:
            out.append((step, kept))
    return out


def test_imagined_steps_0_gives_bitwise_the_cold_starts_metrics(maze_data):
    cold = _run(PPO)
    warm = _run({**PPO, "warm_start": {**TINY, "world_model_steps": 2, "imagined_steps": 0,
                                       "max_outcome_tokens": 30, "dataset": maze_data}})  # fmt: skip
    assert _own(cold) == _own(warm)  # == on floats: bitwise, NaN aside (there is none)
    assert any(k.startswith("eval/return") for _, v in _own(cold) for k in v)
    logged = {k for _, v in warm for k in v}
    assert {"train/world_model_loss", "eval/world_model/em", "eval/world_model/real"} <= logged
    assert not any(k.startswith("train/imagined") for k in logged)


def test_an_imagined_phase_logs_apart_at_real_step_0(maze_data):
    warm = _run({**PPO, "warm_start": {**TINY, "world_model_steps": 2, "imagined_steps": 6, "max_turns": 4,
                                       "max_outcome_tokens": 30, "dataset": maze_data}})  # fmt: skip
    imagined = [(s, v) for s, v in warm if "train/imagined_steps" in v]
    assert imagined and all(s == 0 for s, _ in imagined)
    counts = [v["train/imagined_steps"] for _, v in imagined]
    assert counts == sorted(counts) and 6 <= counts[-1] < 6 + PPO["num_envs"]  # whole rounds of num_envs
    assert all(0.0 <= v["train/imagined_error_rate"] <= 1.0 for _, v in imagined)
    evals = [s for s, v in warm if "eval/return" in v]
    assert evals[0] == 0 and max(evals) == 8  # the real step axis: the cold start's budget
    first_eval = next(i for i, (_, v) in enumerate(warm) if "eval/return" in v)
    assert all(i < first_eval for i, (_, v) in enumerate(warm) if "train/imagined_steps" in v)
    assert {"eval/world_model/em", "eval/world_model/wm", "eval/world_model/w2r"} <= {
        k for _, v in warm for k in v
    }


def test_an_untrained_world_model_ends_imagined_episodes_with_counted_errors():
    from rlbench_cli.algos.text.online import collect
    from rlbench_cli.algos.text.policy import TextPolicy
    from rlbench_cli.envs.text.maze import FREE, describe_fo

    torch.manual_seed(0)
    settings = {**check_warm_start({**TINY, "imagined_steps": 1, "max_outcome_tokens": 12}), "history": 0}
    texts = [describe_fo(p) for p in FREE] + ["move up", "move down", "move left", "move right"]
    tok = build_tokenizer(settings, texts)
    wm = build_model(settings, tok)  # untrained: it generates any token in any order
    predict = model_predict(wm, tok, settings, "cpu")
    moves = ["move up", "move down", "move left", "move right"]
    envs = [WorldModelEnv(predict, texts[:3], 5, moves, error_reward=-1.0, seed=i) for i in range(3)]
    pool = ImaginedPool(envs, seed=0)
    agent = TextPolicy(
        build_model(settings, tok), tok, settings, "cpu", sample=True, rng=np.random.default_rng(0)
    )
    played, ended = collect(pool, agent, turns=30)
    assert len(played) == 30 and ended
    errors = sum(e.errors for e in envs)
    assert errors > 0 and errors <= sum(e.episodes for e in envs)
    # a whole outcome is no error, and a cut one is
    ids = outcome_ids(tok, texts[0], -1.0, False)
    assert outcome_error(tok, ids) is None
    assert outcome_error(tok, ids[:-1]) == "no <cont> or <done>" and outcome_error(tok, ids[1:]) == "no <obs>"


@pytest.mark.parametrize(
    ("algo", "env", "warm", "says"),
    [
        (
            "ppo",
            "CartPole-v1",
            {"imagined_steps": 10},
            "warm_start: a warm start learns inside a text world model",
        ),
        ("bc", "rlbench/MazeFO-v0", {"imagined_steps": 10}, "warm_start: bc does not take it"),
        ("ppo", "rlbench/MazeFO-v0", {"world_model_steps": 10}, "warm_start.imagined_steps is missing"),
        ("ppo", "rlbench/MazeFO-v0", {"imagined_steps": -1}, "warm_start.imagined_steps must be 0 or more"),
        (
            "ppo",
            "rlbench/MazeFO-v0",
            {"imagined_steps": 1, "world_model_steps": 0},
            "world_model_steps must be 1",
        ),
        (
            "ppo",
            "rlbench/MazeFO-v0",
            {"imagined_steps": 1, "start": "mid"},
            "warm_start.start must be one of",
        ),
        (
            "ppo",
            "rlbench/MazeFO-v0",
            {"imagined_steps": 1, "steps": 3},
            "unknown parameter(s) for warm_start",
        ),
        ("ppo", "rlbench/MazeFO-v0", 300, "warm_start must be a mapping"),
    ],
)
def test_bad_warm_starts_are_refused(algo, env, warm, says):
    with pytest.raises(ValueError) as e:
        check_params(algo, env, {"warm_start": warm})
    assert says in str(e.value) and "\n" not in str(e.value)
    check_params("ppo", "rlbench/MazeFO-v0", {"warm_start": {"imagined_steps": 10, "world_model_steps": 5}})
