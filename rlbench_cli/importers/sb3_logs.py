"""Read Stable-Baselines3 / rl-baselines3-zoo logs: ``ALGO/ENV_N/`` run folders.

The zoo writes ``logs/<algo>/<env>_<N>/`` (N counts experiments, from 1), holding ``<rank>.monitor.csv``
(one per training env, SB3's ``Monitor``), ``evaluations.npz`` (SB3's ``EvalCallback``) and
``<env>/config.yml`` + ``<env>/args.yml`` (hyperparameters and command-line arguments). A run folder is any
folder holding a monitor file (``monitor.csv`` or ``*.monitor.csv``) or ``evaluations.npz``; its algorithm is
the name of the folder above it, env and N come from its name, the seed is ``args.yml``'s ``seed`` when there
is one, else N. The config is ``config.yml``'s hyperparameters.

Metrics:

    monitor files      -> train/episode_return, train/episode_length   at the cumulative time step at the end of
                          each episode (episodes of every rank in time order, as SB3's ``load_results`` and
                          ``ts2xy(..., "timesteps")`` do), wall time t_start + t
    evaluations.npz    -> eval/return (mean over the evaluation episodes), eval/return_std, eval/episode_length
                          (mean) at each evaluation's time step

Nothing is executed: ``evaluations.npz`` is read as a zip of ``.npy`` arrays by numpy's ``read_array``, which
refuses pickled (object) arrays; the zoo's YAML (which dumps
OrderedDicts with Python tags) is read by a safe loader that builds only mappings, lists and scalars.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from ..errors import ImportInvalid
from .common import ImportedRun

__all__ = ["find_run_folders", "read_monitor", "read_evaluations", "read_run", "read", "LAYOUT"]

LAYOUT = "ALGO/ENV_N/ (rl-baselines3-zoo's logs/ppo/CartPole-v1_1/)"
EVALUATIONS = "evaluations.npz"
_RUN_NAME = re.compile(r"(?P<env>.+)_(?P<n>[0-9]+)")


def _is_monitor(name: str) -> bool:
    return name == "monitor.csv" or name.endswith(".monitor.csv")


def _is_run_folder(filenames: list[str]) -> bool:
    return EVALUATIONS in filenames or any(_is_monitor(f) for f in filenames)


def find_run_folders(path: Path) -> list[Path]:
    """``path`` when it is a run folder, else every run folder below it (sorted, not below run folders)."""
    path = Path(path)
    if not path.exists():
        raise ImportInvalid(
            f"{path}: no such folder; pass the zoo's logs/ folder or one of its {LAYOUT} folders"
        )
    if not path.is_dir():
        raise ImportInvalid(
            f"{path}: a file, not a folder; pass the zoo's logs/ folder or an ALGO/ENV_N/ folder"
        )
    if _is_run_folder([p.name for p in path.iterdir()]):
        return [path]
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if _is_run_folder(filenames):
            found.append(Path(dirpath))
            dirnames[:] = []
    if not found:
        raise ImportInvalid(
            f"{path}: no Stable-Baselines3 runs in it (a run folder holds monitor.csv files or {EVALUATIONS}, "
            f"laid out as {LAYOUT})"
        )
    return sorted(found)


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ImportInvalid(f"{path}: not a text file (not UTF-8)") from None
    except OSError as e:
        raise ImportInvalid(f"{path}: cannot be read ({e.strerror or e})") from None


def read_monitor(path: Path) -> tuple[float, list[tuple[float, float, float]]]:
    """One monitor file: ``(t_start, [(return, length, t), ...])``.

    The file is ``#{"t_start": ..., "env_id": ...}``, then the header ``r,l,t`` (maybe with more columns, from
    ``info_keywords``), then one line per episode.
    """
    lines = _text(path).splitlines()
    if not lines:
        raise ImportInvalid(f'{path}: empty file; a monitor file starts with #{{"t_start": ...}} and r,l,t')
    t_start = 0.0
    at = 0
    if lines[0].startswith("#"):
        try:
            meta = json.loads(lines[0][1:])
            t_start = float(meta.get("t_start", 0.0)) if isinstance(meta, dict) else 0.0
        except (json.JSONDecodeError, TypeError, ValueError):
            raise ImportInvalid(f'{path}: line 1: not SB3\'s #{{"t_start": ...}} JSON comment') from None
        at = 1
    if at >= len(lines):
        raise ImportInvalid(f"{path}: no header line; a monitor file has r,l,t after its first line")
    header = [h.strip() for h in lines[at].split(",")]
    missing = [c for c in ("r", "l", "t") if c not in header]
    if missing:
        raise ImportInvalid(
            f"{path}: line {at + 1}: header {_clip(lines[at])!r} has no column {', '.join(missing)}; "
            "not a Stable-Baselines3 monitor file (its header is r,l,t)"
        )
    ir, il, it = header.index("r"), header.index("l"), header.index("t")
    episodes = []
    for number, line in enumerate(lines[at + 1 :], start=at + 2):
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != len(header):
            raise ImportInvalid(
                f"{path}: line {number}: {len(fields)} field(s), the header has {len(header)} "
                f"(a truncated or damaged line?): {_clip(line)!r}"
            )
        try:
            r, ln, t = float(fields[ir]), float(fields[il]), float(fields[it])
        except ValueError:
            raise ImportInvalid(
                f"{path}: line {number}: r, l or t is not a number: {_clip(line)!r}"
            ) from None
        if not (ln >= 0 and ln == int(ln)):
            raise ImportInvalid(f"{path}: line {number}: episode length {fields[il]!r} is not a whole number")
        episodes.append((r, ln, t))
    return t_start, episodes


def read_evaluations(path: Path) -> dict[str, tuple[list[int], list[float]]]:
    """``evaluations.npz``: timesteps (n,), results (n, episodes), ep_lengths (n, episodes) -> metrics.

    results and ep_lengths may have trailing axes of length 1: (n, episodes, 1) reads as (n, episodes).
    """
    import zipfile

    import numpy as np
    from numpy.lib import format as npy

    try:  # an .npz is a zip of .npy files; read_array refuses object arrays (no pickles) by default
        with zipfile.ZipFile(path) as z:
            arrays = {}
            for name in z.namelist():
                if name.endswith(".npy"):
                    with z.open(name) as fh:
                        arrays[name[:-4]] = npy.read_array(fh)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ImportInvalid(
            f"{path}: not a readable .npz file ({type(e).__name__}: {_clip(str(e), 80)})"
        ) from None
    missing = [k for k in ("timesteps", "results") if k not in arrays]
    if missing:
        raise ImportInvalid(
            f"{path}: no array {', '.join(missing)} (it has {', '.join(sorted(arrays)) or 'none'}); "
            "not an EvalCallback evaluations.npz"
        )
    steps = np.asarray(arrays["timesteps"]).reshape(-1)
    results = _per_evaluation(path, "results", arrays["results"], len(steps))
    out = {
        "eval/return": (steps.astype(int).tolist(), results.mean(axis=1).tolist()),
        "eval/return_std": (steps.astype(int).tolist(), results.std(axis=1).tolist()),
    }
    if "ep_lengths" in arrays:
        lengths = _per_evaluation(path, "ep_lengths", arrays["ep_lengths"], None)
        if len(lengths) == len(steps):
            out["eval/episode_length"] = (steps.astype(int).tolist(), lengths.mean(axis=1).tolist())
    return out


def _per_evaluation(path: Path, name: str, array: Any, n: int | None) -> Any:
    """``array`` as (evaluations, episodes): one value per episode is (evaluations,) and trailing length-1
    axes, as SB3 writes when an episode's reward comes back as a one-element array, are dropped; any other
    shape (or, with ``n``, another number of evaluations than ``n`` timesteps) is refused naming the file."""
    import numpy as np

    try:
        values = np.asarray(array, dtype=float)
    except (TypeError, ValueError):
        raise ImportInvalid(f"{path}: {name} holds {array.dtype} values, not numbers") from None
    while values.ndim > 2 and values.shape[-1] == 1:
        values = values[..., 0]
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or (n is not None and len(values) != n):
        expected = "(timesteps, episodes), maybe with trailing axes of length 1"
        count = "" if n is None else f" for {n} timesteps"
        raise ImportInvalid(f"{path}: {name} has shape {tuple(array.shape)}{count}; expected {expected}")
    return values


class _ZooLoader:  # built lazily: yaml is imported only when a run has zoo YAML files
    loader: Any = None


def _zoo_yaml(path: Path) -> dict[str, Any]:
    """The zoo's ``config.yml`` / ``args.yml``: an OrderedDict dumped with PyYAML's Python tags, read safely."""
    import yaml

    if _ZooLoader.loader is None:

        class Loader(yaml.SafeLoader):
            pass

        def pairs(loader: Any, node: Any) -> dict[str, Any]:
            (items,) = loader.construct_sequence(node, deep=True) or [[]]
            return {str(k): v for k, v in items}

        Loader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", pairs)
        Loader.add_constructor(
            "tag:yaml.org,2002:python/tuple", lambda loader, node: loader.construct_sequence(node, deep=True)
        )
        _ZooLoader.loader = Loader
    try:
        data = yaml.load(_text(path), Loader=_ZooLoader.loader)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, ValueError, TypeError) as e:
        raise ImportInvalid(
            f"{path}: not YAML the zoo writes ({_clip(' '.join(str(e).split()), 80)})"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ImportInvalid(f"{path}: expected a mapping, got {type(data).__name__}")
    return data


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def read_run(folder: Path) -> ImportedRun:
    """One ``ALGO/ENV_N`` folder: monitor files, evaluations.npz, the zoo's config.yml and args.yml."""
    import numpy as np

    folder = Path(folder).resolve()
    m = _RUN_NAME.fullmatch(folder.name)
    if m is None:
        raise ImportInvalid(
            f"{folder}: the folder name {folder.name!r} is not ENV_N; expected the zoo's layout {LAYOUT}"
        )
    env, n, algo = m.group("env"), int(m.group("n")), folder.parent.name
    metrics: dict[str, tuple[list[int], list[float]]] = {}
    walls: dict[str, list[float]] = {}
    episodes = []
    for f in sorted(p for p in folder.iterdir() if _is_monitor(p.name) and p.is_file()):
        t_start, rows = read_monitor(f)
        episodes += [(t_start + t, r, ln) for r, ln, t in rows]
    if episodes:
        episodes.sort(key=lambda e: e[0])
        wall = [e[0] for e in episodes]
        steps = np.cumsum([int(e[2]) for e in episodes]).tolist()
        metrics["train/episode_return"] = (steps, [e[1] for e in episodes])
        metrics["train/episode_length"] = (steps, [float(e[2]) for e in episodes])
        walls = {"train/episode_return": wall, "train/episode_length": wall}
    if (folder / EVALUATIONS).is_file():
        metrics.update(read_evaluations(folder / EVALUATIONS))
    if not metrics:
        raise ImportInvalid(
            f"{folder}: its monitor files hold no finished episode and it has no {EVALUATIONS}"
        )
    params = folder / env
    config = _zoo_yaml(params / "config.yml") if (params / "config.yml").is_file() else {}
    args = _zoo_yaml(params / "args.yml") if (params / "args.yml").is_file() else {}
    seed = args.get("seed", n)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        seed = n
    config = {k: v for k, v in config.items() if not (isinstance(v, float) and not math.isfinite(v))}
    return ImportedRun(key=f"{algo}/{folder.name}", algo=algo, env=env, seed=seed, config=config,
                       metrics=metrics, wall_times=walls, source=str(folder))  # fmt: skip


def read(path: Path, **_: object) -> list[ImportedRun]:
    """Every run under ``path`` (see ``find_run_folders``). Stops at the first malformed folder or file."""
    return [read_run(folder) for folder in find_run_folders(Path(path))]
