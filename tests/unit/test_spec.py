import re

import pytest

from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.suite.loader import load_suite, parse_suite


def test_defaults(suite_dict):
    s = parse_suite({"envs": ["CartPole-v1"], "algorithms": ["ppo"]}, "x.yaml", default_name="x")
    assert s.name == "x"
    assert s.seed_list == [0, 1, 2]
    assert s.budget.steps == 100_000 and s.budget.eval_every == 10_000 and s.budget.eval_episodes == 10
    assert s.score.metric == "eval/return" and s.score.rule == "final" and s.score.drop_first == 0
    assert s.resources.gpus_per_job == 0


def test_short_and_long_forms():
    s = parse_suite(
        {
            "name": "q",
            "seeds": [3, 7],
            "envs": ["CartPole-v1", {"id": "Pendulum-v1", "kwargs": {"g": 9.81}}],
            "algorithms": ["random", {"name": "ppo", "params": {"learning_rate": 1e-3}, "label": "ppo-fast"}],
        }
    )
    assert s.seed_list == [3, 7]
    assert s.envs[1].label == "Pendulum-v1[g=9.81]"
    assert s.algorithms[1].label == "ppo-fast"


@pytest.mark.parametrize(
    "patch, expected",
    [
        ({"budgett": {}}, "field 'budgett': unknown field; remove it or check its spelling"),
        ({"budget": {"steps": -5}}, "field 'budget.steps': Input should be greater than 0 (got -5)"),
        ({"budget": {"steps": "many"}}, "field 'budget.steps'"),
        ({"seeds": 0}, "field 'seeds': seeds must be a positive count"),
        ({"seeds": [1, -2]}, "seeds must be non-negative"),
        ({"seeds": [1, 1]}, "seeds are listed twice"),
        ({"algorithms": ["ppoo"]}, "field 'algorithms[0].name': unknown algorithm 'ppoo'; choose one of:"),
        ({"algorithms": []}, "field 'algorithms': List should have at least 1 item"),
        (
            {"envs": ["CartPol-v1"]},
            "field 'envs[0]': unknown gymnasium environment 'CartPol-v1'; did you mean CartPole-v1",
        ),
        ({"score": {"rule": "median"}}, "field 'score.rule': rule must be final, best, auc or mean_last:N"),
        (
            {"sweep": {"dqn.lr": [1]}},
            "sweep key 'dqn.lr' names algorithm 'dqn', which the suite does not list",
        ),
        ({"sweep": {"random": [1]}}, "must look like ALGO.PARAM"),
        ({"algorithms": ["random", "random"]}, "both called 'random': give one a different 'label'"),
        ({"name": "../evil"}, "field 'name': names use letters"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_errors_name_file_field_and_fix(suite_dict, patch, expected):
    with pytest.raises(SuiteInvalid) as e:
        parse_suite({**suite_dict, **patch}, "s.yaml")
    msg = str(e.value)
    assert msg.startswith("s.yaml: ")
    assert expected in msg
    assert "\n" not in msg


def test_yaml_errors(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\nenvs: [CartPole-v1\n")
    with pytest.raises(SuiteInvalid, match=r"bad.yaml: line \d+, column \d+: invalid YAML"):
        load_suite(p)
    with pytest.raises(SuiteInvalid, match="no such suite file"):
        load_suite(tmp_path / "missing.yaml")
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(SuiteInvalid, match="the file is empty"):
        load_suite(tmp_path / "empty.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(SuiteInvalid, match="must be a YAML mapping"):
        load_suite(tmp_path / "list.yaml")


def test_yaml_is_loaded_safely(tmp_path):
    p = tmp_path / "evil.yaml"
    p.write_text(
        "name: !!python/object/apply:os.system ['echo pwned']\nenvs: [CartPole-v1]\nalgorithms: [random]\n"
    )
    with pytest.raises(SuiteInvalid, match="invalid YAML"):
        load_suite(p)


def test_ready_suites_validate():
    from pathlib import Path

    for f in sorted(Path(__file__).parents[2].joinpath("suites").glob("*.yaml")):
        load_suite(f)


def test_normalize_block(suite_dict):
    s = parse_suite(
        {
            **suite_dict,
            "algorithms": ["random", "ppo"],
            "normalize": {"table": "classic-control", "references": {"X-v0": [0, 10]}, "low_from": "random"},
        }
    )
    assert s.normalize.table == "classic-control" and s.normalize.references["X-v0"] == (0.0, 10.0)
    for block, needle in [
        ({"table": "d5rl"}, "field 'normalize.table': unknown reference table 'd5rl'"),
        (
            {"high_from": "expert"},
            "normalize.high_from names algorithm 'expert', which the suite does not list",
        ),
        ({"references": {"X-v0": [1, 1]}}, "low and high must differ"),
        ({"scale": 0}, "field 'normalize.scale'"),
        ({"tabel": "d4rl"}, "field 'normalize.tabel': unknown field"),
    ]:
        with pytest.raises(SuiteInvalid, match=block and needle.replace("(", r"\(").replace(")", r"\)")):
            parse_suite({**suite_dict, "normalize": block}, "s.yaml")


def test_algorithm_envs_restricts_to_suite_envs(suite_dict):
    envs = ["CartPole-v1", {"id": "Pendulum-v1", "kwargs": {"g": 9.81}}, "Pendulum-v1"]
    s = parse_suite(
        {
            **suite_dict,
            "envs": envs,
            "algorithms": [
                {"name": "dqn", "envs": ["CartPole-v1"]},
                {"name": "sac", "envs": ["Pendulum-v1[g=9.81]"]},  # an env with kwargs, by its label
                "ppo",
            ],
        }
    )
    assert s.algorithms[0].envs == ["CartPole-v1"] and s.algorithms[2].envs is None  # default: all
    assert [s.algorithms[0].runs_on(e) for e in s.envs] == [True, False, False]
    assert [s.algorithms[1].runs_on(e) for e in s.envs] == [False, True, False]
    assert all(s.algorithms[2].runs_on(e) for e in s.envs)


@pytest.mark.parametrize(
    "envs, expected",
    [
        (
            ["CartPole-v1", "Pendulum-v1"],
            "algorithms[0].envs names 'Pendulum-v1', which is not one of the suite's envs or datasets ('CartPole-v1'); "
            "list only those",
        ),
        ([], "field 'algorithms[0].envs': List should have at least 1 item"),
        ("CartPole-v1", "field 'algorithms[0].envs': Input should be a valid list"),
        (
            ["bogus"],
            "which is not one of the suite's envs or datasets ('CartPole-v1', 'Pendulum-v1[a=x\\ny]')",
        ),
    ],
    ids=["not-in-suite", "empty", "not-a-list", "one-line"],
)
def test_algorithm_envs_errors(suite_dict, envs, expected):
    suite_dict = {**suite_dict, "algorithms": [{"name": "random", "envs": envs}]}
    if envs == ["bogus"]:  # kwargs holding a newline still give a one-line error
        suite_dict["envs"] = ["CartPole-v1", {"id": "Pendulum-v1", "kwargs": {"a": "x\ny"}}]
    with pytest.raises(SuiteInvalid) as e:
        parse_suite(suite_dict, "s.yaml")
    msg = str(e.value)
    assert msg.startswith("s.yaml: ") and expected in msg and "\n" not in msg


@pytest.mark.parametrize(
    "resources, budget, message",
    [
        ({"executor": "kubernetes"}, {}, "unknown executor 'kubernetes'; choose one of: local, ray, slurm"),
        ({"slurm": {"time_min": 0}}, {}, "time_min"),
        ({"slurm": {"partiton": "gpu"}}, {}, "partiton"),
        ({}, {"checkpoint_every": 0}, "checkpoint_every must be a positive number"),
        ({}, {"checkpoint_every": "10 minutes"}, "give steps (an integer) or minutes like '10m'"),
        ({}, {"checkpoint_every": True}, "checkpoint_every must be a positive number"),
    ],
    ids=["executor", "slurm-time", "slurm-typo", "ckpt-zero", "ckpt-words", "ckpt-bool"],
)
def test_executor_and_checkpoint_settings_are_checked(resources, budget, message):
    with pytest.raises(SuiteInvalid, match=re.escape(message)):
        parse_suite({"name": "x", "envs": ["CartPole-v1"], "algorithms": ["random"], "resources": resources,
                     "budget": budget})  # fmt: skip


def test_executor_settings_have_defaults_and_are_read():
    s = parse_suite({"name": "x", "envs": ["CartPole-v1"], "algorithms": ["random"],
                     "budget": {"checkpoint_every": "2.5m"},
                     "resources": {"executor": "ray", "ray": {"address": "auto"}, "slurm": {"partition": "gpu"}}})  # fmt: skip
    assert (s.resources.executor, s.resources.ray.address, s.resources.slurm.partition) == (
        "ray",
        "auto",
        "gpu",
    )
    assert s.budget.checkpoint_every == "2.5m"
    d = parse_suite({"name": "x", "envs": ["CartPole-v1"], "algorithms": ["random"]})
    assert (d.resources.executor, d.budget.checkpoint_every) == ("local", None)


def test_gymnasiums_own_ids_are_known_without_importing_it_and_each_is_registered():
    """A suite of gymnasium's ids is checked without importing gymnasium (the coordinator never makes an
    env); each id so known is registered by the gymnasium installed, and others still go to its registry."""
    import subprocess
    import sys

    code = ("import sys; from rlbench_cli.envs import known_env; "
            "assert known_env('CartPole-v1') is None and known_env('rlbench/MazeFO-v0') is None; "
            "print('gymnasium' in sys.modules)")  # fmt: skip
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        == "False\n"
    )
    from gymnasium.envs.registration import registry

    from rlbench_cli.envs import GYMNASIUM_IDS, known_env

    assert GYMNASIUM_IDS <= set(registry) and "CartPole-v1" in GYMNASIUM_IDS
    assert known_env("phys2d/CartPole-v1") is None  # registered by gymnasium, not in the list
    assert "did you mean CartPole-v1" in known_env("CartPole-v9")
