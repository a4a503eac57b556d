"""The base of the text envs: gymnasium ``Text`` spaces, string in, string out."""

from __future__ import annotations

import string
from typing import Any

import gymnasium
from gymnasium import spaces

__all__ = ["TextEnv", "text_space"]

CHARSET = string.printable


def text_space(max_length: int = 100_000) -> spaces.Text:
    return spaces.Text(max_length=max_length, min_length=0, charset=CHARSET)


class TextEnv(gymnasium.Env):
    """A text env: ``observation_space`` and ``action_space`` are ``Text``; subclasses set ``max_length``."""

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}

    def __init__(self, obs_length: int = 100_000, action_length: int = 1_000) -> None:
        self.observation_space = text_space(obs_length)
        self.action_space = text_space(action_length)
        self._last_obs = ""

    def valid_actions(self) -> list[str] | None:
        """The candidate actions now, or None where the action set is open."""
        return None

    def actions_in(self, observation: str) -> list[str] | None:
        """The candidate actions an ``observation`` of this env lists, read from its text alone, or None where
        they are not in it (the set does not change, or the text does not say): how a policy playing inside a
        world model knows its predicted state's actions (``algos.text.offered.Offered``)."""
        return None

    def render(self) -> str:
        return self._last_obs
