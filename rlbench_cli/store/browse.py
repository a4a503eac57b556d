"""Reads for ``rlbench ui``: suites with their counts by status, a page of runs filtered and sorted in SQL,
one run's row, the metric rows of a selection for curves and a run's artifacts. Every value from a request is
a bound parameter; a config key becomes a JSON path given as a parameter, never SQL text."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .queries import _has_table
from .schema import RUN_COLUMNS

# columns of ``runs`` a filter, a sort or a group may name as they are; any other key is a config path
PLAIN_COLUMNS = ("run_id", "suite", "algo", "algo_name", "env", "seed", "status", "host", "device", "executor",
                 "job_id", "git_commit", "attempts", "exit_code", "started_at", "ended_at", "duration_s")  # fmt: skip
# what the runs table shows of each run (config, packages and the error's full text stay with the run's page)
TABLE_COLUMNS = ("run_id", "algo", "env", "seed", "status", "attempts", "duration_s", "host", "device",
                 "executor", "started_at", "ended_at")  # fmt: skip
CONFIG_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_][A-Za-z0-9_\-]*)*$")

Filters = Sequence[tuple[str, Sequence[str]]]


def key_sql(key: str) -> tuple[str, list[Any]]:
    """A run column, or a config value as text (``params.lr``, ``config.params.lr``), as SQL with its bound
    parameters. Raises ValueError for a key that is neither."""
    if key in PLAIN_COLUMNS:
        return f"CAST(r.{key} AS VARCHAR)", []
    path = key.removeprefix("config.")
    if not CONFIG_KEY.match(path):
        raise ValueError(f"{key!r} is not a run column or a config key (dotted names of letters and digits)")
    return "json_extract_string(r.config, ?)", ["$" + "".join(f'."{p}"' for p in path.split("."))]


def flatten_config(config: Any, prefix: str = "") -> dict[str, Any]:
    """A run's config as ``{dotted key: leaf value}`` (``{"params": {"lr": 1}}`` -> ``{"params.lr": 1}``)."""
    out: dict[str, Any] = {}
    if isinstance(config, dict):
        for k, v in config.items():
            out.update(flatten_config(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = config
    return out


def filter_sql(suite: str | None, filters: Filters) -> tuple[str, list[Any]]:
    """The WHERE clause (without WHERE; ``TRUE`` when empty) keeping a suite's runs whose each key has one
    of its values."""
    where, params = [], []
    if suite is not None:
        where.append("r.suite = ?")
        params.append(suite)
    for key, values in filters:
        if not values:
            continue
        sql, key_params = key_sql(key)
        where.append(f"{sql} IN ({', '.join('?' for _ in values)})")
        params += [*key_params, *map(str, values)]
    return " AND ".join(where) or "TRUE", params


class Browse:
    """Reads of ``rlbench ui`` on a reader connection (a mixin of ``Store``)."""

    def suite_counts(self, con: Any) -> list[dict[str, Any]]:
        """Every suite with its description and ``{status: runs}``, by name."""
        out: dict[str, dict[str, Any]] = {}
        for name, description in con.execute("SELECT name, description FROM suites ORDER BY name").fetchall():
            out[name] = {"name": name, "description": description or "", "counts": {}, "total": 0}
        for suite, status, n in con.execute(
            "SELECT suite, status, count(*) FROM runs GROUP BY ALL ORDER BY ALL"
        ).fetchall():
            entry = out.setdefault(suite, {"name": suite, "description": "", "counts": {}, "total": 0})
            entry["counts"][status] = int(n)
            entry["total"] += int(n)
        return list(out.values())

    def varying_config_keys(self, con: Any, suite: str, sample: int = 2000) -> dict[str, list[str]]:
        """Every config key whose value differs between a suite's runs (from up to ``sample`` distinct
        configs), with its distinct values as text (JSON for anything but text), sorted by key; run columns
        (``PLAIN_COLUMNS``) and ``env_id`` are left out."""
        seen: dict[str, set[str]] = {}
        for (text,) in con.execute(
            "SELECT DISTINCT config FROM runs WHERE suite = ? AND config IS NOT NULL LIMIT ?", [suite, sample]
        ).fetchall():
            for k, v in flatten_config(json.loads(text)).items():
                seen.setdefault(k, set()).add(json.dumps(v) if not isinstance(v, str) else v)
        return {k: sorted(v) for k, v in sorted(seen.items())
                if len(v) > 1 and k not in PLAIN_COLUMNS and k != "env_id"}  # fmt: skip

    def runs_page(
        self,
        con: Any,
        suite: str,
        filters: Filters = (),
        sort: str = "run_id",
        descending: bool = False,
        offset: int = 0,
        limit: int = 100,
        scores: dict[str, float | None] | None = None,
    ) -> tuple[int, list[dict[str, Any]]]:
        """``(runs matching, one page of them)``: ``TABLE_COLUMNS`` and ``config`` (a dict) per run, sorted by
        a column or config key (then run_id). ``scores`` (``{run_id: score}`` of every run of the suite)
        sorts by score when ``sort`` is ``score``."""
        where, params = filter_sql(suite, filters)
        total = int(con.execute(f"SELECT count(*) FROM runs r WHERE {where}", params).fetchall()[0][0])
        cols = ", ".join(f"r.{c}" for c in (*TABLE_COLUMNS, "config"))
        direction = "DESC" if descending else "ASC"
        if sort == "score" and scores is not None:  # scores come from the score rule's SQL: sorted here
            ids = [r[0] for r in con.execute(f"SELECT r.run_id FROM runs r WHERE {where}", params).fetchall()]
            missing = float("-inf") if descending else float("inf")
            ids.sort(key=lambda i: (_num(scores.get(i), missing), i), reverse=descending)
            page = ids[int(offset) : int(offset) + int(limit)]
            cur = con.execute(
                f"SELECT {cols} FROM runs r WHERE list_contains(?::VARCHAR[], r.run_id)", [page]
            )
            names = [d[0] for d in cur.description]
            found = {row[0]: dict(zip(names, row)) for row in cur.fetchall()}
            rows = [found[i] for i in page if i in found]
        else:
            if sort in ("seed", "attempts", "exit_code", "duration_s", "started_at", "ended_at"):
                order, order_params = f"r.{sort} {direction} NULLS LAST, r.run_id", []
            else:
                sql, order_params = key_sql(sort if sort != "score" else "run_id")
                order = f"{sql} {direction} NULLS LAST, r.run_id"
            cur = con.execute(
                f"SELECT {cols} FROM runs r WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
                [*params, *order_params, int(limit), int(offset)],
            )
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, row)) for row in cur.fetchall()]
        for row in rows:
            row["config"] = json.loads(row["config"]) if row["config"] else {}
        return total, rows

    def run_row(self, con: Any, run_id: str) -> dict[str, Any] | None:
        """One run's row (every column; config and packages as dicts); None when there is no such run."""
        cur = con.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id = ?", [run_id])
        row = cur.fetchone()
        if row is None:
            return None
        out = dict(zip([d[0] for d in cur.description], row))
        for key in ("config", "packages"):
            out[key] = json.loads(out[key]) if out[key] else {}
        return out

    def run_ids_where(self, con: Any, suite: str, filters: Filters, keys: Sequence[str]) -> list[tuple]:
        """``(run_id, seed, status, value of each key)`` of the runs a filter keeps, by run_id."""
        where, params = filter_sql(suite, filters)
        selects, key_params = [], []
        for key in keys:
            sql, p = key_sql(key)
            selects.append(sql)
            key_params += p
        extra = "".join(f", {s}" for s in selects)
        return con.execute(
            f"SELECT r.run_id, r.seed, r.status{extra} FROM runs r WHERE {where} ORDER BY r.run_id",
            [*key_params, *params],
        ).fetchall()

    def curve_rows(self, con: Any, suite: str, filters: Filters, metric: str) -> Any:
        """``run, step, value, wall_time`` of one metric for the runs a filter keeps, as a pyarrow Table in no
        particular order; ``run`` is the run's position in ``run_ids_where``'s order (by run_id), so no run
        id travels with each row."""
        where, params = filter_sql(suite, filters)
        return con.sql(
            "SELECT k.run, m.step, m.value, m.wall_time FROM metrics m JOIN (SELECT r.run_id, "
            f"(row_number() OVER (ORDER BY r.run_id) - 1)::INTEGER AS run FROM runs r WHERE {where}) k "
            "USING (run_id) WHERE m.name = ?",
            params=[*params, metric],
        ).to_arrow_table()

    def run_metric_names(self, con: Any, run_ids: Sequence[str]) -> list[str]:
        """The metric names some of these runs logged, sorted."""
        return [r[0] for r in con.execute(
            "SELECT DISTINCT name FROM metrics WHERE list_contains(?::VARCHAR[], run_id) ORDER BY 1",
            [list(run_ids)]).fetchall()]  # fmt: skip

    def latest_metrics(self, con: Any, run_id: str) -> dict[str, tuple[int, float]]:
        """``{name: (step, value)}``: each metric's value at its largest step, of one run."""
        return {name: (int(step), value) for name, step, value in con.execute(
            "SELECT name, max(step), arg_max(value, step) FROM metrics WHERE run_id = ? GROUP BY name ORDER BY name",
            [run_id]).fetchall()}  # fmt: skip

    def artifacts_of(self, con: Any, run_id: str) -> list[dict[str, Any]]:
        """A run's rows of the ``artifacts`` table (whatever its columns are); none when there is no table."""
        if not _has_table(con, "artifacts"):
            return []
        cur = con.execute("SELECT * FROM artifacts WHERE run_id = ?", [run_id])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def sandboxed_select(self, con: Any, sql: str, limit: int = 1000) -> tuple[Any, int]:
        """``select`` (one read-only query) with DuckDB's external access off first, so the query reads
        nothing but this database (no read_csv of a file, no ATTACH, no extension), for ``rlbench ui``'s query
        box: ``(its first ``limit`` rows as a pyarrow Table, how many rows it has)``. Switching it off lasts
        while the database is open in this process, which the UI, reading only the tables, never needs."""
        con.execute("SET enable_external_access = false")
        table = self.select(con, sql)
        return table.slice(0, limit), table.num_rows


def _num(value: float | None, missing: float) -> float:
    """A score to sort by: missing (no score, or NaN) last in either direction."""
    return missing if value is None or value != value else float(value)
