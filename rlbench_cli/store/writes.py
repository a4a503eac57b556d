"""What ``rlbench run`` writes: suites, runs, their attempts, shard ingest and AdaStop decisions.

Every method takes a writer connection; inside ``Store.batch`` the ones that open their own transaction join
the batch's instead, so a coordinator's tick is one transaction whatever the number of runs.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .connection import Connections


class Writes(Connections):
    """Writes of a run's life (a part of ``Store``)."""

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
            con.execute(f"DELETE FROM artifacts WHERE run_id IN ({marks}) AND kind <> 'source'", ids)
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
        files = [str(p) for _, p in todo]
        # the footers' row counts, read by DuckDB: the coordinator never imports pyarrow for them (0.3 s a run)
        rows = dict(
            con.execute("SELECT file_name, num_rows FROM parquet_file_metadata(?)", [files]).fetchall()
        )
        counts = [int(rows[f]) for f in files]
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

    def ingest_artifacts(self, con: Any, items: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> int:
        """Make each run's ``artifacts`` rows what its attempt's index lists now (``artifacts.current``):
        (run_id, rows of step, kind, path, bytes, sha256) each; the run's earlier rows (but an imported
        run's ``source``) are replaced, so ingesting an index again changes nothing. Two statements
        whatever the number of runs. Returns the rows written."""
        if not items:
            return 0
        ids = [run_id for run_id, _ in items]
        rows = [[run_id, r["step"], r["kind"], r["path"], r["bytes"], r["sha256"]]
                for run_id, rs in items for r in rs]  # fmt: skip
        with self._transaction(con):
            con.execute(
                f"DELETE FROM artifacts WHERE run_id IN ({', '.join(['?'] * len(ids))}) AND kind <> 'source'",
                ids,
            )
            if rows:
                con.execute(
                    "INSERT INTO artifacts (run_id, step, kind, path, bytes, sha256) VALUES "
                    + ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(rows)),
                    [v for row in rows for v in row],
                )
        return len(rows)

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

    def remove_runs(self, con: Any, run_ids: Sequence[str]) -> int:
        """Remove runs with their metric rows, shard bookkeeping and artifact rows, in one transaction (``rlbench
        check --record`` does, once the runs are copied into their commit's suite). Returns the runs removed."""
        if not run_ids:
            return 0
        ids = list(run_ids)
        marks = ", ".join(["?"] * len(ids))
        with self._transaction(con):
            for table in ("metrics", "shards", "artifacts"):
                con.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", ids)
            return int(con.execute(f"DELETE FROM runs WHERE run_id IN ({marks})", ids).fetchall()[0][0])

    def save_decisions(
        self, con: Any, suite: str, rows: Sequence[dict[str, Any]], settings: dict[str, Any]
    ) -> None:
        """Replace a suite's AdaStop decisions (``adaptive.Comparison`` fields as dicts), in one transaction."""
        with self._transaction(con):
            con.execute("DELETE FROM adaptive_decisions WHERE suite = ?", [suite])
            con.executemany(
                "INSERT INTO adaptive_decisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())",
                [[suite, r["task"], r["algo_a"], r["algo_b"], r["decision"], r["look"], r["runs_a"], r["runs_b"],
                  _finite(r["mean_a"]), _finite(r["mean_b"]), json.dumps(settings)] for r in rows],
            )  # fmt: skip


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None
