"""Read an rlbench results bundle: the folder ``rlbench fetch --suite S --format bundle -o DIR`` writes
(``runs.parquet``, ``metrics.parquet``, ``suite.json``), e.g. the reference results in results/reference/.

Each run keeps its algorithm, task, seed, config and every metric row; its key is its original run id, so
importing a bundle twice adds nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ImportInvalid
from .common import ImportedRun

__all__ = ["read"]

_RUN_COLS = {"run_id", "algo", "env", "seed", "config"}
_METRIC_COLS = {"run_id", "step", "name", "value"}


def read(path: Path, **options: object) -> list[ImportedRun]:
    import numpy as np
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_dir():
        raise ImportInvalid(f"{path}: not a folder; an rlbench bundle is a folder with runs.parquet and "
                            "metrics.parquet (rlbench fetch --suite S --format bundle -o DIR writes one)")  # fmt: skip
    tables = {}
    for name, need in (("runs", _RUN_COLS), ("metrics", _METRIC_COLS)):
        f = path / f"{name}.parquet"
        try:
            tables[name] = pq.read_table(f)
        except FileNotFoundError:
            raise ImportInvalid(
                f"{f}: missing; an rlbench bundle has runs.parquet and metrics.parquet"
            ) from None
        except Exception as e:  # noqa: BLE001 - pyarrow's errors for a damaged file
            raise ImportInvalid(f"{f}: not a readable Parquet file ({type(e).__name__}: {e})") from None
        missing = sorted(need - set(tables[name].column_names))
        if missing:
            raise ImportInvalid(f"{f}: no column {', '.join(missing)}; not an rlbench bundle")
    runs = tables["runs"].to_pylist()
    m = tables["metrics"]
    ids = np.asarray(m["run_id"].to_pylist(), dtype=object)
    names = np.asarray(m["name"].to_pylist(), dtype=object)
    steps = m["step"].to_numpy(zero_copy_only=False)
    values = m["value"].to_numpy(zero_copy_only=False)
    by_run: dict[str, dict[str, tuple[list[int], list[float]]]] = {}
    order = np.lexsort((steps, names, ids))
    for key in np.unique(ids):
        by_run[str(key)] = {}
    if len(order):
        ids_s, names_s, steps_s, values_s = ids[order], names[order], steps[order], values[order]
        cut = np.flatnonzero((ids_s[1:] != ids_s[:-1]) | (names_s[1:] != names_s[:-1])) + 1
        for lo, hi in zip(np.concatenate([[0], cut]), np.concatenate([cut, [len(order)]])):
            by_run[str(ids_s[lo])][str(names_s[lo])] = (steps_s[lo:hi].tolist(), values_s[lo:hi].tolist())
    out = []
    for r in runs:
        try:
            config = json.loads(r["config"]) if isinstance(r["config"], str) else dict(r["config"] or {})
        except json.JSONDecodeError:
            raise ImportInvalid(f"{path / 'runs.parquet'}: run {r['run_id']}: config is not JSON") from None
        out.append(ImportedRun(key=str(r["run_id"]), algo=str(r["algo"]), env=str(r["env"]), seed=int(r["seed"]),
                               config=config, metrics=by_run.get(str(r["run_id"]), {}),
                               source=str(path / "runs.parquet")))  # fmt: skip
    return out
