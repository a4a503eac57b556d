"""Every fact about a registered algorithm in one entry: where its adapter is, whether it learns from a
dataset, whether it uses torch, whether it can fine-tune online or pack seeds, and its text variant.

Imports nothing (the adapters import torch, d3rlpy or transformers: ``algos.get_algorithm`` imports one
when a run needs it), so the suite's checks, the runner and the packer can ask it for free. Adding an
algorithm is one entry here and its adapter module.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ALGORITHMS",
    "AlgoInfo",
    "finetunable",
    "is_offline",
    "is_discrete_only",
    "is_jax",
    "is_packable",
    "jax_names",
    "needs_torch",
    "offline_names",
    "packable",
    "text_variant_names",
    "pretrainable",
    "warm_startable",
]


@dataclass(frozen=True)
class AlgoInfo:
    """One registered algorithm.

    Attributes:
        name: what a suite writes (``algorithms: [ppo]``).
        target: its adapter, ``"module:Class"`` relative to ``rlbench_cli.algos``.
        offline: learns from a dataset rather than by acting in an environment (runs on a suite's datasets).
        needs_torch: its runs use torch (a worker imports it for them; seconds).
        finetunable: an offline algorithm whose trained agent can go on learning online (``finetune:``).
        packable: the seeds of one cell can train together in one job (``resources.seeds_per_job``).
        text_variant: the adapter (``"module:Class"``) it means when the run's env is a text env
            (``rlbench/...``), or None.
        jax: trains inside one compiled JAX program on JAX envs (``gymnax/...``, ``envs.families``) and on
            them only; needs the ``jax`` extra.
        discrete_only: acts on discrete actions only (refused on a task its env family knows is continuous).
        warm_start: its text variant can first learn inside a world model of the task's dataset, then in the
            real env (``warm_start:``, ``algos.text.warm_start``; checked in ``suite.checks``).
        pretrain: its text variant can first clone a text dataset's behaviour (``pretrain:``,
            ``algos.text.pretrain``; checked in ``suite.checks``).
    """

    name: str
    target: str
    offline: bool = False
    needs_torch: bool = True
    finetunable: bool = False
    packable: bool = False
    text_variant: str | None = None
    jax: bool = False
    discrete_only: bool = False
    warm_start: bool = False
    pretrain: bool = False


def _table(*entries: AlgoInfo) -> dict[str, AlgoInfo]:
    return {a.name: a for a in entries}


# name -> entry, in the order `rlbench` lists them
ALGORITHMS: dict[str, AlgoInfo] = _table(
    AlgoInfo("random", "random_policy:RandomPolicy", needs_torch=False),
    # `ppo` on a text env trains a token policy
    AlgoInfo(
        "ppo", "ppo:PPO", packable=True, text_variant="text.ppo:TextPPO", warm_start=True, pretrain=True
    ),
    # gymnax/... tasks: jit over the whole training, vmap over the seeds of a job (see algos/gymnax/)
    AlgoInfo("ppo_jax", "gymnax:PPOJax", needs_torch=False, packable=True, jax=True),
    AlgoInfo("pqn_jax", "gymnax:PQNJax", needs_torch=False, packable=True, jax=True, discrete_only=True),
    AlgoInfo("dqn", "d3rlpy_online:DQN"),
    AlgoInfo("double_dqn", "d3rlpy_online:DoubleDQN"),
    AlgoInfo("sac", "d3rlpy_online:SAC"),
    AlgoInfo("td3", "d3rlpy_online:TD3"),
    AlgoInfo("ddpg", "d3rlpy_online:DDPG"),
    # offline: trained on a dataset, evaluated in its environment; `bc` on a text dataset clones its actions
    # with a transformer
    AlgoInfo("bc", "d3rlpy_offline:BC", offline=True, text_variant="text.offline:TextBC"),
    AlgoInfo("cql", "d3rlpy_offline:CQL", offline=True, finetunable=True),
    AlgoInfo("discrete_cql", "d3rlpy_offline:DiscreteCQL", offline=True),
    AlgoInfo("iql", "d3rlpy_offline:IQL", offline=True, finetunable=True),
    AlgoInfo("td3_plus_bc", "d3rlpy_offline:TD3PlusBC", offline=True, finetunable=True),
    AlgoInfo("awac", "d3rlpy_offline:AWAC", offline=True, finetunable=True),
    AlgoInfo("bcq", "d3rlpy_offline:BCQ", offline=True),
    AlgoInfo("crr", "d3rlpy_offline:CRR", offline=True),
    AlgoInfo("decision_transformer", "d3rlpy_offline:DecisionTransformer", offline=True),
    AlgoInfo("hf_decision_transformer", "hf_decision_transformer:HFDecisionTransformer", offline=True),
    # text tasks (rlbench/... envs and their datasets): transformer policies, see algos/text/
    AlgoInfo("filtered_bc", "text.offline:FilteredBC", offline=True),
    AlgoInfo("mc_returns", "text.offline:MCReturns", offline=True),
    AlgoInfo("ilql", "text.offline:ILQL", offline=True),
    AlgoInfo("online_filtered_bc", "text.online:OnlineFilteredBC"),
    AlgoInfo("text_world_model", "text.world_model:TextWorldModel", offline=True),
)


def is_offline(name: str) -> bool:
    """Whether ``name`` is a registered algorithm that learns from a dataset (False for any other name)."""
    info = ALGORITHMS.get(name)
    return info is not None and info.offline


def needs_torch(name: str) -> bool:
    """Whether runs of ``name`` may use torch: every name but a registered torch-free algorithm's."""
    info = ALGORITHMS.get(name)
    return info is None or info.needs_torch


def is_packable(name: str) -> bool:
    """Whether ``name`` is a registered algorithm whose seeds can share a job."""
    info = ALGORITHMS.get(name)
    return info is not None and info.packable


def is_jax(name: str) -> bool:
    """Whether ``name`` is a registered algorithm that trains on JAX envs (gymnax) and only on them."""
    info = ALGORITHMS.get(name)
    return info is not None and info.jax


def is_discrete_only(name: str) -> bool:
    """Whether ``name`` is a registered algorithm that acts on discrete actions only."""
    info = ALGORITHMS.get(name)
    return info is not None and info.discrete_only


def jax_names() -> tuple[str, ...]:
    """The registered algorithms that train on JAX envs, sorted."""
    return tuple(sorted(a.name for a in ALGORITHMS.values() if a.jax))


def offline_names() -> frozenset[str]:
    """The registered offline algorithms."""
    return frozenset(a.name for a in ALGORITHMS.values() if a.offline)


def warm_startable() -> tuple[str, ...]:
    """The registered algorithms whose text variant takes ``warm_start:``, sorted."""
    return tuple(sorted(a.name for a in ALGORITHMS.values() if a.warm_start))


def pretrainable() -> tuple[str, ...]:
    """The registered algorithms whose text variant takes ``pretrain:``, sorted."""
    return tuple(sorted(a.name for a in ALGORITHMS.values() if a.pretrain))


def finetunable() -> tuple[str, ...]:
    """The registered algorithms that can go on learning online after their offline steps, sorted."""
    return tuple(sorted(a.name for a in ALGORITHMS.values() if a.finetunable))


def packable() -> tuple[str, ...]:
    """The registered algorithms whose seeds can share a job, sorted."""
    return tuple(sorted(a.name for a in ALGORITHMS.values() if a.packable))


def text_variant_names() -> tuple[str, ...]:
    """The registered algorithms that have a text variant, sorted."""
    return tuple(sorted(a.name for a in ALGORITHMS.values() if a.text_variant is not None))
