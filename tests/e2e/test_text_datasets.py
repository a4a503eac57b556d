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
