"""``rlbench fetch --from bundle:PATH_OR_URL``: a results bundle from a folder, an http(s) URL or S3, read
back as it was recorded.

Unlike ``rlbench:DIR`` (which reads a bundle like any other tool's runs), runs keep their run ids, status and
full manifests, and metric rows keep their wall times. Every file is checked against the bundle's
MANIFEST.sha256 before the database is opened (``rlbench_cli.bundle.fetch``); the saved policies, episode videos
and transcripts a bundle carries (``--with-policies``, ``--with-videos``) are put in the runs folder next to the
database, under each run's folder, and listed with their artifact rows;
then everything goes in ONE transaction, and run ids already there are skipped, so importing twice adds
nothing.

``--into SUITE`` other than the bundle's own suite gives each run the id ``rlbench:DIR --into SUITE`` would
(a hash of the suite, ``rlbench`` and its original id), so the same bundle can go into several suites.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ImportInvalid, UsageError
from ..suite.ids import run_id_of

__all__ = ["load", "import_bundle", "rekey", "named_runs", "artifacts_of"]

_RUN_COLS = {"run_id", "algo", "env", "seed", "config"}
_METRIC_COLS = {"run_id", "step", "name", "value"}


def _table(folder: Path, name: str, need: set[str], where: str) -> Any:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(folder / name)
    except FileNotFoundError:
        raise ImportInvalid(
            f"{where}/{name}: missing; an rlbench bundle has runs.parquet and metrics.parquet"
        ) from None
    except Exception as e:  # noqa: BLE001 - pyarrow's errors for a damaged file
        raise ImportInvalid(
            f"{where}/{name}: not a readable Parquet file ({type(e).__name__}: {e})"
        ) from None
    missing = sorted(need - set(table.column_names))
    if missing:
        raise ImportInvalid(f"{where}/{name}: no column {', '.join(missing)}; not an rlbench bundle")
    return table


def load(folder: Path, where: str) -> tuple[dict[str, Any], Any, Any]:
    """A verified bundle folder -> ``(suite {"name", "description", "config"}, runs, metrics)`` tables.

    Raises:
        ImportInvalid: a file that is not what a bundle holds, naming it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..bundle import FORMAT_VERSION, INFO

    folder = Path(folder)
    if (folder / INFO).is_file():
        try:
            info = json.loads((folder / INFO).read_text())
            version = int(info.get("format_version", 1))
        except (ValueError, AttributeError, TypeError):
            raise ImportInvalid(f"{where}/{INFO}: not valid JSON of an rlbench bundle") from None
        if version > FORMAT_VERSION:
            raise ImportInvalid(f"{where}/{INFO}: bundle format {version}, newer than this rlbench reads "
                                f"({FORMAT_VERSION}); upgrade rlbench")  # fmt: skip
    suite: dict[str, Any] = {"name": None, "description": "", "config": {}}
    if (folder / "suite.json").is_file():
        try:
            doc = json.loads((folder / "suite.json").read_text())
            suite.update(name=doc.get("name"), description=doc.get("description") or "",
                         config=doc.get("config") or {})  # fmt: skip
        except (ValueError, AttributeError):
            raise ImportInvalid(f"{where}/suite.json: not valid JSON of an rlbench bundle") from None
    runs = _table(folder, "runs.parquet", _RUN_COLS, where)
    metrics = _table(folder, "metrics.parquet", _METRIC_COLS, where)
    if "wall_time" not in metrics.column_names:
        metrics = metrics.append_column("wall_time", pa.nulls(metrics.num_rows, pa.float64()))
    if pc.count_distinct(runs["run_id"]).as_py() != runs.num_rows:
        raise ImportInvalid(f"{where}/runs.parquet: a run id appears twice; the file is damaged")
    if runs.num_rows and runs["run_id"].null_count:
        raise ImportInvalid(f"{where}/runs.parquet: a run without a run id; the file is damaged")
    for col in ("config", "packages"):
        if col in runs.column_names and not pa.types.is_string(runs.schema.field(col).type):
            raise ImportInvalid(f"{where}/runs.parquet: column {col} is not JSON text; not an rlbench bundle")
    if suite["name"] is None and "suite" in runs.column_names:
        names = {s for s in runs["suite"].to_pylist() if s}
        suite["name"] = names.pop() if len(names) == 1 else None
    return suite, runs, metrics


def artifacts_of(folder: Path, where: str) -> Any:
    """The bundle's ``artifacts.parquet`` (None: a bundle written before it existed)."""
    if not (Path(folder) / "artifacts.parquet").is_file():
        return None
    return _table(folder, "artifacts.parquet", {"run_id", "step", "kind", "path", "bytes", "sha256"}, where)


def rekey(runs: Any, metrics: Any, artifacts: Any, name: str) -> tuple[Any, Any, Any]:
    """A bundle's tables with each run's id replaced by the one it has in suite ``name`` (a hash of the suite,
    ``rlbench`` and its original id, as ``rlbench:DIR --into SUITE`` gives it), so the same runs can sit in
    several suites of one store; rows of runs the bundle does not list are left out. ``artifacts`` may be
    None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    old = runs["run_id"]
    new = pa.array([run_id_of({"suite": name, "format": "rlbench", "run": str(r)})
                    for r in old.to_pylist()], pa.string())  # fmt: skip
    runs = runs.set_column(runs.column_names.index("run_id"), "run_id", new)
    tables = []
    for table in (metrics, artifacts):
        if table is not None:
            mapped = pc.take(new, pc.index_in(table["run_id"], value_set=old))
            table = table.set_column(table.column_names.index("run_id"), "run_id", mapped)
            table = table.filter(pc.is_valid(table["run_id"]))
        tables.append(table)
    return runs, tables[0], tables[1]


def named_runs(runs: Any, name: str) -> Any:
    """The runs table with ``suite`` set to ``name`` and the columns a bundle may lack filled in."""
    import pyarrow as pa

    suite_col = pa.array([name] * runs.num_rows, pa.string())
    if "suite" in runs.column_names:
        runs = runs.set_column(runs.column_names.index("suite"), "suite", suite_col)
    else:
        runs = runs.append_column("suite", suite_col)
    if "status" not in runs.column_names:
        runs = runs.append_column("status", pa.array(["finished"] * runs.num_rows, pa.string()))
    if "algo_name" not in runs.column_names:
        runs = runs.append_column("algo_name", runs["algo"])
    return runs


def import_bundle(store: Any, location: str, into: str | None, timeout: float | None = None) -> Any:
    """Fetches, verifies and imports the bundle at ``location`` into ``into`` (None: the bundle's suite).

    Returns:
        An ``ImportResult``.
    """
    from ..bundle import _runs_root, fetch, place_artifacts
    from .common import ImportResult

    with fetch(location, timeout) as got:
        suite, runs, metrics = load(got.folder, got.where)
        artifacts = artifacts_of(got.folder, got.where)
        name = into or suite["name"]
        if not name:
            raise UsageError(
                f"--from bundle:{location}: the bundle does not name its suite; add --into SUITE"
            )
        if suite["name"] and name != suite["name"]:
            runs, metrics, artifacts = rekey(runs, metrics, artifacts, name)
        runs = named_runs(runs, name)
        where = got.where if "://" in got.where else str(Path(got.where).resolve())
        carried = place_artifacts(got.folder, artifacts, _runs_root(store) / name)
        with store.writer() as con:
            new_runs, new_rows = store.import_bundle(
                con, {**suite, "name": name}, runs, metrics, source=f"bundle:{where}", artifacts=carried
            )
    return ImportResult(suite=name, source=f"bundle:{location}", found=runs.num_rows, new_runs=new_runs,
                        new_rows=new_rows, present=runs.num_rows - new_runs)  # fmt: skip
