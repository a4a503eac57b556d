"""Each algorithm's params checked as its run would check them at its start, without running anything
(``rlbench_cli.algos.check_params``, which ``rlbench validate`` calls)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlbench_cli.algos import check_params
from rlbench_cli.algos.registry import ALGORITHMS, text_variant_names
from rlbench_cli.cli.app import app

ROOT = Path(__file__).parents[2]
TEXT_ENV = "rlbench/MazeFO-v0"
TEXT_ONLY = {"filtered_bc", "mc_returns", "ilql", "online_filtered_bc", "text_world_model"}


@pytest.mark.parametrize("name", sorted(set(ALGORITHMS) - {"random"}))
def test_every_algorithm_refuses_a_param_it_does_not_have_and_lists_the_ones_it_has(name):
    env = TEXT_ENV if name in TEXT_ONLY else "CartPole-v1"
    with pytest.raises(ValueError, match=r"unknown .*lr_typo.*valid") as e:
        check_params(name, env, {"lr_typo": 1})
    assert str(e.value).split("valid")[-1].count(",") >= 3  # the names it does take, listed


@pytest.mark.parametrize("name", text_variant_names())
def test_on_a_text_env_the_text_variant_checks(name):
    with pytest.raises(
        ValueError, match=rf"unknown parameter\(s\) for {name}: lr_typo; valid: .*max_action_tokens"
    ):
        check_params(name, TEXT_ENV, {"lr_typo": 1})
    check_params(name, TEXT_ENV, {"learning_rate": 1e-4})


def test_random_takes_any_params():
    check_params("random", "CartPole-v1", {"anything": 1})


def test_ppo_refuses_only_what_every_kind_of_action_space_refuses():
    """The env's action space picks ppo's defaults when the run starts: 1,024 minibatches fit the
    continuous defaults' 2,048-step batch, not the discrete 512, so only the run can tell."""
    check_params("ppo", "CartPole-v1", {"num_minibatches": 1024})
    with pytest.raises(ValueError, match="num_minibatches must be <= num_envs \\* num_steps"):
        check_params("ppo", "CartPole-v1", {"num_minibatches": 4096})
    with pytest.raises(ValueError, match="ppo param 'learning_rate' must be a float, got 'fast'"):
        check_params("ppo", "CartPole-v1", {"learning_rate": "fast"})


def test_an_offline_algorithm_takes_a_param_of_either_of_its_configs():
    """bc is d3rlpy's BCConfig on continuous actions and DiscreteBCConfig on discrete ones; the dataset
    decides when the run starts, so a field of either passes."""
    from rlbench_cli.algos.d3rlpy_offline import BC

    only_one = set(BC.config_params(False)) ^ set(BC.config_params(True))
    assert only_one  # the two configs differ
    for key in only_one:
        default = {**BC.config_params(False), **BC.config_params(True)}[key]
        check_params("bc", "CartPole-v1", {key: default})


def test_a_text_algorithms_missing_pretrained_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="params.pretrained: no checkpoint at"):
        check_params("ilql", TEXT_ENV, {"pretrained": str(tmp_path / "nothing-here")})


def test_every_shipped_suite_validates():
    """No false alarm: the params of every suite in suites/ pass their algorithms' checks."""
    files = sorted((ROOT / "suites").glob("*.yaml"))
    r = CliRunner().invoke(app, ["validate", *map(str, files)])
    assert r.exit_code == 0, r.output
    assert r.output.count("ok: ") == len(files)


def test_user_code_takes_any_params(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nenvs: [CartPole-v1]\nalgorithms:\n"
                     "  - {name: mine, entrypoint: 'mypkg.train:main', params: {lr: 3}}\n")  # fmt: skip
    r = CliRunner().invoke(app, ["validate", str(suite)])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    ("name", "env", "params", "refusal"),
    [
        ("dqn", "CartPole-v1", {"learning_rate": "fast"}, "dqn param 'learning_rate' must be a float, got 'fast'"),
        ("dqn", "CartPole-v1", {"batch_size": 32.5}, "dqn param 'batch_size' must be an int, got 32.5"),
        ("dqn", "CartPole-v1", {"buffer_size": True}, "dqn param 'buffer_size' must be an int, got True"),
        ("dqn", "CartPole-v1", {"hidden_units": [64, "wide"]},
         "dqn param 'hidden_units' must be an int list or null, got \\[64, 'wide'\\]"),
        ("dqn", "CartPole-v1", {"explore_end": [0.1]}, "dqn param 'explore_end' must be a float, got \\[0.1\\]"),
        ("cql", "Pendulum-v1", {"conservative_weight": "heavy"},
         "cql param 'conservative_weight' must be a float, got 'heavy'"),
        ("cql", "Pendulum-v1", {"observation_scaler": 3}, "cql param 'observation_scaler' must be a str or null"),
        ("decision_transformer", "Pendulum-v1", {"target_return": "high"},
         "decision_transformer param 'target_return' must be a float or null, got 'high'"),
        ("hf_decision_transformer", "Pendulum-v1", {"n_layer": "three"},
         "hf_decision_transformer param 'n_layer' must be an int, got 'three'"),
        ("hf_decision_transformer", "Pendulum-v1", {"normalize_observations": "yes"},
         "hf_decision_transformer param 'normalize_observations' must be a bool, got 'yes'"),
        ("ilql", TEXT_ENV, {"batch_size": "many"}, "ilql param 'batch_size' must be an int, got 'many'"),
        ("ilql", TEXT_ENV, {"history": -0.5}, "ilql param 'history' must be an int or null, got -0.5"),
        ("ppo", TEXT_ENV, {"pretrained": 7}, "ppo param 'pretrained' must be a str or null, got 7"),
    ],
)  # fmt: skip
def test_a_value_of_the_wrong_type_is_refused_naming_algorithm_param_and_value(name, env, params, refusal):
    with pytest.raises(ValueError, match=refusal):
        check_params(name, env, params)


def test_yaml_ish_values_are_read_as_the_params_types():
    """YAML 1.1 reads 3e-4 as a string and people write 64.0 or 1: a run reads them as its params' types,
    as ppo always has (before, a d3rlpy run handed the string to d3rlpy and failed when it started)."""
    from rlbench_cli.algos.d3rlpy_offline import CQL
    from rlbench_cli.algos.d3rlpy_online import DQN
    from rlbench_cli.algos.hf_decision_transformer import HFDecisionTransformer
    from rlbench_cli.algos.text.common import settings_of

    cfg, settings = DQN.split_params({"learning_rate": "3e-4", "batch_size": 64.0, "hidden_units": [64, "32"],
                                      "buffer_size": "1e5"})  # fmt: skip
    assert cfg == {"learning_rate": 3e-4, "batch_size": 64} and isinstance(cfg["batch_size"], int)
    assert settings["hidden_units"] == [64, 32] and settings["buffer_size"] == 100_000
    cfg, settings = CQL.split_params({"conservative_weight": 5, "hidden_units": None}, discrete=False)
    assert cfg["conservative_weight"] == 5.0 and isinstance(cfg["conservative_weight"], float)
    assert settings["hidden_units"] is None
    config, settings = HFDecisionTransformer.split_params({"n_inner": None, "normalize_observations": "false",
                                                           "target_return": 90})  # fmt: skip
    assert config["n_inner"] is None and settings["normalize_observations"] is False
    assert settings["target_return"] == 90.0
    s = settings_of("ilql", {"history": None, "dropout": "0.1", "batch_size": 16.0}, {})
    assert s["history"] is None and s["dropout"] == 0.1 and s["batch_size"] == 16


def test_coerce_reads_each_kind_and_names_what_it_refuses():
    from rlbench_cli.algos.params import INT_LIST, coerce, coerce_all

    assert coerce("a", "flag", "TRUE", False) is True and coerce("a", "flag", 0, True) is False
    assert coerce("a", "n", "1e3", 1) == 1000 and coerce("a", "lr", 1, 0.5) == 1.0
    assert coerce("a", "units", 64, INT_LIST, optional=True) == [64]
    assert coerce("a", "sizes", [64.0, "32"], (1,)) == (64, 32)
    assert coerce("a", "units", None, INT_LIST, optional=True) is None
    for value, default, kind in [(2, False, "a bool"), (1.5, 1, "an int"), (True, 1.0, "a float"),
                                 (None, 1.0, "a float"), (3, "x", "a str"), ([1.5], INT_LIST, "an int list")]:  # fmt: skip
        with pytest.raises(ValueError, match=f"^a param 'p' must be {kind}, got "):
            coerce("a", "p", value, default)
    typed = coerce_all("a", {"n": "2", "free": [1], "other": "x"}, {"n": 1, "free": None})
    assert typed == {"n": 2, "free": [1], "other": "x"}  # a None default without a kind, a name not known
