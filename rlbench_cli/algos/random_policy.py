"""``random``: uniform random actions. The floor every other algorithm should clear."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .base import RunContext


class RandomPolicy:
    name: ClassVar[str] = "random"

    def train(self, ctx: RunContext) -> None:
        env = ctx.make_env()
        space = env.action_space
        rng = np.random.default_rng(ctx.seed)
        space.seed(int(rng.integers(2**31)))

        def policy(obs: np.ndarray) -> np.ndarray:
            return np.stack([np.asarray(space.sample()) for _ in range(len(obs))])

        env.reset(seed=ctx.seed)
        ep_ret, ep_len = 0.0, 0
        ctx.maybe_evaluate(0, policy)
        for step in range(1, ctx.steps + 1):
            _, r, term, trunc, _ = env.step(space.sample())
            ep_ret += float(r)
            ep_len += 1
            if term or trunc:
                ctx.log_episode(step, ep_ret, ep_len)
                ep_ret, ep_len = 0.0, 0
                env.reset()
            ctx.maybe_evaluate(step, policy)
            if step % 1000 == 0:
                ctx.log_system(step)
                if ctx.should_stop():
                    break
        ctx.finish(step, policy)
