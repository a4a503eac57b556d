"""The algorithms of the gymnax env family (``gymnax/CartPole-v1``, ...): ``ppo_jax`` (PPO, discrete and
continuous) and ``pqn_jax`` (PQN, a value method; discrete), each one compiled JAX program, PureJaxRL's way:
jit over the whole training, vmap over the seeds of a job; every seed still its own run.

Layout: ``ppo_config.py`` (``PPOJaxConfig``: torch ``ppo``'s param names and defaults, CleanRL's, for the
params it implements) and ``pqn_config.py`` (``PQNJaxConfig``: PQN's CartPole defaults), neither importing
JAX; ``common.py`` (the envs of a seed, the seeded evaluation, MLPs, running statistics, the chunk),
``ppo.py`` and ``pqn.py`` (each algorithm's program: init, and one evaluation interval of training followed
by the seeded evaluation episodes, vmapped over seeds), ``loop.py`` (the host side, shared: JAX's flags and
compilation cache, the chunks, each seed's rows, failures, checkpoints). Only ``loop``, ``common`` and the
programs import JAX, when a run starts; ``rlbench validate`` checks params without it.

Every seed its own run: ``resources.seeds_per_job: N`` packs N seeds of a cell into one job through
``packed.run_packed`` (the same path as torch ``ppo``), which calls ``PPOJax.train_packed`` with one
``RunContext`` per seed; a job of one seed is ``train``. Each seed logs its own rows (losses, learning rate,
explained variance and the mean return and length of the training episodes that ended, once per
iteration; ``eval/return`` and co. at every point of the suite's ``eval_every`` grid, from its own
``eval_seeds`` episodes played inside the program; pqn_jax logs its TD loss, mean Q, epsilon and learning
rate), ``sys/pack_size`` and ``sys/compile_s`` at step 0 and
``sys/train_s`` (the training's seconds after the compilation) and ``sys/tracking_s`` (host time spent
turning the chunks into rows) at the end. A seed whose policy, value or
entropy loss turns non-finite fails alone (``diverged: NaN in <which> loss at step S``); the others go on.

Reproducibility: a seed's numbers are bitwise the same for the same pack on the same machine (CPU). XLA's
batched kernels may make them depend on the pack's size (the pack is recorded: ``sys/pack_size``, and the
run ids in each attempt's ``result.json``), not on the other seeds' values.

Differences from torch ``ppo``: whole iterations only (ceil(steps / batch) of them, so a run may pass its
budget by less than one batch; evaluations are logged at the grid's points as every algorithm's are);
``train/episode_return`` is one row per iteration (the mean over the episodes that ended in it) rather than
one per episode; a truncation is the state's ``time`` reaching gymnax's ``max_steps_in_episode`` (gymnax
0.0.9 reports ``done`` only); no ``target_kl``.

Kept policies: every seed's best (by the suite's score metric) and final policy, its slice of the network the
program acts with, as ``policy.GymnaxPolicy`` (``policy.npz``); ``rlbench enjoy`` plays it in gymnax with the
run's evaluation keys, or in gymnasium's version of the task for a video. A compiled call that stalls far
longer than the earlier ones ends the job (``loop.Watchdog``: XLA's CPU runtime can wedge).

Checkpoints (``budget.checkpoint_every``): at the end of an evaluation interval that reaches the next
checkpoint step, each seed saves its slice of the whole training state (network, Adam, env states and
observations, PRNG keys, episode counters, normalisers: the program state's leaves as NumPy arrays) and the
iteration count, in the packed layout torch ``ppo`` uses; a job resumes every seed at their latest common
step (``base.resume_together``), bitwise on CPU, for a pack of one as for many. (Checkpoint files are
``torch.save``'s: a run that checkpoints imports torch.)
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any, ClassVar

from ...envs.gymnax import PIP
from ..base import RunContext
from .ppo_config import PPOJaxConfig
from .pqn_config import PQNJaxConfig

__all__ = ["PPOJax", "PPOJaxConfig", "PQNJax", "PQNJaxConfig"]


def _need_jax(name: str) -> None:
    if importlib.util.find_spec("jax") is None or importlib.util.find_spec("optax") is None:
        raise ValueError(f"{name} needs JAX; install it with: {PIP}")


class PPOJax:
    name: ClassVar[str] = "ppo_jax"

    @staticmethod
    def check_params(params: dict[str, Any]) -> None:
        """What ``PPOJaxConfig.from_params`` refuses for both kinds of action space, and a missing JAX."""
        _need_jax("ppo_jax")
        try:
            PPOJaxConfig.from_params(params, continuous=False)
        except ValueError as discrete:
            try:
                PPOJaxConfig.from_params(params, continuous=True)
            except ValueError:
                raise discrete from None

    def train(self, ctx: RunContext) -> None:
        failure = self.train_packed([ctx]).get(ctx.seed)
        if failure is not None:
            ctx.fail(failure)

    @staticmethod
    def train_packed(ctxs: Sequence[RunContext]) -> dict[int, str | None]:
        """Train one agent per context (the seeds of a job) in one compiled program; {seed: None or why it
        failed}."""
        from .loop import train  # imports JAX

        return train(ctxs, "ppo", PPOJaxConfig.from_params)


class PQNJax(PPOJax):
    name: ClassVar[str] = "pqn_jax"

    @staticmethod
    def check_params(params: dict[str, Any]) -> None:
        _need_jax("pqn_jax")
        PQNJaxConfig.from_params(params)

    @staticmethod
    def train_packed(ctxs: Sequence[RunContext]) -> dict[int, str | None]:
        from .loop import train  # imports JAX

        return train(ctxs, "pqn", PQNJaxConfig.from_params)
