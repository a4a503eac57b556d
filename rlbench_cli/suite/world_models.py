"""Saved text world models that a suite names: ``world_model: PATH`` in ``verifier``, ``imagination`` or
``warm_start`` reuses the final model of a ``text_world_model`` run instead of training one inside the run
(``algos.text.loaded``). This module finds the model in a folder and reads what it was saved with, from JSON
alone (no torch), so that a suite is checked before any run starts.

``PATH`` (``~`` expanded; a relative path is relative to the folder ``rlbench`` runs in, as ``pretrained``
and a dataset's ``path`` are) may be, most specific first: the text policy folder itself (it holds
``rlbench-text-policy.json``: ``<attempt>/policy/final/model``), a kept policy (``policy.json``:
``<attempt>/policy/final``), an attempt folder (``<run>/attempt-N``) or a run folder
(``<runs>/<suite>/<run_id>``: its latest attempt that kept a final policy). A folder whose saved settings have
no world model's outcome (``bc``'s, ``ppo``'s: no ``outcome`` and ``policy_weight``), or whose ``policy.json``
names another algorithm, is refused; so is one saved for another env than the run's task (``env_problem``,
``suite.checks``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CHANNELS", "SavedWorldModel", "env_problem", "find_world_model"]

CHANNELS = ("verifier", "imagination", "warm_start")  # the params that take world_model:
TEXT_POLICY_JSON = "rlbench-text-policy.json"  # algos.text.policy's saved settings
POLICY_JSON = "policy.json"  # algos.keep's kept policy
WORLD_MODEL_ALGO = "text_world_model"
OUTCOMES = ("full", "suffix", "echo")  # a trained world model's resolved outcome mode


@dataclass
class SavedWorldModel:
    """A saved text world model: its text policy ``folder`` (what ``algos.text.policy.load_policy`` reads),
    the settings and tokenizer it was saved with, and its kept ``policy.json`` (``{}`` when given the bare
    folder)."""

    folder: Path
    settings: dict[str, Any]
    tokenizer: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _attempt_number(folder: Path) -> int:
    m = re.search(r"(\d+)$", folder.name)
    return int(m.group(1)) if m else -1


def _locate(p: Path) -> tuple[Path, dict[str, Any]] | None:
    """(the text policy folder, its policy.json or {}) under ``p``, or None."""
    if (p / TEXT_POLICY_JSON).is_file():
        info = _read(p.parent / POLICY_JSON) or {}
        return p, (info if info.get("file") == p.name else {})
    if (p / POLICY_JSON).is_file():
        info = _read(p / POLICY_JSON) or {}
        inner = p / str(info.get("file", ""))
        if info.get("file") and (inner / TEXT_POLICY_JSON).is_file():
            return inner, info
        return None
    if (p / "policy" / "final").is_dir():
        return _locate(p / "policy" / "final")
    attempts = sorted((a for a in p.iterdir() if (a / "policy" / "final").is_dir()), key=_attempt_number)
    for a in reversed(attempts):  # the latest attempt that kept a final policy
        found = _locate(a / "policy" / "final")
        if found is not None:
            return found
    return None


def find_world_model(path: Any, where: str) -> SavedWorldModel:
    """The saved text world model at ``path`` (see the module docstring); ValueError, one line naming
    ``where`` (e.g. ``verifier.world_model``) and the fix, for a path that does not exist or holds none, or
    holds another algorithm's policy."""
    p = Path(str(path)).expanduser()
    fix = f"give the folder of a {WORLD_MODEL_ALGO} run (or its policy/final folder), or remove {where}"
    if not p.exists():
        raise ValueError(f"{where}: no saved world model at {p} (no such folder); {fix}")
    if not p.is_dir():
        raise ValueError(f"{where}: {p} is a file; {fix}")
    found = _locate(p)
    meta = _read(found[0] / TEXT_POLICY_JSON) if found else None
    if found is None or meta is None or not isinstance(meta.get("settings"), dict):
        raise ValueError(f"{where}: {p} holds no saved text world model (no {POLICY_JSON} of a kept final "
                         f"policy, nor {TEXT_POLICY_JSON}); {fix}")  # fmt: skip
    folder, info = found
    settings, algo = meta["settings"], info.get("algo")
    if (
        (algo is not None and algo != WORLD_MODEL_ALGO)
        or settings.get("outcome") not in OUTCOMES
        or ("policy_weight" not in settings)
    ):
        what = f"{algo}'s" if algo else "a text agent's"
        raise ValueError(f"{where}: {p} holds {what} policy, not a {WORLD_MODEL_ALGO}'s (its settings have no "
                         f"world model outcome); {fix}")  # fmt: skip
    return SavedWorldModel(folder, settings, dict(meta.get("tokenizer") or {}), info)


def env_problem(saved: SavedWorldModel, env_id: str, where: str) -> str | None:
    """A one-line problem when ``saved`` was kept by a run on another env than ``env_id`` (the task of the
    run that would load it), else None (also when its ``policy.json`` is not there to say)."""
    theirs = saved.info.get("env_id")
    if theirs and env_id and theirs != env_id:
        return (f"{where}: the world model at {saved.folder} was trained on {theirs}, and this run's task is "
                f"{env_id}; give a {WORLD_MODEL_ALGO} run of {env_id} (trained on its dataset)")  # fmt: skip
    return None
