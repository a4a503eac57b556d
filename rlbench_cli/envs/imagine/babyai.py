"""``rlbench/BabyAI-Lang-v0``: minigrid's BabyAI goto / pickup / open / put-next families in two small rooms
joined by a door, instructions at ImagineBench's levels (``tasks``).

State (153 numbers): the agent's 7x7x3 egocentric view (minigrid's object, colour and state codes), its
direction one-hot, and the type and colour codes of what it carries (0 when nothing); then the instruction's
embedding. Actions: minigrid's 7. Success: minigrid's verifier for the instruction (BabyAI's); the reward
is BabyAI's, ``1 - 0.9 * steps / max_steps`` on success, 0 otherwise.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import gymnasium
import numpy as np
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.envs.babyai.core.verifier import (
    BeforeInstr,
    GoToInstr,
    ObjDesc,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
)

from . import LANG_LEVELS
from .encoder import get_encoder
from .tasks import COLORS, SEEN, SEQUENCE, UNSEEN, babyai_text

__all__ = ["BabyAILangLevel", "LangBabyAI", "make_babyai", "STATE_DIM"]

STATE_DIM = 7 * 7 * 3 + 4 + 2
ROOM_SIZE = 6
N_OBJECTS = 3


class BabyAILangLevel(RoomGridLevel):
    """The minigrid level: two rooms, a door between them, three objects in the agent's room."""

    def __init__(self, level: str = "real", max_steps: int | None = None, **kwargs: Any):
        self.level = level
        self.text = ""
        super().__init__(num_rows=1, num_cols=2, room_size=ROOM_SIZE, max_steps=max_steps, **kwargs)

    def _pick(self, pool: tuple[tuple[str, str], ...], n: int) -> list[tuple[str, str]]:
        idx = self.np_random.permutation(len(pool))[:n]
        return [pool[i] for i in idx]

    def gen_mission(self) -> None:
        self.place_agent(0, 0)
        door_color = COLORS[int(self.np_random.integers(len(COLORS)))]
        self.add_door(0, 0, door_idx=0, color=door_color, locked=False)
        level = self.level
        targets = self._pick(UNSEEN if level == "easy" else SEEN, 2)
        others = [o for o in (*SEEN, *UNSEEN) if o not in targets]
        objs = [*targets, *self._pick(tuple(others), N_OBJECTS - 2)]
        for color, typ in objs:
            self.add_object(0, 0, typ, color)
        self.check_objs_reachable()
        a, b = targets

        def desc(o: tuple[str, str]) -> ObjDesc:
            return ObjDesc(o[1], o[0])

        if level == "hard":
            fa, fb = (("goto", "pickup")[int(i)] for i in self.np_random.integers(2, size=2))
            make = {"goto": GoToInstr, "pickup": PickupInstr}
            self.instrs = BeforeInstr(make[fa](desc(a)), make[fb](desc(b)))
            words = SEQUENCE.format(a=babyai_text("real", fa, o=a), b=babyai_text("real", fb, o=b))
        else:
            families = ("goto", "pickup") if level == "easy" else ("goto", "pickup", "open", "putnext")
            family = families[int(self.np_random.integers(len(families)))]
            wording = "real" if level == "easy" else level
            if family == "goto":
                self.instrs, words = GoToInstr(desc(a)), babyai_text(wording, "goto", o=a)
            elif family == "pickup":
                self.instrs, words = PickupInstr(desc(a)), babyai_text(wording, "pickup", o=a)
            elif family == "open":
                self.instrs = OpenInstr(ObjDesc("door", door_color))
                words = babyai_text(wording, "open", c=door_color)
            else:
                self.instrs, words = (
                    PutNextInstr(desc(a), desc(b)),
                    babyai_text(wording, "putnext", o=a, o2=b),
                )
        self.text = words

    def _gen_grid(self, width: int, height: int) -> None:
        super()._gen_grid(width, height)
        self.mission = self.text


def flat_state(env: BabyAILangLevel, obs: dict[str, Any]) -> np.ndarray:
    """The state part of an observation (see the module docstring)."""
    direction = np.zeros(4, np.float32)
    direction[int(obs["direction"])] = 1.0
    carrying = env.carrying
    held = [OBJECT_TO_IDX[carrying.type], COLOR_TO_IDX[carrying.color]] if carrying is not None else [0, 0]
    return np.concatenate(
        [np.asarray(obs["image"], np.float32).ravel(), direction, np.asarray(held, np.float32)]
    )


class LangBabyAI(gymnasium.Env):
    """The flat, language-conditioned view of ``BabyAILangLevel`` (see the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, level: str = "real", encoder: str | None = None, max_steps: int | None = None):
        if level not in LANG_LEVELS:
            raise ValueError(f"unknown level {level!r}; choose one of: {', '.join(LANG_LEVELS)}")
        self.level = level
        self.inner = BabyAILangLevel(level=level, max_steps=max_steps)
        self.encoder = get_encoder(encoder)
        self.state_dim = STATE_DIM
        dim = STATE_DIM + self.encoder.dim
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (dim,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(7)
        self.instruction = ""
        self._emb = np.zeros(self.encoder.dim, np.float32)

    def _obs(self, obs: dict[str, Any]) -> np.ndarray:
        return np.concatenate([flat_state(self.inner, obs), self._emb])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        with contextlib.redirect_stdout(io.StringIO()):  # minigrid prints each rejected layout
            obs, info = self.inner.reset(seed=seed)
        self.instruction = self.inner.text
        self._emb = self.encoder.encode([self.instruction])[0]
        return self._obs(obs), {**info, "instruction": self.instruction, "level": self.level}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.inner.step(int(action))
        info = dict(info, instruction=self.instruction, level=self.level)
        if terminated or truncated:
            info["success"] = bool(terminated and reward > 0)
        return self._obs(obs), float(reward), bool(terminated), bool(truncated), info


def make_babyai(level: str = "real", encoder: str | None = None, max_steps: int | None = None) -> LangBabyAI:
    return LangBabyAI(level=level, encoder=encoder, max_steps=max_steps)
