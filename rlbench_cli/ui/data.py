"""What ``rlbench ui`` shows, as plain data (no Starlette here): suites, a page of runs with their scores,
curves, one run (config, manifest, attempts, log tail, files, artifacts), a comparison of runs, and a suite's
statistics through the same functions as ``rlbench leaderboard`` and ``rlbench compare``.

Every function opens one short read-only connection (``Store.reader``: it waits while ``rlbench run`` holds
the file for a write burst) and closes it before it returns, so the UI never holds the file between
requests. Files are read only from the run folders next to the database (``coordinator.runs_root``)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..coordinator import runs_root
from ..errors import UsageError
from ..runner import attempt_dir
from ..store.browse import Filters, flatten_config, key_sql
from . import curves as curve_stats
from . import live
from .watch import file_stamp, latest_attempt

LOG_TAIL = 64 * 1024  # bytes of output.log sent at most
MAX_FILES = 500  # files listed per run at most
NOT_GROUPS = ("seed", "run_id")  # a group is several seeds of one configuration
# files served with a type a browser shows without running anything; everything else is a download
SHOWN_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".svg": "text/plain; charset=utf-8", ".mp4": "video/mp4", ".webm": "video/webm",
               ".json": "text/plain; charset=utf-8", ".jsonl": "text/plain; charset=utf-8",
               ".log": "text/plain; charset=utf-8", ".txt": "text/plain; charset=utf-8",
               ".csv": "text/plain; charset=utf-8", ".yaml": "text/plain; charset=utf-8",
               ".md": "text/plain; charset=utf-8"}  # fmt: skip


def jsonable(value: Any) -> Any:
    """Rows as JSON can carry them: times as ISO text, NaN and infinities as None."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def check_key(key: str) -> None:
    """UsageError unless ``key`` is a run column or a config key."""
    try:
        key_sql(key)
    except ValueError as e:
        raise UsageError(str(e)) from None


def suites(store: Any) -> list[dict[str, Any]]:
    """Every suite with its counts by status."""
    with store.reader() as con:
        return store.suite_counts(con)


def query(store: Any, sql: str, limit: int = 1000) -> dict[str, Any]:
    """One read-only SQL query (``rlbench sql``'s rules) with DuckDB's external access off: its first
    ``limit`` rows."""
    with store.reader() as con:
        table, total = store.sandboxed_select(con, sql, limit)
    return jsonable({"columns": table.column_names, "rows": [list(r.values()) for r in table.to_pylist()],
                     "total": total})  # fmt: skip


def _scoring(store: Any, suite: str) -> tuple[str, str, int]:
    from ..analysis import suite_scoring

    return suite_scoring(store, suite, None, None, None)


def _scores(store: Any, con: Any, suite: str, run_ids: Sequence[str] | None) -> dict[str, float | None]:
    """``{run_id: score}`` by the suite's score rule (``Store.run_scores``, the SQL of ``rlbench fetch
    --scores``), for runs of any status; runs without a row of the metric are left out."""
    from .. import scoring

    metric, rule, drop_first = _scoring(store, suite)
    name, n = scoring.parse_rule(rule)
    table = store.run_scores(con, suite=suite, metric=metric, rule=name, n=n, drop_first=drop_first,
                             statuses=(), run_ids=run_ids, phase=scoring.rule_phase(rule)[1])  # fmt: skip
    return dict(zip(table.column("run_id").to_pylist(), table.column("score").to_pylist()))


def runs(
    store: Any, suite: str, filters: Filters = (), sort: str = "run_id", descending: bool = False,
    offset: int = 0, limit: int = 100, with_config: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """A page of a suite's runs, filtered (``[(key, values)]``: a run column or config key, any of the
    values) and sorted (a column, a config key or ``score``), each with its score by the suite's rule and,
    ``with_config``, its config (the table does not show it: most of a page's bytes)."""
    for key, _ in filters:
        check_key(key)
    if sort != "score":
        check_key(sort)
    limit = max(1, min(int(limit), 1000))
    from ..analysis import shared_reader

    with shared_reader(store) as one, one.reader() as con:  # the suite's scoring read on the same connection
        store.require_suite(con, suite)
        metric, rule, _ = _scoring(one, suite)
        everything = _scores(store, con, suite, None) if sort == "score" else None
        total, rows = store.runs_page(con, suite, filters, sort, descending, max(0, int(offset)), limit,
                                      scores=everything)  # fmt: skip
        scores = (
            everything if everything is not None else _scores(store, con, suite, [r["run_id"] for r in rows])
        )
    for r in rows:
        r["score"] = scores.get(r["run_id"])
        if not with_config:
            del r["config"]
    return jsonable({"total": total, "rows": rows, "score": {"metric": metric, "rule": rule}})


def keys(store: Any, suite: str, sample: int = 2000) -> dict[str, Any]:
    """The keys a suite's runs can be filtered and grouped by: run columns and every config key whose value
    differs between runs (``Store.varying_config_keys``, from up to ``sample`` distinct configs), each with its
    values (at most 50 shown), and the metric names logged."""
    with store.reader() as con:
        store.require_suite(con, suite)
        varying = store.varying_config_keys(con, suite, sample)
        plain = {}
        for col in ("algo", "env", "status", "host", "executor", "device"):
            plain[col] = [str(v) for (v,) in con.execute(
                f"SELECT DISTINCT CAST({col} AS VARCHAR) FROM runs WHERE suite = ? AND {col} IS NOT NULL "
                "ORDER BY 1 LIMIT 51", [suite]).fetchall()]  # fmt: skip
        metrics = store.metric_names(con, suite)
    config_keys = {k: v[:51] for k, v in varying.items()}
    groupable = [k for k in ("algo", "env", *config_keys) if k not in NOT_GROUPS]
    from ..analysis import figure_keys

    return {"columns": plain, "config": config_keys, "group_keys": groupable, "metrics": metrics,
            "settings": figure_keys(varying, metrics)}  # fmt: skip


def check_curves(group_by: Sequence[str], filters: Filters, stat: str, smoothing: float, reps: int) -> None:
    """UsageError for a curve request ``curves`` refuses, before anything is read."""
    for key in (*[k for k, _ in filters], *group_by):
        check_key(key)
    if any(k in NOT_GROUPS for k in group_by) or any(k.endswith(".seed") for k in group_by):
        raise UsageError("group by any config key but the seed: a group's runs are its seeds")
    if stat not in curve_stats.STATS:
        raise UsageError(f"stat {stat!r}: use iqm or mean")
    if not 0 <= smoothing < 1:
        raise UsageError(f"smoothing {smoothing}: use a weight in [0, 1)")
    if not 10 <= reps <= 100_000:
        raise UsageError(f"reps {reps}: use 10 to 100000 bootstrap replicates")


def curve_input(
    store: Any, suite: str, metric: str, filters: Filters = (), group_by: Sequence[str] = ()
) -> tuple[Any, list[tuple]]:
    """What ``curves`` reads: the metric's rows (``Store.curve_rows``, with a running run's rows flushed but
    not yet ingested) and the runs (``Store.run_ids_where``)."""
    with store.reader() as con:
        store.require_suite(con, suite)
        runs_found = store.run_ids_where(con, suite, filters, list(group_by))
        running = [r[0] for r in runs_found if r[2] == "running"]
        # a store no run writes to gives the same rows until the file changes: kept for the next request
        # (another grouping, statistic or smoothing of the same metric)
        key = None if running else (str(store.path), _file_stamps(store.path), suite, repr(filters), metric)
        table = _ROWS.get(key) if key else None
        if table is None:
            table = store.curve_rows(con, suite, filters, metric)
            if key:
                with _ROWS_LOCK:
                    _ROWS[key] = table
                    while len(_ROWS) > ROWS_KEPT:
                        _ROWS.pop(next(iter(_ROWS)))
        if running:  # their rows flushed but not yet ingested, at the runs' positions
            _keep_live(store, con, (str(store.path), suite, repr(filters), metric, tuple(group_by)), table,
                       runs_found, running)  # fmt: skip
            table = _with_pending(table, live.pending_rows(store, con, running, metric), runs_found)
    return table, runs_found


# the last read of a curve while runs ran, for live_curve_input: its runs, the rows of the runs that were not
# running, and the runs whose rows come from their files (each one's position and current attempt's metrics
# folder: the running ones, then those started since, found in the suite's folder)
class _LiveBase:
    def __init__(
        self, runs_found: list[tuple], others: Any, folders: list[tuple[int, Path]], suite_dir: Path
    ):
        self.runs_found, self.others, self.folders = runs_found, others, folders
        self.suite_dir = suite_dir
        self.position = {str(r[0]): i for i, r in enumerate(runs_found)}
        self.stamp = file_stamp(suite_dir)
        self.known = set(_names(suite_dir))  # run folders there at the read: started ones are new names
        self.new: list[str] = []  # run folders made since (a run started), in the order first seen
        self._lock = threading.Lock()  # two refreshes at once list the folder once

    def started(self) -> list[tuple[int, Path]]:
        """``(position, metrics folder)`` of the runs whose folder was made since the read (``rlbench run``
        makes a run's folder when it starts it): a look at the suite folder's stat, listed when it changed."""
        with self._lock:
            stamp = file_stamp(self.suite_dir)
            if stamp != self.stamp:
                self.stamp = stamp
                seen = set(self.new)
                self.new += [n for n in _names(self.suite_dir) if n not in self.known and n not in seen
                             and n in self.position]  # fmt: skip
            names = list(self.new)
        out = []
        for name in names:
            n = latest_attempt(self.suite_dir / name)
            if n:
                out.append((self.position[name], self.suite_dir / name / f"attempt-{n}" / "metrics"))
        return out


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


_LIVE: dict[tuple, _LiveBase] = {}


def _keep_live(
    store: Any, con: Any, key: tuple, table: Any, runs_found: list[tuple], running: list[str]
) -> None:
    import numpy as np
    import pyarrow as pa

    found = live._running(con, running)
    if len(found) < len(running):  # more than live.MAX_RUNS running: the database each time
        _LIVE.pop(key, None)
        return
    position = {r[0]: i for i, r in enumerate(runs_found)}
    root = runs_root(store)
    folders = [(position[r], attempt_dir(root, s, r, int(a)) / "metrics") for r, s, a in found]
    rows = table.column("run").to_numpy(zero_copy_only=False)
    others = table.filter(pa.array(~np.isin(rows, [p for p, _ in folders])))
    if len(_LIVE) >= ROWS_KEPT:
        _LIVE.clear()
    _LIVE[key] = _LiveBase(runs_found, others, folders, root / key[1])


def live_curve_input(
    store: Any, suite: str, metric: str, filters: Filters = (), group_by: Sequence[str] = ()
) -> tuple[Any, list[tuple]] | None:
    """``curve_input``'s answer without the database, for a running run's new shard: the last read's runs
    and other runs' rows, and the rows of the runs that were running then or have started since (a new
    folder in the suite's) from their current attempt's shards (``live.attempt_rows``: the store's rows of
    a run are its current attempt's shards, also once it has ended). None, so the caller reads the database,
    when there was no such read or a run has started another attempt since."""
    import pyarrow as pa

    base = _LIVE.get((str(store.path), suite, repr(filters), metric, tuple(group_by)))
    if base is None:
        return None
    parts = [base.others]
    started = base.started()
    if len(base.folders) + len(started) > live.MAX_RUNS:  # many runs started since: the database
        return None
    for position, metrics in base.folders + started:
        attempt = metrics.parent
        if latest_attempt(attempt.parent) != int(attempt.name[8:]):
            return None
        rows = live.attempt_rows(metrics, metric)
        if rows is None:
            return None
        run = pa.array([position] * rows.num_rows, pa.int32())
        parts.append(rows.add_column(0, "run", run).cast(base.others.schema))
    return pa.concat_tables(parts), base.runs_found


ROWS_KEPT = 2  # curve_rows tables kept (10M rows' store: 1M rows of one metric, ~30 MB each)
_ROWS: dict[tuple, Any] = {}
_ROWS_LOCK = threading.Lock()


def _file_stamps(path: Path) -> tuple:
    """What changes when the database file is written: it and its write-ahead log (size, mtime, inode)."""
    return (file_stamp(path), file_stamp(path.with_name(path.name + ".wal")))


def curves(
    store: Any, suite: str, metric: str, filters: Filters = (), group_by: Sequence[str] = (),
    stat: str = "iqm", smoothing: float = 0.0, per_run: bool = False, reps: int = 1000, seed: int = 0,
    packed: bool = False, read: tuple[Any, list[tuple]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One metric of the runs a filter keeps, grouped by ``group_by`` (never the seed), as ``curves.
    group_curves`` computes it (``packed``: its numbers as base64 float64); the connection is closed before
    the bootstrap. ``read``: ``curve_input``'s answer when the caller has read it already."""
    check_curves(group_by, filters, stat, smoothing, reps)
    table, runs_found = read if read is not None else curve_input(store, suite, metric, filters, group_by)
    out = curve_stats.group_curves(table, runs_found, list(group_by), stat, smoothing, per_run, reps, seed,
                                   packed)  # fmt: skip
    return {"metric": metric, "group_by": list(group_by), **out}


def suite_live(
    store: Any, suite: str, page: dict[str, Any] | None, curve: dict[str, Any] | None, with_keys: bool
) -> dict[str, Any]:
    """A suite page's live refresh in one read-only connection (opening the file costs more CPU than these
    reads while ``rlbench run`` writes): ``runs`` (``page``: its arguments; None: none), ``keys`` when
    ``with_keys``, and ``curves`` (``curve``: its arguments; None: none), computed after the connection is
    closed."""
    from ..analysis import shared_reader

    if curve is not None:
        check_curves(curve.get("group_by", ()), curve.get("filters", ()), curve.get("stat", "iqm"),
                     curve.get("smoothing", 0.0), curve.get("reps", 1000))  # fmt: skip
    if page is None and not with_keys and curve is not None:  # a new shard: its rows from the files alone
        args = (suite, curve["metric"], curve.get("filters", ()), curve.get("group_by", ()))
        read = live_curve_input(store, *args)
        if read is not None:
            return {"curves": curves(store, suite, read=read, **curve)}
    with shared_reader(store) as one:
        out = {} if page is None else {"runs": runs(one, suite, **page)}
        if with_keys:
            out["keys"] = keys(one, suite)
        read = None if curve is None else curve_input(one, suite, curve["metric"], curve.get("filters", ()),
                                                      curve.get("group_by", ()))  # fmt: skip
    if curve is not None:
        out["curves"] = curves(store, suite, read=read, **curve)
    return out


def _with_pending(table: Any, pending: Any, runs_found: Sequence[tuple]) -> Any:
    """``curve_rows``'s table with ``live.pending_rows`` appended (run ids turned into positions)."""
    import pyarrow as pa

    if not pending.num_rows:
        return table
    position = {r[0]: i for i, r in enumerate(runs_found)}
    extra = pa.table({"run": pa.array([position[r] for r in pending.column("run_id").to_pylist()], pa.int32()),
                      "step": pending.column("step"), "value": pending.column("value"),
                      "wall_time": pending.column("wall_time")})  # fmt: skip
    return pa.concat_tables([table, extra.cast(table.schema)])


def run_folder(store: Any, suite: str, run_id: str) -> Path | None:
    """The run's folder under the database's runs folder; None when the names cannot name one."""
    for part in (suite, run_id):
        if part in ("", ".", "..") or any(c in part for c in "/\\\0"):
            return None
    return runs_root(store) / suite / run_id


def _attempts(folder: Path) -> list[dict[str, Any]]:
    out = []
    for n in range(1, 1000):
        attempt = folder / f"attempt-{n}"
        if not attempt.is_dir():
            break
        entry: dict[str, Any] = {"attempt": n}
        for name in ("result.json", "placement.json"):
            try:
                entry[name.removesuffix(".json")] = json.loads((attempt / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                pass
        out.append(entry)
    return out


def _files(folder: Path) -> list[dict[str, Any]]:
    """Plain files in a run folder (symlinks left out), relative paths, at most ``MAX_FILES``."""
    found: list[dict[str, Any]] = []
    if not folder.is_dir():
        return found
    for path in sorted(folder.rglob("*")):
        if len(found) >= MAX_FILES:
            break
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(folder)
        if any(
            p.is_symlink() for p in [folder / Path(*rel.parts[: i + 1]) for i in range(len(rel.parts) - 1)]
        ):
            continue
        found.append({"path": rel.as_posix(), "bytes": path.stat().st_size})
    return found


def _in_folder(store: Any, folder: Path | None, path: Any) -> str | None:
    """An artifact's path (absolute, or relative to the run folder, the runs folder or the database's
    folder) as a path inside the run's folder; None when it is not a plain file there."""
    if folder is None or not isinstance(path, str) or not path:
        return None
    given = Path(path)
    for candidate in ([given] if given.is_absolute() else [folder / given, runs_root(store) / given,
                                                            store.path.parent / given]):  # fmt: skip
        try:
            rel = candidate.resolve(strict=True).relative_to(folder.resolve())
        except (OSError, ValueError):
            continue
        if safe_file(store, folder.name, rel.as_posix()) is not None:
            return rel.as_posix()
    return None


def log_tail(
    store: Any, run_id: str, limit: int = LOG_TAIL, folder: Path | None = None
) -> dict[str, Any] | None:
    """The end of the latest attempt's ``output.log`` (``limit`` bytes at most); None for an unknown run.
    ``folder``: the run's folder when the caller knows it (no database read then)."""
    if folder is None:
        with store.reader() as con:
            row = store.run_row(con, run_id)
        if row is None:
            return None
        folder = run_folder(store, row["suite"], run_id)
    attempts = _attempts(folder) if folder else []
    text, size = "", 0
    if attempts:
        log = folder / f"attempt-{attempts[-1]['attempt']}" / "output.log"
        if log.is_file() and not log.is_symlink():
            size = log.stat().st_size
            with open(log, "rb") as f:
                f.seek(max(0, size - limit))
                text = f.read().decode("utf-8", errors="replace")
    return {"attempt": attempts[-1]["attempt"] if attempts else None, "bytes": size, "text": text}


def run(store: Any, run_id: str) -> dict[str, Any] | None:
    """One run: its row (config, manifest, status, error), latest metrics, attempts (their result.json),
    files in its folder, artifacts; None for an unknown run."""
    with store.reader() as con:
        row = store.run_row(con, run_id)
        if row is None:
            return None
        latest = store.latest_metrics(con, run_id)
        pending = live.pending_rows(store, con, [run_id]) if row["status"] == "running" else None
        artifacts = store.artifacts_of(con, run_id)
    if pending is not None:  # rows flushed but not yet ingested: a later step is the latest
        for step, name, value in zip(*(pending.column(c).to_pylist() for c in ("step", "name", "value"))):
            if name not in latest or step >= latest[name][0]:
                latest[name] = (step, value)
    folder = run_folder(store, row["suite"], run_id)
    for artifact in artifacts:  # a file in the run's folder gets its address there
        artifact["file"] = _in_folder(store, folder, artifact.get("path"))
    manifest = {k: row.pop(k) for k in ("git_commit", "git_dirty", "python", "packages", "host", "device",
                                        "executor", "job_id")}  # fmt: skip
    return jsonable({"run": row, "manifest": manifest, "latest": {k: {"step": s, "value": v} for k, (s, v) in
                     latest.items()}, "attempts": _attempts(folder) if folder else [],
                     "files": _files(folder) if folder else [], "artifacts": artifacts})  # fmt: skip


def compare_runs(store: Any, run_ids: Sequence[str]) -> dict[str, Any] | None:
    """Two or more runs side by side: every config key with each run's value and whether they differ;
    None when a run is unknown."""
    rows = []
    with store.reader() as con:
        for run_id in run_ids:
            row = store.run_row(con, run_id)
            if row is None:
                return None
            rows.append(row)
    flat = [flatten_config({"config": r["config"]}) for r in rows]
    for f, r in zip(flat, rows):
        for col in ("status", "host", "device", "attempts", "duration_s", "git_commit"):
            f[col] = r[col]
    keys_all = sorted(set().union(*flat))
    table = [{"key": k, "values": [f.get(k) for f in flat], "differs": len({json.dumps(f.get(k), default=str)
              for f in flat}) > 1} for k in keys_all]  # fmt: skip
    return jsonable({"runs": [{"run_id": r["run_id"], "suite": r["suite"], "algo": r["algo"], "env": r["env"],
                               "seed": r["seed"]} for r in rows], "keys": table})  # fmt: skip


def safe_file(store: Any, run_id: str, rel: str) -> tuple[Path, str] | None:
    """A file of a run's folder to serve and its content type; None when the run is unknown or the path
    leaves the folder (``..``, an absolute path, a symlink anywhere on the way) or is not a plain file."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or any(p in ("..", ".") or "\0" in p for p in parts):
        return None
    with store.reader() as con:
        row = store.run_row(con, run_id)
    if row is None:
        return None
    folder = run_folder(store, row["suite"], run_id)
    if folder is None or not folder.is_dir() or folder.is_symlink():
        return None
    path = folder
    for p in parts:
        path = path / p
        if path.is_symlink():
            return None
    try:
        real = path.resolve(strict=True)
    except OSError:
        return None
    if not real.is_relative_to(folder.resolve()) or not real.is_file():
        return None
    return real, SHOWN_TYPES.get(real.suffix.lower(), "application/octet-stream")


# -- a suite's statistics, by the functions rlbench leaderboard and rlbench compare call ------------------


def leaderboard(store: Any, suite: str, reps: int = 50_000, seed: int = 0) -> dict[str, Any]:
    """What ``rlbench leaderboard SUITE --format json --reps R --seed S`` prints (``analysis.load_suite`` +
    ``leaderboard.build`` + ``leaderboard.render``), as data, with its warnings."""
    from .. import leaderboard as lb
    from ..analysis import load_suite

    s = load_suite(store, suite, rows=False, kinds=False)
    board = lb.build(suite, s.frame, metric=s.metric, rule=s.rule, drop_first=s.drop_first,
                     normalize=s.normalize, reps=reps, seed=seed)  # fmt: skip
    return {
        "board": json.loads(lb.render(board, "json")),
        "warnings": board.warnings,
        "unfinished": s.unfinished,
    }


def _table(store: Any, suite: str) -> Any:
    """The suite's score table on the tasks every algorithm has, as ``leaderboard.build`` makes it."""
    from .. import leaderboard as lb
    from .. import stats
    from ..analysis import load_suite

    s = load_suite(store, suite, rows=False, kinds=False)
    data, _, _ = lb.common_tasks(s.frame)
    return stats.score_table(
        data, rule=s.rule, drop_first=s.drop_first, normalize=s.normalize, metric=s.metric
    )


def improvement(store: Any, suite: str, reps: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The probability of improvement of every ordered pair (``stats.probability_of_improvement``, as
    ``rlbench plot`` bootstraps it) and the run-score performance profile (``stats.performance_profile``)."""
    from .. import stats

    table = _table(store, suite)
    poi = stats.probability_of_improvement(table, reps=reps, seed=seed)
    profile = stats.performance_profile(table, reps=reps, seed=seed)
    return jsonable({"normalized": table.normalized, "metric": table.metric, "rule": table.rule,
                     "poi": poi.to_dict(orient="records"), "profile": profile.to_dict(orient="records")})  # fmt: skip


def by_key(
    store: Any,
    suite: str,
    key: str,
    metric: str | None = None,
    stat: str = "iqm",
    reps: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """The score against a config key as ``rlbench plot SUITE --x KEY`` computes it (``analysis.key_scores`` +
    ``report.key_points``): per task, legend entry and value, the IQM (or mean) over seeds with its 95% CI;
    the axis (values in order, positions, log or not), labels and warnings. ``metric`` None: the suite's."""
    from .. import report, stats
    from ..analysis import key_scores

    if stat not in stats.KEY_STATS:
        raise UsageError(f"stat {stat!r}: use iqm or mean")
    if not 10 <= reps <= 100_000:
        raise UsageError(f"reps {reps}: use 10 to 100000 bootstrap replicates")
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        scored = key_scores(store, suite, key, metric=metric)
        points = report.key_points(scored, stat, reps, seed)
    said = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, stats.StatsWarning)))
    said += [
        f"{b} has one value of {scored.key} ({', '.join(v)}) and is left out"
        for b, v in scored.single.items()
    ]
    said += [f"{a}: {n} runs without {scored.key}, left out" for a, n in scored.left_out.items()]
    axis = stats.x_axis(points["x"].astype(str)) if len(points) else stats.x_axis([])
    ylabel, title = report.key_labels(scored, stat)
    return jsonable({"key": scored.key, "metric": scored.metric, "rule": scored.rule, "stat": stat, "reps": reps,
                     "axis": dataclasses.asdict(axis),
                     "tasks": sorted(points["env"].astype(str).unique()),
                     "legends": stats.natural_order(points["legend"].astype(str)),
                     "points": points.to_dict(orient="records"), "ylabel": ylabel, "title": title,
                     "warnings": said, "unfinished": scored.unfinished})  # fmt: skip


def decisions(store: Any, suite: str) -> dict[str, Any]:
    """AdaStop's decisions as ``rlbench compare SUITE --json`` prints them (``sequential.compare_suite``)."""
    from ..sequential import compare_suite

    rows, settings = compare_suite(store, suite)
    return jsonable(
        json.loads(json.dumps({"suite": suite, "settings": settings, "decisions": rows}, default=str))
    )


def paired(
    store: Any,
    suite: str,
    baseline: str | None = None,
    metric: str | None = None,
    alternative: str = "two-sided",
    steps: Sequence[int | None] = (None,),
    reps: int = 50_000,
    seed: int = 0,
) -> dict[str, Any]:
    """``rlbench compare SUITE --paired BASELINE --json``'s comparisons and settings (``sequential.
    paired_family_at`` of ``paired_scores``: several ``steps`` one family, as ``--step-max`` repeated), and the
    baselines there are to pick from (``choices``: the tasks and algorithms of the runs scored; the page sends
    its pick as ``task:NAME`` or ``algo:NAME``); without ``baseline``, the choices only."""
    from ..sequential import paired_family_at, paired_scores, paired_steps

    if not 1 <= reps <= 100_000:
        raise UsageError(f"reps {reps}: use 1 to 100000 bootstrap replicates")
    steps = paired_steps(list(steps) or [None])
    frames, scoring = paired_scores(store, suite, metric, steps=steps)
    tasks, algos = (sorted({str(v) for f in frames for v in f[col]}) for col in ("env", "algo"))
    choices = {"tasks": tasks, "algos": algos}
    if not baseline:
        return {"choices": choices, "comparisons": [], "paired": None}
    rows, settings = paired_family_at(frames, steps, suite, baseline, scoring, alternative, reps, seed)
    return jsonable({"choices": choices, "paired": settings, "comparisons": rows})


def tuning(store: Any, suite: str) -> dict[str, Any]:
    """The study behind a suite ``rlbench tune`` made (``NAME.tune`` or ``NAME.confirm``) as ``rlbench tune
    --status`` reads it: the search's settings, its trials (number, state, params, objective) and the
    confirmation on fresh seeds; ``{"study": None}`` for any other suite, or when the study's journal is gone
    or Optuna is not installed (with the reason)."""
    from ..tune import tune_status, tuned_suite

    with store.reader() as con:
        store.require_suite(con, suite)
        info = store.suite_info(con, suite) or {}
    tuned = tuned_suite(info.get("config") or {})
    if tuned is None or tuned.tune is None:
        return {"study": None}
    try:
        found = tune_status(tuned, tuned.name, store)
    except (UsageError, ImportError) as e:
        return {"study": None, "reason": str(e).splitlines()[0]}
    spec = tuned.tune
    seeds = spec.confirm.seed_list() if spec.confirm is not None else []
    return jsonable({
        "study": {"tuned": tuned.name, "algorithm": spec.algorithm, "sampler": spec.sampler, "pruner": spec.pruner,
                  "objective": spec.objective, "trials_asked": spec.trials, "search_seeds": spec.search_seeds(),
                  "params": list(spec.params), "confirm_seeds": [seeds[0], seeds[-1]] if seeds else None},
        "trials": found.trials,
        "confirmed": [c.to_dict() for c in found.confirmed],
    })  # fmt: skip
