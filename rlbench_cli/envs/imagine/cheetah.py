"""``rlbench/HalfCheetah-Lang-v0``: gymnasium's MuJoCo HalfCheetah with instructions at ImagineBench's levels
(``tasks``): run forward or move backward at a speed, jump; ``hard``: two of them in sequence, the
first half of the episode and then the second.

State: HalfCheetah-v5's 17 numbers, then the instruction's embedding. Reward per step: for a speed, minus the
distance of the torso's x velocity from the asked one (negative for backward) less HalfCheetah's control
cost; for a jump, the torso's height above its resting height. Success (``info["success"]`` at the end):
every part held on average over its steps: the mean x velocity within ``SPEED_TOLERANCE`` of the asked one,
or the torso at least ``JUMP_HEIGHT`` above rest at some step. Episodes are ``max_steps`` long (100).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from . import LANG_LEVELS
from .encoder import get_encoder
from .tasks import cheetah_tasks, cheetah_text

__all__ = ["LangHalfCheetah", "make_cheetah", "part_success", "SPEED_TOLERANCE", "JUMP_HEIGHT"]

SPEED_TOLERANCE = 0.5
JUMP_HEIGHT = 0.3
STATE_DIM = 17


def part_success(kind: str, speed: float, vx: np.ndarray, height: np.ndarray) -> bool:
    """Whether one part of an instruction was carried out, from its steps' x velocities and torso heights
    (above rest)."""
    if len(vx) == 0:
        return False
    if kind == "jump":
        return bool(np.max(height) >= JUMP_HEIGHT)
    target = speed if kind == "forward" else -speed
    return bool(abs(float(np.mean(vx)) - target) <= SPEED_TOLERANCE)


class LangHalfCheetah(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, level: str = "real", encoder: str | None = None, max_steps: int = 100):
        if level not in LANG_LEVELS:
            raise ValueError(f"unknown level {level!r}; choose one of: {', '.join(LANG_LEVELS)}")
        self.level, self.max_steps = level, int(max_steps)
        self.inner = gymnasium.make("HalfCheetah-v5").unwrapped
        self.encoder = get_encoder(encoder)
        self.state_dim = STATE_DIM
        self.tasks = cheetah_tasks(level)
        self.observation_space = gymnasium.spaces.Box(
            -np.inf, np.inf, (STATE_DIM + self.encoder.dim,), np.float32
        )
        self.action_space = self.inner.action_space
        self.instruction = ""
        self.task: tuple[tuple[str, float], ...] = ()
        self._emb = np.zeros(self.encoder.dim, np.float32)

    def _obs(self, state: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(state, np.float32), self._emb])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        state, info = self.inner.reset(seed=seed)
        self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        if options and options.get("task"):  # a given task of the level (data builders): ((kind, speed), ...)
            self.task = tuple((str(k), float(v)) for k, v in options["task"])
        self.instruction = cheetah_text(self.level, self.task)
        self._emb = self.encoder.encode([self.instruction])[0]
        self._rest = float(self.inner.data.qpos[1])
        self._t, self._vx, self._h = 0, [], []
        return self._obs(state), {**info, "instruction": self.instruction, "level": self.level}

    def _part(self, t: int) -> tuple[str, float]:
        n = len(self.task)
        return self.task[min(n - 1, t * n // self.max_steps)]

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        state, _, term, _, info = self.inner.step(action)
        kind, speed = self._part(self._t)
        vx, height = float(info["x_velocity"]), float(self.inner.data.qpos[1]) - self._rest
        self._vx.append(vx)
        self._h.append(height)
        self._t += 1
        if kind == "jump":
            reward = height
        else:
            reward = -abs(vx - (speed if kind == "forward" else -speed)) + float(info.get("reward_ctrl", 0.0))
        truncated = self._t >= self.max_steps
        info = dict(info, instruction=self.instruction, level=self.level)
        if truncated or term:
            n, vx_all, h_all = len(self.task), np.asarray(self._vx), np.asarray(self._h)
            cuts = [i * self.max_steps // n for i in range(n + 1)]
            info["success"] = all(
                part_success(k, v, vx_all[a:b], h_all[a:b]) for (k, v), a, b in zip(self.task, cuts, cuts[1:])
            )
        return self._obs(state), float(reward), bool(term), bool(truncated), info


def make_cheetah(level: str = "real", encoder: str | None = None, max_steps: int = 100) -> LangHalfCheetah:
    return LangHalfCheetah(level=level, encoder=encoder, max_steps=max_steps)
