"""End to end, as a user would: a text_world_model run's kept model reused by another suite's verifier
(``verifier: {world_model: <the run's folder>}``) through the real `rlbench run`, trained for no step there;
a world model of another task is a one-line error naming the field, exit code 2, before anything runs."""

import json

import pytest
from e2e_cli import rl

from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset

pytestmark = pytest.mark.slow

TINY = "n_embd: 16, n_layer: 1, n_head: 1, batch_size: 4, max_context: 96"
WM = "max_turns: 3, em_turns: 4, max_outcome_tokens: 30"  # its own fidelity metrics, kept short


def _data(tmp_path, env: str, n: int = 6, **kwargs) -> str:
    data = tmp_path / f"{env.split('/')[1]}.jsonl"
    save_text_dataset(build_text_dataset(env, "mixed", n, seed=0, env_kwargs=kwargs), data)
    return str(data)


def _suite(tmp_path, name: str, datasets: str, algorithms: str) -> str:
    suite = tmp_path / f"{name}.yaml"
    suite.write_text(f"name: {name}\nseeds: 1\nbudget: {{steps: 4, eval_every: 4, eval_episodes: 2}}\n"
                     f"datasets: [{datasets}]\nalgorithms:\n{algorithms}")  # fmt: skip
    return str(suite)


def test_a_verifier_reuses_a_saved_world_model_and_one_of_another_task_is_refused(tmp_path, wamerican):
    maze, wordle = _data(tmp_path, "rlbench/MazeFO-v0", max_steps=6), _data(tmp_path, "rlbench/Wordle-v0", 3)
    mine = "{name: MazeFO-v0-mine, path: MAZE, env: rlbench/MazeFO-v0, kwargs: {max_steps: 6}}".replace(
        "MAZE", maze
    )
    words = f"{{name: Wordle-v0-mine, path: {wordle}, env: rlbench/Wordle-v0}}"
    # 1. one world model per task, kept as each run's final policy
    db = tmp_path / "wm.duckdb"
    rl("run", _suite(tmp_path, "wm", f"{mine}, {words}", f"  - {{name: text_world_model, params: {{{TINY}, {WM}}}}}\n"),
       "--db", db, "--workers", "1")  # fmt: skip
    kept = {json.loads(p.read_text())["env_id"]: p.parent.parent.parent.parent
            for p in tmp_path.rglob("policy/final/policy.json")}  # fmt: skip
    assert set(kept) == {"rlbench/MazeFO-v0", "rlbench/Wordle-v0"}, kept
    # 2. bc with a verifier that loads the Maze one (the run's folder) and trains none
    verifier = f"verifier: {{world_model: {kept['rlbench/MazeFO-v0']}, max_outcome_tokens: 30}}"
    db = tmp_path / "v.duckdb"
    rl("run", _suite(tmp_path, "v", mine, f"  - {{name: bc, params: {{{TINY}, {verifier}}}}}\n"), "--db", db,
       "--workers", "1")  # fmt: skip
    rows = json.loads(rl("fetch", "--suite", "v", "--format", "json", "--db", db).stdout)  # every metric
    logged = {r["name"]: (r["step"], r["value"]) for r in rows}
    assert logged["eval/verified/world_model_loaded"] == (4, 1.0)
    assert "eval/verified/world_model_loss" not in logged  # no training here
    for metric in ("eval/verified/return", "eval/verified/calls_per_step", "eval/verified/veto_rate"):
        assert logged[metric][0] == 4, metric
    # 3. the Wordle one on a Maze task: refused before anything runs
    verifier = f"verifier: {{world_model: {kept['rlbench/Wordle-v0']}}}"
    db = tmp_path / "bad.duckdb"
    r = rl("run", _suite(tmp_path, "bad", mine, f"  - {{name: bc, params: {{{TINY}, {verifier}}}}}\n"), "--db", db,
           check=False)  # fmt: skip
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "algorithms[0].params.verifier.world_model" in err and "rlbench/Wordle-v0" in err, err
    assert not db.exists()
