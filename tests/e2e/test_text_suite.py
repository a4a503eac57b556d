"""End to end, as a user would: a tiny Maze FO suite with the text algorithms (transformer policies) through
the real `rlbench run`, normalised by the lmrl table; a pretrained checkpoint that does not exist is a
one-line error, exit code 2, before anything runs."""

import json

import pytest
from e2e_cli import rl

from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset

pytestmark = pytest.mark.slow

TINY = "n_embd: 32, n_layer: 2, n_head: 2, batch_size: 8, max_context: 96"


def _suite(tmp_path, algorithms: str, mixes: str = "") -> str:
    data = tmp_path / "maze.jsonl"
    if not data.exists():
        save_text_dataset(build_text_dataset("rlbench/MazeFO-v0", "mixed", 10, seed=0), data)
    suite = tmp_path / "text.yaml"
    mix = f", data_mix: {mixes}" if mixes else ""
    suite.write_text(
        "name: text-tiny\nseeds: 1\nbudget: {steps: 4, eval_every: 2, eval_episodes: 2}\n"
        f"datasets: [{{name: MazeFO-v0-mine, path: {data}, env: rlbench/MazeFO-v0, kwargs: {{max_steps: 6}}{mix}}}]\n"
        f"algorithms:\n{algorithms}"
        "normalize: {table: lmrl}\n"
    )
    return str(suite)


def test_text_suite_runs_bc_and_ilql_with_normalised_scores(tmp_path):
    suite = _suite(
        tmp_path, f"  - {{name: bc, params: {{{TINY}}}}}\n  - {{name: ilql, params: {{{TINY}}}}}\n"
    )
    db = tmp_path / "r.duckdb"
    r = rl("run", suite, "--db", db, "--workers", "1")
    # the policies it saves (transformers' save_pretrained) leave no lock behind: no warning at the end
    assert "leaked semaphore" not in r.stderr, r.stderr
    status = json.loads(rl("status", "text-tiny", "--db", db, "--json").stdout)["suites"]["text-tiny"]
    assert status["all_finished"] and status["total"] == 2
    rows = json.loads(rl("fetch", "--suite", "text-tiny", "--metric", "eval/normalized_return", "--format", "json",
                         "--db", db).stdout)  # fmt: skip
    assert len(rows) == 2 * 3  # both runs at steps 0, 2 and 4
    assert {r["algo"] for r in rows} == {"bc", "ilql"}
    success = json.loads(rl("fetch", "--suite", "text-tiny", "--metric", "eval/success", "--format", "json",
                            "--db", db).stdout)  # fmt: skip
    assert all(0.0 <= r["value"] <= 1.0 for r in success) and len(success) == 6


def test_missing_pretrained_checkpoint_is_a_one_line_error(tmp_path):
    missing = tmp_path / "no-such-model"
    suite = _suite(tmp_path, f"  - {{name: ilql, params: {{pretrained: {missing}}}}}\n")
    r = rl("run", suite, "--db", tmp_path / "r.duckdb", check=False)
    assert r.returncode == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in r.stderr
    assert "algorithms[0].params.pretrained" in err and str(missing) in err
    assert not (tmp_path / "r.duckdb").exists()


def test_random_on_a_text_env_plays_valid_moves(tmp_path):
    """`random` picks among the env's valid actions: every Maze move costs -1 (a wall bump too; -1 more when the
    episode is cut at max_steps), while a random
    string from the Text space would be an invalid move costing -4 every turn."""
    suite = tmp_path / "random.yaml"
    suite.write_text(
        "name: text-random\nseeds: 2\nbudget: {steps: 40, eval_every: 20, eval_episodes: 3}\n"
        "envs: [{id: rlbench/MazeFO-v0, kwargs: {max_steps: 10}}]\nalgorithms: [random]\n"
    )
    db = tmp_path / "r.duckdb"
    rl("run", suite, "--db", db, "--workers", "1")
    rows = json.loads(rl("fetch", "--suite", "text-random", "--metric", "eval/return", "--format", "json",
                         "--db", db).stdout)  # fmt: skip
    assert len(rows) == 2 * 3 and all(-11.0 <= r["value"] < 0 for r in rows)
    episodes = json.loads(rl("fetch", "--suite", "text-random", "--metric", "train/episode_return", "--format",
                             "json", "--db", db).stdout)  # fmt: skip
    assert episodes and all(-11.0 <= r["value"] < 0 for r in episodes)


def test_bc_with_a_world_model_verifier_logs_both_numbers(tmp_path):
    """One suite entry gives the agent without the verifier (eval/return) and with it (eval/verified/*)."""
    verifier = f"verifier: {{{TINY}, world_model_steps: 3, max_outcome_tokens: 40}}"
    suite = _suite(tmp_path, f"  - {{name: bc, params: {{{TINY}, {verifier}}}}}\n")
    db = tmp_path / "r.duckdb"
    rl("run", suite, "--db", db, "--workers", "1")

    def fetch(metric):
        return json.loads(rl("fetch", "--suite", "text-tiny", "--metric", metric, "--format", "json", "--db",
                             db).stdout)  # fmt: skip

    assert [r["step"] for r in fetch("eval/return")] == [0, 2, 4]
    for metric in ("eval/verified/return", "eval/verified/success", "eval/verified/calls_per_step",
                   "eval/verified/veto_rate", "eval/verified/normalized_return"):  # fmt: skip
        rows = fetch(metric)
        assert [r["step"] for r in rows] == [4], metric
    assert 1.0 <= fetch("eval/verified/calls_per_step")[0]["value"] <= 3.0


def test_a_verifier_on_an_algorithm_without_one_is_a_one_line_error(tmp_path):
    suite = _suite(tmp_path, f"  - {{name: mc_returns, params: {{{TINY}}}}}\n"
                             "  - {name: text_world_model, params: {verifier: {world_model_steps: 10}}}\n")  # fmt: skip
    r = rl("run", suite, "--db", tmp_path / "r.duckdb", check=False)
    assert r.returncode == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in r.stderr
    assert "algorithms[1]" in err or "text_world_model" in err
    assert "verifier: text_world_model does not take it" in err
    assert not (tmp_path / "r.duckdb").exists()


def _po_suite(tmp_path, params: str) -> str:
    data = tmp_path / "maze-po.jsonl"
    save_text_dataset(
        build_text_dataset("rlbench/MazePO-v0", "mixed", 10, seed=0, env_kwargs={"max_steps": 8}), data
    )
    suite = tmp_path / "po.yaml"
    suite.write_text(
        "name: wm-po-tiny\nseeds: 1\nbudget: {steps: 4, eval_every: 4, eval_episodes: 2}\n"
        f"datasets: [{{name: MazePO-v0-mine, path: {data}, env: rlbench/MazePO-v0, kwargs: {{max_steps: 8}}}}]\n"
        f"algorithms:\n  - {{name: text_world_model, params: {{{TINY}, {params}}}}}\n"
    )
    return str(suite)


def test_a_maze_po_world_model_predicts_the_new_lines_end_to_end(tmp_path):
    """Maze PO's observation is its history: the world model predicts each turn's new text (outcome auto),
    the run logs which it used, and its metrics are measured on the whole observations rebuilt."""
    suite = _po_suite(tmp_path, "em_turns: 6, max_turns: 4, max_outcome_tokens: 40, holdout_fraction: 0.25")
    db = tmp_path / "r.duckdb"
    rl("run", suite, "--db", db, "--workers", "1")

    def fetch(metric):
        return json.loads(rl("fetch", "--suite", "wm-po-tiny", "--metric", metric, "--format", "json", "--db",
                             db).stdout)  # fmt: skip

    assert [(r["step"], r["value"]) for r in fetch("train/outcome_mode")] == [(4, 2.0)]  # echo
    for metric in ("eval/em", "eval/em_end", "eval/real", "eval/wm", "eval/w2r"):
        rows = fetch(metric)
        assert [r["step"] for r in rows] == [4] and 0.0 <= rows[0]["value"] <= 1.0, metric


def test_a_world_model_outcome_it_does_not_know_is_a_one_line_error(tmp_path):
    suite = _po_suite(tmp_path, "outcome: line")
    r = rl("run", suite, "--db", tmp_path / "r.duckdb", check=False)
    assert r.returncode == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in r.stderr
    assert "outcome must be one of auto, full, suffix, echo" in err and "'line'" in err
    assert not (tmp_path / "r.duckdb").exists()


def _mix_suite(tmp_path, params: str, mixes: str = "[real, imagined, real+imagined]") -> str:
    return _suite(tmp_path, f"  - {{name: bc, params: {{n_embd: 16, n_layer: 1, n_head: 1, batch_size: 8, {params}}}}}\n",
                  mixes)  # fmt: skip


def test_data_mix_on_a_text_dataset_trains_on_real_and_imagined_episodes(tmp_path):
    """One task per mix; the world model is trained inside each imagined run on its 4 real episodes."""
    imagination = ("imagination: {n_embd: 16, n_layer: 1, n_head: 1, batch_size: 8, learning_rate: 3.0e-3, "
                   "world_model_steps: 200, max_outcome_tokens: 60, max_turns: 5, episodes: 6, em_turns: 10}")  # fmt: skip
    suite = _mix_suite(tmp_path, f"train_episodes: 4, {imagination}")
    db = tmp_path / "r.duckdb"
    rl("run", suite, "--db", db, "--workers", "1")

    def fetch(metric):
        rows = json.loads(rl("fetch", "--suite", "text-tiny", "--metric", metric, "--format", "json", "--db",
                             db).stdout)  # fmt: skip
        return {r["env"].partition("[mix=")[2].rstrip("]"): r["value"] for r in rows}

    assert fetch("train/real_episodes") == {"real": 4, "imagined": 0, "real+imagined": 4}
    imagined = fetch("train/imagined_episodes")
    assert set(imagined) == {"imagined", "real+imagined"} and imagined["imagined"] > 0
    assert set(fetch("train/imagined_errors")) == set(imagined)
    assert all(0.0 <= v <= 1.0 for v in fetch("eval/world_model/em").values())
    assert set(fetch("eval/return")) == {"real", "imagined", "real+imagined"}


@pytest.mark.parametrize(
    ("params", "mixes", "field", "says"),
    [
        ("train_episodes: 4", "[real, imagined]", "algorithms[0].params.imagination", "no world model"),
        (
            "train_episodes: 400, imagination: {world_model_steps: 5}",
            "[real]",
            "algorithms[0].params.train_episodes",
            "has 9 to train on (10 less 1 held out",
        ),
        ("train_episodes: 4", "[real+oracle]", "datasets[0].data_mix", "real+oracle on a text dataset"),
        ("train_episodes: -2", "[real]", "train_episodes", "train_episodes must be 0 (all) to"),
    ],
)
def test_bad_data_mix_input_is_a_one_line_error(tmp_path, params, mixes, field, says):
    r = rl("run", _mix_suite(tmp_path, params, mixes), "--db", tmp_path / "r.duckdb", check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in r.stderr
    assert field in err and says in err, err
