"""Runs written by other tools, read into the results database (``rlbench fetch --from FORMAT:PATH``).

A source is ``FORMAT:PATH``. Each format is one module with ``read(path) -> list[ImportedRun]`` that only
reads files (no database, nothing executed from the data) and raises ``ImportInvalid`` naming the file and
what is wrong. ``import_source`` reads everything first and then writes it in ONE transaction, so a bad file
leaves the database as it was. A run's id is a hash of (suite, format, the run's key within its source,
e.g. the d3rlpy folder name): importing the same runs again adds nothing.

``duckdb:FILE`` and ``bundle:PATH_OR_URL`` are the exceptions: another rlbench database or a results bundle
keeps its run ids, suites and full manifests, so ``duckdb_store.merge`` and ``bundle_source.import_bundle``
copy them in one transaction instead of going through ``ImportedRun``.

To add a format: a module here with ``read(path, **options)`` returning ``common.ImportedRun``s, and a line
in ``FORMATS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ImportInvalid, UsageError
from ..suite.ids import run_id_of
from .common import ImportedRun, ImportResult

__all__ = [
    "FORMATS", "OPTIONS", "ImportedRun", "ImportResult", "parse_source", "read_source", "import_source",
    "check_options", "metrics_table",
]  # fmt: skip

# format -> (module that reads it, what it reads)
FORMATS: dict[str, tuple[str, str]] = {
    "d3rlpy": (
        "rlbench_cli.importers.d3rlpy_logs",
        "d3rlpy log folders, d3rlpy_logs/<ALGO>_<task>_<seed>_<time>/",
    ),
    "rlbench": (
        "rlbench_cli.importers.rlbench_bundle",
        "an rlbench results bundle folder, e.g. results/reference/classic-control",
    ),
    "tensorboard": (
        "rlbench_cli.importers.tensorboard_logs",
        "TensorBoard event files, one run per folder (CleanRL's runs/<env>__<exp_name>__<seed>__<time>/; "
        "--pattern for other folder names)",
    ),
    "sb3": (
        "rlbench_cli.importers.sb3_logs",
        "Stable-Baselines3 / rl-baselines3-zoo logs: monitor.csv files and evaluations.npz in ALGO/ENV_N/",
    ),
    "csv": (
        "rlbench_cli.importers.table_file",
        "a CSV file, tidy (run, step, name, value) or wide (one column per metric), e.g. a W&B export; "
        "--columns to map its column names",
    ),
    "parquet": ("rlbench_cli.importers.table_file", "a Parquet file laid out like csv:FILE"),
    "duckdb": (
        "rlbench_cli.importers.duckdb_store",
        "another rlbench results database: its suites and runs, with their run ids and manifests",
    ),
    "bundle": (
        "rlbench_cli.importers.bundle_source",
        "a results bundle (rlbench export) in a folder, at an http(s):// URL or s3://bucket/prefix, checked "
        "against its MANIFEST.sha256; runs keep their ids and manifests",
    ),
}

# options that only some formats take: option -> (formats, the flag that sets it)
OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "pattern": (("tensorboard", "csv", "parquet"), "--pattern"),
    "columns": (("csv", "parquet"), "--columns"),
    "timeout": (("bundle",), "--timeout"),
}


def _known() -> str:
    return ", ".join(f"{name}:PATH" for name in FORMATS) + " (see rlbench fetch --help)"


def parse_source(text: str) -> tuple[str, Path]:
    """``"d3rlpy:runs/d3rlpy_logs"`` -> ``("d3rlpy", Path("runs/d3rlpy_logs"))``.

    Raises:
        UsageError: no ``FORMAT:`` prefix, an unknown format (the message lists the known ones), no path.
    """
    scheme, sep, rest = text.partition(":")
    if not sep:
        raise UsageError(
            f"--from {text!r}: say which format the runs are in, as FORMAT:PATH; known: {_known()}"
        )
    if scheme not in FORMATS:
        raise UsageError(f"--from {text!r}: unknown format {scheme!r}; known: {_known()}")
    if not rest.strip():
        raise UsageError(f"--from {text!r}: no path after {scheme + ':'!r}; e.g. --from {scheme}:d3rlpy_logs")
    return scheme, Path(rest)


def check_options(scheme: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options given (not None) that ``scheme`` takes; a UsageError names a flag it does not take."""
    given = {k: v for k, v in (options or {}).items() if v is not None}
    for name in given:
        formats, flag = OPTIONS[name]
        if scheme not in formats:
            raise UsageError(
                f"{flag} applies to --from {' / '.join(f + ':' for f in formats)} sources, not {scheme}:"
            )
    if scheme in ("csv", "parquet"):
        given["kind"] = scheme
    return given


def read_source(text: str, options: Mapping[str, Any] | None = None) -> tuple[str, Path, list[ImportedRun]]:
    """Reads every run of a ``FORMAT:PATH`` source, touching no database.

    Args:
        text: ``FORMAT:PATH``.
        options: Format options (``pattern``, ``columns``); None values are ignored, others must apply.
    """
    scheme, path = parse_source(text)
    kwargs = check_options(scheme, options)
    module = importlib.import_module(FORMATS[scheme][0])
    return scheme, path, module.read(path, **kwargs)


def _check_keys(runs: Sequence[ImportedRun]) -> list[str]:
    """Errors on two runs with one key; warnings on two runs in one (algo, env, seed) cell."""
    seen: dict[str, ImportedRun] = {}
    cells: dict[tuple[str, str, int], list[ImportedRun]] = {}
    for run in runs:
        if run.key in seen:
            raise ImportInvalid(
                f"{run.source}: a second run named {run.key!r} (the first is {seen[run.key].source}); "
                "import them into different suites"
            )
        seen[run.key] = run
        cells.setdefault((run.algo, run.env, run.seed), []).append(run)
    return [
        f"{len(same)} runs of {algo} on {env} with seed {seed} ({', '.join(r.key for r in same)}); "
        "statistics need one run per algorithm, task and seed: import one of them, or give each its own suite"
        for (algo, env, seed), same in cells.items()
        if len(same) > 1
    ]


def import_source(
    store: Any, source: str, suite: str | None, options: Mapping[str, Any] | None = None
) -> ImportResult:
    """Imports every run of ``source`` (``FORMAT:PATH``) into ``suite``, as finished runs, in one transaction.

    Runs already in the database (same suite and key) are left as they are and their files are not loaded
    again. The suite is registered if new (description: where it was imported from, config ``{}``).

    Args:
        store: A ``rlbench_cli.store.Store``.
        source: ``FORMAT:PATH``, see ``FORMATS``.
        suite: Suite name the runs go in. For ``duckdb:FILE`` (runs keep their suites and ids), None for
            every suite of the file, or the one suite of it to import. For ``bundle:``, None keeps the
            bundle's suite and run ids.
        options: Format options, see ``OPTIONS``.
    """

    if source.startswith("bundle:") and source[len("bundle:") :].strip():
        given = check_options("bundle", options)
        from .bundle_source import import_bundle

        return import_bundle(store, source[len("bundle:") :], suite, given.get("timeout"))
    scheme, path = parse_source(source)
    if scheme == "duckdb":
        check_options(scheme, options)
        from .duckdb_store import merge

        return merge(store, path, suite)
    if suite is None:
        raise UsageError(f"--from {source}: add --into SUITE to name the suite the imported runs go in")
    scheme, path, runs = read_source(source, options)
    warnings = _check_keys(runs)
    rows: list[dict[str, Any]] = []
    for run in runs:
        run_id = run_id_of({"suite": suite, "format": scheme, "run": run.key})
        rows.append({"run_id": run_id, "suite": suite, "algo": run.algo, "algo_name": run.algo, "env": run.env,
                     "seed": run.seed, "config": run.config, "source": run.source})  # fmt: skip
    metrics = metrics_table(runs, [r["run_id"] for r in rows])
    where = path.resolve()
    with store.writer() as con:
        new_runs, new_rows = store.import_runs(con, suite, f"imported from {scheme} logs at {where}", rows,
                                               metrics, source=f"{scheme}:{where}")  # fmt: skip
    return ImportResult(suite=suite, source=f"{scheme}:{path}", found=len(rows), new_runs=new_runs,
                        new_rows=new_rows, present=len(rows) - new_runs, warnings=warnings)  # fmt: skip


def metrics_table(runs: Sequence[ImportedRun], run_ids: Sequence[str]) -> Any:
    """The metric rows of ``runs`` as one Arrow table (run_id, step, name, value, wall_time), ``run_ids[i]``
    the id of ``runs[i]``: run_id and name dictionary-encoded (an index per row, not a string), the numbers
    zero-copy from numpy (``arrowbuf``: no pandas), wall_time NULL where a run logged none (or NaN)."""
    import numpy as np
    import pyarrow as pa

    from ..arrowbuf import numbers, strings

    names: dict[str, int] = {}
    run_of, name_of, counts, steps, values, walls = [], [], [], [], [], []
    for i, run in enumerate(runs):
        for name, (s, v) in run.metrics.items():
            run_of.append(i)
            name_of.append(names.setdefault(name, len(names)))
            counts.append(len(s))
            steps.append(np.asarray(s, dtype=np.int64))
            values.append(np.asarray(v, dtype=np.float64))
            w = run.wall_times.get(name)
            if w is not None:
                walls.append((len(counts) - 1, np.asarray(w, dtype=np.float64)))
    n = int(sum(counts))

    def joined(parts: list[Any], dtype: Any) -> Any:
        view = _adjacent(parts)  # the bulk-parsed CSVs of d3rlpy logs: already one array
        if view is not None:
            return view
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    def indices(of: list[int]) -> Any:
        return numbers(np.repeat(np.asarray(of, dtype=np.int32), np.asarray(counts, dtype=np.int64)))

    if walls:
        wall = np.full(n, np.nan)  # NULL unless the tool logged them (most do not)
        starts = np.concatenate([[0], np.cumsum(counts)])
        for series, w in walls:
            wall[starts[series] : starts[series + 1]] = w
        null = np.isnan(wall)
        validity = pa.py_buffer(np.packbits(~null, bitorder="little")) if null.any() else None
        wall_time = pa.Array.from_buffers(
            pa.float64(), n, [validity, pa.py_buffer(wall)], null_count=int(null.sum())
        )
    else:  # none logged: all NULL, without building a column of NaN to find that out
        wall_time = pa.nulls(n, pa.float64())
    return pa.Table.from_arrays(
        [
            pa.DictionaryArray.from_arrays(indices(run_of), strings(list(run_ids))),
            numbers(joined(steps, np.int64)),
            pa.DictionaryArray.from_arrays(indices(name_of), strings(list(names))),
            numbers(joined(values, np.float64)),
            wall_time,
        ],
        names=["run_id", "step", "name", "value", "wall_time"],
    )


def _adjacent(parts: Sequence[Any]) -> Any:
    """``np.concatenate(parts)`` without a copy when the parts already lie one after the other in the memory
    of one 1-D array (the CSVs of ``d3rlpy_logs``, parsed in bulk and split per file): the view of that
    stretch of it, the same numbers; else None."""
    import numpy as np

    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    root = parts[0]
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.c_contiguous:
        return None
    root = root.reshape(-1)  # pyarrow's to_numpy keeps a (1, n) array below its 1-D view
    start = root.__array_interface__["data"][0]
    at = parts[0].__array_interface__["data"][0]
    for p in parts:
        if p.dtype != root.dtype or p.ndim != 1 or not p.flags.c_contiguous:
            return None
        if p.__array_interface__["data"][0] != at:
            return None
        at += p.nbytes
    first, end = parts[0].__array_interface__["data"][0] - start, at - start
    if first < 0 or end > root.nbytes or first % root.itemsize:
        return None
    return root[first // root.itemsize : end // root.itemsize]
