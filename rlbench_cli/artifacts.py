"""A run's files beyond its metrics (saved policies, episode videos, transcripts) and the index that lists
them, written by the worker and read by the coordinator. Stdlib only.

A worker never opens the database, so a run lists its files the way it logs its metrics: in its attempt
folder, append-only. Each file is first put in place whole (written to a temporary name and renamed), then
a line is appended to ``<attempt folder>/artifacts.jsonl``::

    {"step": 5000, "kind": "video", "path": "attempt-1/videos/eval-000005000.mp4", "bytes": 81234,
     "sha256": "..."}

``path`` is relative to the RUN folder (``<runs_root>/<suite>/<run_id>/``, the parent of the attempt
folders), so a resumed attempt lists the files of the attempt it continues as they are. The coordinator
reads the index when it ingests the run's shards (``current``): each complete line is a row of the store's
``artifacts`` table; a line cut short by a kill is ignored. A kind in ``REPLACED`` (the best and the final
policy) keeps only the files of its latest step: a new best policy is written to a new folder, listed, and
only then are the older best's files removed, so the index never names a file that is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "INDEX",
    "KINDS",
    "REPLACED",
    "ArtifactLog",
    "sha256_file",
    "read_index",
    "current",
    "resolve",
]

INDEX = "artifacts.jsonl"
KINDS = ("policy_best", "policy_final", "video", "transcript")
REPLACED = ("policy_best", "policy_final")  # a later step's files replace the earlier ones of that kind
_CHUNK = 1 << 20


def sha256_file(path: str | Path) -> str:
    """The hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


class ArtifactLog:
    """The index of one attempt's artifacts (``<attempt folder>/artifacts.jsonl``), appended to by the worker.

    Args:
        attempt_dir: the attempt folder; paths are written relative to its parent (the run folder).
    """

    def __init__(self, attempt_dir: str | Path):
        self.attempt_dir = Path(attempt_dir)
        self.run_dir = self.attempt_dir.parent
        self.path = self.attempt_dir / INDEX
        self._made = False  # the folder is made by the first append (then known to be there)

    def add(self, step: int, kind: str, files: Iterable[str | Path]) -> list[dict[str, Any]]:
        """List ``files`` (complete, under the run folder) as ``kind`` artifacts of ``step``, in one append.
        Returns the rows written."""
        rows = []
        for f in sorted(Path(p) for p in files):
            rows.append({
                "step": int(step), "kind": kind, "path": f.relative_to(self.run_dir).as_posix(),
                "bytes": f.stat().st_size, "sha256": sha256_file(f),
            })  # fmt: skip
        self.append(rows)
        return rows

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append index rows as they are (a resumed attempt carries its predecessor's), in one write."""
        if not rows:
            return
        if not self._made:
            self.attempt_dir.mkdir(parents=True, exist_ok=True)
            self._made = True
        data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def read_index(attempt_dir: str | Path) -> list[dict[str, Any]]:
    """Every complete line of an attempt's index, in order (none when it has no index)."""
    try:
        text = (Path(attempt_dir) / INDEX).read_text(errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return []
    rows = []
    for line in text.split("\n")[:-1]:  # the last piece has no newline: empty, or a line cut by a kill
        try:
            r = json.loads(line)
            rows.append({"step": int(r["step"]), "kind": str(r["kind"]), "path": str(r["path"]),
                         "bytes": int(r["bytes"]), "sha256": str(r["sha256"])})  # fmt: skip
        except (ValueError, KeyError, TypeError):
            continue
    return rows


def current(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The artifacts an index says a run has now: one row per path (its last line), and of each kind in
    ``REPLACED`` only the rows of its latest step. Sorted by (step, kind, path)."""
    latest: dict[str, int] = {}
    for r in rows:
        if r["kind"] in REPLACED:
            latest[r["kind"]] = max(latest.get(r["kind"], -1), r["step"])
    by_path = {r["path"]: r for r in rows if r["kind"] not in REPLACED or r["step"] == latest[r["kind"]]}
    return sorted(by_path.values(), key=lambda r: (r["step"], r["kind"], r["path"]))


def resolve(run_dir: str | Path, path: str) -> Path:
    """The file an artifact row's ``path`` names under ``run_dir``; refuses a path that leads out of it
    (absolute, ``..``, or through a symlink out), raising ValueError."""
    base = Path(run_dir).resolve()
    if not path or Path(path).is_absolute() or ".." in Path(path).parts:
        raise ValueError(f"{path!r}: not a path inside a run folder")
    full = (base / path).resolve()
    if base not in full.parents:
        raise ValueError(f"{path!r}: leads out of the run folder")
    return full
