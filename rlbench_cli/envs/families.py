"""rlbench's own env families, one entry each: which gymnasium ids are its envs, how they are registered, and
what the rest of rlbench does differently for them.

- ``text``: LMRL-Gym's text tasks (``envs.text``): observations and actions are strings, so a registered
  algorithm with a text variant (``algos.registry``) means it there, a generated dataset is JSONL episodes of
  the env's scripted policies (``datasets.text``), and a dataset of one takes no wrappers.
- ``imagine``: ImagineBench's language-conditioned envs (``envs.imagine``): state plus instruction embedding,
  ``info["success"]``; their ``level`` and ``encoder`` kwargs are checked when a suite loads, and rlbench
  builds their ``<EnvId>-imagine`` datasets (real and imagined rollouts).
- ``gymnax``: gymnax's JAX environments (``envs.gymnax``) as ``gymnax/<Name>`` tasks: not gymnasium envs, so
  only algorithms marked ``jax`` in ``algos.registry`` run on them (``jax``), and an unknown id in their
  namespace is refused with close names from the family (``namespace``).

Any other id is a gymnasium env of its own (``family_of`` is None). Imports nothing heavy: each family's envs
are registered with gymnasium on first use (``register_all``, called by ``envs.make_env`` and
``envs.env_ids``) with entry points as strings. Adding a family is one entry here and its package under
``envs/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import gymnax, imagine, text

__all__ = [
    "FAMILIES",
    "HDF5",
    "EnvFamily",
    "dataset_suffix",
    "family_of",
    "is_continuous",
    "is_jax_env",
    "is_text_env",
    "jax_twin",
    "kwargs_problem",
    "namespace_problem",
    "register_all",
]

HDF5 = ".hdf5"  # the file of a generated dataset of any env outside the text family (D4RL's layout)


@dataclass(frozen=True)
class EnvFamily:
    """One family of rlbench's own envs.

    Attributes:
        name: the family's name.
        envs: its gymnasium ids (``rlbench/<Task>-v0``), each with its entry point.
        register: registers its envs with gymnasium (idempotent; nothing heavy runs).
        text: observations and actions are strings (text variants of algorithms, JSONL datasets, no wrappers
            on its datasets).
        dataset_suffix: the file suffix of a dataset rlbench generates for one of its envs.
        check_kwargs: the problem with one of its envs' kwargs (``(env_id, kwargs) -> str | None``), or None
            when any kwargs are left to the env.
        imagined_datasets: rlbench builds ``<EnvId>-imagine`` datasets (real and imagined rollouts) for its
            envs.
        jax: its envs are JAX functions stepped inside an algorithm's compiled program (gymnax), not
            gymnasium envs: only the algorithms marked ``jax`` in ``algos.registry`` run on them.
        namespace: ids ``<namespace>/...`` are this family's: one it lacks is unknown (``unknown``), whatever
            gymnasium has.
        unknown: the one-line problem with an id of its namespace that is not one of its envs.
        continuous: its envs with a continuous (Box) action space, known without making them.
    """

    name: str
    envs: Mapping[str, str]
    register: Callable[[], None]
    text: bool = False
    dataset_suffix: str = HDF5
    check_kwargs: Callable[[str, dict[str, Any]], str | None] | None = None
    imagined_datasets: bool = False
    jax: bool = False
    namespace: str | None = None
    unknown: Callable[[str], str] | None = None
    continuous: frozenset[str] = frozenset()


FAMILIES: tuple[EnvFamily, ...] = (
    EnvFamily("text", text.TEXT_ENVS, text.register, text=True, dataset_suffix=".jsonl"),
    EnvFamily(
        "imagine",
        imagine.LANG_ENVS,
        imagine.register,
        check_kwargs=imagine.check_kwargs,
        imagined_datasets=True,
    ),
    EnvFamily(
        "gymnax",
        gymnax.GYMNAX_ENVS,
        gymnax.register,
        check_kwargs=gymnax.check_kwargs,
        jax=True,
        namespace=gymnax.NAMESPACE,
        unknown=gymnax.unknown,
        continuous=gymnax.CONTINUOUS,
    ),
)


def family_of(env_id: str) -> EnvFamily | None:
    """The family ``env_id`` belongs to, or None for any other (a gymnasium env of its own)."""
    return next((f for f in FAMILIES if env_id in f.envs), None)


def is_text_env(env_id: str) -> bool:
    """Whether ``env_id`` is a text env (observations and actions are strings)."""
    family = family_of(env_id)
    return family is not None and family.text


def is_jax_env(env_id: str) -> bool:
    """Whether ``env_id`` is a JAX env (gymnax): only algorithms marked ``jax`` run on it."""
    family = family_of(env_id)
    return family is not None and family.jax


def jax_twin(env_id: str) -> str | None:
    """The JAX family's version of a gymnasium id (``CartPole-v1`` -> ``gymnax/CartPole-v1``), or None."""
    return next(
        (f"{f.namespace}/{env_id}" for f in FAMILIES if f.jax and f"{f.namespace}/{env_id}" in f.envs), None
    )


def is_continuous(env_id: str) -> bool:
    """Whether ``env_id`` is an env its family knows has a continuous action space (False if unknown)."""
    family = family_of(env_id)
    return family is not None and env_id in family.continuous


def namespace_problem(env_id: str) -> str | None:
    """None unless ``env_id`` is in a family's namespace (``gymnax/...``) without being one of its envs:
    then that family's one-line problem, with close names."""
    for f in FAMILIES:
        if f.namespace and env_id.startswith(f"{f.namespace}/") and env_id not in f.envs and f.unknown:
            return f.unknown(env_id)
    return None


def dataset_suffix(env_id: str) -> str:
    """The file suffix of a dataset rlbench generates for ``env_id``: ``.jsonl`` for a text env, else
    ``.hdf5``."""
    family = family_of(env_id)
    return HDF5 if family is None else family.dataset_suffix


def kwargs_problem(env_id: str, kwargs: dict[str, Any]) -> str | None:
    """A problem with ``kwargs`` for ``env_id`` that its family checks before any env is made, or None."""
    family = family_of(env_id)
    if family is None or family.check_kwargs is None:
        return None
    return family.check_kwargs(env_id, kwargs)


def register_all() -> None:
    """Register every family's envs with gymnasium (idempotent)."""
    for family in FAMILIES:
        family.register()
