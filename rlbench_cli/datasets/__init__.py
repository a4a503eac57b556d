"""Offline datasets: generated D4RL-style from a behaviour policy trained with rlbench, or a user's own
D4RL-format HDF5 file or Minari dataset. ``load_dataset`` is what a run calls."""

from __future__ import annotations

from pathlib import Path

from .data import LEVELS, OfflineData, datasets_root, generated_name, parse_generated_name

__all__ = [
    "LEVELS",
    "OfflineData",
    "datasets_root",
    "generated_name",
    "parse_generated_name",
    "dataset_path",
    "load_dataset",
]


def dataset_path(name: str, path: str | None = None) -> Path:
    """The file of a dataset: the user's ``path``, or ``<datasets root>/<name>.hdf5``."""
    return Path(path) if path else datasets_root() / f"{name}.hdf5"


def load_dataset(name: str, path: str | None = None) -> OfflineData:
    """Load a dataset by its name (generated) or path (a user's file)."""
    from .hdf5 import read_hdf5

    p = dataset_path(name, path)
    if not p.exists():
        hint = (
            f"build it with: rlbench datasets build {parse_generated_name(name)[0]} --level "
            f"{parse_generated_name(name)[1]}"
            if parse_generated_name(name) and not path
            else "check the path"
        )
        raise FileNotFoundError(f"dataset {name!r}: no file {p}; {hint}")
    return read_hdf5(p)
