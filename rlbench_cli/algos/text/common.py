"""What the text algorithms share: their parameters, the run's text dataset, turns as training samples,
evaluation of a text policy, checkpoints of a model and its optimiser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...suite.checks import check_pretrained
from ..params import coerce_all
from .losses import returns_to_go
from .policy import MODEL_PARAMS, context_ids

__all__ = ["TRAIN_PARAMS", "settings_of", "load_episodes", "Turns", "turn_samples", "texts_of", "normalizer"]

TRAIN_PARAMS: dict[str, Any] = {
    "batch_size": 32,
    "learning_rate": 3e-4,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    "logging_steps": 100,  # losses are averaged over and logged every this many steps
    "gamma": 0.99,
}


def adamw(params: Any, settings: dict[str, Any]) -> Any:
    """The AdamW every text trainer uses, at the run's ``learning_rate`` and ``weight_decay``."""
    import torch

    return torch.optim.AdamW(
        params, lr=float(settings["learning_rate"]), weight_decay=float(settings["weight_decay"])
    )


class TextParams:
    """A text algorithm's ``check_params``: what ``settings_of`` refuses (an unknown name, a ``pretrained``
    folder that does not exist) for its ``name`` and ``own`` settings."""

    name: ClassVar[str]
    own: ClassVar[dict[str, Any]] = {}

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        settings_of(cls.name, params, cls.own)


def settings_of(algo: str, params: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """Every setting of a text algorithm: the model's, the shared training ones and ``own``, defaults filled
    in. Unknown keys or a pretrained folder that does not exist raise ValueError naming them."""
    known = {**MODEL_PARAMS, **TRAIN_PARAMS, **own}
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) for {algo}: {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
        )
    typed = coerce_all(algo, params, known, {"pretrained": "", "history": 0})
    problem = check_pretrained(typed.get("pretrained"))
    if problem:
        raise ValueError(problem)
    return {**known, **typed}


def load_episodes(ctx: Any) -> Any:
    """The run's text dataset (``datasets.text.TextEpisodes``): the user's JSONL file, or the generated one
    in the datasets folder (``<EnvName>-<level>.jsonl``)."""
    from ...datasets import dataset_path, datasets_root
    from ...datasets.text import load_text_dataset

    path = dataset_path(str(ctx.spec.dataset), ctx.spec.dataset_path)
    if not ctx.spec.dataset_path and path.suffix != ".jsonl":
        path = datasets_root() / f"{ctx.spec.dataset}.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"text dataset {ctx.spec.dataset!r}: no file {path}")
    return load_text_dataset(path, ctx.spec.env_id)


def texts_of(episodes: Any) -> list[str]:
    return [t[k] for ep in episodes for t in ep for k in ("observation", "action")]


@dataclass
class Turns:
    """Every turn of a dataset as a training sample: its context and action token ids, reward, whether nothing
    follows it (``terminal``: an episode's last turn), whether that end was a time limit's (``truncated``: the
    turn's ``"truncated"`` flag in the dataset; no terminal state), the index of the next turn's sample (-1 at
    an episode's end), its discounted return-to-go and its episode's return and index."""

    contexts: list[list[int]]
    actions: list[list[int]]
    rewards: np.ndarray
    terminal: np.ndarray
    next_index: np.ndarray
    returns_to_go: np.ndarray
    episode_return: np.ndarray
    episode: np.ndarray
    truncated: np.ndarray

    def __len__(self) -> int:
        return len(self.contexts)


def turn_samples(episodes: Any, tok: Any, settings: dict[str, Any]) -> Turns:
    """``Turns`` of ``episodes``, contexts written as the policy writes them (``policy.context_ids``)."""
    contexts, actions, rewards, terminal, nxt, rtg, ep_ret, ep_idx, cut = [], [], [], [], [], [], [], [], []
    h = settings.get("history")
    limit = int(settings["max_context"])
    act_limit = int(settings["max_action_tokens"])
    for e, ep in enumerate(episodes):
        turns = [(t["observation"], t["action"]) for t in ep]
        rs = [float(t["reward"]) for t in ep]
        g = returns_to_go(rs, float(settings["gamma"]))
        for i, t in enumerate(ep):
            contexts.append(
                context_ids(tok, turns[:i], t["observation"], limit, None if h is None else int(h))
            )
            actions.append(tok.encode(t["action"])[:act_limit])
            rewards.append(rs[i])
            last = i == len(ep) - 1
            terminal.append(1.0 if last else 0.0)  # nothing to bootstrap from after an episode's last turn
            cut.append(1.0 if last and t.get("truncated") else 0.0)  # a time limit's end: not terminal either
            nxt.append(-1 if last else len(contexts))
            rtg.append(g[i])
            ep_ret.append(sum(rs))
            ep_idx.append(e)
    return Turns(contexts, actions, np.asarray(rewards, np.float32), np.asarray(terminal, np.float32),
                 np.asarray(nxt, np.int64), np.asarray(rtg, np.float32), np.asarray(ep_ret, np.float32),
                 np.asarray(ep_idx, np.int64), np.asarray(cut, np.float32))  # fmt: skip


def normalizer(task: str, env_id: str) -> Any:
    """A function from a mean return to the normalised score of ``task`` (the ``lmrl`` reference table:
    LMRL-Gym's piecewise rule), or None where the table does not know it."""
    from ... import references

    table = references.BUILTIN.get("lmrl")
    if table is None:
        return None
    for key in (task, env_id):
        ref = table.lookup(key)
        if ref is not None:
            return lambda v, ref=ref: float(references.normalise(v, ref, table.scale))
    return None
