"""Behaviour-cloning pre-training of text ``ppo``'s policy: ``pretrain: {bc_steps: N, ...}``.

Before the run's first real turn, and before a warm start's imagined phase, the policy (ppo's own model, its
language-model head) learns by behaviour cloning on a text dataset's turns for ``bc_steps`` gradient steps:
bc's loss (``offline.TextBC.losses``: the action tokens' cross-entropy given the context, contexts written as
the policy writes them), batches of ``batch_size`` turns drawn uniformly, an AdamW of its own at
``learning_rate`` (ppo's optimiser starts afresh after it), gradients clipped at ppo's ``max_grad_norm``. The
value head is not trained here.

The dataset: ``pretrain.dataset`` (a dataset the suite lists, or a path to a JSONL file of the env's
episodes), by default the env's generated ``<EnvName>-mixed`` (``suite.checks.warm_start_dataset``'s rule),
split as a text world model splits it (``TextWorldModel.split``: the last ``holdout_fraction`` held out, then
the first ``train_episodes`` of the rest, 0 for all): so a warm start with the same dataset and
``train_episodes`` learns its world model from exactly the episodes the policy was cloned from. The policy's
tokenizer is built from the dataset's text as well as ppo's explored text.

Why: where a random policy almost never wins (TextNav: about 1 game in 1,000), ppo from scratch sees no reward
in a CPU-sized budget, and a warm start has nothing to improve on; from a cloned policy both do. The cloning
draws from a generator of its own, seeded by the run's seed, so a cold and a warm run with the same seed and
``pretrain`` start from the same cloned policy: their difference is the warm start's, seed by seed (``rlbench
compare --paired``). The real-step axis is unchanged: ``budget.steps`` counts real turns; the cloning's steps
are logged apart.

Logged at real step 0, before the first evaluation: ``train/pretrain/loss`` (the mean over each
``logging_steps`` steps, and over the last ones), ``train/pretrain/episodes`` and ``train/pretrain/turns``
(what was cloned). A resumed run does not clone again: its checkpoint has the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..base import RunContext
from ..params import coerce_all

__all__ = ["PRETRAIN_OWN", "check_pretrain", "pretrain_episodes", "behaviour_clone"]

PRETRAIN_OWN: dict[str, Any] = {
    "bc_steps": -1,  # gradient steps of behaviour cloning (required)
    "dataset": "",  # what the policy clones (default: the env's generated <EnvName>-mixed)
    "train_episodes": 0,  # the first N episodes not held out (0: all of them)
    "holdout_fraction": 0.1,  # the last episodes left out, as a text world model leaves them out
    "batch_size": 32,
    "learning_rate": 1e-3,
    "logging_steps": 50,
}
MAX_BC_STEPS = 100_000


def check_pretrain(value: Any) -> dict[str, Any]:
    """The pre-training's settings, defaults filled in; ValueError naming the field for a value it cannot
    take. The suite-level checks (algorithm, env, dataset) are ``suite.checks``'."""
    if not isinstance(value, dict):
        raise ValueError(f"pretrain must be a mapping, e.g. {{bc_steps: 500}}; got {value!r}")
    unknown = sorted(set(value) - set(PRETRAIN_OWN))
    if unknown:
        raise ValueError(f"unknown parameter(s) for pretrain: {', '.join(unknown)}; valid: "
                         f"{', '.join(sorted(PRETRAIN_OWN))}")  # fmt: skip
    if "bc_steps" not in value:
        raise ValueError(
            "pretrain.bc_steps is missing: how many behaviour-cloning steps before the first turn"
        )
    settings = {**PRETRAIN_OWN, **coerce_all("pretrain", value, PRETRAIN_OWN)}
    for key, low, high in (("bc_steps", 1, MAX_BC_STEPS), ("batch_size", 1, 1 << 16),
                           ("logging_steps", 1, MAX_BC_STEPS), ("train_episodes", 0, 1 << 30)):  # fmt: skip
        if not low <= int(settings[key]) <= high:
            raise ValueError(f"pretrain.{key} must be {low} to {high}, got {settings[key]}")
    if not float(settings["learning_rate"]) > 0:
        raise ValueError(f"pretrain.learning_rate must be above 0, got {settings['learning_rate']}")
    if not 0 <= float(settings["holdout_fraction"]) < 1:
        raise ValueError(f"pretrain.holdout_fraction must be in [0, 1), got {settings['holdout_fraction']}")
    return settings


def pretrain_episodes(ctx: RunContext, settings: dict[str, Any]) -> list[Any]:
    """The episodes the policy clones: the dataset split as ``TextWorldModel.split`` splits it."""
    from ...suite.checks import warm_start_dataset
    from .warm_start import load_warm_dataset
    from .world_model import TextWorldModel

    episodes = load_warm_dataset(ctx, settings, "pretrain")
    name = warm_start_dataset(ctx.spec.env_id, settings["dataset"])
    cloned, _ = TextWorldModel.split(episodes, settings, name)
    return cloned


def behaviour_clone(ctx: RunContext, model: Any, tok: Any, episodes: list[Any], policy_settings: dict[str, Any],
                    settings: dict[str, Any]) -> None:  # fmt: skip
    """``bc_steps`` of behaviour cloning of ``model`` on ``episodes`` (see the module docstring), logged at step
    0. ``policy_settings``: ppo's (how contexts are written, ``max_grad_norm``, ``weight_decay``)."""
    from .common import adamw, turn_samples
    from .offline import TextBC

    turns = turn_samples(episodes, tok, policy_settings)
    if not len(turns.contexts):
        raise ValueError("pretrain: the dataset's episodes have no turns to clone")
    rng = np.random.default_rng([ctx.seed, 7])  # the cloning's own: ppo's sampler keeps its stream
    params = [p for p in model.parameters() if p.requires_grad]
    optim = adamw(params, {**policy_settings, "learning_rate": settings["learning_rate"]})
    bc, device = TextBC(), ctx.device
    ctx.sink.log(0, **{"train/pretrain/episodes": float(len(episodes)),
                       "train/pretrain/turns": float(len(turns.contexts))})  # fmt: skip
    model.train()
    total, count = 0.0, 0
    for step in range(1, int(settings["bc_steps"]) + 1):
        batch = rng.integers(len(turns.contexts), size=int(settings["batch_size"]))
        loss = bc.losses(model, tok, turns, batch, policy_settings, device)["bc"]
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, float(policy_settings["max_grad_norm"]))
        optim.step()
        total, count = total + float(loss.detach()), count + 1
        if step % int(settings["logging_steps"]) == 0 or step == int(settings["bc_steps"]):
            ctx.sink.log(0, **{"train/pretrain/loss": total / count})
            total, count = 0.0, 0
        if ctx.should_stop():
            break
