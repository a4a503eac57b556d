"""The suite's tune: block (rlbench tune): what it accepts and the one-line errors for what it refuses."""

import pytest

from rlbench_cli.suite.loader import parse_suite
from rlbench_cli.suite.tune import ConfirmSpec, TuneSpec

pytestmark = pytest.mark.fast

BASE = {
    "name": "t",
    "envs": ["CartPole-v1"],
    "algorithms": [{"name": "ppo", "params": {"num_envs": 4}}, "dqn"],
    "tune": {"algorithm": "ppo", "params": {"learning_rate": {"log": [1e-5, 1e-2]}}, "trials": 8},
}


def suite_with(**tune):
    return parse_suite({**BASE, "tune": {**BASE["tune"], **tune}}, "s.yaml")


def refused(**tune) -> str:
    with pytest.raises(Exception) as e:
        suite_with(**tune)
    msg = str(e.value)
    assert "\n" not in msg.strip()
    return msg


def test_defaults_search_seeds_and_fresh_confirm_seeds():
    s = suite_with()
    t = s.tune
    assert (t.trials, t.seeds_per_trial, t.sampler, t.pruner, t.objective) == (8, 3, "tpe", "none", "iqm")
    assert t.search_seeds() == [0, 1, 2]
    assert t.confirm.seed_list() == list(range(1000, 1010))
    assert s.tuned_entry().params == {"num_envs": 4}
    assert not set(t.search_seeds()) & set(t.confirm.seed_list())


def test_every_kind_of_range():
    t = TuneSpec.model_validate({"algorithm": "a", "params": {
        "lr": {"log": [1e-4, 1e-1]}, "ent": {"range": [0.0, 0.05]}, "epochs": {"int": [1, 8]},
        "mb": {"choice": [2, 4, 8]}}})  # fmt: skip
    assert [p.kind for p in t.params.values()] == ["log", "range", "int", "choice"]
    assert t.params["epochs"].values() == [1, 8] and t.params["mb"].values() == [2, 4, 8]


@pytest.mark.parametrize(
    ("space", "says"),
    [
        ({"log": [0, 1e-2]}, "log: [0.0, 0.01] includes 0 or less"),
        ({"log": [-1, 1]}, "includes 0 or less"),
        ({"range": [0.1, 0.01]}, "is empty or reversed; give low < high"),
        ({"range": [0.1, 0.1]}, "is empty or reversed"),
        ({"int": [4]}, "give [low, high], two numbers"),
        ({"choice": []}, "choice: is empty"),
        ({"choice": [1, 1]}, "lists a value twice"),
        ({"log": [1e-4, 1e-2], "range": [0, 1]}, "give exactly one of log"),
        ({}, "give exactly one of log"),
    ],
)
def test_bad_ranges_name_the_param(space, says):
    msg = refused(params={"learning_rate": space})
    assert "tune.params.learning_rate" in msg and says in msg


@pytest.mark.parametrize(
    ("tune", "says"),
    [
        ({"trials": 0}, "tune.trials"),
        ({"seeds_per_trial": 0}, "tune.seeds_per_trial"),
        ({"sampler": "bayes"}, "unknown sampler 'bayes'; use one of random, tpe, cmaes, grid"),
        ({"pruner": "asha"}, "unknown pruner 'asha'"),
        ({"objective": "max"}, "unknown objective 'max'"),
        ({"algorithm": "sac"}, "tune.algorithm 'sac' is not one of the suite's algorithm entries (ppo, dqn)"),
        (
            {"confirm": {"top": 1, "seeds": [2, 7]}},
            "confirm.seeds [2] were used in the search (seeds [0, 1, 2])",
        ),
        ({"confirm": {"top": 0}}, "tune.confirm.top"),
        ({"seeds": [0, 1]}, "tune.seeds lists 2 seed(s); list 3 distinct"),
        ({"sampler": "grid"}, "sampler grid needs a finite set of values per param; learning_rate"),
        ({"stray": 1}, "tune.stray"),
    ],
)
def test_bad_settings_name_the_field(tune, says):
    assert says in refused(**tune)


def test_a_swept_entry_cannot_be_tuned():
    with pytest.raises(Exception, match=r"tune.algorithm 'ppo' is also swept \(ppo.gamma\)"):
        parse_suite({**BASE, "sweep": {"ppo.gamma": [0.9, 0.99]}}, "s.yaml")


def test_grid_takes_choices_and_integer_ranges_and_confirm_can_be_off():
    s = suite_with(sampler="grid", params={"num_minibatches": {"choice": [2, 4]}, "update_epochs": {"int": [1, 3]}},
                   confirm=None)  # fmt: skip
    assert s.tune.confirm is None and s.tune.sampler == "grid"
    assert ConfirmSpec(seeds=[5, 9]).seed_list() == [5, 9]
