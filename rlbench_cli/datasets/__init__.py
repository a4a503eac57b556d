"""Offline datasets: generated D4RL-style from a behaviour policy trained with rlbench (``datagen``),
or a user's own D4RL-format HDF5 file or Minari dataset. ``load_dataset`` is what a run calls.

Where a dataset is: a generated one by its name, ``<datasets root>/<EnvId>-<level>.hdf5``; a user's own by
its path, a D4RL-format ``.hdf5`` file or a folder in Minari's layout; a local Minari dataset by
``minari:<id>`` (looked up under ``MINARI_DATASETS_PATH``, never downloaded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..envs.families import HDF5, dataset_suffix
from .data import OfflineData
from .minari_io import MINARI_PREFIX, minari_path
from .names import LEVELS, datasets_root, generated_file_stem, generated_name, parse_generated_name

__all__ = [
    "LEVELS",
    "OfflineData",
    "datasets_root",
    "generated_file_stem",
    "generated_name",
    "parse_generated_name",
    "dataset_path",
    "load_dataset",
    "to_d3rlpy",
]


def dataset_path(name: str, path: str | None = None, wrappers: list[dict[str, Any]] | None = None) -> Path:
    """Where a dataset is: the user's ``path`` (``minari:<id>``: that local Minari dataset's folder), or
    ``<datasets root>/<name>.hdf5`` (a text env's generated dataset: ``<name>.jsonl``; one collected in a
    wrapped env: ``<name>+<Wrapper>.hdf5``, ``generated_file_stem``)."""
    if path and path.startswith(MINARI_PREFIX):
        return minari_path(path[len(MINARI_PREFIX) :])
    parsed = None if path else parse_generated_name(name)
    if parsed and dataset_suffix(parsed[0]) != HDF5:  # a text env's: no wrappers in its file's name
        return datasets_root() / f"{name}{dataset_suffix(parsed[0])}"
    return Path(path) if path else datasets_root() / f"{generated_file_stem(name, wrappers)}{HDF5}"


def load_dataset(
    name: str,
    path: str | None = None,
    env: str | None = None,
    mix: str | None = None,
    wrappers: list[dict[str, Any]] | None = None,
) -> Any:
    """Load a dataset by its name (generated; ``wrappers``: collected in the env with those wrappers) or path
    (a user's file or Minari folder, or ``minari:<id>``): an ``OfflineData``, or for a text dataset
    (``.jsonl``) a ``datasets.text.TextEpisodes`` (``env``: the text env a user's LMRL-Gym file is read for);
    with ``mix`` (``datasets.mix``), its real and imagined rollouts in that mix."""
    p = dataset_path(name, path, wrappers)
    if not p.exists():
        parsed = None if path else parse_generated_name(name)
        hint = (
            "rlbench run builds it (it is collected in the suite's wrapped env)"
            if parsed and wrappers
            else f"build it with: rlbench datasets build {parsed[0]} --level {parsed[1]}"
            if parsed
            else "check the path"
        )
        raise FileNotFoundError(f"dataset {name!r}: no file {p}; {hint}")
    if p.suffix == ".jsonl":
        from .text import load_text_dataset

        return load_text_dataset(p, env=env)
    from .catalog import open_dataset

    if mix is None:
        return open_dataset(p)
    from .mix import SUFFIXES, mix_data, mix_sources

    used = mix_sources(mix)
    files: dict[str, Any] = {"real": p}
    for source, suffix in SUFFIXES.items():
        files[source] = p.with_name(p.name[: -len(".hdf5")] + suffix) if p.name.endswith(".hdf5") else None
    for source in used:
        f = files[source]
        if f is None or not f.exists():
            what = {"imagined": "imagined rollouts", "oracle": "real rollouts of the new instructions (oracle)",
                    "real": "real rollouts"}[source]  # fmt: skip
            how = ("build them (a <EnvId>-imagine dataset) or import them" if source == "imagined" else
                   "an <EnvId>-imagine dataset rlbench builds has them (rlbench run builds them when missing)")  # fmt: skip
            raise FileNotFoundError(
                f"dataset {name!r}: data_mix {mix} needs {what} in {f}, and there are none; {how}"
            )
    loaded = {k: open_dataset(files[k]) for k in used}
    return mix_data(loaded.get("real"), loaded.get("imagined"), mix, oracle=loaded.get("oracle"))


def to_d3rlpy(data: OfflineData) -> Any:
    """``data`` as a ``d3rlpy.dataset.MDPDataset`` (see ``datasets.d3rlpy_io``)."""
    from .d3rlpy_io import to_d3rlpy as convert

    return convert(data)
