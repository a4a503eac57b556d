"""The results database: the ONLY code that imports duckdb.

One writer, nothing lost (see DESIGN.md): DuckDB lets one process hold a file for writing, and while it
does, no other process can open it at all. So the coordinator opens the file only for the moment it writes
(``Store.writer()``), and readers (``Store.reader()``) retry briefly on a lock instead of failing. Workers
never open the file: they write Parquet shards that ``ingest_shards`` loads, idempotently, in one
transaction with the record of which shards it loaded.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import StoreBusy, StoreError
from .schema import SCHEMA_VERSION, migrate

__all__ = ["Store", "default_db_path", "RUN_COLUMNS", "TERMINAL", "SCHEMA_VERSION"]

TERMINAL = ("finished", "failed", "interrupted")

RUN_COLUMNS = (
    "run_id", "suite", "algo", "algo_name", "env", "seed", "config", "status", "attempts", "exit_code",
    "error", "started_at", "ended_at", "duration_s", "host", "device", "git_commit", "git_dirty",
    "python", "packages", "executor", "job_id",
)  # fmt: skip


def default_db_path() -> Path:
    return Path(os.environ.get("RLBENCH_DB") or "results/rlbench.duckdb")


def _is_lock_error(e: Exception) -> bool:
    text = str(e)
    return "lock" in text.lower() or "Conflicting lock" in text


# each offline-to-online run's phase boundary: the first step its train/phase metric is 1
_BOUNDARIES_SQL = "SELECT run_id, min(step) AS boundary FROM metrics WHERE name = 'train/phase' AND value = 1 GROUP BY run_id"


class Store:
    """A DuckDB results file. Cheap to construct; connections are opened per operation."""

    def __init__(self, path: str | Path | None = None, wait: float = 60.0):
        self.path = Path(path) if path is not None else default_db_path()
        self.wait = wait
        self._batch_con: Any = None  # the connection of an open ``batch``: its writes join that transaction

    # -- connections ------------------------------------------------------------------------------
    def _connect(self, read_only: bool, wait: float | None = None) -> Any:
        import duckdb

        problem = _not_duckdb(self.path)
        if problem:  # before DuckDB sees it: it would open a SQLite file through an extension it downloads
            raise StoreError(
                f"{self.path}: not a usable DuckDB results file ({problem}); pass your rlbench results file "
                "with --db or RLBENCH_DB"
            )
        wait = self.wait if wait is None else wait
        deadline = time.monotonic() + wait
        delay = 0.02
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.Error as e:  # IOException on a lock or a file that is not DuckDB
                if _is_lock_error(e) and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(
                        delay * 1.5, 0.1
                    )  # a writer in a burst leaves the file free >= 0.25 s at a time
                    continue
                if _is_lock_error(e):
                    raise StoreBusy(
                        f"{self.path}: another process has held the database for {wait:.0f}s; "
                        "try again when it finishes, or copy the file and pass the copy with --db"
                    ) from None
                raise StoreError(
                    f"{self.path}: not a usable DuckDB results file ({_first_line(e)})"
                ) from None

    @contextmanager
    def writer(self) -> Iterator[Any]:
        """A read-write connection, migrated to the current schema; closed on exit."""
        con = self.open_writer()
        try:
            yield con
        finally:
            con.close()

    def open_writer(self, migrated: bool = False, wait: float | None = None) -> Any:
        """A read-write connection the caller closes. ``migrated``: this process has already brought the file
        to the current schema (skips the check, ~15 ms); ``wait``: seconds to wait on a lock (default the
        store's; 0 raises StoreBusy at once if another process holds the file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._connect(read_only=False, wait=wait)
        if not migrated:
            try:
                migrate(con, self.path)
            except BaseException:
                con.close()
                raise
        return con

    @contextmanager
    def batch(self, con: Any) -> Iterator[Any]:
        """One transaction around several writes (``start_attempt``, ``ingest_shards``, ``end_attempt``, ...
        of many runs): all of them are recorded, or none. Those methods then skip their own transactions."""
        con.execute("BEGIN TRANSACTION")
        self._batch_con = con
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            self._batch_con = None

    @contextmanager
    def _transaction(self, con: Any) -> Iterator[None]:
        if self._batch_con is con:  # already inside ``batch``
            yield
            return
        con.execute("BEGIN TRANSACTION")
        try:
            yield
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    @contextmanager
    def reader(self) -> Iterator[Any]:
        """A read-only connection. Waits (up to ``wait`` seconds) while a writer holds the file."""
        if not self.path.exists():
            raise StoreError(
                f"{self.path}: no results database here; run a suite first (rlbench run SUITE.yaml) "
                "or point --db / RLBENCH_DB at your file"
            )
        con = self._connect(read_only=True)
        try:
            from .schema import check_version

            check_version(con, self.path)
            yield con
        finally:
            con.close()

    def exists(self) -> bool:
        return self.path.exists()

    # -- writing ----------------------------------------------------------------------------------
    def register_suite(self, con: Any, name: str, description: str, config: dict, source: str) -> None:
        con.execute(
            """INSERT INTO suites VALUES (?, ?, ?, ?, now(), now())
               ON CONFLICT (name) DO UPDATE SET description = excluded.description,
               config = excluded.config, source_path = excluded.source_path, updated_at = now()""",
            [name, description, json.dumps(config), source],
        )

    def add_runs(self, con: Any, rows: Sequence[dict[str, Any]]) -> None:
        """Insert runs that are not there yet as 'pending'. Existing rows are left untouched."""
        if not rows:
            return
        values = [
            [r["run_id"], r["suite"], r["algo"], r["algo_name"], r["env"], r["seed"], json.dumps(r["config"])]
            for r in rows
        ]
        for i in range(0, len(values), 500):  # one statement per 500 rows: executemany costs ~20 ms a row
            chunk = values[i : i + 500]
            con.execute(
                "INSERT INTO runs (run_id, suite, algo, algo_name, env, seed, config, status, attempts) VALUES "
                + ", ".join(["(?, ?, ?, ?, ?, ?, ?, 'pending', 0)"] * len(chunk))
                + " ON CONFLICT (run_id) DO NOTHING",
                [v for row in chunk for v in row],
            )

    def start_attempt(self, con: Any, run_id: str, attempt: int, manifest: dict[str, Any]) -> None:
        """A new attempt replaces what earlier attempts of this run put in the database.

        Their shard files stay on disk under their own attempt folder.
        """
        self.start_attempts(con, [(run_id, attempt, manifest)])

    def start_attempts(self, con: Any, items: Sequence[tuple[str, int, dict[str, Any]]]) -> None:
        """``start_attempt`` for many runs (run_id, attempt, manifest), each run at most once, in three
        statements whatever their number (three per run cost ~2 ms a run)."""
        if not items:
            return
        ids = [run_id for run_id, _, _ in items]
        marks = ", ".join(["?"] * len(ids))
        rows = [
            [run_id, attempt, m["started_at"], m.get("host"), m.get("device"), m.get("git_commit"),
             m.get("git_dirty"), m.get("python"), json.dumps(m.get("packages", {})), m.get("executor", "local"),
             m.get("job_id")]
            for run_id, attempt, m in items
        ]  # fmt: skip
        with self._transaction(con):
            con.execute(f"DELETE FROM metrics WHERE run_id IN ({marks})", ids)
            con.execute(f"DELETE FROM shards WHERE run_id IN ({marks})", ids)
            con.execute(
                """UPDATE runs SET status = 'running', attempts = v.attempts, exit_code = NULL, error = NULL,
                   started_at = to_timestamp(v.started_at), ended_at = NULL, duration_s = NULL, host = v.host,
                   device = v.device, git_commit = v.git_commit, git_dirty = v.git_dirty, python = v.python,
                   packages = v.packages, executor = v.executor, job_id = v.job_id
                   FROM (VALUES """
                + ", ".join(
                    ["(?, ?::INTEGER, ?::DOUBLE, ?::VARCHAR, ?::VARCHAR, ?::VARCHAR, ?::BOOLEAN, ?::VARCHAR, "
                     "?::JSON, ?::VARCHAR, ?::VARCHAR)"] * len(rows)
                )
                + """) AS v(run_id, attempts, started_at, host, device, git_commit, git_dirty, python, packages,
                          executor, job_id)
                   WHERE runs.run_id = v.run_id""",
                [x for row in rows for x in row],
            )  # fmt: skip

    def ingest_shards(self, con: Any, run_id: str, attempt: int, shards: Sequence[Path]) -> int:
        """Load shards not loaded before, in one transaction with their bookkeeping. Returns new rows."""
        return self.ingest_many(con, [(run_id, attempt, shards)])

    def ingest_many(self, con: Any, items: Sequence[tuple[str, int, Sequence[Path]]]) -> int:
        """``ingest_shards`` for many runs at once: (run_id, attempt, shards) each, in one statement per table
        (a statement per shard costs ~6 ms). Rows go in per item and shard in the order given."""
        want: dict[tuple[str, int, str], Path] = {}
        for run_id, attempt, shards in items:
            for p in shards:
                want.setdefault((run_id, int(attempt), p.name), p)
        if not want:
            return 0
        ids = sorted({k[0] for k in want})
        done = {
            (r[0], r[1], r[2])
            for r in con.execute(
                f"SELECT run_id, attempt, shard FROM shards WHERE run_id IN ({', '.join(['?'] * len(ids))})",
                ids,
            ).fetchall()
        }
        todo = [(k, p) for k, p in want.items() if k not in done]
        if not todo:
            return 0
        import pyarrow.parquet as pq

        counts = [pq.read_metadata(p).num_rows for _, p in todo]
        files = [str(p) for _, p in todo]
        runs = {k[0] for k, _ in todo}
        with self._transaction(con):
            if len(runs) == 1:  # one run's shards (a run's end, an import): read in the order given, no join
                con.execute(
                    "INSERT INTO metrics SELECT ?, step, name, value, wall_time FROM read_parquet(?)",
                    [next(iter(runs)), files],
                )  # DuckDB keeps the files' and rows' order (preserve_insertion_order, its default)
            else:
                con.execute(
                    "INSERT INTO metrics SELECT m.run_id, t.step, t.name, t.value, t.wall_time "
                    "FROM read_parquet(?, filename = true, file_row_number = true) t "
                    "JOIN (SELECT unnest(?) AS file, unnest(?) AS run_id, unnest(range(?)) AS i) m "
                    "ON t.filename = m.file ORDER BY m.i, t.file_row_number",
                    [files, files, [k[0] for k, _ in todo], len(todo)],
                )
            con.execute(
                "INSERT INTO shards VALUES " + ", ".join(["(?, ?, ?, ?, now())"] * len(todo)),
                [v for (k, _), n in zip(todo, counts) for v in (k[0], k[1], k[2], n)],
            )
        return sum(counts)

    def end_attempt(self, con: Any, run_id: str, status: str, outcome: dict[str, Any]) -> None:
        self.end_attempts(con, [(run_id, status, outcome)])

    def end_attempts(self, con: Any, items: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
        """``end_attempt`` for many runs (run_id, status, outcome), each run at most once, in one statement."""
        if not items:
            return
        rows = [
            [
                run_id,
                status,
                o.get("exit_code"),
                o.get("error"),
                o.get("ended_at", time.time()),
                o.get("duration_s"),
            ]
            for run_id, status, o in items
        ]
        con.execute(
            """UPDATE runs SET status = v.status, exit_code = v.exit_code, error = v.error,
               ended_at = to_timestamp(v.ended_at), duration_s = v.duration_s
               FROM (VALUES """
            + ", ".join(["(?, ?::VARCHAR, ?::INTEGER, ?::VARCHAR, ?::DOUBLE, ?::DOUBLE)"] * len(rows))
            + """) AS v(run_id, status, exit_code, error, ended_at, duration_s)
               WHERE runs.run_id = v.run_id""",
            [x for row in rows for x in row],
        )

    def import_runs(
        self,
        con: Any,
        suite: str,
        description: str,
        runs: Sequence[dict[str, Any]],
        metrics: Any,
        source: str | None = None,
    ) -> tuple[int, int]:
        """Add finished runs read from another tool, with their metrics, in ONE transaction.

        Runs whose run_id is already in the database are skipped with their metrics, so importing the same
        runs twice adds nothing. The suite is registered if new (config ``{}``); an existing suite row is
        left as it is.

        Args:
            con: A writer connection.
            suite: Suite name.
            description: The suite's description if it is new, e.g. where the runs were imported from.
            runs: Dicts with run_id, suite, algo, algo_name, env, seed, config (a dict) and optionally source
                (a path, recorded in ``artifacts`` with kind ``source``).
            metrics: pyarrow Table with columns run_id, step, name, value, wall_time; loaded in one bulk
                insert (rows of runs already present are dropped first).
            source: Recorded as the suite's source_path when the suite is new.

        Returns:
            ``(new runs, new metric rows)``.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        views: list[str] = []
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "INSERT INTO suites VALUES (?, ?, ?, ?, now(), now()) ON CONFLICT (name) DO NOTHING",
                [suite, description, "{}", source],
            )
            candidates = [r["run_id"] for r in runs]
            present = {
                r[0]
                for r in con.execute(
                    "SELECT run_id FROM runs WHERE list_contains(?::VARCHAR[], run_id)", [candidates]
                ).fetchall()
            }
            new = [r for r in runs if r["run_id"] not in present]
            added_rows = 0
            if new:
                new_runs = pa.table(
                    {
                        "run_id": pa.array([r["run_id"] for r in new], pa.string()),
                        "suite": pa.array([r["suite"] for r in new], pa.string()),
                        "algo": pa.array([r["algo"] for r in new], pa.string()),
                        "algo_name": pa.array([r.get("algo_name") for r in new], pa.string()),
                        "env": pa.array([r.get("env") for r in new], pa.string()),
                        "seed": pa.array([r.get("seed") for r in new], pa.int32()),
                        "config": pa.array([json.dumps(r.get("config", {})) for r in new], pa.string()),
                        "source": pa.array([r.get("source") or None for r in new], pa.string()),
                    }
                )
                mask = pc.is_in(metrics["run_id"], value_set=new_runs["run_id"])
                keep = metrics if pc.all(mask).as_py() else metrics.filter(mask)  # all kept: no copy
                con.register("_rlbench_import_runs", new_runs)
                con.register("_rlbench_import_metrics", keep)
                views += ["_rlbench_import_runs", "_rlbench_import_metrics"]
                con.execute(
                    """INSERT INTO runs (run_id, suite, algo, algo_name, env, seed, config, status, attempts)
                       SELECT run_id, suite, algo, algo_name, env, seed, config::JSON, 'finished', 1
                       FROM _rlbench_import_runs"""
                )
                con.execute(
                    """INSERT INTO artifacts (run_id, kind, path) SELECT run_id, 'source', source
                       FROM _rlbench_import_runs WHERE source IS NOT NULL"""
                )
                con.execute(
                    """INSERT INTO metrics SELECT run_id, step, name, value, wall_time
                       FROM _rlbench_import_metrics"""
                )
                added_rows = keep.num_rows
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            for view in views:
                con.unregister(view)
        return len(new), added_rows

    def save_decisions(
        self, con: Any, suite: str, rows: Sequence[dict[str, Any]], settings: dict[str, Any]
    ) -> None:
        """Replace a suite's AdaStop decisions (``adaptive.Comparison`` fields as dicts), in one transaction."""
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("DELETE FROM adaptive_decisions WHERE suite = ?", [suite])
            con.executemany(
                "INSERT INTO adaptive_decisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())",
                [[suite, r["task"], r["algo_a"], r["algo_b"], r["decision"], r["look"], r["runs_a"], r["runs_b"],
                  _finite(r["mean_a"]), _finite(r["mean_b"]), json.dumps(settings)] for r in rows],
            )  # fmt: skip
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def decisions(self, con: Any, suite: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """A suite's stored AdaStop decisions and the settings they were made with (None: none stored)."""
        if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = "
                           "'adaptive_decisions'").fetchall()[0][0]:  # fmt: skip
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

    def merge_from(self, con: Any, other: Path, suites: Sequence[str]) -> tuple[int, int]:
        """Copy the runs of ``suites`` from another rlbench database, attached read-only, in ONE transaction.

        Runs keep their run ids and every manifest column both files have; run ids already here are skipped
        with their metric rows and artifacts; suites already here keep their row. The caller checks the
        other file's schema version first (``Store(other).reader()``).

        Returns:
            ``(new runs, new metric rows)``.
        """
        import duckdb

        alias = "_rlbench_other"
        try:
            con.execute(f"ATTACH ? AS {alias} (READ_ONLY)", [str(other)])
        except duckdb.Error as e:  # a writer took the other file since it was checked, or it went away
            raise StoreError(f"{other}: cannot be opened to merge ({_first_line(e)}); try again") from None
        try:

            def columns(catalog: str, table: str) -> list[str]:
                return [r[0] for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? "
                    "AND table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", [catalog, table],
                ).fetchall()]  # fmt: skip

            here = con.execute("SELECT current_database()").fetchall()[0][0]
            theirs = set(columns(alias, "runs"))
            cols = ", ".join(f'"{c}"' for c in columns(here, "runs") if c in theirs)
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(
                    f"""CREATE TEMP TABLE _rlbench_merge AS SELECT run_id FROM {alias}.runs
                        WHERE list_contains(?::VARCHAR[], suite) AND run_id NOT IN (SELECT run_id FROM runs)""",
                    [list(suites)],
                )
                con.execute(
                    f"""INSERT INTO suites SELECT name, description, config, source_path, created_at, updated_at
                        FROM {alias}.suites WHERE list_contains(?::VARCHAR[], name) ON CONFLICT (name) DO NOTHING""",
                    [list(suites)],
                )
                new_runs = con.execute(
                    f"INSERT INTO runs ({cols}) SELECT {cols} FROM {alias}.runs "
                    "WHERE run_id IN (SELECT run_id FROM _rlbench_merge)"
                ).fetchall()[0][0]
                new_rows = con.execute(
                    f"INSERT INTO metrics SELECT run_id, step, name, value, wall_time FROM {alias}.metrics "
                    "WHERE run_id IN (SELECT run_id FROM _rlbench_merge)"
                ).fetchall()[0][0]
                con.execute(
                    f"INSERT INTO artifacts SELECT run_id, kind, path, created_at FROM {alias}.artifacts "
                    "WHERE run_id IN (SELECT run_id FROM _rlbench_merge)"
                )
                con.execute("DROP TABLE _rlbench_merge")
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        finally:
            con.execute(f"DETACH {alias}")
        return int(new_runs), int(new_rows)

    # -- reading ----------------------------------------------------------------------------------
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

        Args:
            con: A connection (read-only is fine: COPY TO writes a file, not the database).
            path: The Parquet file (replaced).
            columns: Columns of ``query_metrics`` to write.
            limit: At most this many rows (the first ones in ``query_metrics``' order).
            **filters: As ``query_metrics``.

        Returns:
            The number of rows written.
        """
        sql, params = _metrics_sql(**filters)
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

    def run_scores(
        self,
        con: Any,
        *,
        suite: str,
        metric: str,
        rule: str,
        n: int | None = None,
        drop_first: int = 0,
        statuses: Sequence[str] = ("finished",),
        envs: Sequence[str] = (),
        algos: Sequence[str] = (),
        seeds: Sequence[int] = (),
        run_ids: Sequence[str] | None = None,
        step_min: int | None = None,
        step_max: int | None = None,
        phase: str | None = None,
    ) -> Any:
        """One score per run by a score rule, computed in SQL (one aggregate per run), as a pyarrow Table.

        The same numbers as ``stats.run_scores`` on the runs' rows of ``metric`` (``stats.finish_run_scores``
        turns this table into its output, warnings and errors included), without loading the rows: a run's
        evaluations are numbered by step before non-finite values (NULL, NaN, inf) are left out, the first
        ``drop_first`` are dropped, then the rule: ``final`` is the value at the largest step (``arg_max``),
        ``best`` the maximum, ``mean_last`` the mean of the last ``n`` points and ``auc`` the trapezoids over
        consecutive points (``lag``) divided by the step span (the mean when the span is 0). Sums are
        exactly rounded (DuckDB's ``fsum``, 2.0.1 and later), as ``stats.run_scores`` sums them (``math.fsum``), so
        they agree to the bit.

        Args:
            suite: Suite whose runs are scored.
            metric: Metric name, e.g. ``eval/return``.
            rule: ``final``, ``best``, ``mean_last`` or ``auc`` (parsed: ``stats.parse_rule``).
            n: N of ``mean_last``.
            drop_first: Evaluations dropped from the start of each run.
            statuses: Run statuses kept (all when empty).
            envs, algos, seeds, run_ids, step_min, step_max: Other filters, as in ``query_metrics``
                (the steps bound the rows, before the evaluations are numbered).
            phase: ``offline`` or ``online``: only the rows of that phase of each run, by its phase boundary
                (``phase_boundaries``), before the evaluations are numbered, as ``stats.phase_rows``.

        Returns:
            Columns ``run_id, algo, env, seed, score, rows, nonfinite, points, status``: one row per run with at least
            one row of the metric; ``rows`` counts them, ``nonfinite`` those left out as non-finite,
            ``points`` the finite ones the rule used (0: the run is emptied by ``drop_first``; ``score`` is
            then NULL). Ordered by ``run_id``.
        """
        if rule not in ("final", "best", "mean_last", "auc"):
            raise ValueError(f"unknown score rule {rule!r}")
        if rule == "mean_last" and (n is None or int(n) < 1):
            raise ValueError("mean_last needs n >= 1")
        where, params = ["r.suite = ?"], [suite]
        for col, values in (("r.status", statuses), ("r.env", envs), ("r.algo", algos), ("r.seed", seeds)):
            if values:
                where.append(f"{col} IN ({', '.join('?' for _ in values)})")
                params.extend(values)
        if run_ids is not None:
            where.append("list_contains(?::VARCHAR[], r.run_id)")
            params.append(list(run_ids))
        steps, step_params = "", []
        if step_min is not None:
            steps += " AND m.step >= ?"
            step_params.append(step_min)
        if step_max is not None:
            steps += " AND m.step <= ?"
            step_params.append(step_max)
        join = ""
        if phase is not None:
            if phase not in ("offline", "online"):
                raise ValueError(f"unknown phase {phase!r}")
            join = f" LEFT JOIN ({_BOUNDARIES_SQL}) pb ON pb.run_id = m.run_id"
            steps += (
                " AND (pb.boundary IS NULL OR m.step <= pb.boundary)"
                if phase == "offline"
                else (" AND m.step > pb.boundary")
            )
        ok = "(m.value IS NOT NULL AND isfinite(m.value))"
        # the k-th evaluation of a run by step, counted before non-finite values are left out (stats._clean)
        k = "row_number() OVER (PARTITION BY m.run_id ORDER BY m.step)" if drop_first else "1"
        rows = (
            f"SELECT m.run_id, m.step, m.value, {ok} AS ok, {k} AS k FROM metrics m{join} "
            f"WHERE m.name = ?{steps} AND m.run_id IN (SELECT r.run_id FROM runs r WHERE {' AND '.join(where)})"
        )
        params = [metric, *step_params, *params]
        keep = f"ok AND k > {int(drop_first)}"
        if rule in ("final", "best"):
            score = "arg_max(value, step)" if rule == "final" else "max(value)"
            per_run = (
                f"SELECT run_id, count(*) AS rows, count(*) FILTER (NOT ok) AS nonfinite, "
                f"count(*) FILTER ({keep}) AS points, {score} FILTER ({keep}) AS score FROM ({rows}) GROUP BY run_id"
            )
        else:
            if rule == "mean_last":
                kept = (
                    f"SELECT run_id, step, value, row_number() OVER (PARTITION BY run_id ORDER BY step DESC) "
                    f"AS back FROM ({rows}) WHERE {keep}"
                )
                score = f"fsum(value ORDER BY step) FILTER (back <= {int(n)}) / count(*) FILTER (back <= {int(n)})"
            else:  # trapezoids over consecutive kept points; their first has no area (pandas: fillna(0))
                kept = (
                    f"SELECT run_id, step, value, coalesce((value + lag(value) OVER w) / 2.0 * "
                    f"(step::DOUBLE - (lag(step) OVER w)::DOUBLE), 0.0) AS area FROM ({rows}) WHERE {keep} "
                    "WINDOW w AS (PARTITION BY run_id ORDER BY step)"
                )
                span = "(max(step)::DOUBLE - min(step)::DOUBLE)"
                score = (
                    f"CASE WHEN {span} > 0 THEN fsum(area ORDER BY step) / {span} "
                    "ELSE fsum(value ORDER BY step) / count(*) END"
                )
            per_run = (
                f"SELECT a.run_id, a.rows, a.nonfinite, coalesce(b.points, 0) AS points, b.score FROM "
                f"(SELECT run_id, count(*) AS rows, count(*) FILTER (NOT ok) AS nonfinite FROM ({rows}) "
                f"GROUP BY run_id) a LEFT JOIN (SELECT run_id, count(*) AS points, {score} AS score "
                f"FROM ({kept}) GROUP BY run_id) b USING (run_id)"
            )
            params = params * 2
        sql = (
            "SELECT s.run_id, r.algo, r.env, r.seed, s.score::DOUBLE AS score, s.rows, s.nonfinite, s.points, "
            "r.status "
            f"FROM ({per_run}) s JOIN runs r USING (run_id) ORDER BY s.run_id"
        )
        return con.sql(sql, params=params).to_arrow_table()

    def phase_boundaries(self, con: Any, suite: str) -> dict[str, int]:
        """``{run_id: step}``: the phase boundary (last offline step) of each offline-to-online run of a
        suite, the first step its ``train/phase`` metric is 1; runs without one are not listed."""
        rows = con.execute(
            f"SELECT b.run_id, b.boundary FROM ({_BOUNDARIES_SQL}) b JOIN runs r USING (run_id) WHERE r.suite = ?",
            [suite],
        ).fetchall()
        return {str(run_id): int(step) for run_id, step in rows}

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

        from ..errors import UsageError

        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as e:
            raise UsageError(f"sql: {_first_line(e)}") from None
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
            raise UsageError(f"sql: {_first_line(e)}") from None

    def export_bundle(self, con: Any, suite: str, out: Path) -> tuple[int, int]:
        """Write a suite's finished runs as a results bundle: ``runs.parquet`` (every runs column, config as
        JSON text), ``metrics.parquet`` (run_id, step, name, value, wall_time) and ``suite.json`` (the suite's
        config), zstd-compressed. ``rlbench fetch --from rlbench:DIR`` reads it back. Returns (runs, rows)."""
        import pyarrow.parquet as pq

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        cols = ", ".join(
            f"CAST({c} AS VARCHAR) AS {c}" if c in ("config", "packages") else c for c in RUN_COLUMNS
        )
        runs = con.sql(f"SELECT {cols} FROM runs WHERE suite = ? AND status = 'finished' ORDER BY run_id",
                       params=[suite]).to_arrow_table()  # fmt: skip
        metrics = con.sql(
            """SELECT m.run_id, m.step, m.name, m.value, m.wall_time FROM metrics m JOIN runs r USING (run_id)
               WHERE r.suite = ? AND r.status = 'finished' ORDER BY m.run_id, m.name, m.step""",
            params=[suite],
        ).to_arrow_table()
        suite_row = con.execute("SELECT description, config FROM suites WHERE name = ?", [suite]).fetchall()
        pq.write_table(runs, out / "runs.parquet", compression="zstd")
        pq.write_table(metrics, out / "metrics.parquet", compression="zstd")
        config = json.loads(suite_row[0][1]) if suite_row and suite_row[0][1] else {}
        (out / "suite.json").write_text(json.dumps(
            {"name": suite, "description": suite_row[0][0] if suite_row else "", "config": config}, indent=1
        ) + "\n")  # fmt: skip
        return runs.num_rows, metrics.num_rows

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

    def import_bundle(
        self, con: Any, suite: dict[str, Any], runs: Any, metrics: Any, source: str
    ) -> tuple[int, int]:
        """Add a bundle's runs as they were recorded (run ids, status and every manifest column the bundle
        has), with their metric rows (wall_time included), in ONE transaction.

        Runs whose run_id is already here are skipped with their rows, so importing a bundle twice adds
        nothing. The suite row is added (description and config from the bundle) when the suite is new.

        Args:
            con: A writer connection.
            suite: ``{"name", "description", "config"}``; every run's ``suite`` column already says its name.
            runs: pyarrow Table of runs rows (a subset of ``RUN_COLUMNS`` with at least run_id, suite, algo,
                status; config and packages as JSON text), run ids unique.
            metrics: pyarrow Table run_id, step, name, value, wall_time.
            source: Where the bundle came from; the suite's source_path if new, each run's ``source`` artifact.

        Returns:
            ``(new runs, new metric rows)``.
        """
        cols = [c for c in RUN_COLUMNS if c in runs.column_names]
        select = ", ".join(f'"{c}"::JSON' if c in ("config", "packages") else f'"{c}"' for c in cols)
        views = ["_rlbench_bundle_runs", "_rlbench_bundle_metrics"]
        con.register(views[0], runs.select(cols))
        con.register(views[1], metrics.select(["run_id", "step", "name", "value", "wall_time"]))
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "INSERT INTO suites VALUES (?, ?, ?, ?, now(), now()) ON CONFLICT (name) DO NOTHING",
                [suite["name"], suite.get("description", ""), json.dumps(suite.get("config") or {}), source],
            )
            con.execute(
                f"""CREATE TEMP TABLE _rlbench_bundle_new AS SELECT run_id FROM {views[0]}
                    WHERE run_id NOT IN (SELECT run_id FROM runs)"""
            )
            new = "SELECT run_id FROM _rlbench_bundle_new"
            new_runs = con.execute(
                f"INSERT INTO runs ({', '.join(cols)}) SELECT {select} FROM {views[0]} WHERE run_id IN ({new})"
            ).fetchall()[0][0]
            new_rows = con.execute(
                f"""INSERT INTO metrics SELECT run_id, step, name, value, wall_time FROM {views[1]}
                    WHERE run_id IN ({new})"""
            ).fetchall()[0][0]
            con.execute(f"INSERT INTO artifacts (run_id, kind, path) SELECT run_id, 'source', ? FROM ({new})",
                        [source])  # fmt: skip
            con.execute("DROP TABLE _rlbench_bundle_new")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            for view in views:
                con.unregister(view)
        return int(new_runs), int(new_rows)


_METRIC_COLUMNS = ("run_id", "suite", "algo", "env", "seed", "step", "name", "value", "wall_time", "status")


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
) -> tuple[str, list[Any]]:
    """The SELECT of ``Store.query_metrics`` and its bound parameters."""
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
    sql = (  # ordered by each run's rank (suite, algo, env, seed) and name's: integers sort faster than text
        "SELECT m.run_id, r.suite, r.algo, r.env, r.seed, m.step, m.name, m.value, m.wall_time, r.status "
        "FROM metrics m JOIN (SELECT *, (row_number() OVER (ORDER BY suite, algo, env, seed, run_id))::INTEGER "
        "AS _run FROM runs) r USING (run_id) JOIN (SELECT name, (row_number() OVER (ORDER BY name))::INTEGER AS "
        "_name FROM (SELECT DISTINCT name FROM metrics)) n USING (name)"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r._run, n._name, m.step"
    return sql, params


def _not_duckdb(path: Path) -> str | None:
    """Why ``path`` is not a DuckDB database, from its first bytes; None when it is, or is not a file."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:  # missing (DuckDB creates it), a folder or unreadable: DuckDB's own message says so
        return None
    if not head:
        return None
    if head.startswith(b"SQLite format 3"):
        return "it is a SQLite database"
    if head[8:12] != b"DUCK":
        return "it is not a DuckDB database file"
    return None


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None
