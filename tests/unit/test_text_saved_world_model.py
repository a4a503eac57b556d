"""A saved text world model reused by the agent-utility channels (``world_model:`` in ``verifier``,
``imagination``, ``warm_start``; ``algos.text.loaded``): the refusals of a channel's settings, each one line
naming the field (settings the model brings itself, an action head that never learned, another task's
words), and a loaded model predicting as the saved one did, in the verifier, the imagined episodes and the
warm start, with the loaded flag logged. Where it is found: test_saved_world_model_paths.py."""

from __future__ import annotations

import json

import pytest
import torch
from world_model_helpers import MAZE
from world_model_helpers import json_model as _json_model

from rlbench_cli.algos import check_params, get_algorithm
from rlbench_cli.algos.base import RunContext
from rlbench_cli.algos.text.common import settings_of, texts_of
from rlbench_cli.algos.text.loaded import vocabulary_problem
from rlbench_cli.algos.text.policy import TextPolicy, build_model, build_tokenizer
from rlbench_cli.algos.text.verifier import world_model_of
from rlbench_cli.algos.text.world_model import TextWorldModel
from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset
from rlbench_cli.suite.world_models import SavedWorldModel

TINY = {"n_embd": 16, "n_layer": 1, "n_head": 1, "batch_size": 4, "max_context": 96}


@pytest.mark.parametrize(
    ("algo", "channel", "extra", "says"),
    [
        (
            "bc",
            "verifier",
            {"world_model_steps": 10},
            "verifier.world_model_steps: a world model loaded from",
        ),
        ("bc", "verifier", {"n_embd": 32}, "verifier.n_embd: a world model loaded from"),
        (
            "bc",
            "verifier",
            {"outcome": "echo"},
            "verifier.outcome echo: the world model loaded from verifier.world_model predicts full",
        ),
        ("bc", "imagination", {"learning_rate": 1e-3}, "imagination.learning_rate: a world model loaded"),
        (
            "ppo",
            "warm_start",
            {"imagined_steps": 4, "max_context": 64},
            "warm_start.max_context: a world model",
        ),
    ],
)
def test_settings_a_loaded_world_model_brings_itself_are_refused(tmp_path, algo, channel, extra, says):
    folder = _json_model(tmp_path / "k")
    with pytest.raises(ValueError) as e:
        check_params(algo, MAZE, {channel: {"world_model": str(folder), **extra}})
    assert says in str(e.value) and "\n" not in str(e.value)
    check_params(
        algo,
        MAZE,
        {channel: {"world_model": str(folder), **({"imagined_steps": 4} if algo == "ppo" else {})}},
    )


def test_an_outcome_longer_than_the_loaded_models_positions_is_refused(tmp_path):
    folder = _json_model(tmp_path / "k", settings={"outcome": "full", "policy_weight": 1.0, "n_positions": 128,
                                                    "max_context": 96, "max_action_tokens": 16})  # fmt: skip
    with pytest.raises(ValueError, match=r"verifier.max_outcome_tokens 40: .* leave 14 for an outcome; give "
                                         r"verifier.max_outcome_tokens of at most 14"):  # fmt: skip
        check_params("bc", MAZE, {"verifier": {"world_model": str(folder), "max_outcome_tokens": 40}})
    check_params("bc", MAZE, {"verifier": {"world_model": str(folder), "max_outcome_tokens": 14}})


def test_imagination_refuses_a_world_model_whose_action_head_never_learned(tmp_path):
    folder = _json_model(tmp_path / "k", settings={"outcome": "full", "policy_weight": 0.0})
    with pytest.raises(ValueError, match="imagination.world_model: .* policy_weight 0"):
        check_params("bc", MAZE, {"imagination": {"world_model": str(folder)}})
    check_params("bc", MAZE, {"verifier": {"world_model": str(folder)}})  # the verifier reads outcomes only


@pytest.fixture(scope="module")
def maze(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "maze.jsonl"
    episodes = build_text_dataset(MAZE, "mixed", 6, seed=0)
    save_text_dataset(episodes, path)
    return str(path), episodes


def test_a_tokenizer_of_another_task_is_refused_by_the_words_it_lacks(
    maze, wamerican
):  # Wordle's data: its words
    _, episodes = maze
    texts = texts_of(episodes)

    def saved(task_texts):
        tok = build_tokenizer({"max_words": 2000}, task_texts)
        return SavedWorldModel(None, {"max_words": 2000}, tok.to_dict())  # type: ignore[arg-type]

    assert vocabulary_problem(saved(texts), texts, "verifier.world_model", MAZE) is None
    wordle = texts_of(build_text_dataset("rlbench/Wordle-v0", "mixed", 3, seed=0))
    problem = vocabulary_problem(saved(wordle), texts, "verifier.world_model", MAZE)
    assert problem.startswith("verifier.world_model: its tokenizer has 0% of rlbench/MazeFO-v0's words"), (
        problem
    )
    odd = vocabulary_problem(saved(texts), [*texts, "caf\u00e9"], "imagination.world_model", MAZE)
    assert odd.startswith("imagination.world_model: its tokenizer cannot spell '\u00e9'"), odd


@pytest.fixture(scope="module")
def kept(tmp_path_factory, maze):
    """A tiny untrained world model of Maze FO, kept as a text_world_model run keeps its final policy."""
    _, episodes = maze
    settings = settings_of("text_world_model", {**TINY, "max_outcome_tokens": 20}, TextWorldModel.own)
    settings["outcome"] = "full"
    tok = build_tokenizer(settings, texts_of(episodes))
    torch.manual_seed(0)
    model = build_model(settings, tok)
    final = tmp_path_factory.mktemp("run") / "attempt-1" / "policy" / "final"
    TextPolicy(model, tok, settings, "cpu").save(final / "model")
    (final / "policy.json").write_text(
        json.dumps({"file": "model", "algo": "text_world_model", "env_id": MAZE})
    )
    return final.parent.parent.parent, model, tok, settings


def test_a_loaded_world_model_predicts_as_the_saved_one(maze, kept):
    torch.set_num_threads(1)
    run, model, tok, saved_settings = kept
    _, episodes = maze
    settings = {
        **settings_of("verifier", {}, {"world_model": "", "max_outcome_tokens": 20}),
        "world_model": str(run),
    }
    got, got_tok, loss = world_model_of(episodes, settings, 0, "cpu", "verifier", MAZE)
    assert loss is None and got_tok.tokens == tok.tokens and not got.training
    assert settings["outcome"] == "full" and settings["max_context"] == saved_settings["max_context"]
    obs, acts = [str(t["observation"]) for t in episodes[0][:3]], [str(t["action"]) for t in episodes[0][:3]]
    assert TextWorldModel.predict(got, got_tok, obs, acts, settings, "cpu") == TextWorldModel.predict(
        model.eval(), tok, obs, acts, settings, "cpu"
    )


def _rows(algo: str, params: dict, path: str | None = None, **spec) -> dict:
    from rlbench_cli.suite.grid import RunSpec

    torch.set_num_threads(1)
    spec = RunSpec(suite="t", algo=algo, algo_name=algo, params=params, env_id=MAZE, env_kwargs={"max_steps": 5},
                   seed=0, budget={"steps": 2, "eval_every": 2, "eval_episodes": 2},
                   **({"dataset": "MazeFO-v0-mixed", "dataset_path": path} if path else {}), **spec)  # fmt: skip
    rows: dict = {}

    class Sink:
        def log(self, step, **values):
            rows.update(values)

        def log_many(self, step, values):
            rows.update(values)

    get_algorithm(algo, MAZE)().train(RunContext(spec=spec, sink=Sink()))
    return rows


def test_the_verifier_and_imagination_run_with_a_loaded_world_model(maze, kept):
    path, _ = maze
    run = str(kept[0])
    rows = _rows("bc", {**TINY, "verifier": {"world_model": run, "max_outcome_tokens": 20}}, path)
    assert rows["eval/verified/world_model_loaded"] == 1.0 and "eval/verified/world_model_loss" not in rows
    assert {"eval/verified/return", "eval/verified/veto_rate", "eval/verified/calls_per_step"} <= set(rows)
    rows = _rows("bc", {**TINY, "imagination": {"world_model": run, "max_turns": 2, "em_turns": 4,
                                                 "max_outcome_tokens": 20}}, path, data_mix="real+imagined")  # fmt: skip
    assert rows["train/world_model_loaded"] == 1.0 and "train/world_model_episodes" not in rows
    assert {"eval/world_model/em", "eval/world_model/real", "train/imagined_episodes"} <= set(rows)


def test_a_warm_start_runs_with_a_loaded_world_model(maze, kept):
    path, _ = maze
    params = {**TINY, "num_envs": 2, "n_steps": 4, "vocab_episodes": 2,
              "warm_start": {"world_model": str(kept[0]), "imagined_steps": 4, "max_turns": 2,
                             "max_outcome_tokens": 20, "em_turns": 4, "dataset": path}}  # fmt: skip
    rows = _rows("ppo", params)
    assert rows["train/world_model_loaded"] == 1.0 and "train/world_model_loss" not in rows
    assert {"train/imagined_steps", "eval/world_model/em", "eval/world_model/wm"} <= set(rows)


def test_a_run_refuses_a_world_model_whose_words_are_another_tasks_before_training(
    tmp_path, maze, kept, wamerican
):
    """Where the suite cannot tell (a bare model folder: no policy.json names its env), the run does, from its
    dataset, before the agent trains."""
    path = tmp_path / "wordle.jsonl"
    save_text_dataset(build_text_dataset("rlbench/Wordle-v0", "mixed", 3, seed=0), path)
    from rlbench_cli.suite.grid import RunSpec

    spec = RunSpec(suite="t", algo="bc", algo_name="bc", env_id="rlbench/Wordle-v0", env_kwargs={}, seed=0,
                   params={**TINY, "verifier": {"world_model": str(kept[0] / "attempt-1" / "policy" / "final" / "model")}},
                   budget={"steps": 2, "eval_every": 2, "eval_episodes": 1}, dataset="Wordle-v0-mixed",
                   dataset_path=str(path))  # fmt: skip
    trained = []

    class Sink:
        def log(self, step, **values):
            trained.append(step)

    with pytest.raises(
        ValueError, match="verifier.world_model: its tokenizer has .* of rlbench/Wordle-v0's words"
    ):
        get_algorithm("bc", spec.env_id)().train(RunContext(spec=spec, sink=Sink()))
    assert trained == []
