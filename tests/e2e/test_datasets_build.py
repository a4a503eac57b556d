"""End to end: the real ``rlbench datasets`` command builds CartPole-v1 medium and expert datasets (training
its behaviour policy with a small budget), lists and shows them, and d3rlpy loads and trains on the file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from e2e_cli import rl

from rlbench_cli.datasets.hdf5 import read_hdf5

pytestmark = pytest.mark.slow


def test_build_list_show_and_load_in_d3rlpy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "datasets"
    t0 = time.monotonic()
    r = rl(
        "datasets",
        "build",
        "CartPole-v1",
        "--level",
        "medium",
        "--level",
        "expert",
        "--behaviour-steps",
        15000,
        "--size",
        3000,
        "--datasets",
        root,
    )
    seconds = time.monotonic() - t0
    assert "training the behaviour policy: ppo on CartPole-v1" in r.stdout and r.stdout.count(": wrote ") == 2
    assert seconds < 240, seconds
    # another level reuses the behaviour policy and its references
    r = rl("datasets", "build", "CartPole-v1", "--level", "random", "--size", 3000, "--datasets", root)
    assert "reusing the behaviour policy" in r.stdout and "training" not in r.stdout

    rows = {
        row["level"]: row for row in json.loads(rl("datasets", "list", "--datasets", root, "--json").stdout)
    }
    assert set(rows) == {"random", "medium", "expert"}
    assert all(row["transitions"] == 3000 and row["env"] == "CartPole-v1" for row in rows.values())
    listing = rl("datasets", "list", "--datasets", root).stdout
    assert "CartPole-v1-medium" in listing and "normalised" in listing

    info = json.loads(rl("datasets", "show", "CartPole-v1-medium", "--datasets", root, "--json").stdout)
    meta = info["metadata"]
    ref_random, ref_expert = meta["ref_random"], meta["ref_expert"]
    assert ref_random < ref_expert
    assert meta["behaviour"]["algo"] == "ppo" and meta["behaviour"]["steps"] == 15000
    assert meta["policy"]["kind"] == "checkpoint" and 0 <= meta["policy"]["step"] <= 15000
    # medium's data sits between the random and the expert references, and below the expert's data
    medium, expert, random_ = (rows[lv]["mean_return"] for lv in ("medium", "expert", "random"))
    assert ref_random < medium < ref_expert, (ref_random, medium, ref_expert)
    assert random_ < medium < expert
    assert 0 < rows["medium"]["normalized_mean_return"] < 100
    assert "ref_expert" in rl("datasets", "show", Path(info["path"]), "--datasets", root).stdout

    # d3rlpy loads the file as it is, and trains on it
    import d3rlpy

    monkeypatch.chdir(tmp_path)
    with open(info["path"], "rb") as f:
        buffer = d3rlpy.dataset.ReplayBuffer.load(f, d3rlpy.dataset.InfiniteBuffer())
    data = read_hdf5(Path(info["path"]))
    ends = data.episode_ends()
    lengths, terminated = np.diff(np.r_[-1, ends]), data.terminals[ends]
    assert len(ends) == meta["episodes"] == rows["medium"]["episodes"]
    # d3rlpy drops the last step of an episode cut by a timeout (no next observation): a 1-step one entirely
    assert buffer.size() == int(np.sum((lengths > 1) | terminated))
    assert buffer.transition_count == int(np.sum(np.where(terminated, lengths, lengths - 1))) > 2900
    np.testing.assert_array_equal(
        np.concatenate([ep.observations for ep in buffer.episodes])[:100], data.observations[:100]
    )
    assert buffer.dataset_info.action_space == d3rlpy.ActionSpace.DISCRETE
    bc = d3rlpy.algos.DiscreteBCConfig().create()
    bc.fit(
        buffer,
        n_steps=20,
        n_steps_per_epoch=20,
        show_progress=False,
        logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
    )
    assert bc.predict(np.zeros((2, 4), np.float32)).shape == (2,)
