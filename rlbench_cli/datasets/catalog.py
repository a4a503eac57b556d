"""What ``rlbench datasets list`` and ``show`` print: find a dataset by name or path, and summarise it.

A dataset is named as a suite names it: a generated one by ``<EnvId>-<level>`` (found in the datasets
folder), a file or Minari folder of the user's by its path, a local Minari dataset by ``minari:<id>``.
Listing reads only metadata and the per-transition flags and rewards, never observations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UnknownName, UsageError
from .data import OfflineData
from .minari_io import MINARI_PREFIX, is_minari_folder, minari_path
from .names import datasets_root, generated_file_stem

__all__ = ["resolve", "open_dataset", "summarize", "list_datasets", "describe", "provenance", "PROVENANCE"]

# what a dataset's metadata says about how it was made, recorded with the runs trained on it
PROVENANCE = ("encoder", "encoder_dim", "generator", "generator_model", "source", "data_mix", "imagined_generator",
              "imagined_source")  # fmt: skip


def resolve(name_or_path: str, root: Path | None = None) -> Path:
    """The file or Minari folder ``name_or_path`` names (see the module docstring)."""
    root = Path(root) if root is not None else datasets_root()
    if name_or_path.startswith(MINARI_PREFIX):
        p = minari_path(name_or_path[len(MINARI_PREFIX) :])
        if not is_minari_folder(p):
            raise UnknownName(
                f"no Minari dataset {name_or_path!r} at {p}; set MINARI_DATASETS_PATH to its root"
            )
        return p
    for p in (Path(name_or_path), root / f"{name_or_path}.hdf5", root / f"{name_or_path}.jsonl"):
        if p.exists():
            return p
    raise UnknownName(
        f"no dataset {name_or_path!r}: not a file or folder, and no {root / (name_or_path + '.hdf5')} (or "
        ".jsonl, a text env's); see "
        "rlbench datasets list (--datasets DIR for another folder), or build it with rlbench datasets build "
        "ENV --level LEVEL"
    )


def open_dataset(path: Path) -> OfflineData:
    """Read the dataset at ``path``; a file that is not one is a ``UsageError`` naming it."""
    if path.suffix in (".pkl", ".pickle", ".npy", ".npz"):
        raise UsageError(f"{path}: a pickle is never loaded as a dataset (loading a pickle can run code hidden "
                         "in it); convert it once with: rlbench datasets import FILE --name NAME --env ENV --trust")  # fmt: skip
    try:
        if path.is_dir():
            from .minari_io import read_minari

            return read_minari(path)
        from .hdf5 import read_hdf5

        return read_hdf5(path)
    except (OSError, ValueError, KeyError) as e:
        raise UsageError(
            f"{path}: cannot read it as a dataset ({' '.join(str(e).split())}); rlbench reads D4RL-format "
            ".hdf5 files and Minari dataset folders"
        ) from None


def provenance(path: Path) -> dict[str, Any]:
    """The ``PROVENANCE`` keys of the dataset at ``path`` (and of its imagined rollouts beside it, if any)."""
    from .hdf5 import read_meta

    out: dict[str, Any] = {}
    imagined = (
        path.with_name(path.name[: -len(".hdf5")] + ".imagined.hdf5") if path.name.endswith(".hdf5") else None
    )
    for p, prefix in ((path, ""), (imagined, "imagined_")):
        if p is not None and p.is_file():
            meta = read_meta(p)[0]
            out.update(
                {prefix + k: meta[k] for k in PROVENANCE if k in meta and not k.startswith("imagined_")}
            )
    return out


def _disk_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _episode_stats(
    rewards: np.ndarray, terminals: np.ndarray, timeouts: np.ndarray
) -> tuple[int, float | None]:
    """(episodes, mean episode return), episodes split as ``OfflineData.episode_ends``."""
    data = OfflineData(
        np.empty((len(rewards), 0), np.float32), np.zeros(len(rewards)), rewards, terminals, timeouts
    )
    returns = data.episode_returns()
    return len(returns), float(returns.mean()) if len(returns) else None


def summarize(path: Path, data: OfflineData | None = None) -> dict[str, Any]:
    """One row of ``rlbench datasets list``: name, env, level, transitions, episodes, mean return (the
    builder's, over whole episodes, else over every episode in the file), normalised mean return (x 100,
    when the references are known) and bytes on disk. Reads only what it needs unless ``data`` is given."""
    if data is None and not path.is_dir():
        from .hdf5 import read_meta

        try:
            meta, small = read_meta(path)
        except (OSError, ValueError, KeyError) as e:
            raise UsageError(
                f"{path}: not a D4RL-format dataset ({' '.join(str(e).split())}); fix it or move it out of "
                "the datasets folder"
            ) from None
    else:
        data = data if data is not None else open_dataset(path)
        meta = data.meta
        small = {"rewards": data.rewards, "terminals": data.terminals, "timeouts": data.timeouts}
    episodes, mean = _episode_stats(small["rewards"], small["terminals"], small["timeouts"])
    if meta.get("mean_return") is not None:
        mean = float(meta["mean_return"])
    row: dict[str, Any] = {
        # a generated dataset collected in a wrapped env: its name plus +Wrapper, as suites name the task
        "name": generated_file_stem(meta["name"], meta.get("env_wrappers"))
        if meta.get("name")
        else (path.stem if path.suffix == ".hdf5" else path.name),
        "env": meta.get("env_id"),
        "level": meta.get("level"),
        "transitions": len(small["rewards"]),
        "episodes": episodes,
        "mean_return": mean,
        "normalized_mean_return": None,
        "ref_random": meta.get("ref_random"),
        "ref_expert": meta.get("ref_expert"),
        "bytes": _disk_bytes(path),
        "path": str(path),
    }
    lo, hi = row["ref_random"], row["ref_expert"]
    if mean is not None and lo is not None and hi is not None and hi != lo:
        row["normalized_mean_return"] = 100 * (mean - lo) / (hi - lo)
    return row


def list_datasets(root: Path | None = None) -> list[dict[str, Any]]:
    """Summaries of the ``.hdf5`` datasets in ``root`` (default: the datasets folder), by name."""
    root = Path(root) if root is not None else datasets_root()
    if not root.is_dir():
        return []
    paths = sorted([*root.glob("*.hdf5"), *root.glob("*.jsonl")], key=lambda p: p.stem)
    return [summarize_text(p) if p.suffix == ".jsonl" else summarize(p) for p in paths]


def summarize_text(path: Path, data: Any = None) -> dict[str, Any]:
    """A text dataset's row of ``rlbench datasets list``: turns as transitions, normalised by the ``lmrl``
    references (piecewise, x 100) when the env has them. ``data``: the dataset, when already read."""
    from ..references import BUILTIN, normalise
    from .text import episode_returns, load_text_dataset

    data = data if data is not None else load_text_dataset(path)
    rets = episode_returns(data)
    mean = sum(rets) / len(rets) if rets else None
    ref = BUILTIN["lmrl"].lookup(data.env)
    return {
        "name": path.stem, "env": data.env, "level": data.level, "transitions": data.n_turns,
        "episodes": len(data), "mean_return": mean,
        "normalized_mean_return": normalise(mean, ref, 100.0) if ref and mean is not None else None,
        "ref_random": None, "ref_expert": None, "bytes": _disk_bytes(path), "path": str(path),
    }  # fmt: skip


def describe(name_or_path: str, root: Path | None = None) -> dict[str, Any]:
    """Everything ``rlbench datasets show`` prints: where the dataset is, its summary, its arrays' shapes
    and all its metadata (provenance included)."""
    path = resolve(name_or_path, root)
    if path.suffix == ".jsonl":  # a text env's episodes: turns of text, no arrays
        return describe_text(path)
    data = open_dataset(path)
    arrays = {
        k: {"shape": list(v.shape), "dtype": str(v.dtype)}
        for k in ("observations", "actions", "rewards", "terminals", "timeouts", "next_observations")
        if (v := getattr(data, k)) is not None
    }
    return {"path": str(path), "summary": summarize(path, data), "arrays": arrays, "metadata": data.meta}


def describe_text(path: Path) -> dict[str, Any]:
    """``describe`` of a text dataset (JSONL): its summary, its turns as columns of text and numbers, and its
    env, level, episode lengths and where it is."""
    from .text import load_text_dataset

    data = load_text_dataset(path)
    n = data.n_turns
    lengths = [len(e) for e in data]
    arrays = {"observations": {"shape": [n], "dtype": "text"}, "actions": {"shape": [n], "dtype": "text"},
              "rewards": {"shape": [n], "dtype": "float64"}, "dones": {"shape": [n], "dtype": "bool"}}  # fmt: skip
    meta = {"env": data.env, "level": data.level, "format": "rlbench text JSONL (env, level, turns a line)",
            "episode_turns_min": min(lengths, default=0), "episode_turns_max": max(lengths, default=0),
            "distinct_actions": len({t["action"] for e in data for t in e}), **data.meta}  # fmt: skip
    return {"path": str(path), "summary": summarize_text(path, data), "arrays": arrays, "metadata": meta}


def export_minari(
    name: str, dataset_id: str | None = None, out: Path | None = None, root: Path | None = None
) -> tuple[str, Path, Path]:
    """``rlbench datasets export``: the dataset ``name`` (``resolve``'s names and paths) written as a Minari
    dataset, references and provenance kept. ``dataset_id``: default ``rlbench/<name>-v0``; ``out``: the
    Minari datasets root (default ``minari_io.minari_root()``); ``root``: where datasets are found. Returns
    the id, the dataset's folder and the Minari root.

    Raises:
        UsageError: Minari refused the id or the data (its message, on one line).
    """
    from .minari_io import minari_root, write_minari

    path = resolve(name, root)
    if path.suffix == ".jsonl":
        raise UsageError(f"{name}: a text env's dataset ({path.name}) has no Minari form (Minari holds arrays); "
                         "copy the .jsonl file itself, which rlbench reads as it is")  # fmt: skip
    data = open_dataset(path)
    dataset_id = dataset_id or f"rlbench/{data.meta.get('name') or path.stem}-v0"
    into = out or minari_root()
    try:
        folder = write_minari(data, dataset_id, into)
    except ValueError as e:
        raise UsageError(f"export {name} as {dataset_id} into {into}: {' '.join(str(e).split())}") from None
    return dataset_id, folder, into
