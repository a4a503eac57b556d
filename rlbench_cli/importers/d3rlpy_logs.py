"""Read d3rlpy's file-logger output: ``d3rlpy_logs/<experiment>_<timestamp>/`` run folders.

A run folder holds ``params.json`` (the algorithm's hyperparameters) and one CSV per metric, rows
``epoch,step,value`` without a header: ``environment.csv`` is the evaluation return (``eval/return`` here),
``loss.csv``, ``time_step.csv``, ... keep their file names (``loss``, ``time_step``). Other files (model
snapshots) are ignored. d3rlpy-benchmarks names its experiments ``<ALGO>_<task>_<seed>``, so a folder reads
``<ALGO>_<task>_<seed>_<timestamp>``, e.g. ``DiscreteCQL_breakout_3_20211206103030``.

Nothing from the data is executed: JSON is read with ``json.loads`` and numbers with ``int``/``float``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ImportInvalid
from .common import ImportedRun

__all__ = ["RunName", "parse_run_name", "find_run_folders", "read_run", "read", "EVAL_FILE", "EVAL_METRIC"]

EVAL_FILE = "environment.csv"
EVAL_METRIC = "eval/return"
PARAMS_FILE = "params.json"
NAME_HELP = "<ALGO>_<task>_<seed>_<timestamp>, e.g. DiscreteCQL_breakout_3_20211206103030"
_TIMESTAMP = re.compile(r"[0-9]{14}")
_SEED = re.compile(r"[0-9]+")
_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class RunName:
    """The parts of a d3rlpy-benchmarks run folder name."""

    algo: str
    task: str
    seed: int
    timestamp: str


def parse_run_name(name: str) -> RunName:
    """Splits ``<ALGO>_<task>_<seed>_<timestamp>``.

    The timestamp is the last part (14 digits, d3rlpy's ``%Y%m%d%H%M%S``), the seed the integer before it, the
    algorithm the first part and the task everything in between (so a task may contain underscores).

    Raises:
        ValueError: naming what does not fit.
    """
    parts = name.split("_")
    if len(parts) < 4:
        raise ValueError(f"expected {NAME_HELP}")
    algo, *task_parts, seed, timestamp = parts
    if not _TIMESTAMP.fullmatch(timestamp):
        raise ValueError(f"the last part {timestamp!r} is not a 14-digit timestamp; expected {NAME_HELP}")
    if not _SEED.fullmatch(seed):
        raise ValueError(f"{seed!r} before the timestamp is not an integer seed; expected {NAME_HELP}")
    task = "_".join(task_parts)
    if not algo or not task:
        raise ValueError(f"empty algorithm or task name; expected {NAME_HELP}")
    return RunName(algo=algo, task=task, seed=int(seed), timestamp=timestamp)


def _is_run_folder(filenames: list[str] | set[str]) -> bool:
    return PARAMS_FILE in filenames or EVAL_FILE in filenames


def find_run_folders(path: Path) -> list[Path]:
    """``path`` itself when it is a run folder, else every run folder below it (sorted, not descending into
    run folders). A run folder is one holding ``params.json`` or ``environment.csv``."""
    path = Path(path)
    if not path.exists():
        raise ImportInvalid(f"{path}: no such folder; pass a d3rlpy run folder or a folder of them")
    if not path.is_dir():
        raise ImportInvalid(f"{path}: a file, not a folder; pass a d3rlpy run folder or a folder of them")
    if _is_run_folder({p.name for p in path.iterdir()}):
        return [path]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if Path(dirpath) != path and _is_run_folder(filenames):
            found.append(Path(dirpath))
            dirnames[:] = []
    if not found:
        raise ImportInvalid(
            f"{path}: no d3rlpy run folders in it (a run folder holds {PARAMS_FILE} and CSV logs such as "
            f"{EVAL_FILE})"
        )
    return sorted(found)


def _read_csv(path: Path) -> tuple[list[int], list[float]]:
    """Steps and values of one ``epoch,step,value`` CSV (no header); blank lines are skipped."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ImportInvalid(f"{path}: not a text CSV file (not UTF-8)") from None
    except OSError as e:
        raise ImportInvalid(f"{path}: cannot be read ({e.strerror or e})") from None
    steps: list[int] = []
    values: list[float] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split(",")
        where = f"{path}: line {number}"
        if len(fields) != 3:
            raise ImportInvalid(
                f"{where}: {len(fields)} column(s), expected 3 (epoch,step,value without a header): "
                f"{_clip(line)!r}"
            )
        epoch, step, value = (f.strip() for f in fields)
        for label, text_value in (("epoch", epoch), ("step", step)):
            if not _INT.fullmatch(text_value):
                raise ImportInvalid(f"{where}: {label} {_clip(text_value)!r} is not an integer")
        try:
            number_value = float(value)
        except ValueError:
            raise ImportInvalid(f"{where}: value {_clip(value)!r} is not a number") from None
        steps.append(int(step))
        values.append(number_value)
    return steps, values


# Bytes of a file the bulk reader takes: digits, signs, '.', exponents, commas and '\n'. Anything else (blank
# or whitespace-padded lines, CRLF, nan / inf, text) goes through ``_read_csv``, which also words the errors.
_PLAIN = b"0123456789+-.eE,\n"
_COLUMNS = ("epoch", "step", "value")


def _plain(data: bytes) -> bool:
    return not data.translate(None, _PLAIN) and b"\n\n" not in data and not data.startswith(b"\n")


def _read_csvs(paths: list[Path]) -> list[tuple[Any, Any] | None]:
    """``_read_csv`` of many files at once, for the plain ones (``_plain``): concatenated and parsed by ONE
    pyarrow CSV read (typed int64, int64, float64; correctly rounded like ``float``), then split per file
    into numpy arrays of steps and values. None for the others, and for all of them if that read finds
    anything ``_read_csv`` would not accept (a wrong column count, a non-integer step, an empty field), each
    of them is tried alone and the ones that still fail are None: the caller reads those with ``_read_csv``,
    so the numbers and the errors are the same."""
    out: list = [None] * len(paths)
    whole = _read_whole(paths)
    if whole is not None:  # every file read into one buffer, and every one of them plain
        buf, spans = whole
        rows = [buf.count(b"\n", start, end) for start, end in spans]
        parsed = _parse_bulk(memoryview(buf), sum(rows)) if buf else None
        if parsed is not None:
            steps, values = parsed
            start = 0
            for i, n in enumerate(rows):
                out[i] = (steps[start : start + n], values[start : start + n])
                start += n
            return out
    chunks: list[bytes] = []
    plain: list[tuple[int, int]] = []  # (index into paths, rows)
    for i, path in enumerate(paths):
        try:
            data = path.read_bytes()
        except OSError:
            data = None
        if data is None or not _plain(data):
            continue
        if data and not data.endswith(b"\n"):
            data += b"\n"
        chunks.append(data)
        plain.append((i, data.count(b"\n")))
    if plain:
        parsed = _parse_bulk(b"".join(chunks), sum(rows for _, rows in plain))
        if parsed is not None:
            steps, values = parsed
            start = 0
            for i, rows in plain:
                out[i] = (steps[start : start + rows], values[start : start + rows])
                start += rows
        else:  # some file pyarrow does not take: read them one by one, so only that one is left over
            for (i, rows), data in zip(plain, chunks, strict=True):
                out[i] = _parse_bulk(data, rows)
    return out


def _read_whole(paths: list[Path]) -> tuple[bytearray, list[tuple[int, int]]] | None:
    """The files one after the other in ONE buffer, read straight into it (no copy per file, none to join
    them), each ending in a newline (one added where a file ends without), with each file's (start, end) in
    it; None unless every file reads as its size said and is plain (``_plain``), for ``_read_csvs``' file by
    file way, which sorts out the others."""
    try:
        sizes = [os.stat(p).st_size for p in paths]
    except OSError:
        return None
    buf = bytearray(sum(sizes) + len(paths))
    view = memoryview(buf)
    spans, at = [], 0
    try:
        for path, size in zip(paths, sizes, strict=True):
            with open(path, "rb", buffering=0) as f:
                if f.readinto(view[at : at + size]) != size or f.read(1):
                    return None  # changed since its size was read
            if size and buf[at] == 10:  # starts with a blank line: not plain
                return None
            if size and buf[at + size - 1] != 10:
                buf[at + size] = 10
                size += 1
            spans.append((at, at + size))
            at += size
    except OSError:
        return None
    finally:
        view.release()
    del buf[at:]
    if buf.translate(None, _PLAIN) or b"\n\n" in buf:
        return None
    return buf, spans


def _parse_bulk(data: bytes | memoryview, rows: int) -> tuple[object, object] | None:
    """Steps and values (numpy) of concatenated ``epoch,step,value`` lines, or None if pyarrow finds any
    line ``_read_csv`` would reject (or reads another number of rows)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if not data:
        return None
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(column_names=list(_COLUMNS), block_size=1 << 24),
            parse_options=pacsv.ParseOptions(newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types={"epoch": pa.int64(), "step": pa.int64(), "value": pa.float64()},
                null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False,
            ),
        )  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != rows or any(table.column(c).null_count for c in _COLUMNS):
        return None
    return _numpy(table.column("step")), _numpy(table.column("value"))


def _numpy(column: Any) -> Any:
    """A chunked int64 / float64 column without nulls as one numpy array: each chunk's values buffer read as
    it is, joined when there are several (pyarrow's ``to_numpy`` imports pandas first: 0.3-0.8 s)."""
    import numpy as np

    dtype = np.dtype(np.int64 if str(column.type) == "int64" else np.float64)
    chunks = [np.frombuffer(c.buffers()[1], dtype)[c.offset : c.offset + len(c)] for c in column.chunks]
    if len(chunks) == 1:
        return chunks[0]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype)


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _read_params(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ImportInvalid(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ImportInvalid(f"{path}: expected a JSON object of hyperparameters, got {type(data).__name__}")
    return data


def read_run(folder: Path) -> ImportedRun:
    """One run folder: its name's parts, ``params.json`` as the config, every CSV as a metric."""
    folder = Path(folder)
    try:
        name = parse_run_name(folder.name)
    except ValueError as e:
        raise ImportInvalid(f"{folder}: cannot read a d3rlpy run from this folder name: {e}") from None
    metrics: dict[str, tuple[list[int], list[float]]] = {}
    for csv in _csv_files(folder):
        metrics[_metric_name(csv)] = _read_csv(csv)
    return _run(folder, name, metrics)


def _csv_files(folder: Path) -> list[Path]:
    """The files ``*.csv`` of a folder (links to files included), sorted: ``sorted(folder.glob("*.csv"))``
    that are files, from one directory read (the entries' types, without a ``stat`` per file)."""
    with os.scandir(folder) as entries:
        names = sorted(e.name for e in entries if e.name.endswith(".csv") and e.is_file())
    return [folder / name for name in names]


def _metric_name(csv: Path) -> str:
    return EVAL_METRIC if csv.name == EVAL_FILE else csv.stem


def _run(folder: Path, name: RunName, metrics: dict) -> ImportedRun:
    return ImportedRun(
        key=folder.name,
        algo=name.algo,
        env=name.task,
        seed=name.seed,
        config=_read_params(folder / PARAMS_FILE),
        metrics=metrics,
        source=str(folder.resolve()),
    )


def read(path: Path, **options: object) -> list[ImportedRun]:
    """Every run under ``path`` (see ``find_run_folders``). Stops at the first malformed folder or file.

    What ``read_run`` reads for each folder, with the CSVs of all of them parsed in bulk (``_read_csvs``): one
    pyarrow read for the lot instead of a Python loop over every line.
    """
    folders = find_run_folders(Path(path))
    files = [_csv_files(folder) for folder in folders]
    parsed = iter(_read_csvs([csv for group in files for csv in group]))
    runs = []
    for folder, group in zip(folders, files, strict=True):  # errors in the order read_run meets them
        try:
            name = parse_run_name(folder.name)
        except ValueError as e:
            raise ImportInvalid(f"{folder}: cannot read a d3rlpy run from this folder name: {e}") from None
        metrics = {}
        for csv in group:
            got = next(parsed)
            metrics[_metric_name(csv)] = got if got is not None else _read_csv(csv)
        runs.append(_run(folder, name, metrics))
    return runs
