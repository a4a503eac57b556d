"""Merge another rlbench results database into this one (``rlbench fetch --from duckdb:FILE``).

The other file is opened read-only (its schema version checked: an older rlbench's file is fine, a newer
one's or another application's is refused) and attached read-only to the writer connection; its suites, its
runs with their run ids and full manifests (status, attempts, host, device, git commit, packages, config,
executor, ...), their metric rows and artifacts are copied in ONE transaction. Run ids already here are
skipped, so merging the same file twice, or two files that share runs, adds nothing twice. Suites already
here keep their own row. ``--into SUITE`` picks one suite of the file; without it, every suite is merged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ImportInvalid, StoreError
from .common import ImportResult

__all__ = ["merge"]


def merge(store: Any, path: Path, suite: str | None = None) -> ImportResult:
    """Copies the runs of the rlbench database at ``path`` (every suite, or ``suite``) into ``store``.

    Raises:
        ImportInvalid: no such file, the same file as the store, not an rlbench database, a newer schema,
            no such suite in it, or no runs to merge.
    """
    from ..store import Store

    path = Path(path)
    if not path.exists():
        raise ImportInvalid(f"{path}: no such file; pass another rlbench results database (a .duckdb file)")
    if not path.is_file():
        raise ImportInvalid(f"{path}: not a file; pass another rlbench results database (a .duckdb file)")
    if store.path.exists() and path.resolve() == store.path.resolve():
        raise ImportInvalid(f"{path}: the same file as the database it would be merged into (--db)")
    other = Store(path, wait=store.wait)
    try:
        with other.reader() as con:
            counts = other.runs_per_suite(con)
            if counts is None:
                raise ImportInvalid(f"{path}: an empty DuckDB file, not an rlbench results database")
            suites = other.suites(con)
    except StoreError as e:
        raise ImportInvalid(
            str(e).split("; pass ")[0] + "; --from duckdb: takes another rlbench results database"
        ) from None
    if suite is not None and suite not in suites:
        raise ImportInvalid(f"{path}: no suite {suite!r} in it (suites there: {', '.join(suites) or 'none'})")
    chosen = [suite] if suite is not None else suites
    found = sum(counts.get(s, 0) for s in chosen)
    if not found:
        raise ImportInvalid(
            f"{path}: no runs in {'suite ' + repr(suite) if suite else 'it'}; nothing to merge"
        )
    with store.writer() as con:
        new_runs, new_rows = store.merge_from(con, path, chosen)
    return ImportResult(suite=suite or ", ".join(chosen), source=f"duckdb:{path}", found=found,
                        new_runs=new_runs, new_rows=new_rows, present=found - new_runs, suites=chosen)  # fmt: skip
