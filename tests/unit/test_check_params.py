"""Each algorithm's params checked as its run would check them at its start, without running anything
(``rlbench_cli.algos.check_params``, which ``rlbench validate`` calls)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlbench_cli.algos import ALGORITHMS, TEXT_VARIANTS, check_params
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


@pytest.mark.parametrize("name", sorted(TEXT_VARIANTS))
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
