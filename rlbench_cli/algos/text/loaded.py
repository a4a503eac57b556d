"""A saved text world model reused by the agent-utility channels: ``world_model: PATH`` in ``verifier``,
``imagination`` or ``warm_start`` loads the final model (and its tokenizer) of a ``text_world_model`` run
(``suite.world_models`` finds it) instead of training one for ``world_model_steps`` inside the run.

What the loaded model was trained with stays its own: its shape, ``max_context``, ``max_action_tokens``,
``history`` and ``outcome`` (the mode it predicts in) replace the channel's (``loaded_settings``). So a channel
given ``world_model`` refuses the settings that would only train or shape a model it does not train
(``TRAINED``: ``world_model_steps``, ``n_embd``, ``learning_rate``, ...) and an ``outcome`` other than
``auto`` or the saved one; the channel's own settings (``tries``, ``max_outcome_tokens``, ``success_reward``,
``max_turns``, ...) are used as given. ``imagination`` also refuses a model saved with ``policy_weight: 0``:
its action head, the behaviour that acts in the imagined episodes, never learned. A ``max_outcome_tokens`` that the
loaded model's ``n_positions`` has no room for after its ``max_context`` and ``max_action_tokens`` is refused.

The task must be the one it was trained on. Up front (``suite.checks``), a kept policy's ``policy.json`` names
its env, which must be the run's task's. When the run starts, its tokenizer must cover the task's text
(``vocabulary_problem``; ``TextTokenizer``: the words of a task's own text are tokens of their own, any other
piece is spelt out in printable characters): no character of the task's dataset may be one it cannot spell
(``<unk>``), and the share of the dataset's word pieces it has as whole tokens must be at least
``MIN_COVERAGE`` of the share a tokenizer built from that dataset (with the model's ``max_words``) has. A
model of another task covers little (MazeFO-v0's mixed data: 0% by Wordle's tokenizer, 21% by TextNav's,
against 100%). A pretrained checkpoint's tokenizer (``HFTokenizer``) encodes any text and is not checked.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ...suite.world_models import SavedWorldModel, find_world_model
from .tokenizer import TextTokenizer, split_pieces

__all__ = [
    "MIN_COVERAGE",
    "TRAINED",
    "check_loaded",
    "load_world_model",
    "loaded_settings",
    "vocabulary_problem",
]

# settings that only train or shape a world model: refused beside world_model, which brings its own
TRAINED = ("world_model_steps", "n_embd", "n_layer", "n_head", "n_positions", "max_words", "dropout",
           "pretrained", "learning_rate", "weight_decay", "batch_size", "max_grad_norm", "max_context",
           "max_action_tokens", "history")  # fmt: skip
# what the saved model's own settings decide (the model's shape and how a turn is written as tokens)
KEPT = ("n_embd", "n_layer", "n_head", "n_positions", "max_context", "max_action_tokens", "max_words",
        "dropout", "pretrained", "history", "outcome")  # fmt: skip
MIN_COVERAGE = 0.9


def check_loaded(channel: str, value: dict[str, Any], settings: dict[str, Any]) -> SavedWorldModel | None:
    """The saved world model ``settings["world_model"]`` names (None when it names none), after checking
    ``value`` (the channel's settings as given) against it; ValueError naming the field (``channel.key``)."""
    path = settings.get("world_model")
    if path in (None, ""):
        return None
    where = f"{channel}.world_model"
    saved = find_world_model(path, where)
    given = [k for k in TRAINED if k in value]
    if given:
        raise ValueError(f"{channel}.{given[0]}: a world model loaded from {where} is not trained or shaped "
                         f"here (it brings its own settings); remove {given[0]}, or remove world_model to "
                         "train one in the run")  # fmt: skip
    want, theirs = value.get("outcome", "auto"), saved.settings.get("outcome")
    if want not in ("auto", theirs):
        raise ValueError(f"{channel}.outcome {want}: the world model loaded from {where} predicts {theirs}; "
                         f"remove outcome (auto takes the saved one) or give {theirs}")  # fmt: skip
    merged = loaded_settings(settings, saved)
    room = int(merged["n_positions"]) - int(merged["max_context"]) - int(merged["max_action_tokens"]) - 2
    if int(merged["max_outcome_tokens"]) > room:  # a prediction would run past the model's last position
        raise ValueError(f"{channel}.max_outcome_tokens {merged['max_outcome_tokens']}: the world model loaded from "
                         f"{where} has {merged['n_positions']} positions, of which its max_context and "
                         f"max_action_tokens (+ 2) leave {room} for an outcome; give {channel}.max_outcome_tokens "
                         f"of at most {room}")  # fmt: skip
    if channel == "imagination" and not float(saved.settings.get("policy_weight", 1.0)) > 0:
        raise ValueError(f"{where}: {saved.folder} was trained with policy_weight 0, so its action head (the "
                         "behaviour imagined episodes are played with) never learned; give a text_world_model "
                         "trained with policy_weight above 0")  # fmt: skip
    return saved


def loaded_settings(settings: dict[str, Any], saved: SavedWorldModel) -> dict[str, Any]:
    """``settings`` (a channel's) with the saved model's own (``KEPT``) in place of the channel's."""
    return {**settings, **{k: saved.settings[k] for k in KEPT if k in saved.settings}}


def _coverage(index: Any, counts: Counter[str]) -> float:
    total = sum(counts.values())
    return sum(n for p, n in counts.items() if p in index) / total if total else 1.0


def vocabulary_problem(saved: SavedWorldModel, texts: list[str], where: str, task: str) -> str | None:
    """A one-line problem when the saved model's tokenizer does not cover ``texts`` (the task's dataset; see
    the module docstring for the rule), else None."""
    if saved.tokenizer.get("kind") != "text":
        return None
    tokens = list(saved.tokenizer.get("tokens") or [])
    index = set(tokens)
    chars = {c for t in texts for c in t}
    unknown = sorted(c for c in chars if c not in index)
    fix = f"give a text_world_model run trained on {task}'s data"
    if unknown:
        return (f"{where}: its tokenizer cannot spell {unknown[0]!r} ({len(unknown)} character(s) of {task}'s "
                f"text it has no token for): it was trained on another task; {fix}")  # fmt: skip
    counts = Counter(p for t in texts for p in split_pieces(t) if len(p) > 1)
    own = TextTokenizer.build(texts, int(saved.settings.get("max_words", 2000))).index
    have, could = _coverage(index, counts), _coverage(own, counts)
    if have < MIN_COVERAGE * could:
        return (f"{where}: its tokenizer has {have:.0%} of {task}'s words as tokens (one built from this data: "
                f"{could:.0%}): it was trained on another task; {fix}")  # fmt: skip
    return None


def load_world_model(
    saved: SavedWorldModel, texts: list[str] | None, where: str, task: str, device: str
) -> tuple:
    """(model, tokenizer) of ``saved``, in eval mode on ``device``, once its tokenizer is checked against
    ``texts`` (ValueError: ``vocabulary_problem``; None: checked already)."""
    from .policy import load_policy

    problem = None if texts is None else vocabulary_problem(saved, texts, where, task)
    if problem:
        raise ValueError(problem)
    policy = load_policy(saved.folder, device)
    return policy.model, policy.tok
