"""LMRL-Gym's JSONL datasets read into rlbench's ``TextEpisodes``.

LMRL-Gym's data files come in three layouts (its training scripts' ``map_data_item`` / ``chains_from_item``);
each line is detected by its keys:

- ``{"text_history": [obs, action, obs, action, ...], "rewards": [...], "dones": [...]}`` (Maze): the texts
  alternate observation / action, ``rewards[i]`` and ``dones[i]`` belong to the action at index i (odd).
- ``{"sequence": [[text, is_action], ...], "reward": [...], "done": bool}`` (Wordle, Twenty Questions, Guess
  My City, Car Dealer, Text-Nav): ``reward[i - 1]`` belongs to item i (``reward=[0.0] + item["reward"]``);
  an action's observation is every text before it (the history, as the policy conditions on it).
- ``{"from_state": fen, "action": san, "reward": r, "done": d}`` (Chess, Endgames): one move a line;
  consecutive lines form an episode until ``done``.

A line that is not JSON or matches none of these is a one-line error naming the file and line number.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ImportInvalid
from .episodes import TextEpisodes

__all__ = ["load_lmrl_jsonl"]


def _bad(path: Path, lineno: int, what: str) -> ImportInvalid:
    return ImportInvalid(f"{path}:{lineno}: {what}; LMRL-Gym lines hold text_history/rewards/dones, "
                         "sequence/reward/done, or from_state/action/reward/done")  # fmt: skip


def _text_history(path: Path, lineno: int, obj: dict) -> list[dict[str, Any]]:
    texts, rewards, dones = obj["text_history"], obj.get("rewards"), obj.get("dones")
    if not (isinstance(texts, list) and isinstance(rewards, list) and len(rewards) == len(texts)):
        raise _bad(path, lineno, "text_history needs rewards of the same length")
    dones = dones if isinstance(dones, list) and len(dones) == len(texts) else [False] * len(texts)
    turns = []
    for i in range(1, len(texts), 2):
        turns.append({
            "observation": "".join(str(t) for t in texts[:i]).rstrip("\n") if i > 1 else str(texts[0]).rstrip("\n"),
            "action": str(texts[i]).strip(),
            "reward": float(rewards[i]),
            "done": bool(dones[i]),
        })  # fmt: skip
    if turns:
        turns[-1]["done"] = True
    return turns


def _sequence(path: Path, lineno: int, obj: dict) -> list[dict[str, Any]]:
    seq, rewards = obj["sequence"], obj.get("reward")
    if not isinstance(seq, list) or not all(isinstance(s, list | tuple) and len(s) == 2 for s in seq):
        raise _bad(path, lineno, "sequence must be a list of [text, is_action] pairs")
    if not isinstance(rewards, list) or len(rewards) != len(seq) - 1:
        raise _bad(path, lineno, f"reward must list one number per item after the first ({len(seq) - 1})")
    full = [0.0, *rewards]
    turns = []
    for i, (text, is_action) in enumerate(seq):
        if is_action:
            history = "".join(str(t) for t, _ in seq[:i])
            turns.append({"observation": history.rstrip("\n"), "action": str(text).strip(),
                          "reward": float(full[i]), "done": False})  # fmt: skip
    if turns:
        turns[-1]["done"] = bool(obj.get("done", True))
    return turns


def load_lmrl_jsonl(path: str | Path, env: str) -> TextEpisodes:
    """Read an LMRL-Gym JSONL file (any of its three layouts) as ``TextEpisodes`` of ``env``."""
    path = Path(path)
    episodes: list[list[dict[str, Any]]] = []
    pending: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ImportInvalid(f"{path}: cannot read it ({e})") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ImportInvalid(
                f"{path}:{lineno}: not a JSON object ({e.msg}); fix or remove that line"
            ) from None
        if not isinstance(obj, dict):
            raise _bad(path, lineno, "not a JSON object")
        try:
            if "text_history" in obj:
                turns = _text_history(path, lineno, obj)
            elif "sequence" in obj:
                turns = _sequence(path, lineno, obj)
            elif "from_state" in obj and "action" in obj:
                pending.append({"observation": str(obj["from_state"]), "action": str(obj["action"]).strip(),
                                "reward": float(obj.get("reward", 0.0)), "done": bool(obj.get("done", False))})  # fmt: skip
                if pending[-1]["done"]:
                    episodes.append(pending)
                    pending = []
                continue
            else:
                raise _bad(path, lineno, f"unknown layout (keys: {', '.join(sorted(obj)) or 'none'})")
        except (TypeError, ValueError) as e:
            raise _bad(path, lineno, f"a reward or text of the wrong type ({e})") from None
        if turns:
            episodes.append(turns)
    if pending:
        pending[-1]["done"] = True
        episodes.append(pending)
    if not episodes:
        raise ImportInvalid(f"{path}: holds no episodes")
    return TextEpisodes(episodes, env=env, level="lmrl", meta={"path": str(path), "source": "LMRL-Gym"})
