"""MuJoCo (gymnasium[mujoco], CPU) for the D4RL-style suites: a Hopper-v5 dataset is built, an offline
algorithm trains on it and is evaluated in the simulator, normalised by the dataset's references."""

import json

import pyarrow.parquet as pq
import pytest

pytest.importorskip("mujoco")

from rlbench_cli.datagen.d4rl import build_dataset  # noqa: E402
from rlbench_cli.datasets import load_dataset  # noqa: E402
from rlbench_cli.runner import run_one  # noqa: E402
from rlbench_cli.suite.grid import RunSpec  # noqa: E402


def test_hopper_random_dataset_trains_bc_and_evaluates_in_mujoco(tmp_path):
    # a 300-step behaviour run stands in for the 1M-step one: the random level needs only its references
    path = build_dataset("Hopper-v5", "random", size=600, root=tmp_path, behaviour_steps=300)
    data = load_dataset("Hopper-v5-random", str(path))
    assert len(data) == 600 and data.observations.shape == (600, 11) and data.actions.shape == (600, 3)
    assert data.meta["env_id"] == "Hopper-v5" and not data.discrete
    assert data.meta["ref_random"] is not None
    spec = RunSpec(suite="mj", algo="bc", algo_name="bc", params={"hidden_units": [32, 32]}, env_id="Hopper-v5",
                   env_kwargs={}, seed=0, budget={"steps": 20, "eval_every": 20, "eval_episodes": 1, "timeout": None},
                   dataset="Hopper-v5-random", dataset_path=str(path))  # fmt: skip
    result = run_one(spec, tmp_path / "run")
    assert result["status"] == "finished", result.get("error")
    rows = pq.read_table(tmp_path / "run" / "metrics").to_pylist()
    names = {r["name"] for r in rows}
    assert "eval/return" in names and any(n.startswith("train/loss/") for n in names)
    assert json.loads((tmp_path / "run" / "spec.json").read_text())["dataset"] == "Hopper-v5-random"
    if data.references is not None:
        assert "eval/normalized_return" in names
