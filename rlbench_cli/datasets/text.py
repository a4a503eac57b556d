"""Offline datasets of the text envs: episodes of (observation, action, reward, done) turns, as JSONL.

``TextEpisodes`` is a list of episodes, each a list of turns ``{"observation": str, "action": str, "reward":
float, "done": bool}``, plus the env id it comes from and its level. On disk: JSONL, one episode per line,
``{"env": ..., "level": ..., "turns": [...]}``.

Generated datasets are named ``<EnvName>-<level>`` with the env's name without its ``rlbench/`` prefix
(dataset names hold no '/'): ``MazeFO-v0-mixed`` is evaluated in ``rlbench/MazeFO-v0``, lives in the datasets
folder as ``MazeFO-v0-mixed.jsonl``. Levels: ``optimal``, ``noisy``, ``random`` (every episode by the
scripted policy of that quality) and ``mixed`` (each episode by one of the three, drawn uniformly).

LMRL-Gym's own JSONL files are read by ``load_lmrl_jsonl`` (see there) into the same ``TextEpisodes``.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from ..envs.families import is_text_env
from ..envs.text import short_name
from ..errors import ImportInvalid, UsageError

__all__ = [
    "TEXT_LEVELS",
    "TextEpisodes",
    "build_text_dataset",
    "save_text_dataset",
    "load_text_dataset",
    "parse_text_name",
    "text_dataset_name",
    "episode_returns",
    "DEFAULT_EPISODES",
    "text_dataset_path",
    "ensure_text_dataset",
]

# episodes of a generated text dataset when no size is given: cheap envs many, Stockfish-played ones fewer
DEFAULT_EPISODES = {"rlbench/Chess-v0": 50, "rlbench/Endgames-v0": 200}
_DEFAULT = 1_000

TEXT_LEVELS = ("optimal", "noisy", "mixed", "random")
_NAME = re.compile(r"^(?P<env>[A-Za-z0-9_.]+-v\d+)-(?P<level>optimal|noisy|mixed|random)$")


class TextEpisodes(list):
    """A list of episodes (each a list of turn dicts) with ``env`` (gymnasium id), ``level`` and ``meta``."""

    def __init__(self, episodes: Any = (), env: str = "", level: str = "", meta: dict | None = None) -> None:
        super().__init__(episodes)
        self.env, self.level, self.meta = env, level, dict(meta or {})

    @property
    def n_turns(self) -> int:
        return sum(len(e) for e in self)


def episode_returns(data: TextEpisodes) -> list[float]:
    return [float(sum(t["reward"] for t in ep)) for ep in data]


def text_dataset_name(env_id: str, level: str) -> str:
    return f"{short_name(env_id)}-{level}"


def parse_text_name(name: str) -> tuple[str, str] | None:
    """``MazeFO-v0-mixed`` -> (``rlbench/MazeFO-v0``, ``mixed``); None if not a generated text dataset name."""
    m = _NAME.match(name)
    if not m or not is_text_env(f"rlbench/{m.group('env')}"):
        return None
    return f"rlbench/{m.group('env')}", m.group("level")


def _episode(env: Any, policy: Any, seed: int) -> list[dict[str, Any]]:
    obs, info = env.reset(seed=seed)
    turns = []
    while True:
        action = policy(obs, info)
        nxt, reward, terminated, truncated, info = env.step(action)
        done = bool(terminated or truncated)
        turns.append({"observation": obs, "action": action, "reward": float(reward), "done": done})
        if done:
            return turns
        obs = nxt


def build_text_dataset(
    env_id: str, level: str, n_episodes: int, seed: int = 0, env_kwargs: dict[str, Any] | None = None
) -> TextEpisodes:
    """``n_episodes`` episodes of ``env_id`` played by the scripted policies of ``level``, seeded."""
    from ..envs import make_env
    from ..envs.text.policies import QUALITIES, scripted_policy

    if level not in TEXT_LEVELS:
        raise UsageError(f"--level {level!r}: text datasets have levels {', '.join(TEXT_LEVELS)}")
    rng = random.Random(seed)
    env = make_env(env_id, env_kwargs)
    policies = {q: scripted_policy(env_id, q, seed=seed * 1_000 + i) for i, q in enumerate(QUALITIES)}
    episodes, qualities = [], []
    try:
        for i in range(n_episodes):
            quality = rng.choice(QUALITIES) if level == "mixed" else level
            qualities.append(quality)
            episodes.append(_episode(env, policies[quality], seed=seed * 1_000_003 + i))
    finally:
        env.close()
        for p in policies.values():
            getattr(p, "close", lambda: None)()
    meta = {"seed": seed, "env_kwargs": dict(env_kwargs or {}), "qualities": qualities}
    return TextEpisodes(episodes, env=env_id, level=level, meta=meta)


def save_text_dataset(data: TextEpisodes, path: str | Path) -> Path:
    """Write ``data`` as JSONL (one episode a line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for ep in data:
            f.write(json.dumps({"env": data.env, "level": data.level, "turns": ep}) + "\n")
    tmp.replace(path)
    return path


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


def text_dataset_path(name: str, root: Path | None = None) -> Path:
    from .data import datasets_root

    return Path(root or datasets_root()) / f"{name}.jsonl"


def ensure_text_dataset(
    env_id: str,
    level: str,
    *,
    n_episodes: int | None = None,
    seed: int = 0,
    root: Path | None = None,
    env_kwargs: dict[str, Any] | None = None,
    force: bool = False,
    progress: Any = None,
) -> Path:
    """Build ``<root>/<EnvName>-<level>.jsonl`` unless it exists (or ``force``); return its path."""
    path = text_dataset_path(text_dataset_name(env_id, level), root)
    if path.exists() and not force:
        if progress:
            progress(f"{path}: exists, kept (--force rebuilds it)")
        return path
    n = n_episodes or DEFAULT_EPISODES.get(env_id, _DEFAULT)
    data = build_text_dataset(env_id, level, n, seed=seed, env_kwargs=env_kwargs)
    save_text_dataset(data, path)
    if progress:
        rets = episode_returns(data)
        progress(
            f"{path}: {len(data)} episodes, {data.n_turns} turns, mean return {sum(rets) / len(rets):.3f}"
        )
    return path
