"""Turn a suite's datasets into files: the one place that decides which kind of dataset a name means and asks
that family's builder for it.

``FAMILIES`` is the table, family -> builder module, asked in order. A builder module has:

- ``claims(ds) -> bool``: whether a dataset the suite names without a ``path:`` (a ``spec.DatasetSpec``) is
  of this family (``d4rl``: ``<EnvId>-<level>`` of a gymnasium env; ``text``: ``<EnvName>-<level>`` of a text
  env; ``imagine``: ``<EnvId>-imagine``);
- ``ensure(ds, *, root, seed, device, progress) -> Path``: build it unless it exists, return its path;
- optionally ``complete(ds, path) -> bool`` (default: the file exists) and ``check(ds, path)`` (None, or
  ``(field, problem)`` when the built files are not the ones the suite describes);
- optionally ``builds_env(env_id)`` and ``build_levels(env_id, levels, ...)``: ``rlbench datasets build``.

So a new kind of dataset is one builder module here and one row of ``FAMILIES``; where its files are read is
``datasets`` (``datasets.dataset_path``, ``datasets.load_dataset``). ``prepare`` is what ``rlbench run`` asks
for (``coordinator.prepare_datasets``), ``build`` what ``rlbench datasets build`` does. The builders are
imported when asked for: d4rl's trains with ``algos`` (imported lazily there), imagine's imports torch and
transformers when it builds.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..envs.families import is_text_env
from ..errors import SuiteInvalid, UnknownName, UsageError
from .lock import building

__all__ = ["FAMILIES", "family_of", "ensure_datasets", "prepare", "build"]

Progress = Callable[[str], None]

# family -> its builder module (relative to this package), asked in this order
FAMILIES: dict[str, str] = {
    "imagine": ".imagine",  # <EnvId>-imagine: real, imagined and oracle rollouts (ImagineBench)
    "text": ".text",  # <EnvName>-<level> of a text env: scripted policies' episodes, JSONL (LMRL-Gym)
    "d4rl": ".d4rl",  # <EnvId>-<level>: a behaviour policy's checkpoints' rollouts, HDF5 (D4RL)
}


def _silent(message: str) -> None:
    pass


def _builder(family: str) -> Any:
    return importlib.import_module(FAMILIES[family], __name__)


def family_of(ds: Any) -> Any:
    """The builder module of the family that claims ``ds`` (a generated dataset: no ``path``), or None."""
    for family in FAMILIES:
        builder = _builder(family)
        if builder.claims(ds):
            return builder
    return None


def ensure_datasets(
    specs: Iterable[Any],
    progress: Progress = _silent,
    *,
    root: Path | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> list[Path]:
    """Make sure every dataset of a suite exists, building the generated ones that are missing (their
    behaviour policy is trained once per environment and reused). ``specs`` are ``spec.DatasetSpec``s (name,
    path, env, kwargs). A user's own file that is missing is an error naming it. Returns the paths, in order."""
    from ..datasets import dataset_path

    paths = []
    for spec in specs:
        if spec.path:
            p = dataset_path(spec.name, spec.path)
            if not p.exists():
                raise UnknownName(
                    f"dataset {spec.name!r}: no file or folder {p}; check its path: in the suite"
                )
            paths.append(p)
            continue
        builder = family_of(spec)
        if builder is None:
            raise UsageError(f"dataset {spec.name!r} is neither <EnvId>-<level> nor a file: give it a path:")
        paths.append(builder.ensure(spec, root=root, seed=seed, device=device, progress=progress))
    return paths


def prepare(
    suite: Any,
    source: str = "<suite>",
    report: Callable[[str, dict[str, Any]], None] = lambda e, i: None,
    gpus: Callable[[], int] = lambda: 0,
) -> dict[str, list[float]]:
    """Make sure every dataset of ``suite`` is on disk, building the generated ones that are missing (their
    behaviour policy is trained once per environment and reused), and point the workers at them
    (``RLBENCH_DATASETS``, absolute). Returns {dataset: [random return, expert return]} for the datasets that
    record their references: an offline suite is normalised by them (D4RL's convention, x 100).

    ``report(event, info)`` hears of each dataset built (``dataset``), the builders' progress
    (``dataset_progress``) and where mixed or imagined data comes from (``dataset_provenance``); a dataset
    that another process (another suite's ``rlbench run``) is building is waited for (``dataset_wait``, with
    its PID; ``datagen.lock``) and then used as that process built it (``dataset_ready``). ``gpus()``
    counts the machine's GPUs, asked only when something is built: a suite that runs on GPUs builds its
    datasets on one too (behaviour policies, the imagine generator)."""
    if not suite.datasets:
        return {}
    from ..datasets import dataset_path, datasets_root
    from ..datasets.catalog import provenance, summarize

    os.environ["RLBENCH_DATASETS"] = str(datasets_root().resolve())
    paths = {ds.label: dataset_path(ds.name, ds.path, ds.wrapper_dicts) for ds in suite.datasets}
    for i, ds in enumerate(suite.datasets):
        if ds.path and not paths[ds.label].exists():
            raise SuiteInvalid(f"{source}: field 'datasets[{i}].path': dataset {ds.name!r} has no file at "
                               f"{paths[ds.label]}; check the path (relative paths start at the current folder)")  # fmt: skip
    builders = {ds.label: family_of(ds) if ds.generated else None for ds in suite.datasets}

    def checked(i: int, ds: Any) -> None:  # a built file is the one the suite describes
        check = getattr(builders[ds.label], "check", None)
        problem = check(ds, paths[ds.label]) if check and paths[ds.label].exists() else None
        if problem:
            raise SuiteInvalid(f"{source}: field 'datasets[{i}].{problem[0]}': {problem[1]}")

    def complete(ds: Any) -> bool:  # every file it is read from (a mix of it, too) is there
        done = getattr(builders[ds.label], "complete", None)
        return done(ds, paths[ds.label]) if done else paths[ds.label].exists()

    for i, ds in enumerate(suite.datasets):
        checked(i, ds)
    device: str | None = None
    for i, ds in enumerate(suite.datasets):
        if not ds.generated or complete(ds):
            continue
        path = paths[ds.label]
        note = {"name": ds.label, "path": path}
        with building(path, lambda pid, note=note: report("dataset_wait", {**note, "pid": pid})):
            if complete(ds):  # another process built it while this one waited
                checked(i, ds)
                report("dataset_ready", note)
                continue
            report("dataset", note)
            if device is None:
                device = "cuda" if suite.resources.gpus_per_job > 0 and gpus() > 0 else "cpu"
            ensure_datasets([ds], lambda msg: report("dataset_progress", {"msg": msg}), device=device)
    from .text import check_budgets  # a text dataset's size against its runs' train_episodes

    check_budgets(suite, paths, source)
    refs: dict[str, list[float]] = {}
    for ds in suite.datasets:
        path = paths[ds.label]
        if ds.env is not None and is_text_env(ds.env):  # normalised by the lmrl table, not by its file
            continue
        if ds.data_mix or ds.imagined:  # which encoder embedded its instructions, which generator imagined
            report("dataset_provenance", {"name": ds.name, **provenance(path)})
        lo, hi = (summarize(path)[k] for k in ("ref_random", "ref_expert"))
        if lo is not None and hi is not None and lo != hi:
            for task in [f"{ds.label}[mix={m}]" for m in ds.mixes] or [ds.label]:  # tasks as grid labels them
                refs[task] = [float(lo), float(hi)]
    return refs


def build(env_id: str, levels: list[str], **options: Any) -> list[Path]:
    """``rlbench datasets build ENV --level ...``: the levels of ``env_id``, by the first family that builds
    datasets of that env (a text env's scripted policies, else a behaviour policy rlbench trains). ``options``:
    the family's ``build_levels`` keywords (size, seed, root, env_kwargs, force, behaviour_steps, device,
    progress)."""
    for family in FAMILIES:
        builder = _builder(family)
        if getattr(builder, "builds_env", lambda env: False)(env_id):
            return builder.build_levels(env_id, levels, **options)
    raise UsageError(f"{env_id}: rlbench builds no datasets of it")
