"""LMRL-Gym's piecewise-linear normalisation (min -> 0, dataset average -> 50, max -> 100) and the Maze scores of
the scripted policies under it."""

from __future__ import annotations

import statistics

import numpy as np
import pandas as pd
import pytest

from rlbench_cli.datagen.text import build_text_dataset
from rlbench_cli.datasets.text import episode_returns
from rlbench_cli.references import BUILTIN, normalise, resolve
from rlbench_cli.stats.normalise import _normalise


def test_piecewise_rule_hits_the_three_references_and_is_linear_between():
    ref = (-101.0, -83.0, -6.84)
    assert [normalise(v, ref, 100.0) for v in ref] == pytest.approx([0.0, 50.0, 100.0])
    assert normalise(-92.0, ref, 100.0) == pytest.approx(25.0)
    assert normalise((-83.0 + -6.84) / 2, ref, 100.0) == pytest.approx(75.0)
    assert normalise(-200.0, ref, 100.0) < 0  # extended linearly past min
    arr = normalise(np.array([-101.0, -6.84]), ref, 100.0)
    assert arr.tolist() == pytest.approx([0.0, 100.0])
    assert normalise(5.0, (0.0, 10.0), 100.0) == 50.0  # two references: the linear rule, unchanged


def test_lmrl_table_keys_env_ids_and_dataset_names():
    lmrl = BUILTIN["lmrl"]
    assert lmrl.lookup("rlbench/MazeFO-v0") == (-101.0, -83.0, -6.84)
    assert lmrl.lookup("MazeFO-v0-mixed") == (-101.0, -83.0, -6.84)
    assert lmrl.lookup("rlbench/Chess-v0") == (-401.0, 0.21, 1.0)
    assert lmrl.lookup("rlbench/Endgames-v0") == (-1.0, 0.586, 1.0)
    assert lmrl.lookup("CartPole-v1") is None


def test_auto_picks_lmrl_and_stats_normalises_piecewise():
    res = resolve(["rlbench/MazeFO-v0", "rlbench/Endgames-v0"], "auto")
    assert res.name == "lmrl" and res.scale == 100.0 and "piecewise" in res.description
    assert "D4RL" not in res.description
    values = pd.Series([-6.84, -83.0, 0.586, -1.0])
    tasks = pd.Series(
        ["rlbench/MazeFO-v0", "rlbench/MazeFO-v0", "rlbench/Endgames-v0", "rlbench/Endgames-v0"]
    )
    assert _normalise(values, tasks, res).tolist() == pytest.approx([100.0, 50.0, 50.0, 0.0])


def test_suite_block_on_the_lmrl_table_keeps_the_middle_reference_unless_overridden():
    res = resolve(["rlbench/MazeFO-v0", "rlbench/Chess-v0"], {"table": "lmrl", "references": {
        "rlbench/Chess-v0": [-1.0, 1.0]}})  # fmt: skip
    assert res.refs == {"rlbench/MazeFO-v0": (-101.0, -83.0, -6.84), "rlbench/Chess-v0": (-1.0, 1.0)}


def _maze_score(quality: str) -> float:
    ret = statistics.mean(episode_returns(build_text_dataset("rlbench/MazeFO-v0", quality, 300, seed=7)))
    return normalise(ret, BUILTIN["lmrl"].lookup("rlbench/MazeFO-v0"), 100.0)


def test_scripted_optimal_maze_scores_about_100_and_random_far_below_the_dataset_average():
    assert _maze_score("optimal") == pytest.approx(100.0, abs=3.0)
    # A uniformly random valid move from a uniformly random start reaches the goal within 100 steps in
    # some episodes (mean return about -88): about 35 here, between LMRL-Gym's min (-101: never reaching the
    # goal) and its dataset average (-83).
    assert 0.0 <= _maze_score("random") < 45.0


def test_every_text_env_has_lmrl_references():
    from rlbench_cli.envs.text import TEXT_ENVS

    for env_id in TEXT_ENVS:
        ref = BUILTIN["lmrl"].lookup(env_id)
        assert ref is not None and len(ref) == 3 and ref[0] < ref[1] < ref[2], env_id
