"""The interface between rlbench and an algorithm: ``RunContext`` in, metrics out.

An adapter is a class with a ``name`` and a ``train(ctx)`` method. It trains for ``ctx.steps`` environment
steps, calls ``ctx.maybe_evaluate(step, policy)`` as it goes and ``ctx.finish(step, policy)`` at the end,
and logs whatever else it likes through ``ctx.sink``. Evaluation is shared: every algorithm is scored on
the same seeded evaluation episodes, in the same way, under the same metric names.

Offline adapters train for ``ctx.steps`` gradient steps on ``ctx.dataset()`` and are evaluated the same
way, in the dataset's environment; where the dataset knows its random and expert reference returns,
evaluation also logs ``eval/normalized_return`` (D4RL's convention: 0 = random, 100 = expert).

A policy is a function from a batch of observations to a batch of actions. A policy with memory across an
episode's steps (a Decision Transformer) is an ``EpisodePolicy`` instead: evaluation calls its ``reset(n)``
when n episodes start and its ``act(obs, rewards, idx)`` with the observations of the episodes still
running, the rewards they got on their last step, and their indices in 0..n-1.

Metric names: ``eval/return`` (mean over episodes), ``eval/return_std``, ``eval/length``, logged at the
suite's evaluation point (0, eval_every, 2 eval_every, ..., the budget) that the evaluation stands for, with
``eval/actual_step``, the step training had reached (ppo, say, reaches a point at its next batch boundary);
``train/episode_return``, ``train/episode_length``, ``train/loss/<name>``, ``sys/sps_overall`` and
``sys/rss_peak_mb`` (whole run), and every few seconds the runner's ``sysmon``: ``sys/steps_per_second``,
``sys/cpu_percent``, ``sys/rss_mb`` and on a GPU ``sys/gpu_util``, ``sys/gpu_mem_mb``, at the step an
algorithm last passed to ``ctx.log_system(step)``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from ..envs import make_env
from ..grid import RunSpec
from ..sink import MetricSink
from ..sysmon import peak_rss_mb

__all__ = ["Algorithm", "RunContext", "Policy", "EpisodePolicy", "eval_seeds", "eval_points"]

# obs batch (n, *obs_shape) -> actions (n,) or (n, act_dim); deterministic unless the algorithm says so.
Policy = Callable[[np.ndarray], np.ndarray]

EVAL_SEED_OFFSET = 1_000_003


class EpisodePolicy(Protocol):
    """A policy that remembers the steps of each episode (see the module docstring)."""

    def reset(self, n: int) -> None: ...

    def act(self, obs: np.ndarray, rewards: np.ndarray, idx: np.ndarray) -> np.ndarray: ...


class Algorithm(Protocol):
    name: ClassVar[str]

    def train(self, ctx: RunContext) -> None: ...


def eval_seeds(seed: int, episodes: int) -> list[int]:
    """Seeds of the evaluation episodes: the same for every algorithm at a given run seed."""
    return [EVAL_SEED_OFFSET + seed * 10_007 + i for i in range(episodes)]


def eval_points(steps: int, every: int) -> list[int]:
    """Steps at which a run is evaluated: 0, every, 2*every, ... and always the last step."""
    pts = list(range(0, steps, every))
    if not pts or pts[-1] != steps:
        pts.append(steps)
    return pts


@dataclass
class RunContext:
    """Everything one run needs. Built by the runner inside a worker process."""

    spec: RunSpec
    sink: MetricSink
    device: str = "cpu"
    run_dir: Path = field(default_factory=lambda: Path("."))
    stop_event: threading.Event | None = None
    # called after each evaluation with (step, mean return, policy): the dataset builder keeps snapshots
    on_evaluate: Callable[[int, float, Any], None] | None = None
    _dataset: Any = None
    _next_eval: int = 0
    _eval_envs: list[Any] | None = None
    _t0: float = field(default_factory=time.perf_counter)
    _last_eval_step: int = -1
    current_step: int = 0  # the step the system monitor logs at; kept current by log_system / evaluate
    evaluations: int = 0
    last_eval: float | None = None

    # -- budget ------------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return int(self.spec.budget["steps"])

    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.spec.params)

    def should_stop(self) -> bool:
        return self.stop_event is not None and self.stop_event.is_set()

    # -- environments --------------------------------------------------------------------------------
    def make_env(self, seed: int | None = None) -> Any:
        """A training env, seeded with the run seed unless another seed is given."""
        return make_env(self.spec.env_id, self.spec.env_kwargs, self.seed if seed is None else seed,
                        self.spec.env_wrappers)  # fmt: skip

    # -- offline data ---------------------------------------------------------------------------------
    def dataset(self) -> Any:
        """The run's offline dataset (``datasets.OfflineData``), loaded once; offline runs only."""
        if self._dataset is None:
            if self.spec.dataset is None:
                raise ValueError(
                    f"{self.spec.algo_name} needs a dataset: list it under datasets: in the suite"
                )
            from ..datasets import load_dataset

            self._dataset = load_dataset(self.spec.dataset, self.spec.dataset_path)
        return self._dataset

    def references(self) -> tuple[float, float] | None:
        """(random, expert) reference returns of the run's dataset, if it has them."""
        return self.dataset().references if self.spec.dataset is not None else None

    # -- evaluation ----------------------------------------------------------------------------------
    def maybe_evaluate(self, step: int, policy: Policy) -> float | None:
        """Evaluate if ``step`` has reached the next evaluation point. Cheap to call every step."""
        self.current_step = step
        if step < self._next_eval:
            return None
        return self.evaluate(step, policy)

    def finish(self, step: int, policy: Policy) -> float | None:
        """Call once after training: evaluates the final policy at the last step (unless that is done) and
        logs the run's overall steps per second and peak memory."""
        elapsed = time.perf_counter() - self._t0
        self.current_step = step
        self.sink.log(step, **{"sys/sps_overall": step / elapsed if elapsed > 0 else 0.0,
                               "sys/rss_peak_mb": peak_rss_mb()})  # fmt: skip
        if step <= self._last_eval_step:
            return None
        return self.evaluate(step, policy)

    def evaluate(self, step: int, policy: Policy) -> float:
        """Run ``eval_episodes`` seeded episodes in lock-step, log eval/return, return its mean."""
        episodes = int(self.spec.budget["eval_episodes"])
        seeds = eval_seeds(self.seed, episodes)
        if self._eval_envs is None:
            self._eval_envs = [
                make_env(self.spec.env_id, self.spec.env_kwargs, wrappers=self.spec.env_wrappers)
                for _ in seeds
            ]
        envs = self._eval_envs
        obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds)]
        returns = np.zeros(len(envs))
        last_rewards = np.zeros(len(envs))
        lengths = np.zeros(len(envs), dtype=np.int64)
        alive = list(range(len(envs)))
        stateful = hasattr(policy, "act") and hasattr(policy, "reset")
        if stateful:
            policy.reset(len(envs))
        while alive:
            batch = np.stack([obs[i] for i in alive])
            if stateful:
                idx = np.asarray(alive)
                actions = np.asarray(policy.act(batch, last_rewards[idx], idx))
            else:
                actions = np.asarray(policy(batch))
            still = []
            for j, i in enumerate(alive):
                o, r, term, trunc, _ = envs[i].step(_unbatch(actions[j]))
                returns[i] += r
                last_rewards[i] = r
                lengths[i] += 1
                obs[i] = o
                if not (term or trunc):
                    still.append(i)
            alive = still
        mean = float(returns.mean())
        values = {
            "eval/return": mean,
            "eval/return_std": float(returns.std()),
            "eval/length": float(lengths.mean()),
        }
        refs = self.references()
        if refs is not None:
            values["eval/normalized_return"] = 100.0 * (mean - refs[0]) / (refs[1] - refs[0])
        # logged at the suite's evaluation point this evaluation stands for (a multiple of eval_every, or the
        # budget), so every algorithm's rows line up by step; the step training had reached is kept beside it
        every = int(self.spec.budget["eval_every"])
        due = [p for p in eval_points(self.steps, every) if self._last_eval_step < p <= step]
        values["eval/actual_step"] = float(step)
        self.sink.log(due[-1] if due else step, **values)
        self.evaluations += 1
        self.last_eval = mean
        self._last_eval_step = step
        pts = [p for p in eval_points(self.steps, every) if p > step]
        self._next_eval = pts[0] if pts else self.steps + 1
        if self.on_evaluate is not None:
            self.on_evaluate(step, mean, policy)
        return mean

    # -- training-side helpers ------------------------------------------------------------------------
    def log_episode(self, step: int, episode_return: float, episode_length: int) -> None:
        self.sink.log(
            step, **{"train/episode_return": episode_return, "train/episode_length": episode_length}
        )

    def log_system(self, step: int) -> None:
        """Say how far training has got: the runner's system monitor logs steps per second, CPU and memory
        (and GPU use) every few seconds at this step. Cheap enough to call every step."""
        self.current_step = step


def _unbatch(a: np.ndarray) -> Any:
    """An action from a batch row, in the form gymnasium's spaces expect."""
    if a.ndim == 0:
        return a.item()
    return a
