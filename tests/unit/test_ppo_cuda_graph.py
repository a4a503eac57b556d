"""ppo's update (``Update``, and packed ppo's ``StackedUpdate``): the eager path on CPU, and on a CUDA device
each epoch replayed as a CUDA graph with the same results as the eager path (those tests run where a GPU is,
and are skipped elsewhere)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from rlbench_cli.algos.base import RunContext
from rlbench_cli.algos.ppo import PPO, PPOConfig, PPOPolicy
from rlbench_cli.algos.ppo.envs import spaces as _spaces
from rlbench_cli.algos.ppo.nets import Agent as _Agent
from rlbench_cli.algos.ppo.nets import NumpyActor as _NumpyActor
from rlbench_cli.algos.ppo.nets import StackedAgent
from rlbench_cli.algos.ppo.transfer import Staging as _Staging
from rlbench_cli.algos.ppo.transfer import to_device as _to_device
from rlbench_cli.algos.ppo.transfer import to_host as _to_host
from rlbench_cli.algos.ppo.update import StackedUpdate
from rlbench_cli.algos.ppo.update import Update as _Update
from rlbench_cli.sink import ShardSink
from rlbench_cli.suite.grid import RunSpec

# the NumPy actor and critic against torch: float32 sums of terms up to ~10 (Pendulum's obs through weights moved
# by 0.5) in two BLAS libraries, whose last bits differ by CPU (1.1e-6 seen on an AMD Zen 5), not the policy
NUMPY_VS_TORCH = {"rtol": 1e-5, "atol": 1e-5}

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _pair(device: str, continuous: bool = False, **cfg_kw) -> tuple[list[_Update], PPOConfig]:
    """Two updates (CUDA graph on, off) of agents with the same initial weights on ``device``."""
    cfg = PPOConfig(**cfg_kw)
    out = []
    for graph in (True, False):
        torch.manual_seed(0)
        agent = _Agent(4, 2, continuous, cfg).to(device)
        out.append(_Update(agent, dataclasses.replace(cfg, cuda_graph=graph), torch.device(device)))
    return out, cfg


def _batch(n: int, device: str, seed: int, continuous: bool = False) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, 4, generator=g)
    actions = torch.randn(n, 2, generator=g) if continuous else torch.randint(0, 2, (n,), generator=g)
    logprobs = -torch.rand(n, generator=g) - 0.5
    adv, returns, values = (torch.randn(n, generator=g) for _ in range(3))
    return tuple(t.to(device) for t in (obs, actions, logprobs, adv, returns, values))


def _close(a: _Update, b: _Update, stats_a: dict, stats_b: dict) -> None:
    for pa_, pb in zip(a.agent.parameters(), b.agent.parameters(), strict=True):
        torch.testing.assert_close(pa_, pb, rtol=1e-4, atol=1e-5)
    assert stats_a.keys() == stats_b.keys()
    for k in stats_a:
        assert stats_a[k] == pytest.approx(stats_b[k], rel=1e-3, abs=1e-5), k


def test_on_cpu_the_update_is_eager_and_its_state_is_portable():
    (graph, eager), _ = _pair("cpu")
    assert not graph.graphed and graph.graph is None
    stats = [u.run(_batch(512, "cpu", 1), torch.Generator().manual_seed(3)) for u in (graph, eager)]
    assert stats[0] == stats[1]  # cuda_graph does nothing on CPU: bitwise the same
    assert set(stats[0]) == {"pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"}
    graph.set_lr(1e-3)
    state = graph.state_dict()
    assert state["param_groups"][0]["lr"] == 1e-3 and state["param_groups"][0]["capturable"] is False
    (fresh, _), _ = _pair("cpu")
    fresh.load_state_dict(state)
    assert fresh.lr == 1e-3
    moments = [fresh.optimizer.state[p]["exp_avg"] for p in fresh.agent.parameters()]
    assert all(torch.equal(m, graph.optimizer.state[p]["exp_avg"])
               for m, p in zip(moments, graph.agent.parameters(), strict=True))  # fmt: skip


def test_drawing_every_epochs_permutation_first_updates_as_drawing_each_in_turn():
    # without target_kl the permutations are drawn up front and copied at once; an unreachable target_kl
    # takes the path that draws one per epoch (and could stop early): bitwise the same update on CPU
    (upfront, _), _ = _pair("cpu")
    (in_turn, _), _ = _pair("cpu", target_kl=1e9)
    gens = [torch.Generator().manual_seed(4) for _ in range(2)]
    for it in range(2):
        stats = [u.run(_batch(512, "cpu", it), g) for u, g in zip((upfront, in_turn), gens, strict=True)]
        assert stats[0] == stats[1]
    assert gens[0].get_state().equal(gens[1].get_state())
    for a, b in zip(upfront.agent.parameters(), in_turn.agent.parameters(), strict=True):
        assert torch.equal(a, b)


def _round_trip(device: str) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((7, 3)).astype(np.float32), rng.integers(0, 5, 7),  # odd sizes: padding
              rng.standard_normal((1, 5)).astype(np.float32)[:, ::2], np.float32(rng.standard_normal(3))]  # fmt: skip
    out = _to_device(arrays, _Staging(torch.device(device)))
    for a, t in zip(arrays, out, strict=True):
        assert t.device.type == device and t.shape == a.shape and t.numpy(force=True).dtype == a.dtype
        np.testing.assert_array_equal(t.cpu().numpy(), a)
    back = _to_host([out[0], out[2], torch.tensor(2.5, device=device)])
    np.testing.assert_array_equal(back[0], arrays[0])
    np.testing.assert_array_equal(back[1], arrays[2])
    assert back[2].shape == () and float(back[2]) == 2.5


def test_host_and_device_values_travel_in_one_copy_each_way_unchanged():
    _round_trip("cpu")
    cfg = PPOConfig()
    agent = _Agent(4, 2, True, cfg)
    actor = _NumpyActor(agent, cfg.activation)
    layers, std = actor.layers, actor.std
    actor.load(_to_host(actor.tensors()))  # what a training iteration does with the fetched weights
    assert all(np.array_equal(a, b) for x, y in zip(layers, actor.layers, strict=True) for a, b in zip(x, y))
    assert np.array_equal(std, actor.std) and layers[0][0].shape == (4, 64)  # (in, out): x @ w
    assert actor.critic_layers == []  # the critic's copy is kept only where asked for (off the CPU)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_the_numpy_critic_values_observations_as_the_torch_critic(activation: str):
    cfg = PPOConfig(activation=activation)
    torch.manual_seed(2)
    agent = _Agent(4, 2, False, cfg)
    with torch.no_grad():
        for p in agent.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    both = _NumpyActor(agent, cfg.activation, critic=True)
    assert len(both.tensors()) == 12  # the actor's 3 layers, then the critic's
    x = np.random.default_rng(0).standard_normal((300, 4)).astype(np.float32)
    with torch.no_grad():
        expected = agent.value(torch.from_numpy(x)).numpy()
    got = both.value(x)
    assert got.shape == (300,) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, **NUMPY_VS_TORCH)
    with torch.no_grad():  # an update changes the weights: the next fetch's copy values as the new critic
        for p in agent.critic.parameters():
            p.mul_(0.5)
        expected = agent.value(torch.from_numpy(x)).numpy()
    both.load(_to_host(both.tensors()))
    np.testing.assert_allclose(both.value(x), expected, **NUMPY_VS_TORCH)
    np.testing.assert_allclose(both(x), _NumpyActor(agent, cfg.activation)(x), rtol=0, atol=0)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_a_policy_acting_through_the_numpy_actor_acts_as_the_torch_one(env_id: str):
    import gymnasium as gym

    env = gym.make(env_id)
    space, obs_shape = _spaces(env.observation_space, env.action_space)
    cfg = PPOConfig.from_params({}, continuous=space.continuous)
    torch.manual_seed(1)
    agent = _Agent(int(np.prod(obs_shape)), space.n_act, space.continuous, cfg)
    with torch.no_grad():
        for p in agent.parameters():
            p.add_(torch.randn_like(p) * 0.5)  # away from the near-uniform initial policy
    args = (agent, cfg, obs_shape, space, None, torch.device("cpu"))
    on_torch, on_numpy = PPOPolicy(*args), PPOPolicy(*args, host_actor=_NumpyActor(agent, cfg.activation))
    env.observation_space.seed(0)
    obs = np.stack([env.observation_space.sample() for _ in range(256)])
    if space.continuous:
        np.testing.assert_allclose(on_numpy(obs), on_torch(obs), **NUMPY_VS_TORCH)
    else:
        assert (on_numpy(obs) == on_torch(obs)).mean() > 0.99  # argmax: the same but for float near-ties
    draws = [pol.sample(obs, np.random.default_rng(3)) for pol in (on_torch, on_numpy)]
    np.testing.assert_allclose(*draws, **NUMPY_VS_TORCH)


@pytest.mark.parametrize(
    "num_envs, num_steps, copies",
    [(4, 128, 1), (1, 2048, 2)],  # 516 x 4,416 multiply-adds: valued on the host; 2,049 rows: on the device
)
def test_away_from_the_cpu_an_iteration_copies_once_each_way(
    tmp_path: Path, monkeypatch, num_envs: int, num_steps: int, copies: int
):
    # the host path (a GPU's) forced on CPU: each iteration sends one copy to the device (batch, advantages,
    # returns, values and the permutations) and fetches one back (statistics and the networks' weights); a
    # batch too large to value on the host cheaply makes one round trip more for its values
    from rlbench_cli.algos.ppo import transfer, update

    calls: dict[str, int] = {"to_device": 0, "to_host": 0, "draw_perms": 0}

    def counted(name: str, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(transfer, "host_side", lambda device: True)
    monkeypatch.setattr(transfer, "to_device", counted("to_device", transfer.to_device))
    monkeypatch.setattr(transfer, "to_host", counted("to_host", transfer.to_host))
    monkeypatch.setattr(update.Update, "draw_perms", counted("draw_perms", update.Update.draw_perms))
    params = {"num_envs": num_envs, "num_steps": num_steps}
    spec = RunSpec(suite="t", algo="ppo", algo_name="ppo", params=params, env_id="CartPole-v1", env_kwargs={},
                   seed=0, budget={"steps": 4096, "eval_every": 2048, "eval_episodes": 2, "timeout": None})  # fmt: skip
    sink = ShardSink(tmp_path / "run", background=False)
    PPO().train(RunContext(spec=spec, sink=sink, device="cpu"))
    sink.close()
    iterations = 4096 // (num_envs * num_steps)
    # one fetch more: the NumPy copies' first weights; evaluation (3 times) goes through them, no copy
    expected = {
        "to_device": copies * iterations,
        "to_host": copies * iterations + 1,
        "draw_perms": iterations,
    }
    assert calls == expected


@cuda
def test_host_and_device_values_travel_in_one_copy_each_way_unchanged_on_cuda():
    _round_trip("cuda")


@cuda
def test_copies_from_the_pinned_staging_buffer_are_not_overwritten_before_they_land():
    device = torch.device("cuda")
    staging = _Staging(device)
    rng = np.random.default_rng(1)
    sent = []
    for size in (1000, 10, 5000, 5000, 3):  # the buffer grows, and is reused while copies may be queued
        arrays = [rng.standard_normal(size).astype(np.float32), rng.integers(0, 9, (size, 2))]
        sent.append((arrays, _to_device(arrays, staging)))
        assert staging.host.is_pinned()
    for arrays, tensors in sent:
        for a, t in zip(arrays, tensors, strict=True):
            np.testing.assert_array_equal(t.cpu().numpy(), a)


def test_cuda_graph_is_a_param_of_ppo():
    assert PPOConfig.from_params({"cuda_graph": "false"}).cuda_graph is False
    assert PPOConfig().cuda_graph is True


@cuda
@pytest.mark.parametrize("continuous", [False, True])
def test_graph_replays_match_the_eager_update(continuous: bool):
    (graph, eager), _ = _pair("cuda", continuous)
    assert graph.graphed and not eager.graphed
    for it, lr in enumerate((2.5e-4, 1.5e-4, 0.5e-4)):
        batch = _batch(512, "cuda", it, continuous)
        stats = []
        for u in (graph, eager):
            u.set_lr(lr)
            stats.append(u.run(batch, torch.Generator().manual_seed(10 + it)))
        assert graph.graph is not None  # captured at the first full batch, replayed since
        _close(graph, eager, *stats)
    # a short batch (a budget ending mid-iteration) goes eager with the same optimiser, and still agrees
    short = _batch(200, "cuda", 9, continuous)
    stats = [u.run(short, torch.Generator().manual_seed(99)) for u in (graph, eager)]
    _close(graph, eager, *stats)


@cuda
def test_target_kl_stops_graph_epochs_where_eager_stops():
    (graph, eager), _ = _pair("cuda", target_kl=1e-6, update_epochs=6)
    for it in range(2):
        batch = _batch(512, "cuda", it)
        gens = [torch.Generator().manual_seed(5 + it) for _ in range(2)]
        stats = [u.run(batch, g) for u, g in zip((graph, eager), gens, strict=True)]
        _close(graph, eager, *stats)
        assert gens[0].get_state().equal(gens[1].get_state())  # the same permutations drawn


@cuda
def test_a_graphed_checkpoint_resumes_on_cpu():
    (graph, _), _ = _pair("cuda")
    graph.set_lr(2e-4)
    graph.run(_batch(512, "cuda", 0), torch.Generator().manual_seed(0))
    state = graph.state_dict()
    cfg = PPOConfig()
    torch.manual_seed(0)
    cpu = _Update(_Agent(4, 2, False, cfg), cfg, torch.device("cpu"))
    cpu.load_state_dict(state)  # moments moved to the CPU, lr a float, not capturable
    assert cpu.lr == pytest.approx(2e-4) and not cpu.optimizer.param_groups[0]["capturable"]
    cpu.run(_batch(512, "cpu", 1), torch.Generator().manual_seed(1))
    (again, _), _ = _pair("cuda")
    again.load_state_dict(state)  # and back on a GPU: a tensor lr again, capturable
    assert isinstance(again.optimizer.param_groups[0]["lr"], torch.Tensor) and again.lr == pytest.approx(2e-4)
    again.run(_batch(512, "cuda", 1), torch.Generator().manual_seed(1))
    assert again.graph is not None


@cuda
def test_a_ppo_run_on_cuda_learns_with_graphs(tmp_path: Path):
    spec = RunSpec(suite="t", algo="ppo", algo_name="ppo", params={}, env_id="CartPole-v1", env_kwargs={},
                   seed=0, budget={"steps": 20_000, "eval_every": 20_000, "eval_episodes": 5, "timeout": None})  # fmt: skip
    sink = ShardSink(tmp_path / "run", background=False)
    PPO().train(RunContext(spec=spec, sink=sink, device="cuda"))
    sink.close()
    df = pa.concat_tables(
        [pq.read_table(p) for p in sorted((tmp_path / "run").glob("*.parquet"))]
    ).to_pandas()
    final = df[df["name"] == "eval/return"].sort_values("step")["value"].iloc[-1]
    assert final > 100  # CartPole-v1 at 20k steps: CleanRL's ppo is well past random (~20)


def _stacked_pair(device: str, n_seeds: int = 3, **cfg_kw) -> tuple[list[StackedUpdate], PPOConfig]:
    """Two stacked updates (CUDA graph on, off) of ``n_seeds`` agents with the same initial weights."""
    cfg = PPOConfig(**cfg_kw)
    out = []
    for graph in (True, False):
        agents = []
        for s in range(n_seeds):
            torch.manual_seed(s)
            agents.append(_Agent(4, 2, False, cfg))
        net = StackedAgent(agents, cfg, torch.device(device))
        out.append(StackedUpdate(net, dataclasses.replace(cfg, cuda_graph=graph), torch.device(device)))
    return out, cfg


def _stacked_batch(n_seeds: int, n: int, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    return tuple(torch.stack(parts) for parts in zip(*(_batch(n, device, seed + k) for k in range(n_seeds))))


def test_on_cpu_the_stacked_update_is_eager():
    (graph, eager), _ = _stacked_pair("cpu")
    assert not graph.graphed and graph.graph is None
    gens = [[torch.Generator().manual_seed(k) for k in range(3)] for _ in range(2)]
    stats = [u.run_tensors(_stacked_batch(3, 512, "cpu", 1), g, None) for u, g in zip((graph, eager), gens)]
    assert stats[0].shape == (3, 8) and torch.equal(stats[0], stats[1])


@cuda
@pytest.mark.parametrize("target_kl", [None, 1e-6])
def test_stacked_graph_replays_match_the_eager_update(target_kl: float | None):
    """Packed ppo's update is graphed as one run's is: the same results as its eager path, seed by seed."""
    (graph, eager), _ = _stacked_pair("cuda", target_kl=target_kl, update_epochs=4)
    assert graph.graphed and not eager.graphed
    for it, lr in enumerate((2.5e-4, 1.5e-4)):
        batch = _stacked_batch(3, 512, "cuda", 10 * it)
        stats = []
        for u in (graph, eager):
            u.set_lr(lr)
            gens = [torch.Generator().manual_seed(100 * it + k) for k in range(3)]
            stats.append(u.run_tensors(batch, gens, None).cpu())
        assert graph.graph is not None
        torch.testing.assert_close(stats[0], stats[1], rtol=1e-3, atol=1e-5)
        for pa_, pb in zip(graph.params, eager.params, strict=True):
            torch.testing.assert_close(pa_, pb, rtol=1e-4, atol=1e-5)


@cuda
def test_a_packed_run_on_cuda_learns_with_graphs(tmp_path: Path):
    from rlbench_cli.algos.ppo import train_packed

    ctxs, sinks = [], []
    for seed in (0, 1):
        spec = RunSpec(suite="t", algo="ppo", algo_name="ppo", params={}, env_id="CartPole-v1", env_kwargs={},
                       seed=seed, budget={"steps": 20_000, "eval_every": 20_000, "eval_episodes": 5,
                                          "timeout": None})  # fmt: skip
        sinks.append(ShardSink(tmp_path / f"run{seed}", background=False))
        ctxs.append(RunContext(spec=spec, sink=sinks[-1], device="cuda"))
    assert train_packed(ctxs) == {0: None, 1: None}
    for seed, sink in enumerate(sinks):
        sink.close()
        df = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / f"run{seed}").glob("*.parquet"))])
        df = df.to_pandas()
        assert df[df["name"] == "eval/return"].sort_values("step")["value"].iloc[-1] > 100
