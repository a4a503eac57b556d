"""Read runs from one CSV or Parquet file, tidy or wide, e.g. a W&B export.

Tidy: one row per (run, step, metric), columns ``run, step, name, value``. Wide: one row per (run, step),
one column per metric (every numeric column that has no other role). Columns are found by these names
(the first one present), or named with ``--columns ROLE=COLUMN,...``:

    run        run, run_id, run_name          (none: the whole file is one run, named after the file)
    step       step, global_step, _step, timestep, timesteps, Step
    name       name, metric                   (tidy files only)
    value      value                          (tidy files only)
    algo       algo, algorithm, exp_name
    env        env, env_id, task
    seed       seed
    wall_time  wall_time, _timestamp

A run's algo, env and seed come from those columns (one value per run), or else from its name through
``--pattern`` (default CleanRL's ``{env}__{algo}__{seed}__{time}``, which W&B run names of CleanRL runs
follow; ``{algo=ppo}`` fixes a value). W&B's internal columns (``_runtime``, ``_timestamp``, ``_step``) are
not metrics. A W&B chart export (``Step``, then ``<run name> - <metric>`` columns with ``__MIN``/``__MAX``
companions) is read as one run per name prefix. Empty cells of a wide file are steps where that metric was
not logged. Metric names are kept as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ImportInvalid, UsageError
from .common import ImportedRun
from .names import CLEANRL_PATTERN, parse_pattern

__all__ = ["ROLES", "parse_columns", "read"]

ROLES: dict[str, tuple[str, ...]] = {
    "run": ("run", "run_id", "run_name"),
    "step": ("step", "global_step", "_step", "timestep", "timesteps", "Step"),
    "name": ("name", "metric"),
    "value": ("value",),
    "algo": ("algo", "algorithm", "exp_name"),
    "env": ("env", "env_id", "task"),
    "seed": ("seed",),
    "wall_time": ("wall_time", "_timestamp"),
}
WANDB_INTERNAL = ("_runtime", "_timestamp", "_step", "_wandb")
_WANDB_SEP = " - "


def parse_columns(text: str | None) -> dict[str, str]:
    """``"run=Name,step=_step"`` -> ``{"run": "Name", "step": "_step"}``.

    Raises:
        UsageError: an item without ``=``, an unknown role, a role twice.
    """
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        role, sep, column = item.partition("=")
        role = role.strip()
        if not sep or not column.strip():
            raise UsageError(
                f"--columns {text!r}: {item!r} is not ROLE=COLUMN, e.g. --columns run=Name,step=_step"
            )
        if role not in ROLES:
            raise UsageError(f"--columns {text!r}: unknown role {role!r}; roles: {', '.join(ROLES)}")
        if role in out:
            raise UsageError(f"--columns {text!r}: {role} is given twice")
        out[role] = column.strip()
    return out


def _load(path: Path, kind: str) -> Any:
    import pandas as pd

    if not path.exists():
        raise ImportInvalid(f"{path}: no such file; pass the {kind.upper()} file to import")
    if not path.is_file():
        raise ImportInvalid(f"{path}: not a file; pass one {kind.upper()} file")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pandas()
        _check_csv_lines(path)
        return pd.read_csv(path, low_memory=False)
    except ImportInvalid:
        raise
    except pd.errors.EmptyDataError:
        raise ImportInvalid(f"{path}: empty file, no header and no rows") from None
    except UnicodeDecodeError:
        raise ImportInvalid(f"{path}: not a text CSV file (not UTF-8)") from None
    except OSError as e:
        if e.filename or e.strerror:
            raise ImportInvalid(f"{path}: cannot be read ({e.strerror or e})") from None
        raise ImportInvalid(f"{path}: not a readable {kind} file ({_clip(str(e))})") from None
    except Exception as e:  # noqa: BLE001 - pandas/pyarrow parse errors of a damaged file
        raise ImportInvalid(
            f"{path}: not a readable {kind} file ({type(e).__name__}: {_clip(str(e))})"
        ) from None


def _check_csv_lines(path: Path) -> None:
    """Every record has as many fields as the header: a shorter one is a line cut off (pandas would read
    it as empty cells), a longer one a damaged file."""
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            return
        for record in reader:
            if record and len(record) != len(header):
                raise ImportInvalid(
                    f"{path}: line {reader.line_num}: {len(record)} field(s), the header has {len(header)} "
                    "(a truncated or damaged line?)"
                )


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _columns_list(columns: list[str], limit: int = 8) -> str:
    shown = ", ".join(repr(c) for c in columns[:limit])
    return shown + (f" and {len(columns) - limit} more" if len(columns) > limit else "")


def _resolve(path: Path, df: Any, mapping: dict[str, str]) -> dict[str, str]:
    cols = [str(c) for c in df.columns]
    roles: dict[str, str] = {}
    for role, column in mapping.items():
        if column not in cols:
            raise ImportInvalid(
                f"{path}: no column {column!r} (--columns {role}={column}); its columns: {_columns_list(cols)}"
            )
        roles[role] = column
    for role, names in ROLES.items():
        if role in roles:
            continue
        for name in names:
            if name in cols and name not in roles.values():
                roles[role] = name
                break
    if "step" not in roles:
        raise ImportInvalid(
            f"{path}: no step column (looked for {', '.join(ROLES['step'])}); its columns: {_columns_list(cols)}; "
            "name it with --columns step=COLUMN"
        )
    if ("name" in roles) != ("value" in roles):
        have, lack = ("name", "value") if "name" in roles else ("value", "name")
        raise ImportInvalid(
            f"{path}: a tidy file needs both a {have} and a {lack} column, found only {roles[have]!r}; "
            f"name it with --columns {lack}=COLUMN"
        )
    return roles


def _numbers(path: Path, series: Any, what: str, whole: bool = False) -> Any:
    import numpy as np
    import pandas as pd

    values = pd.to_numeric(series, errors="coerce")
    bad = values.isna() & series.notna()
    if whole:
        bad |= series.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ImportInvalid(
            f"{path}: row {row + 1}: {what} {_clip(repr(series.iloc[row]), 40)} is not a number"
            + ("; steps are whole numbers" if whole else "")
        )
    if whole:
        v = values.to_numpy(dtype=float)
        if not np.all(v == np.round(v)):
            row = int(np.flatnonzero(v != np.round(v))[0])
            raise ImportInvalid(f"{path}: row {row + 1}: {what} {float(v[row]):g} is not a whole number")
        return values.astype("int64")
    return values.astype(float)


def _tidy(path: Path, df: Any, roles: dict[str, str]) -> Any:
    """The file as tidy rows: columns run, step, name, value, wall_time (+ algo, env, seed if mapped)."""
    import pandas as pd

    if "name" in roles:
        out = pd.DataFrame({"step": df[roles["step"]], "name": df[roles["name"]].astype(str),
                            "value": _numbers(path, df[roles["value"]], f"value (column {roles['value']!r})")})  # fmt: skip
        keep = [c for c in ("run", "algo", "env", "seed", "wall_time") if c in roles]
        for role in keep:
            out[role] = df[roles[role]].to_numpy()
        return out.dropna(subset=["value"]) if len(out) else out
    used = set(roles.values())
    metric_cols = [c for c in df.columns if str(c) not in used and str(c) not in WANDB_INTERNAL]
    metric_cols = [c for c in metric_cols if not str(c).endswith(("__MIN", "__MAX"))]
    numeric = [c for c in metric_cols if pd.api.types.is_numeric_dtype(df[c]) or df[c].isna().all()]
    text = [c for c in metric_cols if c not in numeric]
    if text:
        c = text[0]
        raise ImportInvalid(
            f"{path}: column {str(c)!r} is not numeric, so it is not a metric, and it has no role; map it "
            f"(--columns run={c}, algo=..., env=..., seed=...) or drop it from the file"
        )
    if not numeric:
        raise ImportInvalid(
            f"{path}: no metric columns (every numeric column other than {', '.join(sorted(used))}); a tidy "
            "file needs name and value columns (--columns name=COLUMN,value=COLUMN)"
        )
    wandb_chart = "run" not in roles and all(_WANDB_SEP in str(c) for c in numeric)
    base = {"step": df[roles["step"]]}
    for role in ("run", "algo", "env", "seed", "wall_time"):
        if role in roles:
            base[role] = df[roles[role]]
    frame = pd.DataFrame(base)
    parts = []
    for c in numeric:
        part = frame.assign(name=str(c), value=pd.to_numeric(df[c], errors="coerce").astype(float))
        if wandb_chart:
            run, _, metric = str(c).partition(_WANDB_SEP)
            part = part.assign(run=run.strip(), name=metric.strip())
        parts.append(part.dropna(subset=["value"]))
    return pd.concat(parts, ignore_index=True)


def read(
    path: Path, kind: str = "csv", columns: str | None = None, pattern: str | None = None, **_: object
) -> list[ImportedRun]:
    """Every run of one CSV (``kind="csv"``) or Parquet (``kind="parquet"``) file; see the module doc."""
    path = Path(path)
    mapping = parse_columns(columns)
    compiled = parse_pattern(pattern or CLEANRL_PATTERN)
    df = _load(path, kind)
    if df.columns.empty or len(df) == 0:
        raise ImportInvalid(f"{path}: no rows; nothing to import")
    df.columns = [str(c) for c in df.columns]
    roles = _resolve(path, df, mapping)
    rows = _tidy(path, df, roles)
    if rows.empty:
        raise ImportInvalid(f"{path}: every metric value is empty; nothing to import")
    rows["step"] = _numbers(path, rows["step"], f"step (column {roles['step']!r})", whole=True)
    if "wall_time" in rows:
        rows["wall_time"] = _numbers(path, rows["wall_time"], f"wall time (column {roles['wall_time']!r})")
    if "run" not in rows:
        rows["run"] = path.stem
    rows["run"] = rows["run"].astype(str)
    runs = []
    for run, group in rows.groupby("run", sort=True):
        runs.append(_run(path, str(run), group, roles, compiled))
    return runs


def _run(path: Path, run: str, group: Any, roles: dict[str, str], pattern: Any) -> ImportedRun:
    parts: dict[str, Any] = {}
    for role in ("algo", "env", "seed"):
        if role in group:
            values = group[role].dropna().unique()
            if len(values) != 1:
                raise ImportInvalid(
                    f"{path}: run {run!r} has {len(values)} values in column {roles[role]!r} ({role}); a run "
                    "has one"
                )
            parts[role] = values[0]
    if len(parts) < 3:
        named = pattern.match(run)
        if named is None:
            lack = ", ".join(r for r in ("algo", "env", "seed") if r not in parts)
            raise ImportInvalid(
                f"{path}: run {run!r}: no {lack} column, and its name does not fit the pattern "
                f"{pattern.text!r}; add --columns {lack.split(', ')[0]}=COLUMN, or --pattern, e.g. "
                "--pattern '{algo=ppo}{env=CartPole-v1}{seed=0}' for one run"
            )
        parts = {**named, **parts}
    try:
        seed = int(float(parts["seed"]))
    except (TypeError, ValueError):
        raise ImportInvalid(f"{path}: run {run!r}: seed {parts['seed']!r} is not a whole number") from None
    metrics, walls = {}, {}
    for name, m in group.sort_values("step", kind="mergesort").groupby("name", sort=True):
        metrics[str(name)] = (m["step"].tolist(), m["value"].tolist())
        if "wall_time" in m:
            walls[str(name)] = m["wall_time"].tolist()
    return ImportedRun(key=run, algo=str(parts["algo"]), env=str(parts["env"]), seed=seed, config={},
                       metrics=metrics, wall_times=walls, source=str(path.resolve()))  # fmt: skip
