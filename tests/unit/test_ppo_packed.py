"""Packed PPO (``algos.ppo.train_packed``, ``packed.run_packed``): many seeds in one process, batched across seeds.

What is proven here, on tiny budgets:
- with one seed, ``train_packed`` logs the same rows as ``PPO().train`` (same names, steps, episode lengths;
  values to float tolerance), on CartPole (discrete, vectorised env) and Pendulum (continuous, obs and reward
  normalisation, truncation bootstrapping), and with ``target_kl`` (early-stopped epochs);
- the NumPy-vectorised CartPole is bit-identical to gymnasium's CartPole with same-step autoreset;
- re-running a pack gives the same numbers; a seed's numbers do not depend on the seeds it is packed with;
- a seed whose rewards turn NaN fails with the reason while the others finish (through ``run_packed``,
  which writes each seed's spec.json, shards and result.json);
- packed and one-per-job training give statistically compatible final returns (permutation test and
  overlapping IQM intervals), with a check that the test can tell a trained from an untrained policy.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch

from rlbench_cli.algos.base import RunContext
from rlbench_cli.algos.ppo import PPO, train_packed
from rlbench_cli.algos.ppo.envs import CartPoleBlock
from rlbench_cli.algos.registry import ALGORITHMS
from rlbench_cli.bootstrap import interval_estimates
from rlbench_cli.packed import run_packed
from rlbench_cli.runner import read_result
from rlbench_cli.sink import ShardSink, list_shards
from rlbench_cli.suite.grid import RunSpec

CARTPOLE = {"num_steps": 64}
PENDULUM = {"num_envs": 2, "num_steps": 256, "normalize_obs": True, "normalize_reward": True}


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_spec(env_id: str, params: dict[str, Any], seed: int, steps: int, eval_every: int = 1024,
              eval_episodes: int = 2, env_kwargs: dict[str, Any] | None = None) -> RunSpec:  # fmt: skip
    return RunSpec(suite="t", algo="ppo", algo_name="ppo", params=params, env_id=env_id,
                   env_kwargs=env_kwargs or {}, seed=seed,
                   budget={"steps": steps, "eval_every": eval_every, "eval_episodes": eval_episodes,
                           "timeout": None})  # fmt: skip


def read_rows(folder: Path) -> pd.DataFrame:
    """A run's metric rows in logging order, without the sys/* ones (timings)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = pa.concat_tables([pq.read_table(p) for p in list_shards(folder)]).to_pandas()
    return df[~df["name"].str.startswith("sys/")].reset_index(drop=True)[["step", "name", "value"]]


def unpacked(tmp: Path, spec: RunSpec) -> pd.DataFrame:
    folder = tmp / f"single-{spec.seed}-{len(list(tmp.iterdir()))}"
    sink = ShardSink(folder, background=False)
    PPO().train(RunContext(spec=spec, sink=sink))
    sink.close()
    return read_rows(folder)


def packed(
    tmp: Path, specs: list[RunSpec], **kw: Any
) -> tuple[dict[int, str | None], dict[int, pd.DataFrame]]:
    tag = len(list(tmp.iterdir()))
    sinks = {s.seed: ShardSink(tmp / f"pack{tag}-{s.seed}", background=False) for s in specs}
    ctxs = [RunContext(spec=s, sink=sinks[s.seed]) for s in specs]
    outcome = train_packed(ctxs, **kw)
    for sink in sinks.values():
        sink.close()
    return outcome, {seed: read_rows(tmp / f"pack{tag}-{seed}") for seed in sinks}


def assert_same_rows(a: pd.DataFrame, b: pd.DataFrame, rtol: float = 1e-4, atol: float = 1e-4) -> None:
    assert a["name"].tolist() == b["name"].tolist()
    assert a["step"].tolist() == b["step"].tolist()
    lengths = a["name"] == "train/episode_length"
    assert a["value"][lengths].tolist() == b["value"][lengths].tolist()
    np.testing.assert_allclose(b["value"], a["value"], rtol=rtol, atol=atol)


# -- N = 1 is ppo.py ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env_id, params",
    [
        ("CartPole-v1", CARTPOLE),
        ("Pendulum-v1", PENDULUM),
        ("CartPole-v1", {"num_steps": 64, "target_kl": 0.002}),
    ],
    ids=["cartpole", "pendulum-normalised", "cartpole-target-kl"],
)
def test_one_seed_matches_unpacked_ppo_step_for_step(tmp_path: Path, env_id: str, params: dict) -> None:
    spec = make_spec(env_id, params, seed=3, steps=2048)
    ref = unpacked(tmp_path, spec)
    outcome, rows = packed(tmp_path, [spec])
    assert outcome == {3: None}
    got = rows[3]
    assert set(ref["name"]) >= {"eval/return", "train/episode_return", "train/loss/policy", "train/clipfrac"}
    assert_same_rows(ref, got)
    # evaluation is the shared one on the same weights: the same returns
    ev = ref["name"] == "eval/return"
    assert ref["step"][ev].tolist() == [0, 1024, 2048]
    # (rtol 1e-5: Pendulum trains with the continuous defaults, 10 epochs x 32 minibatches of rounding)
    np.testing.assert_allclose(got["value"][ev], ref["value"][ev], rtol=1e-5)


COST = {"name": "SafetyCost", "kwargs": {"index": 2, "low": -1.0, "high": 1.0, "limit": 5}}


def test_packed_seeds_log_their_safety_costs_as_one_run_does(tmp_path: Path) -> None:
    """NeoRL-2's SafetyCost (``info["cost"]``) reaches every packed seed's ``train/episode_cost`` (at each
    episode's end, as its return) and ``eval/cost`` (at each evaluation), the same rows as unpacked ppo's."""
    specs = [RunSpec(**{**make_spec("Pendulum-v1", PENDULUM, seed, steps=1024, eval_every=512).__dict__,
                        "env_wrappers": [COST]}) for seed in (3, 4)]  # fmt: skip
    folders = [tmp_path / f"pack-{spec.seed}" for spec in specs]
    results = run_packed(specs, folders)
    assert [r["status"] for r in results] == ["finished", "finished"], results
    for spec, folder in zip(specs, folders):
        rows = read_rows(folder / "metrics")
        costs, returns = (rows[rows["name"] == f"train/episode_{k}"] for k in ("cost", "return"))
        assert (
            costs["step"].tolist() == returns["step"].tolist() and len(costs) == 4
        )  # 2 envs x 512 steps / 200
        assert (costs["value"] >= 0).all() and (costs["value"] > 0).any()
        assert rows[rows["name"] == "eval/cost"]["step"].tolist() == [0, 512, 1024]
        assert_same_rows(unpacked(tmp_path, spec), rows)


def test_vectorised_cartpole_is_gymnasium_cartpole() -> None:
    envs = [gym.make("CartPole-v1") for _ in range(6)]
    seeds = [[10, 11, 12], [40, 41, 42]]
    block = CartPoleBlock(envs[0], 500, 2, 3)
    obs = block.reset(seeds)
    ref = np.stack([np.asarray(e.reset(seed=s)[0]) for e, s in zip(envs, sum(seeds, []))]).reshape(2, 3, 4)
    assert np.array_equal(obs, ref)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(1500):
        a = (rng.random((2, 3)) < 0.5).astype(np.int64)
        if _ % 3 == 0:
            a[:] = (obs[..., 2] > 0).astype(
                np.int64
            )  # balance now and then: some episodes hit the time limit
        res = block.step(a)
        for j, env in enumerate(envs):
            k, i = divmod(j, 3)
            o, r, te, tr, _info = env.step(int(a[k, i]))
            assert (r, te, tr) == (res.reward[k, i], res.terminated[k, i], res.truncated[k, i])
            if te or tr:
                ends += 1
                assert np.array_equal(o, res.final_obs[k, i])
                o, _info = env.reset()
            assert np.array_equal(o, res.obs[k, i])
        obs = res.obs
    assert ends > 20


def test_vectorised_and_plain_envs_train_identically(tmp_path: Path) -> None:
    specs = [make_spec("CartPole-v1", CARTPOLE, seed, steps=1024) for seed in (0, 1)]
    _, fast = packed(tmp_path, specs)
    _, plain = packed(tmp_path, specs, vectorise=False)
    for seed in (0, 1):
        pd.testing.assert_frame_equal(fast[seed], plain[seed])


# -- determinism and independence -----------------------------------------------------------------------------


def test_same_pack_same_numbers(tmp_path: Path) -> None:
    specs = [make_spec("CartPole-v1", CARTPOLE, seed, steps=1024) for seed in (0, 1, 2)]
    _, a = packed(tmp_path, specs)
    _, b = packed(tmp_path, specs)
    for seed in (0, 1, 2):
        pd.testing.assert_frame_equal(a[seed], b[seed])
    assert a[0]["value"].tolist() != a[1]["value"].tolist()


@pytest.mark.parametrize("env_id, params", [("CartPole-v1", CARTPOLE), ("Pendulum-v1", PENDULUM)])
def test_a_seed_does_not_depend_on_its_pack(tmp_path: Path, env_id: str, params: dict) -> None:
    """Seed 0's numbers packed with {1, 2} and with {5}: its own streams, per-seed batched kernels."""
    _, three = packed(tmp_path, [make_spec(env_id, params, s, steps=1024) for s in (0, 1, 2)])
    _, two = packed(tmp_path, [make_spec(env_id, params, s, steps=1024) for s in (5, 0)])
    pd.testing.assert_frame_equal(three[0], two[0])  # exactly: every kernel computes a seed's slice alone
    assert three[0]["value"].tolist() != two[5]["value"].tolist()


# -- failures and run_packed ------------------------------------------------------------------------------------


class _NaNRewardCartPole(gym.Env):
    """CartPole whose rewards are NaN when it was seeded with one of ``poison`` (env i of seed s: s + i)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, poison: tuple[int, ...] = ()):
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv

        self.inner = CartPoleEnv()
        self.observation_space, self.action_space = self.inner.observation_space, self.inner.action_space
        self.poison, self.poisoned = set(poison), False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.poisoned = seed in self.poison
        return self.inner.reset(seed=seed, options=options)

    def step(self, action: Any):
        o, r, te, tr, info = self.inner.step(action)
        return o, float("nan") if self.poisoned else r, te, tr, info


gym.register("rlbench-test/NaNRewardCartPole-v0", entry_point=_NaNRewardCartPole, max_episode_steps=500)


def test_a_diverging_seed_fails_and_the_others_finish(tmp_path: Path) -> None:
    specs = [
        make_spec(
            "rlbench-test/NaNRewardCartPole-v0",
            {"num_steps": 32},
            seed,
            steps=512,
            eval_every=256,
            eval_episodes=1,
            env_kwargs={"poison": [7]},
        )  # fmt: skip
        for seed in (0, 7, 20)
    ]
    folders = [tmp_path / s.run_id / "attempt-1" for s in specs]
    results = run_packed(specs, folders)
    by_seed = {s.seed: r for s, r in zip(specs, results)}
    assert by_seed[7]["status"] == "failed"
    assert by_seed[7]["error"] == "diverged: NaN in policy loss at step 128"
    for seed in (0, 20):
        assert by_seed[seed]["status"] == "finished" and by_seed[seed]["error"] is None
        assert by_seed[seed]["final_eval"] is not None
    for spec, folder, result in zip(specs, folders, results):
        assert read_result(folder) == json.loads(json.dumps(result))
        assert json.loads((folder / "spec.json").read_text())["seed"] == spec.seed
        assert result["pack"] == [s.run_id for s in specs]
        rows = read_rows(folder / "metrics")
        ev = rows[rows["name"] == "eval/return"]["step"].tolist()
        assert ev == ([0] if spec.seed == 7 else [0, 256, 512])
        losses = rows[rows["name"] == "train/loss/policy"]
        assert losses["step"].tolist() == ([128] if spec.seed == 7 else [128, 256, 384, 512])
        assert np.isfinite(losses["value"]).all() == (spec.seed != 7)


_HOST_CASES = {  # env, params, seeds, steps, make_spec's other arguments
    "cartpole": ("CartPole-v1", CARTPOLE, (0, 1, 2), 1024, {}),
    "pendulum": ("Pendulum-v1", PENDULUM, (0, 1), 1024, {}),
    "a-seed-diverges": ("rlbench-test/NaNRewardCartPole-v0", {"num_steps": 32}, (0, 7, 20), 512,
                        {"env_kwargs": {"poison": [7]}, "eval_every": 256}),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(_HOST_CASES))
def test_away_from_the_cpu_each_seed_evaluates_through_its_slice_of_the_numpy_actor(
    tmp_path: Path, monkeypatch, case: str
) -> None:
    """The GPU's path forced on CPU: a seed's evaluation acts through its row of the stacked NumPy actor (no
    device round trip a step), also after a failed seed has left the stacks; training is untouched."""
    from rlbench_cli.algos.ppo import nets, transfer

    env_id, params, seeds, steps, kw = _HOST_CASES[case]
    specs = [make_spec(env_id, params, s, steps=steps, **kw) for s in seeds]
    out_torch, on_torch = packed(tmp_path, specs)
    calls = []
    monkeypatch.setattr(transfer, "host_side", lambda device: True)
    monkeypatch.setattr(nets.SeedActor, "__call__",
                        lambda self, x, f=nets.SeedActor.__call__: calls.append(self.index()) or f(self, x))  # fmt: skip
    out_host, on_host = packed(tmp_path, specs)
    assert out_host == out_torch and (case != "a-seed-diverges" or out_host[7] is not None)
    assert set(calls) == set(range(len(seeds)))  # every seed's row was acted with
    for seed in seeds:
        a, b = on_torch[seed], on_host[seed]
        train = ~a["name"].str.startswith("eval/")
        pd.testing.assert_frame_equal(a[train], b[train])  # bitwise: training never reads the host copy
        assert a["name"].tolist() == b["name"].tolist() and a["step"].tolist() == b["step"].tolist()
        np.testing.assert_allclose(b["value"][~train], a["value"][~train], rtol=1e-4, atol=1e-3)


def test_a_seeds_row_is_found_by_identity_not_by_equal_looking_fields() -> None:
    """Away from the CPU a seed looks its row up every step (``seeds.index(seed)``, failed seeds leave the
    stacks): two seeds whose fields are the same objects are still two rows, and finding one compares
    identities (a field-by-field comparison a step made 256 seeds' evaluation O(N^2): 2.4x slower here)."""
    from rlbench_cli.algos.ppo.loop import Seed

    fields = dict(
        ctx=None, rng=np.random.default_rng(0), perm_gen=torch.Generator(), agent=None, obs_rms=None
    )
    a, b = Seed(**fields), Seed(**fields)
    assert [a, b].index(b) == 1 and a != b and a == a


def test_run_packed_stop_event_interrupts_every_seed(tmp_path: Path) -> None:
    specs = [make_spec("CartPole-v1", CARTPOLE, seed, steps=4096, eval_episodes=1) for seed in (0, 1)]
    folders = [tmp_path / str(s.seed) for s in specs]
    stop = threading.Event()
    stop.set()
    results = run_packed(specs, folders, stop_event=stop)
    assert [r["status"] for r in results] == ["interrupted", "interrupted"]
    for folder in folders:
        rows = read_rows(folder / "metrics")
        assert rows[rows["name"] == "eval/return"]["step"].tolist() == [
            0,
            256,
        ]  # one iteration, then finish()


def test_run_packed_rejects_what_cannot_be_packed(tmp_path: Path) -> None:
    a = make_spec("CartPole-v1", CARTPOLE, 0, steps=512)
    b = make_spec("CartPole-v1", {"num_steps": 32}, 1, steps=512)
    with pytest.raises(ValueError, match="same everything but the seed"):
        run_packed([a, b], [tmp_path / "a", tmp_path / "b"])
    assert ALGORITHMS["ppo"].packable
    other = RunSpec(**{**a.__dict__, "algo": "dqn", "algo_name": "dqn"})
    sink = ShardSink(tmp_path / "dqn", background=False)
    with pytest.raises(ValueError, match="'dqn' cannot be packed"):  # ppo's trainer trains ppo only
        train_packed([RunContext(spec=other, sink=sink)])


# -- statistics: packed vs one per job ----------------------------------------------------------------------------


def permutation_p(x: np.ndarray, y: np.ndarray, reps: int = 20000, seed: int = 0) -> float:
    """Two-sided permutation test of equal means."""
    rng = np.random.default_rng(seed)
    both = np.concatenate([x, y])
    observed = abs(x.mean() - y.mean())
    perms = np.argsort(rng.random((reps, len(both))), axis=1)
    d = np.abs(both[perms[:, : len(x)]].mean(1) - both[perms[:, len(x) :]].mean(1))
    return float((np.sum(d >= observed - 1e-12) + 1) / (reps + 1))


def finals(rows: pd.DataFrame, step: int | None = None) -> float:
    ev = rows[rows["name"] == "eval/return"]
    return float(ev["value"].iloc[-1] if step is None else ev[ev["step"] == step]["value"].iloc[0])


def check_compatible(tmp: Path, n_seeds: int, steps: int, params: dict[str, Any]) -> None:
    """Packed seeds 0..n-1 against one-per-job seeds 100..100+n-1: different seeds, the same algorithm."""
    specs = [
        make_spec("CartPole-v1", params, s, steps, eval_every=steps, eval_episodes=5) for s in range(n_seeds)
    ]
    _, rows = packed(tmp, specs)
    x = np.array([finals(rows[s]) for s in range(n_seeds)])
    x0 = np.array([finals(rows[s], 0) for s in range(n_seeds)])
    refs = [unpacked(tmp, make_spec("CartPole-v1", params, 100 + s, steps, steps, 5)) for s in range(n_seeds)]
    y = np.array([finals(r) for r in refs])
    assert permutation_p(x, y) > 0.05, (x, y)
    ci = interval_estimates({"packed": x[:, None], "single": y[:, None]}, ["iqm"], reps=2000, seed=0)
    assert ci["packed"].lower[0] <= ci["single"].upper[0] and ci["single"].lower[0] <= ci["packed"].upper[0]
    # the test has power at this budget: trained returns are told apart from the untrained ones
    assert permutation_p(x, x0) < 0.05, (x, x0)


def test_packed_and_unpacked_are_statistically_compatible_quick(tmp_path: Path) -> None:
    check_compatible(tmp_path, n_seeds=6, steps=6144, params={"num_steps": 64, "learning_rate": 1e-3})


@pytest.mark.slow
def test_packed_and_unpacked_are_statistically_compatible_10_seeds(tmp_path: Path) -> None:
    check_compatible(tmp_path, n_seeds=10, steps=30720, params={})
