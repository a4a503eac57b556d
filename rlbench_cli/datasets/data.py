"""Offline datasets in memory (``OfflineData``) and their metadata as HDF5 attributes (``meta_to_attrs``).

A dataset is a flat sequence of transitions, D4RL's layout: ``observations``, ``actions``, ``rewards``,
``terminals`` (the episode ended in a terminal state) and ``timeouts`` (the episode was cut off by a time
limit); an episode ends where either is true. ``meta`` holds what rlbench knows about it: the gymnasium id
it is evaluated in (``env_id``, ``env_kwargs``), whether actions are discrete, its level, the random and
expert reference returns used for normalisation (``ref_random``, ``ref_expert``) and its provenance.

Datasets' names and where they live: ``datasets.names``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["OfflineData", "meta_to_attrs"]


@dataclass
class OfflineData:
    """A dataset of transitions in D4RL's flat layout, plus what rlbench knows about it."""

    observations: np.ndarray  # (N, *obs_shape) float32
    actions: np.ndarray  # (N, act_dim) float32, or (N,) int64 for a discrete action space
    rewards: np.ndarray  # (N,) float32
    terminals: np.ndarray  # (N,) bool
    timeouts: np.ndarray  # (N,) bool
    meta: dict[str, Any] = field(default_factory=dict)
    # (N, *obs_shape) float32: the observation after each step (D4RL's -v2 files have it too). Optional:
    # inside an episode it is the next row's observation; it adds the one thing the flat layout loses, the
    # last observation of each episode, which Minari's layout (T + 1 observations per episode) needs.
    next_observations: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.observations)
        arrays = ("actions", "rewards", "terminals", "timeouts", "next_observations")
        for k in (a for a in arrays if getattr(self, a) is not None):
            if len(getattr(self, k)) != n:
                raise ValueError(
                    f"dataset arrays differ in length: observations {n}, {k} {len(getattr(self, k))}"
                )

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def discrete(self) -> bool:
        return bool(
            self.meta.get(
                "discrete", self.actions.ndim == 1 and np.issubdtype(self.actions.dtype, np.integer)
            )
        )

    @property
    def env_id(self) -> str | None:
        return self.meta.get("env_id")

    @property
    def references(self) -> tuple[float, float] | None:
        """(random return, expert return) if known."""
        lo, hi = self.meta.get("ref_random"), self.meta.get("ref_expert")
        if lo is None or hi is None or lo == hi:
            return None
        return float(lo), float(hi)

    def episode_ends(self) -> np.ndarray:
        """Indices of the last transition of each episode (the last transition always ends one)."""
        done = np.asarray(self.terminals, bool) | np.asarray(self.timeouts, bool)
        if len(done):
            done = done.copy()
            done[-1] = True
        return np.flatnonzero(done)

    def episode_returns(self) -> np.ndarray:
        ends = self.episode_ends()
        cs = np.concatenate([[0.0], np.cumsum(np.asarray(self.rewards, np.float64))])
        starts = np.concatenate([[0], ends[:-1] + 1])
        return cs[ends + 1] - cs[starts]


def meta_to_attrs(meta: dict[str, Any]) -> dict[str, str | float | int | bool]:
    """Metadata as HDF5 attributes: plain scalars stay scalars, anything else is stored as JSON text."""
    out: dict[str, Any] = {}
    for k, v in meta.items():
        if isinstance(v, (bool, int, float, str)):
            out[k] = v
        elif v is not None:
            out[k] = json.dumps(v, default=str)
    return out
