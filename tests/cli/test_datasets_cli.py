"""``rlbench datasets`` with Typer's CliRunner: help, listing and showing, Minari export, and every error as
one line on stderr with exit code 2. Building with training is the e2e test's job; here a build either
fails before training or needs none (MountainCar-v0's random level)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.datasets import OfflineData
from rlbench_cli.datasets.hdf5 import write_hdf5

runner = CliRunner()
SUBCOMMANDS = ["build", "list", "show", "export"]


def invoke(*args: object) -> object:
    return runner.invoke(app, [str(a) for a in args])


def _one_line_error(r: object, code: int = 2) -> str:
    assert r.exit_code == code, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("rlbench: error: ")
    assert "Traceback" not in r.output + r.stderr
    return lines[0]


def _dataset(folder: Path, name: str = "CartPole-v1-medium") -> Path:
    """A small rlbench-style dataset file: two CartPole episodes, references and provenance."""
    obs = np.arange(40, dtype=np.float32).reshape(10, 4)
    terminals = np.zeros(10, bool)
    terminals[[3, 9]] = True
    meta = {
        "name": name,
        "env_id": "CartPole-v1",
        "env_kwargs": {},
        "level": "medium",
        "discrete": True,
        "n_actions": 2,
        "ref_random": 2.0,
        "ref_expert": 10.0,
        "mean_return": 5.0,
        "behaviour": {"algo": "ppo", "steps": 50000},
    }
    data = OfflineData(
        obs,
        np.array([0, 1] * 5),
        np.ones(10, np.float32),
        terminals,
        np.zeros(10, bool),
        meta,
        next_observations=obs + 4,
    )
    path = folder / f"{name}.hdf5"
    write_hdf5(path, data)
    return path


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help_with_an_example(sub: str) -> None:
    r = invoke("datasets", sub, "--help")
    assert r.exit_code == 0, r.output
    assert f"Example: rlbench datasets {sub}" in " ".join(r.output.split())


def test_help_imports_no_heavy_package() -> None:
    code = (
        "import sys\n"
        "from rlbench_cli.cli.app import app\n"
        "for args in (['--help'], ['datasets', '--help'], ['datasets', 'build', '--help']):\n"
        "    try:\n"
        "        app(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print([m for m in ('torch', 'd3rlpy', 'minari', 'h5py', 'gymnasium') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_list_and_show(tmp_path: Path) -> None:
    r = invoke("datasets", "list", "--datasets", tmp_path)
    assert r.exit_code == 0 and "no datasets yet" in r.output
    path = _dataset(tmp_path)
    r = invoke("datasets", "list", "--datasets", tmp_path, "--json")
    [row] = json.loads(r.output)
    assert (row["name"], row["env"], row["level"], row["transitions"], row["episodes"]) == (
        "CartPole-v1-medium",
        "CartPole-v1",
        "medium",
        10,
        2,
    )
    assert row["mean_return"] == 5.0 and row["normalized_mean_return"] == pytest.approx(37.5)
    assert row["bytes"] == path.stat().st_size
    r = invoke("datasets", "list", "--datasets", tmp_path)
    assert r.exit_code == 0 and "CartPole-v1-medium" in r.output and "37.5" in r.output
    for ref in ("CartPole-v1-medium", path):  # by name in the folder, or by path
        r = invoke("datasets", "show", ref, "--datasets", tmp_path, "--json")
        info = json.loads(r.output)
        assert info["metadata"]["behaviour"] == {"algo": "ppo", "steps": 50000}
        assert info["arrays"]["next_observations"] == {"shape": [10, 4], "dtype": "float32"}
    r = invoke("datasets", "show", path)
    assert r.exit_code == 0 and "ref_expert: 10.0" in r.output and '"algo": "ppo"' in r.output


def test_export_to_minari(tmp_path: Path) -> None:
    import minari

    _dataset(tmp_path)
    out = tmp_path / "minari"
    r = invoke("datasets", "export", "CartPole-v1-medium", "--datasets", tmp_path, "--out", out)
    assert r.exit_code == 0, r.output
    assert "rlbench/CartPole-v1-medium-v0" in r.output
    ds = minari.MinariDataset(str(out / "rlbench" / "CartPole-v1-medium-v0" / "data"))
    assert (ds.total_episodes, ds.total_steps) == (2, 10)
    r = invoke("datasets", "show", out / "rlbench" / "CartPole-v1-medium-v0", "--json")
    assert json.loads(r.output)["summary"]["normalized_mean_return"] == pytest.approx(37.5)
    line = _one_line_error(
        invoke("datasets", "export", "CartPole-v1-medium", "--datasets", tmp_path, "--out", out)
    )
    assert "already exists" in line and "rlbench/CartPole-v1-medium-v0" in line


def test_build_random_without_training(tmp_path: Path) -> None:
    r = invoke(
        "datasets", "build", "MountainCar-v0", "--level", "random", "--size", 300, "--datasets", tmp_path
    )
    assert r.exit_code == 0, r.output
    assert "wrote" in r.output and (tmp_path / "MountainCar-v0-random.hdf5").exists()
    r = invoke("datasets", "build", "MountainCar-v0", "--level", "random", "--datasets", tmp_path)
    assert "exists (add --force to rebuild it)" in r.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["build", "CartPol-v1", "--level", "medium"],
            "unknown gymnasium environment 'CartPol-v1'; did you mean",
        ),
        (["build", "CartPole-v1", "--level", "hard"], "--level 'hard': choose one of random, medium, expert"),
        (["build", "CartPole-v1", "--level", "medium", "--size", "0"], "--size must be at least 1"),
        (["build", "CartPole-v1"], "Missing option '--level'"),
        (["build", "MountainCar-v0", "--level", "expert"], "MountainCar-v0: no learned levels"),
        (["build", "Taxi-v3", "--level", "random"], "Taxi-v3: rlbench builds datasets for Box observations"),
        (["show", "CartPole-v1-expert"], "no dataset 'CartPole-v1-expert'"),
        (["show", "minari:no/such-v0"], "no Minari dataset 'minari:no/such-v0'"),
        (
            ["export", "CartPole-v1-expert", "--format", "csv"],
            "--format 'csv': the one export format is minari",
        ),
    ],
)
def test_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], needle: str
) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    line = _one_line_error(invoke("datasets", *args, "--datasets", tmp_path))
    assert needle in line
    assert not list(tmp_path.glob("*.hdf5"))


def test_a_file_that_is_not_a_dataset(tmp_path: Path) -> None:
    bad = tmp_path / "notes.hdf5"
    bad.write_text("not hdf5")
    line = _one_line_error(invoke("datasets", "show", bad))
    assert str(bad) in line and "rlbench reads D4RL-format .hdf5 files and Minari dataset folders" in line
    line = _one_line_error(invoke("datasets", "list", "--datasets", tmp_path))
    assert str(bad) in line and "not a D4RL-format dataset" in line


def test_show_finds_a_text_envs_jsonl_dataset_and_export_refuses_it_in_one_line(tmp_path: Path) -> None:
    turns = [{"observation": "at 1", "action": "move up", "reward": -1.0, "done": False},
             {"observation": "at 2", "action": "move left", "reward": 0.0, "done": True}]  # fmt: skip
    lines = [{"env": "rlbench/MazeFO-v0", "level": "noisy", "turns": turns},
             {"env": "rlbench/MazeFO-v0", "level": "noisy", "turns": turns[1:]}]  # fmt: skip
    (tmp_path / "MazeFO-v0-noisy.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = invoke("datasets", "show", "MazeFO-v0-noisy", "--datasets", tmp_path, "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert (info["summary"]["transitions"], info["summary"]["episodes"], info["summary"]["mean_return"]) == (
        3,
        2,
        -0.5,
    )
    assert info["arrays"]["actions"] == {"shape": [3], "dtype": "text"}
    meta = info["metadata"]
    assert (meta["env"], meta["level"], meta["episode_turns_min"], meta["episode_turns_max"]) == (
        "rlbench/MazeFO-v0", "noisy", 1, 2)  # fmt: skip
    assert meta["distinct_actions"] == 2
    r = invoke("datasets", "show", "MazeFO-v0-noisy", "--datasets", tmp_path)
    assert r.exit_code == 0 and "observations: (3,) text" in r.output and "level: noisy" in r.output
    err = _one_line_error(invoke("datasets", "export", "MazeFO-v0-noisy", "--datasets", tmp_path))
    assert "MazeFO-v0-noisy" in err and "no Minari form" in err
