"""The suite's datasets on disk before its runs start (``rlbench run`` builds the generated ones missing)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import SuiteInvalid
from ..spec import Suite

__all__ = ["prepare_datasets"]


def prepare_datasets(
    suite: Suite, source: str = "<suite>", report: Callable[[str, dict[str, Any]], None] = lambda e, i: None
) -> dict[str, list[float]]:
    """Make sure every dataset of ``suite`` is on disk, building the generated ones that are missing (their
    behaviour policy is trained once per environment and reused), and point the workers at them
    (``RLBENCH_DATASETS``, absolute). Returns {dataset: [random return, expert return]} for the datasets that
    record their references: an offline suite is normalised by them (D4RL's convention, x 100)."""
    if not suite.datasets:
        return {}
    from ..datagen import ensure_datasets
    from ..datasets import dataset_path, datasets_root
    from ..datasets.catalog import provenance, summarize

    os.environ["RLBENCH_DATASETS"] = str(datasets_root().resolve())
    paths = {ds.label: dataset_path(ds.name, ds.path, ds.wrapper_dicts) for ds in suite.datasets}
    for i, ds in enumerate(suite.datasets):
        if ds.path and not paths[ds.label].exists():
            raise SuiteInvalid(f"{source}: field 'datasets[{i}].path': dataset {ds.name!r} has no file at "
                               f"{paths[ds.label]}; check the path (relative paths start at the current folder)")  # fmt: skip

    def incomplete(
        ds: Any,
    ) -> bool:  # its real rollouts, or the oracle rollouts a mix of it asks for, missing
        from ..datasets.mix import mix_sources

        if not paths[ds.label].exists():
            return True
        wants_oracle = ds.imagined and any("oracle" in mix_sources(m) for m in ds.mixes)
        return wants_oracle and not paths[ds.label].with_name(f"{ds.name}.oracle.hdf5").exists()

    for i, ds in enumerate(suite.datasets):
        if ds.imagined and paths[ds.label].exists():
            from ..imagine.build import settings_problem

            problem = settings_problem(paths[ds.label], ds.imagine)
            if problem:  # never train on a dataset other than the one the suite describes
                raise SuiteInvalid(
                    f"{source}: field 'datasets[{i}].imagine': {paths[ds.label]} was built with other settings "
                    f"({problem}); keep both with --datasets OTHER_FOLDER, or delete {ds.name}.*hdf5 there "
                    "to rebuild it"
                )
    missing = [ds for ds in suite.datasets if ds.generated and incomplete(ds)]
    for ds in missing:
        report("dataset", {"name": ds.label, "path": paths[ds.label]})
    if missing:
        from ..executors.base import detect_gpus

        # a suite that runs on GPUs builds its datasets on one too (behaviour policies, the imagine generator)
        device = "cuda" if suite.resources.gpus_per_job > 0 and detect_gpus() > 0 else "cpu"
        ensure_datasets(missing, lambda msg: report("dataset_progress", {"msg": msg}), device=device)
    refs: dict[str, list[float]] = {}
    for ds in suite.datasets:
        path = paths[ds.label]
        if path.suffix == ".jsonl":  # a text dataset: normalised by the lmrl table, not by its file
            continue
        if ds.data_mix or ds.imagined:  # which encoder embedded its instructions, which generator imagined
            report("dataset_provenance", {"name": ds.name, **provenance(path)})
        lo, hi = (summarize(path)[k] for k in ("ref_random", "ref_expert"))
        if lo is not None and hi is not None and lo != hi:
            for task in [f"{ds.label}[mix={m}]" for m in ds.mixes] or [ds.label]:  # tasks as grid labels them
                refs[task] = [float(lo), float(hi)]
    return refs
