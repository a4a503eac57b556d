"""Read TensorBoard event files as runs: one run per folder holding ``events.out.tfevents.*`` files.

CleanRL writes ``runs/{env_id}__{exp_name}__{seed}__{int(time.time())}/events.out.tfevents...``, so the
default pattern ``{env}__{algo}__{seed}__{time}`` reads algorithm (the exp_name, e.g. ``ppo``), env and seed
from the folder name; ``--pattern`` reads other layouts (see ``names``), e.g. ``{env}/{algo}_{seed}`` for
rl-baselines3-zoo's ``tensorboard/CartPole-v1/PPO_1``.

Every scalar becomes a metric row at its step, with its wall time. Tag names are kept as they are, except
these, renamed to rlbench's names for the same thing:

    charts/episodic_return   -> train/episode_return     (CleanRL)
    charts/episodic_length   -> train/episode_length     (CleanRL)
    eval/mean_reward         -> eval/return              (Stable-Baselines3's EvalCallback)
    eval/mean_ep_length      -> eval/episode_length      (Stable-Baselines3's EvalCallback)

The run's config is CleanRL's ``hyperparameters`` text summary (its ``|param|value|`` markdown table), values
read as JSON where they are (numbers, ``True``/``False``), else kept as text; ``{}`` when there is none.

Files are read whole, with their record checksums: a file cut mid-record is an error naming it, not a run
with its last records missing. Nothing is decoded beyond scalars (``tbevents``); nothing is executed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ..errors import ImportInvalid
from ..tbevents import EventFileError, read_complete
from .common import ImportedRun
from .names import CLEANRL_PATTERN, RunNamePattern, parse_pattern

__all__ = ["RENAMES", "find_run_folders", "hyperparameters", "read_run", "read"]

RENAMES = {
    "charts/episodic_return": "train/episode_return",
    "charts/episodic_length": "train/episode_length",
    "eval/mean_reward": "eval/return",
    "eval/mean_ep_length": "eval/episode_length",
}
EVENTS = "events.out.tfevents."


def _event_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(EVENTS) and p.is_file())


def find_run_folders(path: Path) -> list[Path]:
    """``path`` when it holds event files, else every folder below it that does (sorted)."""
    path = Path(path)
    if not path.exists():
        raise ImportInvalid(
            f"{path}: no such folder; pass a folder of TensorBoard runs, e.g. CleanRL's runs/"
        )
    if not path.is_dir():
        raise ImportInvalid(f"{path}: a file, not a folder; pass the folder that holds the run folders")
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if any(f.startswith(EVENTS) for f in filenames):
            found.append(Path(dirpath))
    if not found:
        raise ImportInvalid(
            f"{path}: no TensorBoard event files ({EVENTS}*) in it or below it; pass the folder your runs "
            "log to, e.g. CleanRL's runs/"
        )
    return sorted(found)


def _name_of(folder: Path, root: Path, levels: int) -> str:
    """The last ``levels`` parts of ``folder``'s path, ``/``-separated (its own name for one level)."""
    parts = folder.resolve().parts
    return "/".join(parts[-levels:]) if levels <= len(parts) else "/".join(parts)


def read_run(folder: Path, root: Path, pattern: RunNamePattern) -> ImportedRun:
    """One run folder: its name through ``pattern``, every scalar of its event files as a metric."""
    name = _name_of(folder, root, pattern.levels)
    parts = pattern.match(name)
    if parts is None:
        raise ImportInvalid(
            f"{folder}: the folder name {name!r} does not fit the pattern {pattern.text!r}; "
            "pass --pattern to say how your run folders are named, e.g. --pattern '{algo}_{env}_{seed}'"
        )
    series: dict[str, tuple[list[int], list[float], list[float]]] = {}
    texts: list[tuple[str, str]] = []
    for f in _event_files(folder):
        try:
            scalars = read_complete(f, texts)
        except EventFileError as e:
            raise ImportInvalid(f"{f}: {e}") from None
        except OSError as e:
            raise ImportInvalid(f"{f}: cannot be read ({e.strerror or e})") from None
        for step, tag, value, wall in scalars:
            steps, values, walls = series.setdefault(RENAMES.get(tag, tag), ([], [], []))
            steps.append(int(step))
            values.append(float(value))
            walls.append(float(wall))
    if not series:
        raise ImportInvalid(f"{folder}: its event files hold no scalars (nothing was logged with add_scalar)")
    return ImportedRun(
        key=name,
        algo=str(parts["algo"]),
        env=str(parts["env"]),
        seed=int(parts["seed"]),
        config=hyperparameters(texts),
        metrics={k: (s, v) for k, (s, v, _) in series.items()},
        wall_times={k: w for k, (_, _, w) in series.items()},
        source=str(folder.resolve()),
    )


def hyperparameters(texts: list[tuple[str, str]]) -> dict[str, Any]:
    """CleanRL's ``hyperparameters`` text summary (``|param|value|`` rows) as a config dict."""
    config: dict[str, Any] = {}
    for tag, text in texts:
        if tag.split("/")[0] != "hyperparameters":
            continue
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 2 or not cells[0] or set(cells[0]) <= {"-", ":"} or cells == ["param", "value"]:
                continue
            key, value = cells
            literal = {"True": True, "False": False, "None": None}.get(value, _MISSING)
            if literal is _MISSING:
                try:
                    literal = json.loads(value)
                except json.JSONDecodeError:
                    literal = value
            if isinstance(literal, float) and not math.isfinite(literal):
                literal = value
            config[key] = literal
    return config


_MISSING = object()


def read(path: Path, pattern: str | None = None, **_: object) -> list[ImportedRun]:
    """Every run under ``path``; ``pattern`` reads run folder names (default CleanRL's, see module doc)."""
    compiled = parse_pattern(pattern or CLEANRL_PATTERN)
    root = Path(path)
    return [read_run(folder, root, compiled) for folder in find_run_folders(root)]
