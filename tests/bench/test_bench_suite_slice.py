"""benchmarks/suite_slice.py: the slice it cuts from a suite, and a real run of one on a tiny suite."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "suite_slice.py"


def _module():
    spec = importlib.util.spec_from_file_location("suite_slice", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_slice_keeps_the_named_algorithms_and_tasks_and_sizes_the_budget_down() -> None:
    raw = yaml.safe_load((ROOT / "suites" / "lmrl.yaml").read_text())
    out = _module().slice_suite(raw, ["ilql", "bc"], ["MazeFO-v0-mixed", "MazePO-v0"], 500, 1, 4)
    assert out["name"] == "lmrl-slice" and out["seeds"] == 1
    assert [a["name"] for a in out["algorithms"]] == [
        "bc",
        "ilql",
    ]  # the suite's order and entries, params kept
    assert out["algorithms"][1]["params"] == raw["algorithms"][3]["params"]
    assert out["datasets"] == ["MazeFO-v0-mixed"] and out["envs"] == [
        "rlbench/MazePO-v0"
    ]  # id without prefix
    assert out["budget"] == {"steps": 500, "eval_every": 500, "eval_episodes": 4}
    assert out["resources"] == raw["resources"] and raw["seeds"] == 3  # the suite itself is untouched
    only_envs = _module().slice_suite(raw, [], ["Wordle-v0"], 100, 2, None)
    assert "datasets" not in only_envs and only_envs["envs"] == ["rlbench/Wordle-v0"]
    assert only_envs["budget"]["eval_episodes"] == 32 and len(only_envs["algorithms"]) == 6
    with pytest.raises(SystemExit, match="--algo 'dqn'"):
        _module().slice_suite(raw, ["dqn"], [], 100, 1, None)
    with pytest.raises(SystemExit, match="--task 'Chess-v9'"):
        _module().slice_suite(raw, [], ["Chess-v9"], 100, 1, None)


def test_slice_of_a_tiny_suite_runs_and_scales_up(tmp_path: Path) -> None:
    suite = tmp_path / "tiny.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "tiny", "seeds": 4, "budget": {"steps": 3000, "eval_every": 1000, "eval_episodes": 2},
        "envs": ["CartPole-v1", "Acrobot-v1"], "algorithms": [{"name": "random"}, {"name": "ppo"}],
    }))  # fmt: skip
    proc = subprocess.run([sys.executable, str(SCRIPT), str(suite), "--algo", "random", "--task", "CartPole-v1",
                           "--steps", "300", "--json", str(tmp_path / "s.json"), "--keep", str(tmp_path / "k")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fig = json.loads((tmp_path / "s.json").read_text())
    assert [(r["algo"], r["task"], r["status"], r["device"]) for r in fig["runs"]] == [
        ("random", "CartPole-v1", "finished", "cpu")
    ]
    assert fig["runs"][0]["steps_per_s"] > 0 and fig["runs"][0]["gpu_util"] is None
    (est,) = fig["estimate"]  # the full suite has 4 seeds of random on CartPole, 3000 steps each
    assert (est["algo"], est["task"], est["full_runs"], est["steps_per_run"]) == (
        "random",
        "CartPole-v1",
        4,
        3000,
    )
    assert est["train_hours"] == pytest.approx(4 * 3000 / est["steps_per_s"] / 3600)
    assert "random" in proc.stdout and "4 runs x 3,000 steps" in proc.stdout
    assert (tmp_path / "k" / "slice.duckdb").is_file()  # --keep keeps the database
