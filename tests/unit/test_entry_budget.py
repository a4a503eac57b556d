"""`budget:` on algorithm, env and dataset entries: merged over the suite's budget in grid expansion, validated
at load time with a one-line error naming the field."""

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.suite.grid import expand, steps_summary
from rlbench_cli.suite.loader import parse_suite


def suite(**over):
    base = {
        "name": "eb",
        "seeds": 2,
        "budget": {"steps": 500, "eval_every": 250, "eval_episodes": 5},
        "envs": ["CartPole-v1", "Acrobot-v1"],
        "datasets": ["CartPole-v1-medium", "Pendulum-v1-expert"],
        "algorithms": ["ppo", "bc"],
    }
    base.update(over)
    return parse_suite(base, "eb.yaml")


def budgets(s):
    return {(r.algo, r.env, r.seed): r.budget for r in expand(s)}


def test_without_entry_budgets_runs_keep_the_suites_budget_and_ids():
    plain = suite()
    runs = expand(plain)
    assert all(r.budget == plain.budget.model_dump() for r in runs)
    # an entry budget that repeats the suite's values trains the same runs: same ids
    same = suite(datasets=[{"name": "CartPole-v1-medium", "budget": {"steps": 500}}, "Pendulum-v1-expert"])
    assert [r.run_id for r in expand(same)] == [r.run_id for r in runs]


def test_dataset_budget_applies_to_every_algorithm_on_that_dataset_only():
    s = suite(
        datasets=[
            {"name": "CartPole-v1-medium", "budget": {"steps": 3000, "eval_every": 1000}},
            "Pendulum-v1-expert",
        ]
    )
    b = budgets(s)
    assert b[("bc", "CartPole-v1-medium", 0)]["steps"] == 3000
    assert b[("bc", "CartPole-v1-medium", 1)]["eval_every"] == 1000
    assert b[("bc", "CartPole-v1-medium", 0)]["eval_episodes"] == 5  # the suite's, not given by the entry
    assert b[("bc", "Pendulum-v1-expert", 0)]["steps"] == 500
    assert all(b[("ppo", env, 0)]["steps"] == 500 for env in ("CartPole-v1", "Acrobot-v1"))
    base = {r.run_id: r for r in expand(suite())}
    changed = [r for r in expand(s) if r.run_id not in base]
    assert {(r.algo, r.env) for r in changed} == {("bc", "CartPole-v1-medium")}  # only those cells retrain
    assert len(expand(s)) == len(base)


def test_env_budget_and_algorithm_budget_and_their_order():
    s = suite(
        envs=[{"id": "CartPole-v1", "budget": {"steps": 2000, "eval_episodes": 20}}, "Acrobot-v1"],
        algorithms=[{"name": "ppo", "budget": {"steps": 4000}}, "bc"],
    )
    b = budgets(s)
    # the algorithm entry's fields win over the task's, the task's over the suite's
    assert (
        b[("ppo", "CartPole-v1", 0)]["steps"] == 4000 and b[("ppo", "CartPole-v1", 0)]["eval_episodes"] == 20
    )
    assert b[("ppo", "Acrobot-v1", 0)]["steps"] == 4000 and b[("ppo", "Acrobot-v1", 0)]["eval_episodes"] == 5
    assert b[("bc", "CartPole-v1-medium", 0)]["steps"] == 500


def test_eval_every_follows_the_merged_steps_when_nobody_sets_it():
    s = suite(budget={"steps": 500}, algorithms=["ppo", {"name": "bc", "budget": {"steps": 3000}}])
    b = budgets(s)
    assert b[("bc", "CartPole-v1-medium", 0)]["eval_every"] == 300
    assert b[("ppo", "CartPole-v1", 0)]["eval_every"] == 50
    # the suite's explicit eval_every is kept under an entry's steps
    b = budgets(suite(algorithms=["ppo", {"name": "bc", "budget": {"steps": 3000}}]))
    assert b[("bc", "CartPole-v1-medium", 0)]["eval_every"] == 250


def test_entry_budget_with_sweep_variants():
    s = suite(
        algorithms=[{"name": "bc", "budget": {"steps": 50}}],
        envs=[],
        sweep={"bc.learning_rate": [1e-3, 1e-4]},
    )
    runs = expand(s)
    assert len(runs) == 2 * 2 * 2 and {r.budget["steps"] for r in runs} == {50}


def test_steps_summary():
    assert steps_summary(expand(suite())) == "500 steps each"
    s = suite(datasets=[{"name": "CartPole-v1-medium", "budget": {"steps": 3000}}, "Pendulum-v1-expert"])
    assert steps_summary(expand(s)) == "500 to 3,000 steps (entries' budgets)"


@pytest.mark.parametrize(
    "over, needle",
    [
        (
            {"datasets": [{"name": "CartPole-v1-medium", "budget": {"steps": 0}}]},
            "field 'datasets[0].budget.steps': Input should be greater than 0 (got 0)",
        ),
        (
            {"envs": [{"id": "CartPole-v1", "budget": {"stepz": 10}}]},
            "field 'envs[0].budget.stepz': unknown field",
        ),
        (
            {"algorithms": ["ppo", {"name": "bc", "budget": {"timeout": 60}}]},
            "field 'algorithms[1].budget': timeout is the suite's alone",
        ),
        (
            {"algorithms": ["ppo", {"name": "bc", "budget": {}}]},
            "field 'algorithms[1].budget': an entry's budget is empty",
        ),
        (
            {"algorithms": [{"name": "ppo", "budget": {"eval_every": "often"}}]},
            "field 'algorithms[0].budget.eval_every'",
        ),
        (
            {"algorithms": [{"name": "ppo", "budget": {"checkpoint_every": "5h"}}]},
            "field 'algorithms[0].budget.checkpoint_every'",
        ),
        ({"algorithms": [{"name": "ppo", "budget": 100}]}, "field 'algorithms[0].budget'"),
    ],
)
def test_bad_entry_budgets_are_one_line_errors(over, needle):
    with pytest.raises(SuiteInvalid) as e:
        suite(**over)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_validate_and_dry_run_show_entry_budgets(tmp_path):
    f = tmp_path / "eb.yaml"
    f.write_text(
        "name: eb\nseeds: 1\nbudget: {steps: 500}\nenvs: [CartPole-v1]\n"
        "datasets: [{name: CartPole-v1-medium, budget: {steps: 2000}}]\nalgorithms: [ppo, bc]\n"
    )
    runner = CliRunner()
    r = runner.invoke(app, ["validate", str(f)])
    assert r.exit_code == 0, r.output
    assert "500 to 2,000 steps (entries' budgets)" in r.output
    r = runner.invoke(app, ["run", str(f), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "steps=2000" in r.output and "steps=500" in r.output
    f.write_text(f.read_text().replace("{steps: 2000}", "{steps: -1}"))
    r = runner.invoke(app, ["validate", str(f)])
    assert r.exit_code == 2
    line = r.output.strip()
    assert "\n" not in line and "datasets[0].budget.steps" in line


def test_entries_may_share_a_label_on_disjoint_tasks():
    s = suite(
        algorithms=[
            "ppo",
            {"name": "bc", "envs": ["Pendulum-v1-expert"]},
            {
                "name": "bc",
                "envs": ["CartPole-v1-medium"],
                "params": {"batch_size": 64},
                "budget": {"steps": 2000},
            },
        ]
    )
    runs = expand(s)
    assert len(runs) == 2 * (2 + 2)
    bc = {r.env: r for r in runs if r.algo == "bc" and r.seed == 0}
    assert (
        bc["CartPole-v1-medium"].params == {"batch_size": 64}
        and bc["CartPole-v1-medium"].budget["steps"] == 2000
    )
    assert bc["Pendulum-v1-expert"].params == {} and bc["Pendulum-v1-expert"].budget["steps"] == 500
    # the Pendulum cell is the cell of a suite with one bc entry: the same run id
    plain = {(r.algo, r.env, r.seed): r.run_id for r in expand(suite())}
    assert bc["Pendulum-v1-expert"].run_id == plain[("bc", "Pendulum-v1-expert", 0)]
    # a sweep over the shared label applies to both entries
    swept = expand(s.model_copy(update={"sweep": {"bc.learning_rate": [1e-3, 1e-4]}}))
    assert {(r.algo, r.env) for r in swept if r.algo_name == "bc" and r.seed == 0} == {
        (f"bc[learning_rate={lr}]", env) for lr in ("0.001", "0.0001") for env in bc
    }


@pytest.mark.parametrize(
    "algorithms, needle",
    [
        (
            ["bc", {"name": "bc", "envs": ["CartPole-v1-medium"]}],
            "two algorithm entries are both called 'bc'",
        ),
        (
            [{"name": "bc", "envs": ["CartPole-v1-medium"]}, {"name": "bc", "envs": ["CartPole-v1-medium"]}],
            "algorithms[0] and algorithms[1] are both called 'bc' and both run on 'CartPole-v1-medium'",
        ),
        (
            [
                {"name": "bc", "envs": ["CartPole-v1-medium"]},
                {"name": "cql", "label": "bc", "envs": ["Pendulum-v1-expert"]},
            ],
            "algorithm entries called 'bc' are different algorithms (bc, cql)",
        ),
    ],
)
def test_shared_labels_need_disjoint_envs_of_one_algorithm(algorithms, needle):
    with pytest.raises(SuiteInvalid) as e:
        suite(algorithms=algorithms)
    assert needle in str(e.value) and "\n" not in str(e.value)
