"""Normalisation by fixed references: built-in tables, lookup by name, a suite's own block."""

import numpy as np
import pandas as pd
import pytest

from rlbench_cli import stats
from rlbench_cli.references import BUILTIN, NormalizeError, lookup, resolve

pytestmark = pytest.mark.fast

COLS = ["run_id", "algo", "env", "seed", "step", "value"]


@pytest.mark.parametrize(
    "task, expected_set, refs",
    [
        ("hopper-medium-v2", "d4rl", (-20.272305, 3234.3)),
        ("hopper-medium-replay-v0", "d4rl", (-20.272305, 3234.3)),
        ("Hopper-v5", "d4rl", (-20.272305, 3234.3)),
        ("halfcheetah-medium-expert-v2", "d4rl", (-280.178953, 12135.0)),
        ("walker2d-random-v2", "d4rl", (1.629008, 4592.3)),
        ("ant-medium-v2", "d4rl", (-325.6, 3879.7)),
        ("antmaze-large-diverse-v2", "d4rl", (0.0, 1.0)),
        ("maze2d-umaze-dense-v1", "d4rl", (68.537689, 193.66285642381482)),
        ("pen-human-v1", "d4rl", (96.262799, 3076.8331017826877)),
        ("pong", "atari", (-20.7, 14.6)),
        ("ALE/Pong-v5", "atari", (-20.7, 14.6)),
        ("BankHeistNoFrameskip-v4", "atari", (14.2, 753.1)),
        ("ms_pacman", "atari", (307.3, 6951.6)),
        ("CartPole-v1", "classic-control", (22.197, 500.0)),
    ],
)
def test_lookup(task, expected_set, refs):
    assert lookup(task) == (expected_set, refs)


def test_unknown_task_and_no_false_prefix_match():
    assert lookup("MyEnv-v0") is None
    assert lookup("antelope-v1") is None  # 'ant' must match a whole dash-separated part only


def test_every_builtin_reference_is_ordered():
    for s in BUILTIN.values():
        for task, ref in s.table.items():  # (low, high) or (low, mid, high)
            assert all(a < b for a, b in zip(ref, ref[1:])), (s.name, task)


def _runs(env, algo_scores):
    rows = []
    for algo, scores in algo_scores.items():
        for seed, v in enumerate(scores):
            rows.append((f"{algo}-{env}-{seed}", algo, env, seed, 1000, float(v)))
    return pd.DataFrame(rows, columns=COLS)


def test_d4rl_scores_are_x100_and_fixed():
    df = _runs("hopper-medium-v2", {"cql": [1500.0, 1600.0], "bc": [900.0, 1000.0]})
    t = stats.score_table(df, normalize="auto")
    assert t.normalized == "d4rl" and t.scale == 100
    expected = 100 * (1500.0 + 20.272305) / (3234.3 + 20.272305)
    got = t.per_run.set_index("run_id").loc["cql-hopper-medium-v2-0", "norm_score"]
    assert got == pytest.approx(expected)
    assert "x 100" in t.norm_description
    # adding a run far above the expert changes no other run's normalised score
    more = pd.concat([df, _runs("hopper-medium-v2", {"super": [9000.0]})])
    t2 = stats.score_table(more, normalize="auto")
    a = t.per_run.set_index("run_id")["norm_score"]
    b = t2.per_run.set_index("run_id")["norm_score"].loc[a.index]
    pd.testing.assert_series_equal(a, b)
    # the optimality gap is measured against the expert (100 on this scale)
    agg = stats.aggregates(t, reps=200, seed=0).set_index(["algo", "metric"])["estimate"]
    cql = t.scores["cql"]
    assert agg["cql", "optimality_gap"] == pytest.approx(np.mean(100 - np.minimum(cql, 100)))


def test_suite_block_with_measured_references():
    df = pd.concat(
        [
            _runs("MyEnv-v0", {"random": [10.0, 12.0], "expert": [110.0, 108.0], "new": [60.0, 61.0]}),
            _runs("CartPole-v1", {"random": [22.0, 23.0], "expert": [500.0, 500.0], "new": [250.0, 300.0]}),
        ]
    )
    spec = {"low_from": "random", "high_from": "expert", "scale": 100}
    t = stats.score_table(df, normalize=spec)
    assert t.normalized == "suite" and t.scale == 100
    assert t.references["MyEnv-v0"] == (11.0, 109.0)
    assert t.scores["random"].mean() == pytest.approx(0.0)
    assert t.scores["expert"].mean() == pytest.approx(100.0)
    # fixed references from the block override a table
    t2 = stats.score_table(df, normalize={"table": "classic-control", "references": {"MyEnv-v0": [0, 100]}})
    assert t2.references == {"CartPole-v1": (22.197, 500.0), "MyEnv-v0": (0.0, 100.0)}
    assert t2.scale == 1


def test_suite_block_errors():
    df = _runs("MyEnv-v0", {"a": [1.0]})
    with pytest.raises(NormalizeError, match="no low reference for MyEnv-v0"):
        resolve(["MyEnv-v0"], {"table": "classic-control"})
    with pytest.raises(NormalizeError, match="normalize.low_from names algorithm 'random', which has no"):
        resolve(["MyEnv-v0"], {"low_from": "random", "references": {}}, stats.run_scores(df))
    with pytest.raises(NormalizeError, match="low and high references are equal"):
        resolve(["MyEnv-v0"], {"references": {"MyEnv-v0": [1, 1]}})
    with pytest.raises(NormalizeError, match="normalize.table 'd5rl' is unknown"):
        resolve(["MyEnv-v0"], {"table": "d5rl"})
