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

from ..errors import ImportInvalid
from . import ImportedRun

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
    for csv in sorted(folder.glob("*.csv")):
        if not csv.is_file():
            continue
        metric = EVAL_METRIC if csv.name == EVAL_FILE else csv.stem
        metrics[metric] = _read_csv(csv)
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
    """Every run under ``path`` (see ``find_run_folders``). Stops at the first malformed folder or file."""
    return [read_run(folder) for folder in find_run_folders(Path(path))]
