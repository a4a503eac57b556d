"""Algorithm registry: name -> adapter class, imported only when a run needs it.

An adapter implements ``train(ctx: RunContext) -> None`` (see ``algos.base``). Registering a name here is
all it takes for suites to use it.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..envs.text import is_text_env
from ..ids import canonical_json

__all__ = [
    "ALGORITHMS",
    "OFFLINE",
    "TEXT_VARIANTS",
    "check_params",
    "first_refusal",
    "get_algorithm",
    "to_check",
]

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
    # text tasks (rlbench/... envs and their datasets): transformer policies, see algos/text/
    "filtered_bc": "text.offline:FilteredBC",
    "mc_returns": "text.offline:MCReturns",
    "ilql": "text.offline:ILQL",
    "online_filtered_bc": "text.online:OnlineFilteredBC",
    "text_world_model": "text.world_model:TextWorldModel",
}
# names that mean the text variant when the run's env is a text env (rlbench/...): `bc` on a text dataset
# clones its actions with a transformer, `ppo` on a text env trains a token policy
TEXT_VARIANTS: dict[str, str] = {"bc": "text.offline:TextBC", "ppo": "text.ppo:TextPPO"}
# the registered algorithms whose runs never use torch: a worker does not import it for them (seconds)
TORCH_FREE: frozenset[str] = frozenset({"random"})
# the registered algorithms that learn from a dataset rather than by acting in an environment
OFFLINE: frozenset[str] = frozenset(
    {"bc", "cql", "discrete_cql", "iql", "td3_plus_bc", "awac", "bcq", "crr", "decision_transformer",
     "hf_decision_transformer", "filtered_bc", "mc_returns", "ilql", "text_world_model"}
)  # fmt: skip


def get_algorithm(name: str, env_id: str | None = None) -> Any:
    """The adapter class registered under ``name`` (its text variant where ``env_id`` is a text env)."""
    try:
        target = ALGORITHMS[name]
        if name in TEXT_VARIANTS and env_id is not None and is_text_env(env_id):
            target = TEXT_VARIANTS[name]
    except KeyError:
        raise KeyError(
            f"unknown algorithm {name!r}; choose one of: {', '.join(sorted(ALGORITHMS))}"
        ) from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def check_params(name: str, env_id: str | None, params: dict[str, Any]) -> None:
    """Raise the ValueError the run's adapter would raise at its start for ``params`` (an unknown name, a value
    it cannot take), without running anything. An adapter takes part through a ``check_params(params)``
    classmethod; one without it (``random``) takes any params. Imports the adapter: torch, d3rlpy or
    transformers, seconds each."""
    check = getattr(get_algorithm(name, env_id), "check_params", None)
    if check is not None:
        check(dict(params))


def to_check(specs: list[Any]) -> list[Any]:
    """The first run of each distinct (algorithm, env, params) among ``specs`` whose params an adapter checks:
    registered algorithms that use torch (user code, ``entrypoint`` or ``command``, takes any params)."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for spec in specs:
        key = (spec.algo_name, spec.env_id, canonical_json(spec.params))
        if (
            spec.entrypoint is None
            and spec.command is None
            and spec.algo_name not in TORCH_FREE
            and key not in seen
        ):
            seen.add(key)
            out.append(spec)
    return out


def first_refusal(specs: list[Any]) -> str | None:
    """``algorithm 'LABEL' on ENV: WHY`` for the first of ``specs`` (``to_check``'s) whose adapter refuses its
    params, None when every one passes. An adapter that cannot be imported (a missing extra) is left to its
    runs, which report it with their traceback."""
    for spec in specs:
        try:
            check_params(spec.algo_name, spec.env_id, spec.params)
        except ValueError as e:
            return f"algorithm {spec.algo!r} on {spec.env}: {e}"
        except Exception:  # noqa: BLE001, S112 - not a params problem: the run itself reports it
            continue
    return None
