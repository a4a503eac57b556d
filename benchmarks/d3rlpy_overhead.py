"""Offline training speed: rlbench's d3rlpy adapters vs d3rlpy called directly, same dataset, same config.

The dataset is Pendulum-v1 (random actions, --episodes episodes of 200 steps), written to an HDF5 file for
rlbench. Each algorithm (--algos) trains --steps gradient steps with d3rlpy's default config, plus the min-max
action scaler fitted to the env's action bounds that rlbench gives continuous algorithms, on both sides:

- d3rlpy: ``MDPDataset`` from the arrays, ``config.create()``, ``algo.fit(dataset, n_steps=N,
  n_steps_per_epoch=N)`` with d3rlpy's no-op logger (no files), no progress bar and no evaluation;
- rlbench: ``runner.run_one`` on a RunSpec naming the HDF5 file (load, checks, training, metric shards), with
  eval_every = N and one evaluation episode. The two evaluations (steps 0 and N) are timed and subtracted;
  the rest (loading the file included) counts as training time. Two variants:
  ``replay_buffer: d3rlpy`` samples batches from d3rlpy's MDPDataset exactly as ``fit`` does, so its ratio
  is the wrapper's overhead; ``replay_buffer: array`` (rlbench's default) gathers the same transitions from
  numpy arrays in one indexing call.

The sides alternate run by run and each figure is the median of --repeats runs. Steps per second are gradient
steps over training seconds; ratio = rlbench's steps/s over d3rlpy's (1.00: as fast; above: faster).

    python benchmarks/d3rlpy_overhead.py                            # cql, bc, iql; 2,000 steps; median of 3
    python benchmarks/d3rlpy_overhead.py --algos bc --steps 5000 --hidden 64 64

One torch thread by default (--threads): the networks are small, and both sides get the same. Each algorithm
first runs a few untimed steps on each side (first-use costs such as torch's lazy imports).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ENV_ID = "Pendulum-v1"


def make_dataset(episodes: int, path: Path) -> Any:
    """Random-action Pendulum episodes, as an OfflineData and an HDF5 file at ``path``."""
    import gymnasium as gym

    from rlbench_cli.datasets.data import OfflineData
    from rlbench_cli.datasets.hdf5 import write_hdf5

    env = gym.make(ENV_ID)
    env.action_space.seed(0)
    cols: dict[str, list[Any]] = {
        k: [] for k in ("observations", "actions", "rewards", "terminals", "timeouts")
    }
    for e in range(episodes):
        obs, _ = env.reset(seed=e)
        done = False
        while not done:
            action = env.action_space.sample()
            nxt, reward, term, trunc, _ = env.step(action)
            for k, v in zip(cols, (obs, action, reward, term, trunc)):
                cols[k].append(v)
            obs, done = nxt, term or trunc
    data = OfflineData(
        observations=np.asarray(cols["observations"], np.float32),
        actions=np.asarray(cols["actions"], np.float32),
        rewards=np.asarray(cols["rewards"], np.float32),
        terminals=np.asarray(cols["terminals"], bool),
        timeouts=np.asarray(cols["timeouts"], bool),
        meta={"env_id": ENV_ID, "discrete": False},
    )
    write_hdf5(path, data)
    return data


def bench_d3rlpy(name: str, data: Any, steps: int, hidden: list[int] | None, seed: int) -> float:
    """Seconds to train with d3rlpy alone: MDPDataset, algorithm, ``fit``."""
    import gymnasium as gym

    from rlbench_cli.algos import get_algorithm
    from rlbench_cli.algos.d3rlpy_offline import _quiet_d3rlpy, d3rlpy

    from d3rlpy.logging import NoopAdapterFactory  # isort: skip  (after rlbench's quiet import of d3rlpy)
    from d3rlpy.models.encoders import VectorEncoderFactory  # isort: skip
    from d3rlpy.preprocessing import MinMaxActionScaler  # isort: skip

    config_cls = get_algorithm(name).continuous_config
    space = gym.make(ENV_ID).action_space
    kwargs: dict[str, Any] = {"action_scaler": MinMaxActionScaler(minimum=space.low, maximum=space.high)}
    for f in dataclasses.fields(config_cls):
        if hidden and f.name.endswith("encoder_factory"):
            kwargs[f.name] = VectorEncoderFactory(hidden_units=hidden)
    with _quiet_d3rlpy():
        d3rlpy.seed(seed)
        t0 = time.perf_counter()
        dataset = d3rlpy.dataset.MDPDataset(
            data.observations, data.actions, data.rewards, data.terminals.astype(np.float32),
            data.timeouts.astype(np.float32),
        )  # fmt: skip
        algo = config_cls(**kwargs).create(device="cpu")
        algo.fit(
            dataset,
            n_steps=steps,
            n_steps_per_epoch=steps,
            logger_adapter=NoopAdapterFactory(),
            show_progress=False,
        )
        return time.perf_counter() - t0


_EVAL_SECONDS = [0.0]


def _time_evaluations() -> None:
    """Wrap ``RunContext.evaluate`` so that the seconds spent evaluating add up in ``_EVAL_SECONDS``."""
    from rlbench_cli.algos.base import RunContext

    evaluate = RunContext.evaluate

    def timed(self: Any, step: int, policy: Any) -> float:
        t0 = time.perf_counter()
        try:
            return evaluate(self, step, policy)
        finally:
            _EVAL_SECONDS[0] += time.perf_counter() - t0

    RunContext.evaluate = timed  # type: ignore[method-assign]


def bench_rlbench(
    name: str, path: Path, steps: int, hidden: list[int] | None, seed: int, buffer: str, folder: Path
) -> tuple[float, float]:
    """(training seconds, evaluation seconds) of one ``runner.run_one``."""
    from rlbench_cli.runner import run_one
    from rlbench_cli.suite.grid import RunSpec

    params: dict[str, Any] = {"replay_buffer": buffer, **({"hidden_units": hidden} if hidden else {})}
    spec = RunSpec(
        suite="bench", algo=name, algo_name=name, params=params, env_id=ENV_ID, env_kwargs={}, seed=seed,
        budget={"steps": steps, "eval_every": steps, "eval_episodes": 1, "timeout": None},
        dataset="pendulum-random", dataset_path=str(path),
    )  # fmt: skip
    _EVAL_SECONDS[0] = 0.0
    t0 = time.perf_counter()
    result = run_one(spec, folder)
    total = time.perf_counter() - t0
    if result["status"] != "finished":
        raise RuntimeError(f"{name} failed: {result['error']}")
    return total - _EVAL_SECONDS[0], _EVAL_SECONDS[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--algos", nargs="+", default=["cql", "bc", "iql"], help="continuous d3rlpy offline algorithms"
    )
    ap.add_argument("--steps", type=int, default=2000, help="gradient steps per run")
    ap.add_argument("--episodes", type=int, default=50, help="dataset size in 200-step episodes")
    ap.add_argument(
        "--hidden", type=int, nargs="+", default=None, help="MLP widths (default: d3rlpy's 256 256)"
    )
    ap.add_argument("--repeats", type=int, default=3, help="runs per side; the median is reported")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    _time_evaluations()
    sides = ["d3rlpy fit", "rlbench, d3rlpy buffer", "rlbench, array buffer"]
    hidden = args.hidden or "d3rlpy's default"
    print(f"{ENV_ID}, {args.episodes * 200:,} transitions, {args.steps:,} steps, hidden {hidden}, "
          f"{args.threads} thread(s), median of {args.repeats}")  # fmt: skip
    print(
        f"{'algo':<6} {'side':<24} {'train s':>8} {'steps/s':>9} {'eval s':>7} {'ratio':>6} {'overhead':>9}"
    )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        path = tmp / "pendulum-random.hdf5"
        data = make_dataset(args.episodes, path)
        for name in args.algos:
            train_s: dict[str, list[float]] = {s: [] for s in sides}
            eval_s: dict[str, list[float]] = {s: [] for s in sides}
            warm = min(args.steps, 20)  # untimed: first-use costs (torch's optimiser imports torch._dynamo)
            bench_d3rlpy(name, data, warm, args.hidden, 0)
            bench_rlbench(name, path, warm, args.hidden, 0, "array", tmp / f"{name}-warm")
            for rep in range(args.repeats):  # alternate the sides, so that a busy moment hits all of them
                train_s[sides[0]].append(bench_d3rlpy(name, data, args.steps, args.hidden, rep))
                eval_s[sides[0]].append(0.0)
                for side, buffer in zip(sides[1:], ("d3rlpy", "array")):
                    folder = tmp / f"{name}-{buffer}-{rep}"
                    t, e = bench_rlbench(name, path, args.steps, args.hidden, rep, buffer, folder)
                    train_s[side].append(t)
                    eval_s[side].append(e)
            base = args.steps / statistics.median(train_s[sides[0]])
            for side in sides:
                sps = args.steps / statistics.median(train_s[side])
                ratio = sps / base
                secs, evals = statistics.median(train_s[side]), statistics.median(eval_s[side])
                print(f"{name:<6} {side:<24} {secs:>8.2f} {sps:>9.1f} {evals:>7.2f} {ratio:>6.3f} "
                      f"{100 * (1 / ratio - 1):>+8.1f}%")  # fmt: skip
    print(
        "ratio: rlbench steps/s over d3rlpy's; overhead: extra time per step (target: at most a few percent)"
    )


if __name__ == "__main__":
    main()
