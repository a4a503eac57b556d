"""Offline datasets in memory (``OfflineData``), where they live on disk, and D4RL-format HDF5 files.

A dataset is a flat sequence of transitions, D4RL's layout: ``observations``, ``actions``, ``rewards``,
``terminals`` (the episode ended in a terminal state) and ``timeouts`` (the episode was cut off by a time
limit); an episode ends where either is true. ``meta`` holds what rlbench knows about it: the gymnasium id
it is evaluated in (``env_id``, ``env_kwargs``), whether actions are discrete, its level, the random and
expert reference returns used for normalisation (``ref_random``, ``ref_expert``) and its provenance.

Names: a dataset rlbench generates is named ``<EnvId>-<level>`` (``CartPole-v1-medium``) and lives in the
datasets folder (``RLBENCH_DATASETS``, default ``results/datasets``) as ``<name>.hdf5``. A user's own file
is named by its path.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "LEVELS",
    "OfflineData",
    "datasets_root",
    "parse_generated_name",
    "generated_name",
]

LEVELS = ("random", "medium", "expert", "medium-replay", "medium-expert", "conservative")
_GENERATED = re.compile(
    r"^(?P<env>.+?)-(?P<level>medium-replay|medium-expert|random|medium|expert|conservative)$"
)


def generated_name(env_id: str, level: str) -> str:
    return f"{env_id}-{level}"


def generated_file_stem(name: str, wrappers: list[dict[str, Any]] | None = None) -> str:
    """A generated dataset's file name without suffix: its name, plus ``+Wrapper`` per wrapper of the env it
    was collected in (``Pendulum-v1-conservative+Delay``)."""
    return name + "".join(f"+{w['name'].rpartition(':')[2]}" for w in wrappers or [])


def parse_generated_name(name: str) -> tuple[str, str] | None:
    """``CartPole-v1-medium-replay`` -> (``CartPole-v1``, ``medium-replay``); a text env's dataset
    ``MazeFO-v0-mixed`` -> (``rlbench/MazeFO-v0``, ``mixed``) (``datasets.text``); None if not such a name."""
    from .text import parse_text_name

    text = parse_text_name(name)
    if text is not None:
        return text
    m = _GENERATED.match(name)
    return (m.group("env"), m.group("level")) if m else None


def datasets_root() -> Path:
    """Where generated datasets live: ``$RLBENCH_DATASETS`` or ``results/datasets``."""
    return Path(os.environ.get("RLBENCH_DATASETS") or "results/datasets")


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
