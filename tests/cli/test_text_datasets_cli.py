"""``rlbench datasets build`` for the text envs (CliRunner): JSONL episodes of the scripted policies, and bad
settings (missing stockfish, a bad word list, a bad level) as one line with exit code 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.datasets import load_dataset

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def _one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output + r.stderr
    return lines[0]


def test_build_maze_levels_then_keep(tmp_path, monkeypatch):
    r = invoke("datasets", "build", "rlbench/MazeFO-v0", "--level", "mixed", "--level", "optimal",
               "--size", 4, "--datasets", tmp_path)  # fmt: skip
    assert r.exit_code == 0, r.output
    path = tmp_path / "MazeFO-v0-mixed.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["env"] == "rlbench/MazeFO-v0"
    assert (tmp_path / "MazeFO-v0-optimal.jsonl").exists()
    monkeypatch.setenv("RLBENCH_DATASETS", str(tmp_path))
    data = load_dataset("MazeFO-v0-optimal")
    assert data.level == "optimal" and len(data) == 4 and data[0][-1]["reward"] == 0.0
    r = invoke("datasets", "build", "rlbench/MazeFO-v0", "--level", "mixed", "--datasets", tmp_path)
    assert r.exit_code == 0 and "exists, kept" in r.output and path.read_text().splitlines() == lines
    r = invoke("datasets", "list", "--datasets", tmp_path, "--json")
    rows = {row["name"]: row for row in json.loads(r.stdout)}
    assert set(rows) == {"MazeFO-v0-mixed", "MazeFO-v0-optimal"}
    opt = rows["MazeFO-v0-optimal"]
    assert (opt["env"], opt["level"], opt["episodes"]) == ("rlbench/MazeFO-v0", "optimal", 4)
    assert opt["normalized_mean_return"] > 90


def test_bad_level_missing_stockfish_and_bad_word_list(tmp_path):
    err = _one_line_error(
        invoke("datasets", "build", "rlbench/MazeFO-v0", "--level", "medium", "--datasets", tmp_path)
    )
    assert "--level 'medium': text datasets have levels optimal, noisy, mixed, random" in err
    err = _one_line_error(
        invoke(
            "datasets",
            "build",
            "rlbench/Chess-v0",
            "--level",
            "random",
            "--datasets",
            tmp_path,
            "--env-kwargs",
            json.dumps({"stockfish": str(tmp_path / "nope")}),
        )  # fmt: skip
    )
    assert "stockfish: no executable" in err and "nope" in err
    words = tmp_path / "words.txt"
    words.write_text("apple\nbanana\n")
    err = _one_line_error(
        invoke(
            "datasets",
            "build",
            "rlbench/Wordle-v0",
            "--level",
            "random",
            "--datasets",
            tmp_path,
            "--env-kwargs",
            json.dumps({"word_list": str(words)}),
        )  # fmt: skip
    )
    assert "words.txt:2: 'banana' is not a five-letter word" in err
    err = _one_line_error(invoke("datasets", "build", "rlbench/MazeF-v0", "--level", "random"))
    assert "unknown gymnasium environment 'rlbench/MazeF-v0'" in err
    err = _one_line_error(
        invoke("datasets", "build", "rlbench/MazeFO-v0", "--level", "random", "--env-kwargs", "{bad")
    )
    assert "--env-kwargs: not JSON" in err
    assert not list(tmp_path.glob("*.jsonl"))
