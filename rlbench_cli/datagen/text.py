"""Build the offline datasets of the text envs: episodes of their scripted policies, as JSONL.

Generated datasets are named ``<EnvName>-<level>`` (``datasets.names``): ``MazeFO-v0-mixed`` is evaluated in
``rlbench/MazeFO-v0``, lives in the datasets folder as ``MazeFO-v0-mixed.jsonl``. Levels: ``optimal``,
``noisy``, ``random`` (every episode by the scripted policy of that quality) and ``mixed`` (each episode by
one of the three, drawn uniformly). The layout and its reader: ``datasets.text``. As a family of
``datagen``'s dispatch: ``claims`` a dataset named ``<EnvName>-<level>`` of a text env, ``ensure`` builds it,
``build_levels`` is ``rlbench datasets build rlbench/<Task>-v0``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from ..datasets.episodes import TextEpisodes
from ..datasets.names import TEXT_LEVELS, datasets_root, parse_generated_name, text_dataset_name
from ..datasets.text import episode_returns
from ..envs.families import is_text_env
from ..errors import UsageError
from .lock import building

__all__ = [
    "claims",
    "ensure",
    "builds_env",
    "build_levels",
    "build_text_dataset",
    "save_text_dataset",
    "DEFAULT_EPISODES",
    "text_dataset_path",
    "ensure_text_dataset",
    "check_budgets",
]

# episodes of a generated text dataset when no size is given: cheap envs many, Stockfish-played ones fewer
DEFAULT_EPISODES = {"rlbench/Chess-v0": 50, "rlbench/Endgames-v0": 200}
_DEFAULT = 1_000


def _episode(env: Any, policy: Any, seed: int) -> list[dict[str, Any]]:
    obs, info = env.reset(seed=seed)
    turns = []
    while True:
        action = policy(obs, info)
        nxt, reward, terminated, truncated, info = env.step(action)
        done = bool(terminated or truncated)
        turns.append({"observation": obs, "action": action, "reward": float(reward), "done": done})
        if truncated and not terminated:  # the time limit's end: no terminal state (ilql bootstraps nothing)
            turns[-1]["truncated"] = True
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
    head = {"env": data.env, "level": data.level}
    kwargs = (data.meta or {}).get("env_kwargs")
    if (
        kwargs
    ):  # the env's kwargs it was played with (Wordle's word list, Endgames' engine): ``check`` reads them
        head["env_kwargs"] = kwargs
    with tmp.open("w", encoding="utf-8") as f:
        for ep in data:
            f.write(json.dumps({**head, "turns": ep}) + "\n")
    tmp.replace(path)
    return path


def text_dataset_path(name: str, root: Path | None = None) -> Path:
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
    note = progress or (lambda msg: None)
    with building(path, lambda pid: note(f"{path}: another process (pid {pid}) is building it; waiting")):
        return _ensure(path, env_id, level, n_episodes, seed, env_kwargs, force, progress)


def _ensure(path: Path, env_id: str, level: str, n_episodes: int | None, seed: int,
            env_kwargs: dict[str, Any] | None, force: bool, progress: Any) -> Path:  # fmt: skip
    """``ensure_text_dataset``'s work, holding the dataset's build lock (``datagen.lock``)."""
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


# -- the family datagen's dispatch asks ------------------------------------------------------------------


def claims(ds: Any) -> bool:
    """Whether ``ds`` (a ``spec.DatasetSpec`` without a path) is this family's: ``<EnvName>-<level>`` of a
    text env."""
    parsed = parse_generated_name(ds.name)
    return parsed is not None and is_text_env(parsed[0])


def ensure(ds: Any, *, root: Path | None, seed: int, device: str, progress: Any) -> Path:
    """Build ``ds`` unless it exists (``ensure_text_dataset``, default size, quietly); return its path."""
    env_id, level = parse_generated_name(ds.name) or ("", "")
    return ensure_text_dataset(env_id, level, seed=seed, root=root, env_kwargs=ds.kwargs)


def check(ds: Any, path: Path) -> tuple[str, str] | None:
    """None if the built ``ds`` at ``path`` was played with the env kwargs its suite gives, else (its field,
    what is wrong): a dataset's file is named by env and level only, so one built for other kwargs (another
    suite's word list, say) must not be trained on silently."""
    try:
        with path.open(encoding="utf-8") as f:
            first = json.loads(f.readline() or "{}")
    except (OSError, ValueError):
        return None  # unreadable: loading it says what is wrong, naming the file
    built = first.get("env_kwargs") or {} if isinstance(first, dict) else {}
    wanted = dict(ds.kwargs or {})
    if built == wanted:
        return None
    return "kwargs", (f"{path} was played with env kwargs {json.dumps(built, sort_keys=True)}, this suite asks "
                      f"for {json.dumps(wanted, sort_keys=True)}; keep both with --datasets OTHER_FOLDER, or "
                      f"delete {path.name} there to rebuild it")  # fmt: skip


def _budgets(suite: Any) -> list[tuple[int, str, int, float]]:
    """(algorithm entry index, field, train_episodes, held-out fraction) of each entry's real-data budget (its
    param or each swept value; a value that is not a whole number is left to the params check)."""
    from ..datasets.text import HOLDOUT_FRACTION

    out = []
    for i, a in enumerate(suite.algorithms):
        label = a.label or a.name
        imagination = a.params.get("imagination")
        frac = HOLDOUT_FRACTION if isinstance(imagination, dict) else 0.0
        if isinstance(imagination, dict) and isinstance(imagination.get("holdout_fraction"), (int, float)):
            frac = float(imagination["holdout_fraction"])
        swept = f"{label}.train_episodes"
        values = suite.sweep.get(swept) or [a.params.get("train_episodes", 0)]
        field = f"sweep.{swept}" if swept in suite.sweep else f"algorithms[{i}].params.train_episodes"
        for n in values:
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                out.append((i, field, n, frac))
    return out


def check_budgets(suite: Any, paths: dict[str, Path], source: str) -> None:
    """Refuse (SuiteInvalid, naming the field) a ``train_episodes`` larger than the episodes a text dataset its
    entry runs on has to train on (those not held out for the world model's EM); checked once the datasets
    exist, before any run starts."""
    from ..datasets.text import held_out, load_text_dataset
    from ..errors import SuiteInvalid

    budgets = _budgets(suite)
    counts: dict[str, int] = {}
    for ds in suite.datasets:
        if not budgets or not is_text_env(ds.env or "") or not paths[ds.label].exists():
            continue
        for i, field, n, frac in budgets:
            if not suite.algorithms[i].runs_on(ds):
                continue
            if ds.label not in counts:
                counts[ds.label] = len(load_text_dataset(paths[ds.label], ds.env))
            total = counts[ds.label]
            pool = total - held_out(total, frac)
            if n > pool:
                held = (
                    f" ({total} less {total - pool} held out for the world model's EM)"
                    if pool < total
                    else ""
                )
                raise SuiteInvalid(f"{source}: field '{field}': {n} real episodes, and dataset {ds.name!r} has "
                                   f"{pool} to train on{held}; use 1 to {pool}, or 0 for all")  # fmt: skip


def builds_env(env_id: str) -> bool:
    """Whether ``rlbench datasets build ENV`` builds this family's levels of ``env_id``: a text env."""
    return is_text_env(env_id)


def build_levels(
    env_id: str,
    levels: list[str],
    *,
    size: int | None = None,
    seed: int = 0,
    root: Path | None = None,
    env_kwargs: dict[str, Any] | None = None,
    force: bool = False,
    progress: Any = None,
    **_: Any,
) -> list[Path]:
    """``rlbench datasets build rlbench/<Task>-v0 --level ...``: ``size`` episodes of each level, in order
    (a behaviour policy's options do not apply: the policies are scripted)."""
    from ..envs import known_env

    problem = known_env(env_id)
    if problem:
        raise UsageError(problem)
    bad = [lv for lv in levels if lv not in TEXT_LEVELS]
    if bad:
        raise UsageError(f"--level {bad[0]!r}: text datasets have levels {', '.join(TEXT_LEVELS)}")
    return [
        ensure_text_dataset(
            env_id,
            lv,
            n_episodes=size,
            seed=seed,
            root=root,
            env_kwargs=env_kwargs,
            force=force,
            progress=progress,
        )  # fmt: skip
        for lv in dict.fromkeys(levels)
    ]
