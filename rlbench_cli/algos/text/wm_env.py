"""A text world model played as a text env: ``reset`` draws a start observation, ``step`` is the world
model's predicted next observation, reward and end of the episode.

The world model is any ``Predict``: a function from a batch of (observation, action) pairs to their
outcomes ``(next observation, reward, done)``, or None for an outcome it could not produce (a trained
``TextWorldModel``'s generated tokens that are not a whole outcome: ``model_predict``). ``WorldModelEnv``
has gymnasium's ``reset`` / ``step`` / ``close`` and ``unwrapped``, so the text policies and
``algos.text.online.collect`` play it as they play a real text env, and ``step_many`` steps several of them
with one batched prediction (one decoding for all of them, not one per env).

- Start observations: a list (a dataset's first observations, one drawn per episode by the env's own
  generator, seeded by ``reset(seed=...)``) or a function of a seed (a real env's ``reset`` observation).
- Valid actions: those the current (predicted) observation lists where the real env can read them from its
  text (``actions_in``, the env's ``TextEnv.actions_in``: TextNav's admissible commands), else a fixed list
  given at construction (the real env's at reset; an env whose actions do not change) or none (the policy
  decodes its action): ``algos.text.offered.Offered``.
- An episode ends when the world model predicts ``done`` (``terminated``; ``info["success"]`` is
  ``reward >= success_reward``, ``text_world_model``'s rule), after ``max_turns`` turns (``truncated``, as
  ``text_world_model`` caps its world-model episodes), or at an outcome that could not be parsed
  (``truncated``, the observation unchanged, reward ``error_reward``, ``info["wm_error"]``; counted in
  ``errors``): a bad prediction never raises.

Used by ``ppo``'s warm start (``algos.text.warm_start``); meant for any rollout inside a world model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .offered import ActionsIn, Offered

__all__ = ["Outcome", "Predict", "WorldModelEnv", "model_predict", "step_many"]

Outcome = tuple[str, float, bool]
Predict = Callable[[list[str], list[str]], list["Outcome | None"]]
Step = tuple[str, float, bool, bool, dict[str, Any]]


def model_predict(model: Any, tok: Any, settings: dict[str, Any], device: str) -> Predict:
    """A trained ``TextWorldModel`` (model, its tokenizer, its settings) as a ``Predict``: greedy outcomes,
    None where the generated tokens are not a whole outcome (``world_model.outcome_error``); whole next
    observations also where the model predicts only the new text (``settings["outcome"]`` ``suffix`` or ``echo``)."""
    from .world_model import TextWorldModel, strict_outcome  # imports torch: the env itself needs none

    def predict(obs: list[str], actions: list[str]) -> list[Outcome | None]:
        return TextWorldModel.predict(model, tok, obs, actions, settings, device, parse=strict_outcome)

    return predict


class WorldModelEnv:
    """One text env inside a world model (see the module docstring). Counts: ``turns`` and ``episodes``
    played, ``errors`` (outcomes that could not be parsed, each ending its episode)."""

    def __init__(self, predict: Predict, starts: Sequence[str] | Callable[[int], str], max_turns: int,
                 actions: list[str] | None = None, success_reward: float = 0.0, error_reward: float = 0.0,
                 seed: int = 0, actions_in: ActionsIn | None = None):  # fmt: skip
        if not callable(starts) and not len(starts):
            raise ValueError("a world-model env needs at least one start observation")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.predict, self.starts, self.max_turns = predict, starts, int(max_turns)
        self.offered = Offered(actions, actions_in)
        self.success_reward, self.error_reward = float(success_reward), float(error_reward)
        self.rng = np.random.default_rng(seed)
        self.obs = ""
        self.turn = 0
        self.turns = self.episodes = self.errors = 0

    @property
    def unwrapped(self) -> WorldModelEnv:
        return self

    def valid_actions(self) -> list[str] | None:
        self.offered.obs = self.obs
        return self.offered.valid_actions()

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        if callable(self.starts):
            self.obs = str(self.starts(int(self.rng.integers(2**31 - 1))))
        else:
            self.obs = str(self.starts[int(self.rng.integers(len(self.starts)))])
        self.turn = 0
        return self.obs, {"imagined": True}

    def step(self, action: str) -> Step:
        return step_many([self], [action])[0]

    def close(self) -> None:
        return None

    def outcome(self, predicted: Outcome | None) -> Step:
        """This env's step to the ``predicted`` outcome of its current observation and the action taken."""
        self.turns += 1
        self.turn += 1
        if predicted is None:
            self.errors += 1
            self.episodes += 1
            return self.obs, self.error_reward, False, True, {"imagined": True, "wm_error": True}
        nxt, reward, done = predicted
        self.obs = str(nxt)
        info: dict[str, Any] = {"imagined": True}
        if done:
            info["success"] = float(reward) >= self.success_reward
        truncated = not done and self.turn >= self.max_turns
        self.episodes += int(done or truncated)
        return self.obs, float(reward), bool(done), truncated, info


def step_many(envs: list[WorldModelEnv], actions: list[str]) -> list[Step]:
    """Step each env with its action: one ``predict`` call per distinct world model among ``envs`` (all the
    pairs of the envs that share it), results in the order of ``envs``."""
    out: list[Step | None] = [None] * len(envs)
    groups: dict[int, list[int]] = {}
    for i, env in enumerate(envs):
        groups.setdefault(id(env.predict), []).append(i)
    for idx in groups.values():
        pred = envs[idx[0]].predict([envs[i].obs for i in idx], [str(actions[i]) for i in idx])
        if len(pred) != len(idx):
            raise ValueError(f"a world model predicted {len(pred)} outcomes for {len(idx)} actions")
        for i, p in zip(idx, pred):
            out[i] = envs[i].outcome(p)
    return out  # type: ignore[return-value]
