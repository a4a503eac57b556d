"""End to end: the real `rlbench datasets build` makes a text env's dataset, and bad settings end in one line
with exit code 2."""

from __future__ import annotations

import json

from e2e_cli import rl


def test_build_text_dataset_and_bad_settings(tmp_path):
    rl("datasets", "build", "rlbench/MazePO-v0", "--level", "mixed", "--size", 3, "--datasets", tmp_path)
    lines = (tmp_path / "MazePO-v0-mixed.jsonl").read_text().splitlines()
    episodes = [json.loads(ln) for ln in lines]
    assert len(episodes) == 3 and {e["env"] for e in episodes} == {"rlbench/MazePO-v0"}
    assert all(e["turns"][-1]["done"] for e in episodes)
    r = rl("datasets", "list", "--datasets", tmp_path, check=False)
    assert r.returncode == 0 and "Traceback" not in r.stderr

    r = rl("datasets", "build", "rlbench/Endgames-v0", "--level", "random", "--datasets", tmp_path,
           "--env-kwargs", json.dumps({"stockfish": "no-such-stockfish"}), check=False)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert line.startswith("rlbench: error: stockfish: no executable 'no-such-stockfish' found")


def test_a_dataset_played_with_other_env_kwargs_is_not_trained_on(tmp_path):
    """A text dataset's file is named by env and level: one built for another word list is refused, naming the
    field and both settings, before anything runs; the one the suite describes is used."""
    words = tmp_path / "words.txt"
    words.write_text("apple\ncrane\nslate\nplate\nbrick\nmound\n")
    data = tmp_path / "ds"
    rl("datasets", "build", "rlbench/Wordle-v0", "--level", "mixed", "--size", 3, "--datasets", data,
       "--env-kwargs", json.dumps({"word_list": str(words)}))  # fmt: skip
    first = json.loads((data / "Wordle-v0-mixed.jsonl").read_text().splitlines()[0])
    assert first["env_kwargs"] == {"word_list": str(words)}
    suite = tmp_path / "w.yaml"
    suite.write_text(
        "name: w\nseeds: 1\nbudget: {steps: 2, eval_every: 2, eval_episodes: 1}\ndatasets: [Wordle-v0-mixed]\n"
        "algorithms: [{name: bc, params: {n_embd: 16, n_layer: 1, n_head: 1, batch_size: 2}}]\n"
    )
    r = rl("run", suite, "--db", tmp_path / "r.duckdb", "--datasets", data, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "field 'datasets[0].kwargs'" in line and "keep both with --datasets OTHER_FOLDER" in line, line
    assert f'"word_list": "{words}"' in line and "asks for {}" in line, line
