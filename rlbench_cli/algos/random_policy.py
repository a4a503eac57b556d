"""``random``: uniform random actions. The floor every other algorithm should clear.

An env that lists its valid actions (``env.unwrapped.valid_actions()``, as the text envs do) gets one of those,
uniformly: a random string from a ``Text`` space would be an invalid move every turn, not a random policy."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .base import RunContext


def _valid_actions(env: Any) -> list[Any] | None:
    get = getattr(env.unwrapped, "valid_actions", None)
    acts = get() if callable(get) else None
    return list(acts) if acts else None


class _ValidActionPolicy:
    """Evaluation policy for envs that list their valid actions: one of them per env, uniformly."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.envs: list[Any] = []

    def bind(self, envs: list[Any]) -> None:
        self.envs = list(envs)

    def reset(self, n: int) -> None:
        pass

    def act(self, obs: np.ndarray, last_rewards: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out = []
        for i in idx:
            acts = _valid_actions(self.envs[int(i)]) or [""]
            out.append(acts[int(self.rng.integers(len(acts)))])
        return np.array(out, dtype=str)


class RandomPolicy:
    name: ClassVar[str] = "random"

    def train(self, ctx: RunContext) -> None:
        env = ctx.make_env()
        space = env.action_space
        rng = np.random.default_rng(ctx.seed)
        space.seed(int(rng.integers(2**31)))

        def policy(obs: np.ndarray) -> np.ndarray:
            return np.stack([np.asarray(space.sample()) for _ in range(len(obs))])

        def sample() -> Any:
            return space.sample()

        if _valid_actions(env) is not None:  # text envs: a random valid move, not a random string
            policy = _ValidActionPolicy(np.random.default_rng(int(rng.integers(2**31))))  # type: ignore[assignment]

            def sample() -> Any:
                acts = _valid_actions(env) or [space.sample()]
                return acts[int(rng.integers(len(acts)))]

        env.reset(seed=ctx.seed)
        ep_ret, ep_len, ep_cost = 0.0, 0, None
        ctx.maybe_evaluate(0, policy)
        for step in range(1, ctx.steps + 1):
            _, r, term, trunc, info = env.step(sample())
            ep_ret += float(r)
            ep_len += 1
            if "cost" in info:  # a safety cost (SafetyCost): train/episode_cost
                ep_cost = (ep_cost or 0.0) + float(info["cost"])
            if term or trunc:
                ctx.log_episode(step, ep_ret, ep_len, ep_cost)
                ep_ret, ep_len, ep_cost = 0.0, 0, None
                env.reset()
            ctx.maybe_evaluate(step, policy)
            if step % 1000 == 0:
                ctx.log_system(step)
                if ctx.should_stop():
                    break
        ctx.finish(step, policy)
