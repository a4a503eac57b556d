"""``coordinator.validate``: what ``rlbench validate`` prints, as data."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.coordinator.validate import validate
from rlbench_cli.errors import SuiteInvalid, UsageError

SUITE = """
name: packs
seeds: 4
budget: {steps: 2048}
envs: [CartPole-v1, Acrobot-v1]
algorithms: [ppo, random]
resources: {seeds_per_job: 2}
"""


def test_validate_returns_the_grid_and_its_packing(tmp_path):
    path = tmp_path / "packs.yaml"
    path.write_text(SUITE, encoding="utf-8")
    v = validate(path)
    assert (v.suite, v.runs, v.seeds, v.seeds_per_job) == ("packs", 16, 4, 2)
    assert v.grid == "2 algorithm configs x 2 envs"
    assert v.jobs == 4 + 8  # ppo: 4 seeds / 2 per job on each env; random: one job a seed
    assert v.unpackable == ["random"] and v.packable == ["ppo", "ppo_jax", "pqn_jax"]
    out = CliRunner().invoke(app, ["validate", str(path)])
    assert out.exit_code == 0, out.output
    assert "ok: " in out.output and "16 runs = 4 seeds x 2 algorithm configs x 2 envs" in out.output
    assert "seeds_per_job 2: 16 runs in 12 jobs; random cannot be packed" in out.output
    assert "(packable: ppo, ppo_jax, pqn_jax and entrypoints marked @rlbench_cli.seeds_per_job)" in out.output


def test_validate_refuses_a_params_typo_and_a_bad_field(tmp_path):
    typo = tmp_path / "typo.yaml"
    typo.write_text(SUITE.replace("[ppo, random]", "[{name: ppo, params: {learning_rat: 0.1}}]"), "utf-8")
    with pytest.raises(UsageError, match=r"typo\.yaml: algorithm 'ppo' on CartPole-v1: .*learning_rat"):
        validate(typo)
    bad = tmp_path / "bad.yaml"
    bad.write_text(SUITE.replace("seeds: 4", "seeds: -1"), "utf-8")
    with pytest.raises(SuiteInvalid, match="field 'seeds'"):
        validate(bad)
