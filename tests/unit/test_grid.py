import json

import pytest

from rlbench_cli.suite.grid import RunSpec, expand
from rlbench_cli.suite.loader import parse_suite

pytestmark = pytest.mark.fast


def _suite(**kw):
    base = {"name": "g", "seeds": 2, "envs": ["CartPole-v1", "Acrobot-v1"], "algorithms": ["random", "ppo"]}
    return parse_suite({**base, **kw})


@pytest.mark.parametrize(
    "kw, n",
    [
        ({}, 2 * 2 * 2),
        ({"seeds": [5]}, 1 * 2 * 2),
        ({"sweep": {"ppo.learning_rate": [1e-3, 3e-4, 1e-4]}}, 2 * (1 + 3) * 2),
        ({"sweep": {"ppo.learning_rate": [1e-3, 3e-4], "ppo.num_envs": [4, 8]}}, 2 * (1 + 4) * 2),
    ],
    ids=["plain", "one-seed", "sweep-1d", "sweep-2d"],
)
def test_grid_size(kw, n):
    runs = expand(_suite(**kw))
    assert len(runs) == n
    assert len({r.run_id for r in runs}) == n


def test_sweep_labels_and_params():
    runs = expand(_suite(sweep={"ppo.learning_rate": [1e-3, 3e-4]}))
    labels = sorted({r.algo for r in runs})
    assert labels == ["ppo[learning_rate=0.0003]", "ppo[learning_rate=0.001]", "random"]
    lr = {r.algo: r.params.get("learning_rate") for r in runs}
    assert lr["ppo[learning_rate=0.001]"] == 1e-3


def test_run_id_is_deterministic_and_ignores_order_of_keys():
    a = expand(_suite())
    b = expand(_suite())
    assert [r.run_id for r in a] == [r.run_id for r in b]
    r = a[0]
    assert RunSpec.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_run_id_changes_with_what_is_trained_not_with_score_rule():
    base = {r.run_id for r in expand(_suite())}
    assert base == {r.run_id for r in expand(_suite(score={"rule": "best"}))}
    assert base == {r.run_id for r in expand(_suite(resources={"gpus_per_job": 0.5}))}
    assert base == {
        r.run_id for r in expand(_suite(resources={"executor": "slurm", "slurm": {"qos": "low"}}))
    }
    assert base == {r.run_id for r in expand(_suite(budget={"checkpoint_every": "5m"}))}
    assert base == {r.run_id for r in expand(_suite(budget={"video_every": 2}))}
    assert base == {
        r.run_id for r in expand(_suite(algorithms=["random", {"name": "ppo", "budget": {"video_every": 1}}]))
    }
    assert base.isdisjoint({r.run_id for r in expand(_suite(budget={"steps": 1234}))})
    changed = {
        r.run_id for r in expand(_suite(algorithms=["random", {"name": "ppo", "params": {"gamma": 0.9}}]))
    }
    assert len(base & changed) == len(base) // 2  # random's runs unchanged, ppo's new


def test_seed_major_order():
    runs = expand(_suite())
    assert [r.seed for r in runs] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_algorithm_envs_restricts_its_runs():
    full = expand(_suite())
    runs = expand(_suite(algorithms=["random", {"name": "ppo", "envs": ["Acrobot-v1"]}]))
    assert len(runs) == 2 * (2 + 1)
    assert sorted({(r.algo, r.env) for r in runs}) == [
        ("ppo", "Acrobot-v1"),
        ("random", "Acrobot-v1"),
        ("random", "CartPole-v1"),
    ]
    # the cells kept are the same cells: same run ids as in the full grid, in the same order
    kept = {r.run_id for r in runs}
    assert [r.run_id for r in full if r.run_id in kept] == [r.run_id for r in runs]


def test_algorithm_envs_holds_for_every_sweep_variant():
    runs = expand(
        _suite(
            algorithms=["random", {"name": "ppo", "envs": ["CartPole-v1"]}],
            sweep={"ppo.learning_rate": [1e-3, 3e-4]},
        )
    )
    assert len(runs) == 2 * (2 + 2 * 1)
    assert {r.env for r in runs if r.algo_name == "ppo"} == {"CartPole-v1"}
    assert len({r.algo for r in runs if r.algo_name == "ppo"}) == 2
