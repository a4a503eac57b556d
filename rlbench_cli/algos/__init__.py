"""Algorithm registry: name -> adapter class, imported only when a run needs it.

An adapter implements ``train(ctx: RunContext) -> None`` (see ``algos.base``). Registering a name here is
all it takes for suites to use it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ALGORITHMS", "get_algorithm"]

# name -> "module:Class", relative to this package. Importing this module stays cheap.
ALGORITHMS: dict[str, str] = {
    "random": "random_policy:RandomPolicy",
    "ppo": "ppo:PPO",
    "dqn": "d3rlpy_online:DQN",
    "double_dqn": "d3rlpy_online:DoubleDQN",
    "sac": "d3rlpy_online:SAC",
    "td3": "d3rlpy_online:TD3",
    "ddpg": "d3rlpy_online:DDPG",
}


def get_algorithm(name: str) -> Any:
    """The adapter class registered under ``name``."""
    try:
        target = ALGORITHMS[name]
    except KeyError:
        raise KeyError(
            f"unknown algorithm {name!r}; choose one of: {', '.join(sorted(ALGORITHMS))}"
        ) from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)
