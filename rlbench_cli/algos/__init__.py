"""Algorithm registry: name -> adapter class, imported only when a run needs it.

An adapter implements ``train(ctx: RunContext) -> None`` (see ``algos.base``). Registering a name here is
all it takes for suites to use it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ALGORITHMS", "OFFLINE", "get_algorithm"]

# name -> "module:Class", relative to this package. Importing this module stays cheap.
ALGORITHMS: dict[str, str] = {
    "random": "random_policy:RandomPolicy",
    "ppo": "ppo:PPO",
    "dqn": "d3rlpy_online:DQN",
    "double_dqn": "d3rlpy_online:DoubleDQN",
    "sac": "d3rlpy_online:SAC",
    "td3": "d3rlpy_online:TD3",
    "ddpg": "d3rlpy_online:DDPG",
    # offline: trained on a dataset, evaluated in its environment
    "bc": "d3rlpy_offline:BC",
    "cql": "d3rlpy_offline:CQL",
    "discrete_cql": "d3rlpy_offline:DiscreteCQL",
    "iql": "d3rlpy_offline:IQL",
    "td3_plus_bc": "d3rlpy_offline:TD3PlusBC",
    "awac": "d3rlpy_offline:AWAC",
    "bcq": "d3rlpy_offline:BCQ",
    "crr": "d3rlpy_offline:CRR",
    "decision_transformer": "d3rlpy_offline:DecisionTransformer",
    "hf_decision_transformer": "hf_decision_transformer:HFDecisionTransformer",
}
# the registered algorithms whose runs never use torch: a worker does not import it for them (seconds)
TORCH_FREE: frozenset[str] = frozenset({"random"})
# the registered algorithms that learn from a dataset rather than by acting in an environment
OFFLINE: frozenset[str] = frozenset(
    {"bc", "cql", "discrete_cql", "iql", "td3_plus_bc", "awac", "bcq", "crr", "decision_transformer",
     "hf_decision_transformer"}
)  # fmt: skip


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
