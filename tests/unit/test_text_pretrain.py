"""Behaviour-cloning pre-training of text ppo (``pretrain:``, ``algos.text.pretrain``), in process on tiny
models: the cloning logs apart at real step 0 before the first evaluation and lowers its loss; a run with the
same seed starts from the same cloned policy with or without a warm start (so cold and warm pair by seed);
bad settings are one-line errors naming the field, in the params and in the suite."""

from __future__ import annotations

import pytest
from text_ppo_helpers import PPO, TINY, maze_dataset, run_ppo

from rlbench_cli.algos import check_params
from rlbench_cli.errors import SuiteInvalid

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def maze_data(tmp_path_factory):
    return maze_dataset(tmp_path_factory.mktemp("data"), 8)


_run = run_ppo


def _metrics(rows, prefix):
    return [(s, v[k]) for s, v in rows for k in v if k.startswith(prefix)]


def test_cloning_logs_apart_at_step_0_before_the_first_evaluation_and_learns(maze_data):
    rows = _run({**PPO, "pretrain": {"bc_steps": 60, "logging_steps": 20, "dataset": maze_data,
                                     "train_episodes": 6, "batch_size": 8}})  # fmt: skip
    losses = _metrics(rows, "train/pretrain/loss")
    assert [s for s, _ in losses] == [0, 0, 0] and losses[-1][1] < losses[0][1]
    assert _metrics(rows, "train/pretrain/episodes") == [(0, 6.0)]
    assert _metrics(rows, "train/pretrain/turns")[0][1] > 6
    first_eval = next(i for i, (_, v) in enumerate(rows) if "eval/return" in v)
    assert all(
        i < first_eval for i, (_, v) in enumerate(rows) if any(k.startswith("train/pretrain") for k in v)
    )
    assert max(s for s, _ in _metrics(rows, "eval/return")) == 8  # the real-step axis is unchanged


def test_cold_and_warm_start_from_the_same_cloned_policy(maze_data):
    pre = {"bc_steps": 10, "dataset": maze_data, "train_episodes": 4}

    def own(rows):  # the run's metrics less the machine's and the world model's
        kept = [(s, {k: x for k, x in v.items() if k.startswith(("eval/", "train/pretrain", "train/loss"))
                     and not k.startswith("eval/world_model/")}) for s, v in rows]  # fmt: skip
        return [r for r in kept if r[1]]

    cold = _run({**PPO, "pretrain": pre})
    assert own(cold) == own(_run({**PPO, "pretrain": pre}))  # the same seed: bitwise the same run
    warm = _run({**PPO, "pretrain": pre, "warm_start": {**TINY, "world_model_steps": 2, "imagined_steps": 0,
                                                        "max_outcome_tokens": 30, "dataset": maze_data}})  # fmt: skip
    assert own(cold) == own(warm)
    without = _run(PPO)
    assert _metrics(without, "train/pretrain") == [] and _metrics(without, "train/loss") != _metrics(
        cold, "train/loss"
    )


@pytest.mark.parametrize(
    ("algo", "env", "pre", "says"),
    [
        ("ppo", "CartPole-v1", {"bc_steps": 10}, "pretrain: behaviour cloning before the first turn is an option"),
        ("bc", "rlbench/MazeFO-v0", {"bc_steps": 10}, "pretrain: behaviour cloning before the first turn"),
        ("ppo", "rlbench/MazeFO-v0", {"train_episodes": 3}, "pretrain.bc_steps is missing"),
        ("ppo", "rlbench/MazeFO-v0", {"bc_steps": 0}, "pretrain.bc_steps must be 1 to 100000, got 0"),
        ("ppo", "rlbench/MazeFO-v0", {"bc_steps": 5, "lr": 0.1}, "unknown parameter(s) for pretrain: lr; valid:"),
        ("ppo", "rlbench/MazeFO-v0", {"bc_steps": 5, "learning_rate": 0}, "pretrain.learning_rate must be above 0"),
        ("ppo", "rlbench/MazeFO-v0", {"bc_steps": "many"}, "bc_steps"),
        ("ppo", "rlbench/MazeFO-v0", 300, "pretrain must be a mapping"),
    ],
)  # fmt: skip
def test_bad_pretraining_is_refused(algo, env, pre, says):
    with pytest.raises(ValueError) as e:
        check_params(algo, env, {"pretrain": pre})
    assert says in str(e.value) and "\n" not in str(e.value)
    check_params("ppo", "rlbench/MazeFO-v0", {"pretrain": {"bc_steps": 10}})


@pytest.mark.parametrize(
    ("algorithms", "head", "says"),
    [
        ("  - {name: ppo, params: {pretrain: {bc_steps: 4}}}\n", "",
         "algorithms[0].params.pretrain: rlbench/MazeFO-v0 has no dataset to clone (the suite has no dataset "
         "MazeFO-v0-mixed); add MazeFO-v0-mixed to the suite's datasets:"),
        ("  - {name: ppo, params: {pretrain: {bc_steps: 4, dataset: MazePO-v0-mixed}}}\n",
         "datasets: [MazePO-v0-mixed]\n",
         "algorithms[0].params.pretrain.dataset: MazePO-v0-mixed is a dataset of rlbench/MazePO-v0"),
        ("  - {name: ppo, params: {pretrain: {bc_steps: 4, dataset: /no/such.jsonl}}}\n", "",
         "algorithms[0].params.pretrain.dataset: no file at /no/such.jsonl"),
        ("  - {name: online_filtered_bc, params: {pretrain: {bc_steps: 4}}}\n", "",
         "algorithms[0].params.pretrain: online_filtered_bc does not take it; pretrain is an option of ppo"),
    ],
)  # fmt: skip
def test_a_pretraining_the_suite_cannot_take_is_a_one_line_error(tmp_path, algorithms, head, says):
    from rlbench_cli.suite.loader import load_suite

    suite = tmp_path / "pre.yaml"
    suite.write_text(f"name: pre\nbudget: {{steps: 8, eval_every: 4}}\n{head}envs: [rlbench/MazeFO-v0]\n"
                     f"algorithms:\n{algorithms}")  # fmt: skip
    with pytest.raises(SuiteInvalid) as e:
        load_suite(suite)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_listed_dataset_passes_the_suite_check(tmp_path, maze_data):
    from rlbench_cli.suite.loader import load_suite

    suite = tmp_path / "pre.yaml"
    suite.write_text("name: pre\nbudget: {steps: 8, eval_every: 4}\ndatasets: [MazeFO-v0-mixed]\n"
                     "envs: [rlbench/MazeFO-v0]\nalgorithms:\n"
                     "  - {name: ppo, envs: [rlbench/MazeFO-v0], params: {pretrain: {bc_steps: 4}}}\n"
                     f"  - {{name: ppo, label: own, envs: [rlbench/MazeFO-v0], params: {{pretrain: {{bc_steps: 4, "
                     f"dataset: {maze_data}}}}}}}\n")  # fmt: skip
    assert [a.label for a in load_suite(suite).algorithms] == [None, "own"]
