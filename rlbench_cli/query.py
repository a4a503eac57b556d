"""What ``rlbench fetch`` returns, as plain functions for Python users: a results database's metric rows (tidy,
or one column per metric), one score per run, or the tidy rows written to a Parquet file, selected by suite,
algorithm, env, seed, status, steps and the runs' config values.

``filters`` is ``Store.query_metrics``' keyword filters as a dict: ``suite`` (None: every suite), ``algos``,
``envs``, ``seeds``, ``statuses`` (empty: all), ``step_min``, ``step_max`` (inclusive; None: open). ``where``
is a list of conditions on each run's config, as ``parse_where`` reads them from ``KEY=VALUE`` texts.

Example::

    from rlbench_cli import query
    from rlbench_cli.store import Store

    rows = query.metric_rows(Store("results/rlbench.duckdb"), {"suite": "quickstart"}, metrics=["eval/return"],
                             where=query.parse_where(["learning_rate=0.001"]), wide=True)
    rows.to_pandas()  # one row per run and step, one column per metric
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .analysis import score_runs, shared_reader
from .errors import UsageError

__all__ = [
    "COLUMNS",
    "WIDE_KEYS",
    "config_value",
    "matches",
    "metric_rows",
    "parse_where",
    "rows_to_parquet",
    "run_config",
    "scores",
    "wide",
]

COLUMNS = ["run_id", "suite", "algo", "env", "seed", "step", "name", "value", "wall_time"]
WIDE_KEYS = ["run_id", "suite", "algo", "env", "seed", "step"]

Where = list[tuple[str, Any, str]]


def parse_where(items: list[str] | None) -> Where:
    """``["lr=0.001"]`` -> ``[("lr", 0.001, "0.001")]``: the key, the value as JSON reads it, the text."""
    out = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"--where {item!r}: use KEY=VALUE, e.g. --where lr=0.001 or --where params.gamma=0.99"
            )
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.append((key.strip(), parsed, value))
    return out


_MISSING = object()


def config_value(config: Any, key: str) -> Any:
    """``config[key]`` along a dotted path; a plain key not at the top is looked up in ``params`` (where a
    suite's hyperparameters are). ``_MISSING`` when it is not there."""
    for path in [key.split(".")] + ([["params", key]] if "." not in key else []):
        node = config
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                node = _MISSING
                break
        if node is not _MISSING:
            return node
    return _MISSING


def _same(have: Any, want: Any, text: str) -> bool:
    if isinstance(have, bool) or isinstance(want, bool):
        return have is want or (isinstance(have, str) and have == text)
    if isinstance(have, (int, float)) and isinstance(want, (int, float)):
        return math.isclose(float(have), float(want), rel_tol=1e-9, abs_tol=0.0)
    if isinstance(have, (dict, list)):
        return have == want
    return str(have) == text or have == want


def matches(config: Any, where: Where) -> bool:
    """Whether a run's config has every ``KEY=VALUE`` of ``where`` (numbers compare as numbers)."""
    return all(
        (v := config_value(config, key)) is not _MISSING and _same(v, want, text) for key, want, text in where
    )


def run_config(value: Any) -> Any:
    """A run's stored config as a dict (``{}`` when it is not JSON)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return {}
    return value or {}


@contextmanager
def _selected(store: Any, filters: dict[str, Any], where: Where) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """One read-only connection: the shared reader, the connection and ``filters`` with the ``run_ids`` that
    ``where`` keeps. UnknownName when ``filters["suite"]`` is not in the database."""
    suite = filters.get("suite")
    with shared_reader(store) as reads, reads.reader() as con:
        if suite is not None:
            store.require_suite(con, suite)
        if where:
            kept = [r["run_id"] for r in store.runs(con, suite) if matches(run_config(r["config"]), where)]
            filters = {**filters, "run_ids": kept}
        yield reads, con, filters


def metric_rows(
    store: Any,
    filters: dict[str, Any],
    metrics: list[str] | tuple[str, ...] = (),
    where: Where | None = None,
    wide_rows: bool = False,
) -> Any:
    """The selected runs' rows of ``metrics`` (empty: every metric): a pyarrow Table with ``COLUMNS``, or,
    with ``wide_rows``, ``wide``'s one row per run and step. Empty when nothing matches.

    Raises:
        UnknownName: ``filters["suite"]`` is not in the database.
    """
    with _selected(store, filters, where or []) as (_, con, selected):
        table = store.query_metrics(con, metrics=metrics or (), **selected)
    if table.num_rows == 0:
        return table
    return wide(table) if wide_rows else table.select(COLUMNS)


def scores(
    store: Any,
    filters: dict[str, Any],
    where: Where | None,
    metric: str | None,
    rule: str | None,
    drop_first: int | None,
) -> tuple[Any, list[str]]:
    """One score per selected run (``analysis.score_runs``: each suite's score rule unless ``rule`` is given):
    a pyarrow Table with ``analysis.SCORE_COLUMNS`` (empty when nothing matches) and the warnings.

    Raises:
        UnknownName: ``filters["suite"]`` is not in the database.
    """
    with _selected(store, filters, where or []) as (reads, _, selected):  # each suite's rule read on it too
        return score_runs(reads, selected, metric, rule, drop_first)


def rows_to_parquet(
    store: Any,
    path: Path,
    filters: dict[str, Any],
    metrics: list[str] | tuple[str, ...] = (),
    where: Where | None = None,
    limit: int | None = None,
) -> int | None:
    """The tidy rows ``metric_rows`` returns, at most ``limit`` of them, written to a Parquet file by DuckDB
    (``Store.metrics_to_parquet``: streaming, seconds for millions of rows, no pandas). The number of rows
    written; None, and no file, when nothing matches.

    Raises:
        UnknownName: ``filters["suite"]`` is not in the database.
    """
    with _selected(store, {**filters, "metrics": metrics or ()}, where or []) as (_, con, selected):
        if not store.query_metrics_exists(con, **selected):
            return None
        return store.metrics_to_parquet(con, path, COLUMNS, limit=limit, **selected)


def wide(table: Any) -> Any:
    """Tidy rows -> one row per (run, step), one column per metric (the last value logged at that step, NaN
    included); rows only for the (run, step) pairs that have rows."""
    import pyarrow as pa

    df = table.select(WIDE_KEYS + ["name", "value"]).to_pandas()
    df = df.drop_duplicates(WIDE_KEYS + ["name"], keep="last")
    out = df.set_index(WIDE_KEYS + ["name"])["value"].unstack("name").sort_index().reset_index()
    out.columns.name = None
    return pa.Table.from_pandas(out, preserve_index=False)
