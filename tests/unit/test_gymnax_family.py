"""The gymnax env family and ppo_jax's place in the registries, without JAX: names, references, the refusal
of gymnasium's factory, and that checking a gymnax suite (params included) imports no JAX."""

import subprocess
import sys

import pytest

from rlbench_cli.algos.registry import is_discrete_only, is_jax, is_packable, jax_names, needs_torch
from rlbench_cli.envs import known_env, make_env
from rlbench_cli.envs.families import family_of, is_continuous, is_jax_env, jax_twin
from rlbench_cli.envs.gymnax import CONTINUOUS, GYMNAX_ENVS
from rlbench_cli.references import lookup

pytestmark = pytest.mark.fast


def test_gymnax_tasks_are_named_by_their_simulator_and_known():
    for name in ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0",
                 "Breakout-MinAtar", "SpaceInvaders-MinAtar", "Catch-bsuite", "DeepSea-bsuite"):  # fmt: skip
        env_id = f"gymnax/{name}"
        assert env_id in GYMNAX_ENVS and known_env(env_id) is None and is_jax_env(env_id)
        assert family_of(env_id).name == "gymnax"
    assert not is_jax_env("CartPole-v1") and jax_twin("CartPole-v1") == "gymnax/CartPole-v1"
    assert jax_twin("Hopper-v5") is None
    assert CONTINUOUS <= set(GYMNAX_ENVS)
    assert "did you mean gymnax/Breakout-MinAtar" in known_env("gymnax/Breakout-Minatar")


def test_classic_control_references_apply_to_gymnaxs_versions():
    for name in ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1"):
        assert lookup(f"gymnax/{name}") == lookup(name) and lookup(name)[0] == "classic-control"


def test_gymnasiums_factory_refuses_a_jax_env():
    with pytest.raises(ValueError, match="gymnax/CartPole-v1 is a JAX env"):
        make_env("gymnax/CartPole-v1")


def test_ppo_jax_in_the_registry():
    assert jax_names() == ("ppo_jax", "pqn_jax") and is_jax("ppo_jax") and not is_jax("ppo")
    assert is_packable("ppo_jax") and not needs_torch("ppo_jax") and is_packable("pqn_jax")
    assert is_discrete_only("pqn_jax") and not is_discrete_only("ppo_jax")
    assert is_continuous("gymnax/Pendulum-v1") and not is_continuous("gymnax/CartPole-v1")


def test_checking_a_gymnax_suite_and_its_params_imports_no_jax(tmp_path):
    suite = tmp_path / "j.yaml"
    suite.write_text("name: j\nseeds: 2\nenvs: [gymnax/CartPole-v1]\nalgorithms: [{name: ppo_jax, params: "
                     "{num_envs: 8}}, pqn_jax]\nresources: {seeds_per_job: 2}\n")  # fmt: skip
    code = (
        "import sys\nfrom rlbench_cli.cli.app import app\nfrom typer.testing import CliRunner\n"
        f"r = CliRunner().invoke(app, ['validate', {str(suite)!r}]); assert r.exit_code == 0, r.output\n"
        "print([m for m in ('jax', 'gymnax', 'optax', 'torch') if m in sys.modules])\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "[]", p.stdout + p.stderr
