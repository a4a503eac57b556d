"""A text dataset in memory: ``TextEpisodes``, what ``datagen.text`` builds, ``datasets.text`` reads and
``datasets.lmrl`` reads LMRL-Gym's files into.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TextEpisodes"]


class TextEpisodes(list):
    """A list of episodes (each a list of turn dicts) with ``env`` (gymnasium id), ``level`` and ``meta``."""

    def __init__(self, episodes: Any = (), env: str = "", level: str = "", meta: dict | None = None) -> None:
        super().__init__(episodes)
        self.env, self.level, self.meta = env, level, dict(meta or {})

    @property
    def n_turns(self) -> int:
        return sum(len(e) for e in self)
