"""Offline-to-online fine-tuning (D5RL): an offline agent goes on learning online in its dataset's env.

A suite asks for it with ``finetune: {steps: N}`` on an ``iql``, ``cql``, ``td3_plus_bc`` or ``awac`` entry.
After its ``budget.steps`` gradient steps on the dataset, the same d3rlpy agent (networks, optimisers,
scalers) acts for N environment steps, one gradient step after each, as d3rlpy's ``fit_online`` does and its
fine-tuning reproductions do: the replay buffer starts with the dataset's transitions and the online ones are
appended. Exploration: ``td3_plus_bc``'s deterministic actor gets d3rlpy's Gaussian ``NormalNoise`` (std 0.1,
in action units), discrete ``cql`` an epsilon-greedy of 0.1; ``iql``, ``cql`` and ``awac`` sample their
stochastic policy.

Both phases are logged on one step axis: online step k is step ``budget.steps + k``, so learning curves
continue; ``train/phase`` is 0 at step 0 and turns 1 at the last offline step (the phase boundary), which
score rules (``score: {phase: offline|online}``) and figures read. Online losses are ``train/loss/<name>``,
training episodes ``train/episode_return``. Checkpoints (``budget.checkpoint_every``) cover both phases: in the
online one they hold what d3rlpy_online's do (the impl's modules, the replay buffer with the dataset's
transitions and the online ones, the env pickled whole, the current observation and the losses not yet
logged) and ``phase: "online"``; a run stopped while fine-tuning resumes there, bitwise on CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checkpoint import dumps_envs, loads_envs
from .base import RunContext
from .d3rlpy_online import _ArrayReplayBuffer, _EpisodeStats, impl_state

__all__ = ["finetune_online", "EXPLORE_NOISE", "EXPLORE_EPSILON", "LOGGING_STEPS"]

EXPLORE_NOISE = 0.1  # std of the Gaussian noise on a deterministic actor's action (d3rlpy's default)
EXPLORE_EPSILON = 0.1  # epsilon-greedy for discrete Q-learners
LOGGING_STEPS = 1000  # online losses are averaged over and logged every this many updates


def finetune_online(
    ctx: RunContext,
    algo: Any,
    transitions: Any,
    discrete: bool,
    policy: Any,
    explore_noise: bool = False,
    resume: dict[str, Any] | None = None,
) -> int:
    """Train ``algo`` online for ``ctx.finetune_steps`` steps after step ``ctx.steps``; returns the last step.

    ``transitions`` is the offline dataset (``d3rlpy_offline._TransitionArrays``) that fills the replay
    buffer first; ``resume`` an online-phase checkpoint's state (``algo`` already restored from it) to go on
    from instead."""
    from d3rlpy.algos.qlearning.explorers import ConstantEpsilonGreedy, NormalNoise

    offline, online = ctx.steps, ctx.finetune_steps
    if resume is None:
        env = _EpisodeStats(ctx.make_env(), ctx)
        env.total_steps = offline  # training episodes are logged on the run's one step axis
        t = transitions
        pool = t._pool
        buffer = _ArrayReplayBuffer.for_env(len(pool) + online + 1, env)
        nxt = t._next[pool]
        buffer.extend(t._obs[pool], t._actions[pool], t._rewards[pool], t._obs[nxt], t._actions[nxt],
                      t._terminals[pool])  # fmt: skip
    else:
        buffer, env = resume["buffer"], loads_envs(resume["env"])
        env.attach(ctx)
    if discrete:
        explorer: Any = ConstantEpsilonGreedy(EXPLORE_EPSILON)
    elif explore_noise:
        explorer = NormalNoise(mean=0.0, std=EXPLORE_NOISE)
    else:
        explorer = None
    if resume is None:
        ctx.sink.log(offline, **{"train/phase": 1.0})
        observation, _ = env.reset()
        losses: dict[str, list[float]] = {}
        step = offline
    else:
        observation, losses, step = resume["observation"], resume["losses"], int(resume["step"])
    for step in range(step + 1, offline + online + 1):  # noqa: B020 - step goes on from where it was
        batch_obs = np.expand_dims(observation, axis=0)
        if explorer is not None:
            action = explorer.sample(algo, batch_obs, step)[0]
        else:
            action = algo.sample_action(batch_obs)[0]
        next_observation, reward, terminal, truncated, _ = env.step(action)
        buffer.append(observation, action, float(reward))
        if terminal or truncated:
            buffer.clip_episode(terminal)
            observation, _ = env.reset()
        else:
            observation = next_observation
        if buffer.transition_count > algo.batch_size:
            for name, val in algo.update(buffer.sample_transition_batch(algo.batch_size)).items():
                losses.setdefault(name, []).append(val)
        if (step - offline) % LOGGING_STEPS == 0 and losses:
            ctx.sink.log(step, **{f"train/loss/{k}": sum(v) / len(v) for k, v in losses.items()})
            losses = {}
        ctx.maybe_evaluate(step, policy)
        ctx.log_system(step)
        if ctx.checkpoint_due(step):
            ctx.save_checkpoint(step, {**impl_state(algo), "phase": "online", "buffer": buffer,
                                       "env": dumps_envs(env), "observation": observation, "losses": losses})  # fmt: skip
        if ctx.should_stop():
            break
    if losses:
        ctx.sink.log(step, **{f"train/loss/{k}": sum(v) / len(v) for k, v in losses.items()})
    env.close()
    return step
