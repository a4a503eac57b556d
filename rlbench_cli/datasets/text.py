"""Offline datasets of the text envs: episodes of (observation, action, reward, done) turns, as JSONL.

``TextEpisodes`` is a list of episodes, each a list of turns ``{"observation": str, "action": str, "reward":
float, "done": bool}``, plus the env id it comes from and its level. The last turn of an episode that a time
limit ended (not a terminal state) also has ``"truncated": true``. On disk: JSONL, one episode per line,
``{"env": ..., "level": ..., "turns": [...]}``. This module reads them; ``datagen.text`` builds rlbench's own
(``<EnvName>-<level>``, ``datasets.names``: ``MazeFO-v0-mixed`` is ``MazeFO-v0-mixed.jsonl``, evaluated in
``rlbench/MazeFO-v0``).

LMRL-Gym's own JSONL files are read by ``load_lmrl_jsonl`` (see there) into the same ``TextEpisodes``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ImportInvalid
from .episodes import TextEpisodes

__all__ = [
    "HOLDOUT_FRACTION",
    "held_out",
    "held_out_ends",
    "held_out_turns",
    "load_text_dataset",
    "episode_returns",
]

HOLDOUT_FRACTION = 0.1  # a world model's held-out episodes (its EM), the last of a dataset's (algos.text)


def held_out(n_episodes: int, fraction: float) -> int:
    """How many of a dataset's ``n_episodes`` (its last ones) are held out at ``fraction``: none for 0, at least
    one (of two or more) otherwise."""
    if fraction <= 0 or n_episodes < 2:
        return 0
    return min(n_episodes - 1, max(1, int(round(fraction * n_episodes))))


def held_out_turns(episodes: Any, n: int) -> list[tuple[str, str, str]]:
    """(observation, action, next observation) of at most ``n`` turns of ``episodes`` that have a next
    observation (an episode's last turn has none), spread evenly over all of them in order (every k-th, the
    first and the last included), so that every episode is sampled as often as it is long. A world model's EM
    is measured on these: the first ``n`` turns would be those of a few episodes (in a maze's mixed data mostly
    one random walk of 100 turns), the same cells again and again."""
    turns = [(str(t["observation"]), str(t["action"]), str(ep[i + 1]["observation"]))
             for ep in episodes for i, t in enumerate(ep) if i + 1 < len(ep)]  # fmt: skip
    if n <= 0:
        return []
    if len(turns) <= n:
        return turns
    if n == 1:
        return turns[:1]
    step = (len(turns) - 1) / (n - 1)  # at least 1: the picks are distinct
    return [turns[int(round(k * step))] for k in range(n)]


def held_out_ends(episodes: Any, n: int) -> list[dict[str, Any]]:
    """The last turns of at most ``n`` of ``episodes`` (the first ones) that ended them: done, and not a time
    limit's cut (``truncated``). The turns that carry a goal's reward, which ``held_out_turns`` leaves out."""
    ends = [ep[-1] for ep in episodes if len(ep) and bool(ep[-1].get("done")) and not ep[-1].get("truncated")]
    return ends[: max(0, n)]


def episode_returns(data: TextEpisodes) -> list[float]:
    return [float(sum(t["reward"] for t in ep)) for ep in data]


def _turns(path: Path, lineno: int, raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise ImportInvalid(f"{path}:{lineno}: 'turns' must be a non-empty list of turns")
    out = []
    for t in raw:
        try:
            out.append(
                {
                    "observation": str(t["observation"]),
                    "action": str(t["action"]),
                    "reward": float(t["reward"]),
                    "done": bool(t["done"]),
                }
            )
            if t.get("truncated"):
                out[-1]["truncated"] = True
        except (KeyError, TypeError, ValueError) as e:
            raise ImportInvalid(
                f"{path}:{lineno}: each turn needs observation, action, reward (a number) and done ({e})"
            ) from None
    return out


def _lines(path: Path) -> Any:
    try:
        f = path.open(encoding="utf-8")
    except OSError as e:
        raise ImportInvalid(f"{path}: cannot read it ({e.strerror})") from None
    with f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise ImportInvalid(
                    f"{path}:{lineno}: not a JSON object ({e.msg}); fix or remove that line"
                ) from None


def load_text_dataset(path: str | Path, env: str | None = None) -> TextEpisodes:
    """Read a text dataset: rlbench's JSONL (``{"env", "level", "turns"}`` a line) or, given ``env`` (or when
    the lines are not rlbench's), one of LMRL-Gym's JSONL formats for that task (``load_lmrl_jsonl``)."""
    path = Path(path)
    if not path.exists():
        raise ImportInvalid(f"{path}: no such dataset file; check the path")
    first = next(_lines(path), None)
    if first is None:
        raise ImportInvalid(f"{path}: the file holds no episodes")
    if not (isinstance(first[1], dict) and "turns" in first[1]):
        if env is None:
            raise ImportInvalid(
                f"{path}: lines are not rlbench's {{env, level, turns}}; name the env (env: rlbench/<Task>-v0) "
                "to read it as LMRL-Gym's format for that task"
            )
        from .lmrl import load_lmrl_jsonl

        return load_lmrl_jsonl(path, env)
    episodes, env_id, level = [], env, ""
    for lineno, obj in _lines(path):
        if not isinstance(obj, dict) or "turns" not in obj:
            raise ImportInvalid(f'{path}:{lineno}: expected {{"env", "level", "turns"}} on every line')
        env_id = env_id or obj.get("env")
        level = level or obj.get("level", "")
        episodes.append(_turns(path, lineno, obj["turns"]))
    return TextEpisodes(episodes, env=env_id or "", level=level, meta={"path": str(path)})
