"""Algorithms by name: the adapter class of a registered name, imported only when a run needs it, and the
check of a run's params by its adapter.

An adapter implements ``train(ctx: RunContext) -> None`` (see ``algos.base``). An entry in
``algos.registry.ALGORITHMS`` is all it takes for suites to use it.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..envs.families import is_text_env
from ..suite.ids import canonical_json
from .registry import ALGORITHMS, is_jax, needs_torch, pretrainable, warm_startable

__all__ = [
    "check_params",
    "first_refusal",
    "get_algorithm",
    "to_check",
]


def get_algorithm(name: str, env_id: str | None = None) -> Any:
    """The adapter class registered under ``name`` (its text variant where ``env_id`` is a text env)."""
    info = ALGORITHMS.get(name)
    if info is None:
        raise KeyError(f"unknown algorithm {name!r}; choose one of: {', '.join(sorted(ALGORITHMS))}")
    target = info.target
    if info.text_variant is not None and env_id is not None and is_text_env(env_id):
        target = info.text_variant
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def check_params(name: str, env_id: str | None, params: dict[str, Any]) -> None:
    """Raise the ValueError the run's adapter would raise at its start for ``params`` (an unknown name, a value
    it cannot take), without running anything. An adapter takes part through a ``check_params(params)``
    classmethod; one without it (``random``) takes any params. Imports the adapter: torch, d3rlpy or
    transformers, seconds each."""
    adapter = get_algorithm(name, env_id)
    for key, what in (
        ("verifier", "a world model checks actions"),
        ("imagination", "a world model imagines episodes"),
    ):
        if key in params and not getattr(adapter, f"takes_{key}", False):
            if env_id is not None and not is_text_env(env_id):
                raise ValueError(f"{key}: {what} only on a text task (rlbench/MazeFO-v0, ...); {env_id} is not "
                                 f"one: remove {key}")  # fmt: skip
            raise ValueError(f"{key}: {name} does not take it; it is an option of bc, filtered_bc, mc_returns "
                             "and ilql on a text task")  # fmt: skip
    if "warm_start" in params and not getattr(adapter, "takes_warm_start", False):
        if env_id is not None and not is_text_env(env_id):
            raise ValueError(f"warm_start: a warm start learns inside a text world model and {env_id} is not a "
                             "text env (rlbench/MazeFO-v0, ...): remove warm_start")  # fmt: skip
        raise ValueError(f"warm_start: {name} does not take it; it is an option of "
                         f"{', '.join(warm_startable())} on a text env")  # fmt: skip
    if "pretrain" in params and not getattr(adapter, "takes_pretrain", False):
        where = (
            f"{env_id} is not a text env" if env_id is not None and not is_text_env(env_id) else "not here"
        )
        raise ValueError(f"pretrain: behaviour cloning before the first turn is an option of "
                         f"{', '.join(pretrainable())} on a text env (rlbench/MazeFO-v0, ...), {where}: remove "
                         "pretrain")  # fmt: skip
    check = getattr(adapter, "check_params", None)
    if check is not None:
        check(dict(params))


def to_check(specs: list[Any]) -> list[Any]:
    """The first run of each distinct (algorithm, env, params) among ``specs`` whose params an adapter checks:
    registered algorithms that use torch or JAX (user code, ``entrypoint`` or ``command``, takes any params;
    a JAX adapter's check imports no JAX)."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for spec in specs:
        key = (spec.algo_name, spec.env_id, canonical_json(spec.params))
        if (
            spec.entrypoint is None
            and spec.command is None
            and (needs_torch(spec.algo_name) or is_jax(spec.algo_name))
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
