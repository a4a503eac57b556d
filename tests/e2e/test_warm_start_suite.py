"""End to end, as a user would: a cold and a warm-started text ppo on Maze FO through the real `rlbench run`
(on one real-step axis, the imagined turns logged apart), cloned first (`pretrain`: the same policy for both, so
they pair by seed in `rlbench compare --paired`), and a warm start or cloning the suite cannot take is a
one-line error naming the field, exit code 2, before anything runs."""

import json

import pytest
from e2e_cli import rl

from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset

TINY = "n_embd: 16, n_layer: 1, n_head: 1, batch_size: 4, max_context: 96"
PPO = f"{TINY}, num_envs: 2, n_steps: 4, vocab_episodes: 2"


def _data(tmp_path) -> str:
    data = tmp_path / "maze.jsonl"
    if not data.exists():
        save_text_dataset(build_text_dataset("rlbench/MazeFO-v0", "mixed", 6, seed=0), data)
    return str(data)


def _suite(tmp_path, algorithms: str, head: str = "", envs: str = "rlbench/MazeFO-v0") -> str:
    suite = tmp_path / "warm.yaml"
    suite.write_text(
        "name: warm-tiny\nseeds: 1\nbudget: {steps: 8, eval_every: 4, eval_episodes: 2}\n"
        f"envs: [{{id: {envs}, kwargs: {{max_steps: 6}}}}]\n{head}algorithms:\n{algorithms}"
    )
    return str(suite)


def _fetch(db, metric, algo=None):
    rows = json.loads(rl("fetch", "--suite", "warm-tiny", "--metric", metric, "--format", "json", "--db",
                         db).stdout)  # fmt: skip
    return [r for r in rows if algo is None or r["algo"] == algo]


@pytest.mark.slow
def test_cold_and_warm_ppo_share_the_real_step_axis_and_the_imagined_turns_are_logged_apart(tmp_path):
    warm = f"warm_start: {{{TINY}, world_model_steps: 3, imagined_steps: 6, max_outcome_tokens: 30, dataset: {_data(tmp_path)}}}"
    suite = _suite(tmp_path, f"  - {{name: ppo, label: cold, params: {{{PPO}}}}}\n"
                             f"  - {{name: ppo, label: warm, params: {{{PPO}, {warm}}}}}\n")  # fmt: skip
    db = tmp_path / "r.duckdb"
    rl("run", suite, "--db", db, "--workers", "1")
    for algo in ("cold", "warm"):
        assert [r["step"] for r in _fetch(db, "eval/return", algo)] == [0, 4, 8], algo
    imagined = _fetch(db, "train/imagined_steps")
    assert {r["algo"] for r in imagined} == {"warm"} and {r["step"] for r in imagined} == {0}
    assert 6 <= max(r["value"] for r in imagined) < 8  # whole rounds of num_envs
    for metric in (
        "eval/world_model/em",
        "train/world_model_loss",
        "eval/world_model/real",
    ):  # once, beside the curves
        rows = _fetch(db, metric)
        assert [(r["algo"], r["step"]) for r in rows] == [("warm", 0)], metric
    errors = _fetch(db, "train/imagined_error_rate")  # after each imagined update
    assert len(errors) == 2 and {(r["algo"], r["step"]) for r in errors} == {("warm", 0)}


@pytest.mark.slow
def test_cloned_cold_and_warm_ppo_start_from_the_same_policy_and_pair_by_seed(tmp_path):
    pre = f"pretrain: {{bc_steps: 20, dataset: {_data(tmp_path)}, train_episodes: 4}}"
    warm = f"warm_start: {{{TINY}, world_model_steps: 3, imagined_steps: 0, max_outcome_tokens: 30, dataset: {_data(tmp_path)}}}"
    suite = _suite(tmp_path, f"  - {{name: ppo, label: cold, params: {{{PPO}, {pre}}}}}\n"
                             f"  - {{name: ppo, label: warm, params: {{{PPO}, {pre}, {warm}}}}}\n")  # fmt: skip
    db = tmp_path / "r.duckdb"
    rl("run", suite, "--db", db, "--workers", "1")
    losses = _fetch(db, "train/pretrain/loss")
    assert {r["algo"] for r in losses} == {"cold", "warm"} and {r["step"] for r in losses} == {0}
    cold, warm = (sorted(r["value"] for r in losses if r["algo"] == a) for a in ("cold", "warm"))
    assert cold == warm  # the same seed clones the same policy
    # imagined_steps 0: the warm run is the cold one, seed by seed
    paired = json.loads(rl("compare", "warm-tiny", "--db", db, "--paired", "cold", "--json").stdout)
    (c,) = paired["comparisons"]
    assert (c["other"], c["pairs"], c["tied"], c["mean_diff"]) == ("warm", 1, 1, 0.0)


BAD = [
    (  # more imagined turns than the run's real budget
        "  - {name: ppo, params: {warm_start: {imagined_steps: 9, dataset: DATA}}}\n",
        "",
        "rlbench/MazeFO-v0",
        "algorithms[0].params.warm_start.imagined_steps: 9 imagined steps is more than the run's budget.steps (8)",
    ),
    (  # no dataset of the env in the suite to train the world model on
        "  - {name: ppo, params: {warm_start: {imagined_steps: 4}}}\n",
        "",
        "rlbench/MazeFO-v0",
        "algorithms[0].params.warm_start: rlbench/MazeFO-v0 has no dataset to train the world model on",
    ),
    (  # a dataset of another env
        "  - {name: ppo, params: {warm_start: {imagined_steps: 4, dataset: MazePO-v0-mixed}}}\n",
        "datasets: [MazePO-v0-mixed]\n",
        "rlbench/MazeFO-v0",
        "algorithms[0].params.warm_start.dataset: MazePO-v0-mixed is a dataset of rlbench/MazePO-v0",
    ),
    (  # a non-text env
        "  - {name: ppo, params: {warm_start: {imagined_steps: 4}}}\n",
        "",
        "CartPole-v1",
        "algorithms[0].params.warm_start: a warm start learns inside a text world model and CartPole-v1",
    ),
    (  # a cloning dataset the suite does not list
        "  - {name: ppo, params: {pretrain: {bc_steps: 4, dataset: MazeFO-v0-noisy}}}\n",
        "",
        "rlbench/MazeFO-v0",
        "algorithms[0].params.pretrain: rlbench/MazeFO-v0 has no dataset to clone (pretrain.dataset names one",
    ),
    (  # another algorithm
        "  - {name: online_filtered_bc, params: {warm_start: {imagined_steps: 4}}}\n",
        "",
        "rlbench/MazeFO-v0",
        "algorithms[0].params.warm_start: online_filtered_bc does not take it",
    ),
]


@pytest.mark.parametrize(("algorithms", "head", "env", "says"), BAD)
def test_a_warm_start_the_suite_cannot_take_is_a_one_line_error(tmp_path, algorithms, head, env, says):
    kwargs = "" if env.startswith("rlbench/") else None
    suite = _suite(tmp_path, algorithms.replace("DATA", _data(tmp_path)), head, env)
    if kwargs is None:  # CartPole takes no max_steps
        (tmp_path / "warm.yaml").write_text(
            (tmp_path / "warm.yaml").read_text().replace(", kwargs: {max_steps: 6}", "")
        )
    r = rl("run", suite, "--db", tmp_path / "r.duckdb", check=False)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert says in err, err
    assert not (tmp_path / "r.duckdb").exists()
