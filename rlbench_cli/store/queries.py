"""Reads: suites, runs, metric rows with their filters, AdaStop decisions, and the one read-only query of
``rlbench sql``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .schema import ARTIFACT_COLUMNS, RUN_COLUMNS


class Queries:
    """Reads on a reader connection (a mixin of ``Store``)."""

    def runs(self, con: Any, suite: str | None = None) -> list[dict[str, Any]]:
        sql = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"
        params: list[Any] = []
        if suite is not None:
            sql += " WHERE suite = ?"
            params.append(suite)
        sql += " ORDER BY suite, seed, algo, env"
        cur = con.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row)) for row in cur.fetchall()]

    def suites(self, con: Any) -> list[str]:
        return [r[0] for r in con.execute("SELECT name FROM suites ORDER BY name").fetchall()]

    def require_suite(self, con: Any, suite: str) -> None:
        """UnknownName naming the suites there unless ``suite`` is one of them."""
        suites = self.suites(con)
        if suite not in suites:
            from ..errors import UnknownName

            known = ", ".join(suites) or "none yet"
            raise UnknownName(f"no suite {suite!r} in {self.path} (suites there: {known})")

    def runs_per_suite(self, con: Any) -> dict[str, int] | None:
        """``{suite: runs}`` of every suite with runs; None when the file has no runs table (a DuckDB file
        that is not an rlbench results database)."""
        if not _has_table(con, "runs"):
            return None
        return {
            str(s): int(n)
            for s, n in con.execute("SELECT suite, count(*) FROM runs GROUP BY suite").fetchall()
        }

    def run_counts(self, con: Any, suite: str) -> tuple[int, int]:
        """``(unfinished, finished)``: how many runs of a suite have not finished (any other status), and
        how many have."""
        unfinished, finished = con.execute(
            "SELECT count(*) FILTER (status <> 'finished'), count(*) FILTER (status = 'finished') FROM runs "
            "WHERE suite = ?", [suite]
        ).fetchall()[0]  # fmt: skip
        return int(unfinished), int(finished)

    def metric_names(self, con: Any, suite: str) -> list[str]:
        """The distinct metric names logged by a suite's runs (any status), sorted."""
        return [r[0] for r in con.execute(
            "SELECT DISTINCT m.name FROM metrics m JOIN runs r USING (run_id) WHERE r.suite = ? ORDER BY 1",
            [suite]).fetchall()]  # fmt: skip

    def task_kinds(self, con: Any, suite: str) -> dict[str, str]:
        """``{task: "online" | "offline"}`` of a suite's finished runs: offline where a run trained on a
        dataset (its config has a ``dataset``), online where rlbench recorded none (``dataset: null``); tasks
        of runs whose config says neither (imported, e.g. d3rlpy logs) are left out."""
        rows = con.execute(
            "SELECT env, CASE WHEN bool_or(config->>'$.dataset' IS NOT NULL) THEN 'offline' "
            "WHEN bool_and(json_exists(config, '$.dataset')) THEN 'online' END "
            "FROM runs WHERE suite = ? AND status = 'finished' GROUP BY env", [suite]
        ).fetchall()  # fmt: skip
        return {str(env): kind for env, kind in rows if env is not None and kind is not None}

    def latest_values(self, con: Any, suite: str, names: Sequence[str]) -> dict[str, dict[str, float]]:
        """``{run_id: {name: value}}``: the value at the largest step of each of ``names`` per run of a suite
        (runs and names without a row are not listed)."""
        latest: dict[str, dict[str, float]] = {}
        for run_id, name, value in con.execute(
            """SELECT run_id, name, arg_max(value, step) FROM metrics
               WHERE list_contains(?::VARCHAR[], name)
               AND run_id IN (SELECT run_id FROM runs WHERE suite = ?) GROUP BY run_id, name""",
            [list(names), suite],
        ).fetchall():  # fmt: skip
            latest.setdefault(run_id, {})[name] = value
        return latest

    def query_metrics(
        self,
        con: Any,
        suite: str | None = None,
        algos: Sequence[str] = (),
        envs: Sequence[str] = (),
        seeds: Sequence[int] = (),
        metrics: Sequence[str] = (),
        statuses: Sequence[str] = (),
        run_ids: Sequence[str] | None = None,
        step_min: int | None = None,
        step_max: int | None = None,
    ) -> Any:
        """Tidy metric rows joined with their run, as a pyarrow Table. Every filter is a bound parameter.

        ``run_ids`` (None: any run) keeps those runs; ``step_min`` / ``step_max`` bound the step, inclusive.
        """
        sql, params = _metrics_sql(suite=suite, algos=algos, envs=envs, seeds=seeds, metrics=metrics,
                                   statuses=statuses, run_ids=run_ids, step_min=step_min, step_max=step_max)  # fmt: skip
        return con.sql(sql, params=params).to_arrow_table()

    def query_metrics_exists(self, con: Any, **filters: Any) -> bool:
        """Whether ``query_metrics`` with these filters has at least one row (without fetching them)."""
        sql, params = _metrics_sql(**filters)
        sql = sql[: sql.index(" ORDER BY ")]
        return bool(con.execute(f"SELECT EXISTS ({sql})", params).fetchall()[0][0])

    def metrics_to_parquet(
        self, con: Any, path: str | Path, columns: Sequence[str], limit: int | None = None, **filters: Any
    ) -> int:
        """Writes ``query_metrics``' rows (the ``columns`` given, same order) to a Parquet file with DuckDB's
        ``COPY ... TO ... (FORMAT parquet)``, streaming, without building the table in Python.

        The text columns travel through the join and the sort as ENUMs (``_enum_types``), which DuckDB writes
        as dictionary-encoded strings without hashing every row: the same rows, types and order, in about
        half the CPU time on 10M rows. Their Parquet fields are optional (DuckDB marks a field required only
        when its statistics say it holds no NULL, and a cast drops those statistics).

        Args:
            con: A connection (read-only is fine: COPY TO writes a file, not the database).
            path: The Parquet file (replaced).
            columns: Columns of ``query_metrics`` to write.
            limit: At most this many rows (the first ones in ``query_metrics``' order).
            **filters: As ``query_metrics``.

        Returns:
            The number of rows written.
        """
        sql, params = _metrics_sql(**filters, enums=_enum_types(con))
        unknown = [c for c in columns if c not in _METRIC_COLUMNS]
        if unknown:
            raise ValueError(f"unknown metric columns {unknown}")
        sql = f"SELECT {', '.join(columns)} FROM ({sql})"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        target = str(path).replace("'", "''")
        rows = con.execute(
            f"COPY ({sql}) TO '{target}' (FORMAT parquet, COMPRESSION snappy)", params
        ).fetchall()
        return int(rows[0][0]) if rows and rows[0] else 0

    def decisions(self, con: Any, suite: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """A suite's stored AdaStop decisions and the settings they were made with (None: none stored)."""
        if not _has_table(con, "adaptive_decisions"):
            return [], None  # a file of schema 2 or older, opened read-only: nothing stored
        cur = con.execute(
            """SELECT task, algo_a, algo_b, decision, look, runs_a, runs_b, mean_a, mean_b, settings
               FROM adaptive_decisions WHERE suite = ? ORDER BY task, algo_a, algo_b""", [suite])  # fmt: skip
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        settings = json.loads(rows[0].pop("settings")) if rows else None
        for r in rows:
            r.pop("settings", None)
        return rows, settings

    def artifacts(
        self, con: Any, run_id: str | None = None, suite: str | None = None, kind: str | None = None
    ) -> list[dict[str, Any]]:
        """Artifact rows (run_id, step, kind, path, bytes, sha256, created_at) of a run, a suite's runs or
        every run, optionally of one kind, by run, step, kind and path. ``path`` is relative to the run
        folder (``<runs folder>/<suite>/<run_id>/``), but for an imported run's ``source``. A file of schema
        3 or older, opened read-only, has no step, bytes or sha256: they read as None."""
        have = {r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'artifacts'").fetchall()}  # fmt: skip
        cols = ", ".join(f"a.{c}" if c in have else f"NULL AS {c}" for c in ARTIFACT_COLUMNS)
        where, params = [], []
        for col, value in (("a.run_id", run_id), ("r.suite", suite), ("a.kind", kind)):
            if value is not None:
                where.append(f"{col} = ?")
                params.append(value)
        cur = con.execute(
            f"SELECT {cols} FROM artifacts a JOIN runs r USING (run_id) "
            + (f"WHERE {' AND '.join(where)} " if where else "")
            + "ORDER BY a.run_id, "
            + ("a.step, " if "step" in have else "")
            + "a.kind, a.path",
            params,
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def suite_info(self, con: Any, suite: str) -> dict[str, Any] | None:
        """A suite's row (name, description, config as a dict, source_path); None when there is none."""
        rows = con.execute(
            "SELECT name, description, config, source_path FROM suites WHERE name = ?", [suite]
        ).fetchall()
        if not rows:
            return None
        name, description, config, source = rows[0]
        return {"name": name, "description": description or "", "config": json.loads(config) if config else {},
                "source_path": source}  # fmt: skip

    def select(self, con: Any, sql: str) -> Any:
        """Runs ONE read-only query (``SELECT``, ``WITH``, ``FROM``, ``SHOW``, ``DESCRIBE``, ``SUMMARIZE``,
        ``VALUES``, ``EXPLAIN``) on a reader connection and returns its result as a pyarrow Table.

        Anything else is refused before it runs, with one line saying why: statements that write (INSERT,
        UPDATE, DELETE, CREATE, ...; the connection is read-only anyway), and those a read-only connection
        would still let through: COPY and EXPORT (they write files), ATTACH, INSTALL / LOAD, SET, PRAGMA,
        CALL. Reading files (``read_csv``, ``read_parquet``) stays allowed; extensions are never downloaded.

        Raises:
            UsageError: no statement, several, a refused one, or DuckDB's own error (first line).
        """
        import duckdb

        from ..errors import UsageError, error_line

        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as e:
            raise UsageError(f"sql: {error_line(e)}") from None
        if not statements:
            raise UsageError(
                'sql: no statement to run; e.g. rlbench sql "SELECT suite, count(*) FROM runs GROUP BY ALL"'
            )
        if len(statements) > 1:
            raise UsageError(f"sql: {len(statements)} statements; rlbench sql runs one query at a time")
        kind = statements[0].type
        if kind not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
            name = str(kind).rsplit(".", 1)[-1]
            hint = (
                "to export a result, use -o FILE with --format csv, json or parquet"
                if name in ("COPY", "EXPORT")
                else "the results database is written only by rlbench run and rlbench fetch --from"
            )
            raise UsageError(
                f"sql: {name} statements are refused: rlbench sql runs one read-only query; {hint}"
            )
        try:
            con.execute("SET autoinstall_known_extensions = false")
            return con.sql(sql).to_arrow_table()
        except duckdb.Error as e:
            raise UsageError(f"sql: {error_line(e)}") from None


_METRIC_COLUMNS = ("run_id", "suite", "algo", "env", "seed", "step", "name", "value", "wall_time", "status")


# Distinct values above which a text column stays VARCHAR in a Parquet export (a long ENUM literal).
_ENUM_LIMIT = 200_000


def _enum_types(con: Any) -> dict[str, str]:
    """``{column: "ENUM('a', 'b', ...)"}``: an ENUM of the values of each text column of ``query_metrics``
    that has any and at most ``_ENUM_LIMIT`` of them (run_id, suite, algo, env from runs; name from
    metrics)."""
    out: dict[str, str] = {}
    for column, table in (("run_id", "runs"), ("suite", "runs"), ("algo", "runs"), ("env", "runs"),
                          ("name", "metrics")):  # fmt: skip
        values = con.execute(
            f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL LIMIT {_ENUM_LIMIT + 1}"
        ).fetchall()
        if 0 < len(values) <= _ENUM_LIMIT:
            out[column] = "ENUM(" + ", ".join("'" + str(v).replace("'", "''") + "'" for (v,) in values) + ")"
    return out


def _metrics_sql(
    suite: str | None = None,
    algos: Sequence[str] = (),
    envs: Sequence[str] = (),
    seeds: Sequence[int] = (),
    metrics: Sequence[str] = (),
    statuses: Sequence[str] = (),
    run_ids: Sequence[str] | None = None,
    step_min: int | None = None,
    step_max: int | None = None,
    enums: dict[str, str] | None = None,
) -> tuple[str, list[Any]]:
    """The SELECT of ``Store.query_metrics`` and its bound parameters. ``enums`` (``_enum_types``): those
    text columns are selected cast to their ENUM (cast once per run or name, before the join); the filters
    still compare the text."""
    where: list[str] = []
    params: list[Any] = []
    if run_ids is not None:
        where.append("list_contains(?::VARCHAR[], r.run_id)")
        params.append(list(run_ids))
    if step_min is not None:
        where.append("m.step >= ?")
        params.append(step_min)
    if step_max is not None:
        where.append("m.step <= ?")
        params.append(step_max)
    if suite is not None:
        where.append("r.suite = ?")
        params.append(suite)
    for col, values in (("r.algo", algos), ("r.env", envs), ("r.seed", seeds), ("m.name", metrics),
                        ("r.status", statuses)):  # fmt: skip
        if values:
            where.append(f"{col} IN ({', '.join('?' for _ in values)})")
            params.extend(values)
    enums = enums or {}
    src = {"run_id": "m", "suite": "r", "algo": "r", "env": "r", "name": "m"}
    text = {
        c: f"{'n' if c == 'name' else 'r'}._e_{c} AS {c}" if c in enums else f"{t}.{c}"
        for c, t in src.items()
    }
    cast = "".join(f", {c}::{enums[c]} AS _e_{c}" for c in ("run_id", "suite", "algo", "env") if c in enums)
    name_cast = f", name::{enums['name']} AS _e_name" if "name" in enums else ""
    sql = (  # ordered by each run's rank (suite, algo, env, seed) and name's: integers sort faster than text
        f"SELECT {text['run_id']}, {text['suite']}, {text['algo']}, {text['env']}, r.seed, m.step, "
        f"{text['name']}, m.value, m.wall_time, r.status FROM metrics m JOIN (SELECT *{cast}, (row_number() "
        "OVER (ORDER BY suite, algo, env, seed, run_id))::INTEGER AS _run FROM runs) r USING (run_id) JOIN "
        "(SELECT name"
        f"{name_cast}, (row_number() OVER (ORDER BY name))::INTEGER AS _name FROM (SELECT DISTINCT name FROM "
        "metrics)) n USING (name)"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r._run, n._name, m.step"
    return sql, params


def _has_table(con: Any, name: str) -> bool:
    return bool(
        con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]).fetchall()[
            0
        ][0]
    )
