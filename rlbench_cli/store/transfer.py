"""Runs between databases: results bundles out and in, another rlbench file merged, other tools' runs in.

Each import is ONE transaction, and skips run ids already present with their rows, so importing twice adds
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import StoreError, error_line
from .connection import Connections
from .schema import ARTIFACT_COLUMNS, RUN_COLUMNS

_ARTIFACT_ROW = ("run_id", "step", "kind", "path", "bytes", "sha256")


class Transfer(Connections):
    """Exports and imports (a part of ``Store``)."""

    def export_bundle(self, con: Any, suite: str, out: Path) -> tuple[int, int]:
        """Write a suite's finished runs as a results bundle: ``runs.parquet`` (every runs column, config as
        JSON text), ``metrics.parquet`` (run_id, step, name, value, wall_time), ``artifacts.parquet`` (run_id,
        step, kind, path, bytes, sha256: the runs' listed files) and ``suite.json`` (the suite's config),
        zstd-compressed. ``rlbench fetch --from rlbench:DIR`` reads it back. Returns (runs, rows)."""
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
        artifacts = con.sql(
            """SELECT a.run_id, a.step, a.kind, a.path, a.bytes, a.sha256 FROM artifacts a JOIN runs r
               USING (run_id) WHERE r.suite = ? AND r.status = 'finished' AND a.kind <> 'source'
               ORDER BY a.run_id, a.step, a.kind, a.path""",
            params=[suite],
        ).to_arrow_table()
        pq.write_table(runs, out / "runs.parquet", compression="zstd")
        pq.write_table(metrics, out / "metrics.parquet", compression="zstd")
        pq.write_table(artifacts, out / "artifacts.parquet", compression="zstd")
        config = json.loads(suite_row[0][1]) if suite_row and suite_row[0][1] else {}
        (out / "suite.json").write_text(json.dumps(
            {"name": suite, "description": suite_row[0][0] if suite_row else "", "config": config}, indent=1
        ) + "\n")  # fmt: skip
        return runs.num_rows, metrics.num_rows

    def import_bundle(
        self, con: Any, suite: dict[str, Any], runs: Any, metrics: Any, source: str, artifacts: Any = None
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
            artifacts: pyarrow Table run_id, step, kind, path, bytes, sha256 of files the caller has put in
                place (a bundle's carried policies), or None.

        Returns:
            ``(new runs, new metric rows)``.
        """
        cols = [c for c in RUN_COLUMNS if c in runs.column_names]
        select = ", ".join(f'"{c}"::JSON' if c in ("config", "packages") else f'"{c}"' for c in cols)
        views = ["_rlbench_bundle_runs", "_rlbench_bundle_metrics"]
        con.register(views[0], runs.select(cols))
        con.register(views[1], metrics.select(["run_id", "step", "name", "value", "wall_time"]))
        try:
            with self._transaction(con):
                con.execute(
                    "INSERT INTO suites VALUES (?, ?, ?, ?, now(), now()) ON CONFLICT (name) DO NOTHING",
                    [
                        suite["name"],
                        suite.get("description", ""),
                        json.dumps(suite.get("config") or {}),
                        source,
                    ],
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
                if artifacts is not None and artifacts.num_rows:
                    con.register("_rlbench_bundle_artifacts", artifacts.select(list(_ARTIFACT_ROW)))
                    views.append("_rlbench_bundle_artifacts")
                    con.execute(f"""INSERT INTO artifacts ({", ".join(_ARTIFACT_ROW)})
                                    SELECT {", ".join(_ARTIFACT_ROW)} FROM _rlbench_bundle_artifacts
                                    WHERE run_id IN ({new})""")  # fmt: skip
                con.execute("DROP TABLE _rlbench_bundle_new")
        finally:
            for view in views:
                con.unregister(view)
        return int(new_runs), int(new_rows)

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

        from ..arrowbuf import optional_int32, optional_strings

        views: list[str] = []
        try:
            with self._transaction(con):
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
                    # from buffers (``arrowbuf``): pa.array of Python lists imports pandas first (0.3-0.8 s)
                    new_runs = pa.Table.from_arrays(
                        [
                            optional_strings([r["run_id"] for r in new]),
                            optional_strings([r["suite"] for r in new]),
                            optional_strings([r["algo"] for r in new]),
                            optional_strings([r.get("algo_name") for r in new]),
                            optional_strings([r.get("env") for r in new]),
                            optional_int32([r.get("seed") for r in new]),
                            optional_strings([json.dumps(r.get("config", {})) for r in new]),
                            optional_strings([r.get("source") or None for r in new]),
                        ],
                        names=["run_id", "suite", "algo", "algo_name", "env", "seed", "config", "source"],
                    )
                    if _only_of(metrics["run_id"], {r["run_id"] for r in new}):
                        keep = (
                            metrics  # every row is a new run's (the importers' tables): no row-by-row check
                        )
                    else:
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
        finally:
            for view in views:
                con.unregister(view)
        return len(new), added_rows

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
            raise StoreError(f"{other}: cannot be opened to merge ({error_line(e)}); try again") from None
        try:

            def columns(catalog: str, table: str) -> list[str]:
                return [r[0] for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? "
                    "AND table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", [catalog, table],
                ).fetchall()]  # fmt: skip

            here = con.execute("SELECT current_database()").fetchall()[0][0]
            theirs = set(columns(alias, "runs"))
            cols = ", ".join(f'"{c}"' for c in columns(here, "runs") if c in theirs)
            with self._transaction(con):
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
                theirs_a = set(columns(alias, "artifacts"))
                acols = ", ".join(c for c in ARTIFACT_COLUMNS if c in theirs_a)
                con.execute(
                    f"INSERT INTO artifacts ({acols}) SELECT {acols} FROM {alias}.artifacts "
                    "WHERE run_id IN (SELECT run_id FROM _rlbench_merge)"
                )
                con.execute("DROP TABLE _rlbench_merge")
        finally:
            con.execute(f"DETACH {alias}")
        return int(new_runs), int(new_rows)


def _only_of(column: Any, ids: set[str]) -> bool:
    """Whether a dictionary-encoded run_id column without nulls can only hold ``ids``: every chunk's dictionary
    (the values its rows may take) is among them. False for a column of plain strings (not checked here)."""
    import pyarrow as pa

    if not pa.types.is_dictionary(column.type) or column.null_count:
        return False
    return all(set(chunk.dictionary.to_pylist()) <= ids for chunk in column.chunks)
