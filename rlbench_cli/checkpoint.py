"""Training checkpoints: one file per checkpoint, written atomically, only the latest kept.

A run's checkpoints live in its run folder, shared by its attempts: ``<runs_root>/<suite>/<run_id>/checkpoint/``
(the parent of an attempt folder). Each is one file, ``step-<S>.pt``, a ``torch.save`` of a dict::

    {"format": FORMAT, "step": S, "saved_at": unix time, "rng": rng_state(), "meta": {...}, "state": {...}}

``state`` is the algorithm's (tensors, numpy arrays, Python objects, pickled environments), ``meta`` the
runner's (evaluation bookkeeping, which metric shards hold the rows logged before the checkpoint). A file is
written to a temporary name in the same folder, fsynced, renamed into place, and the folder fsynced; then
the older checkpoints are removed (or later, by ``prune``: a packed job removes its seeds' older checkpoints
once every seed has its new one). A reader takes the highest step that loads; a temporary file is never
read. Nothing here knows about runs or algorithms: ``RunContext`` uses it.
"""

from __future__ import annotations

import io
import os
import pickle
import random
import re
import time
from pathlib import Path
from typing import Any

__all__ = [
    "FORMAT",
    "save",
    "prune",
    "load",
    "load_latest",
    "latest_step",
    "list_checkpoints",
    "rng_state",
    "set_rng_state",
    "minutes_or_steps",
    "dumps_envs",
    "loads_envs",
]

FORMAT = "rlbench-checkpoint-1"
_NAME = re.compile(r"step-([0-9]+)\.pt")


def rng_state() -> dict[str, Any]:
    """The global random states: Python's ``random``, NumPy's legacy global, torch CPU (and CUDA)."""
    import numpy as np
    import torch

    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` returned."""
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])


def list_checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoint files in ``folder`` as (step, path), latest step first."""
    d = Path(folder)
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir() if (m := _NAME.fullmatch(p.name))]
    return sorted(found, reverse=True)


def latest_step(folder: str | Path) -> int | None:
    """The step of the latest checkpoint in ``folder`` (from its file name: cheap), or None."""
    found = list_checkpoints(folder)
    return found[0][0] if found else None


def save(
    folder: str | Path,
    step: int,
    state: dict[str, Any],
    meta: dict[str, Any] | None = None,
    *,
    prune: bool = True,
) -> Path:
    """Write a checkpoint of ``state`` taken at ``step`` (with the current global RNG states) atomically,
    then (unless not ``prune``) remove every other checkpoint in ``folder``. Returns the file written."""
    import torch

    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    final = d / f"step-{int(step)}.pt"
    tmp = d / f".step-{int(step)}.{os.getpid()}.tmp"
    payload = {
        "format": FORMAT,
        "step": int(step),
        "saved_at": time.time(),
        "rng": rng_state(),
        "meta": dict(meta or {}),
        "state": state,
    }
    try:
        with open(tmp, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(d)
    if prune:
        _keep_only(d, int(step))
    return final


def prune(folder: str | Path, keep: int) -> None:
    """Remove every checkpoint in ``folder`` but the one at step ``keep``, and temporary files left by a
    process killed while writing one."""
    _keep_only(Path(folder), int(keep))


def _keep_only(d: Path, keep: int) -> None:
    for step, old in list_checkpoints(d):
        if step != keep:
            old.unlink(missing_ok=True)
    for stale in d.glob(".step-*.tmp") if d.is_dir() else []:  # left by a process killed while writing
        stale.unlink(missing_ok=True)


def load(path: str | Path) -> dict[str, Any]:
    """Read one checkpoint file (the whole dict ``save`` wrote). Raises ValueError if it is not one."""
    import torch

    ck = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(ck, dict) or ck.get("format") != FORMAT:
        raise ValueError(f"{path}: not an rlbench checkpoint")
    return ck


def load_latest(folder: str | Path) -> dict[str, Any] | None:
    """The latest checkpoint in ``folder`` that loads, or None. A file that does not load (it cannot be
    half-written, but a disk can fail) is renamed ``*.bad`` and the next older one is tried."""
    for _, path in list_checkpoints(folder):
        try:
            return load(path)
        except Exception:  # noqa: BLE001 - any unreadable file: keep it for a post-mortem, fall back
            os.replace(path, path.with_suffix(".bad"))
    return None


def minutes_or_steps(every: int | str | None) -> tuple[int | None, float | None]:
    """``budget.checkpoint_every`` as (steps, seconds): an int is steps, ``'10m'`` is 600 seconds."""
    if every is None:
        return None, None
    if isinstance(every, str):
        text = every.strip()
        if text.endswith("m"):
            return None, float(text[:-1]) * 60.0
        return int(text), None
    return int(every), None


def dumps_envs(obj: Any) -> bytes:
    """Environments (or anything holding them) as bytes that ``loads_envs`` turns back into the same
    environments in the same state: their simulator state, wrappers, episode counters and random generators.

    Plain ``pickle`` is not enough: gymnasium's MuJoCo and Box2D environments are ``EzPickle``, which
    pickles the constructor's arguments and builds a fresh environment on loading, losing its state. Here an
    ``EzPickle`` object is pickled by its attributes instead (MuJoCo's ``MjData`` pickles whole). An
    environment holding something that does not pickle (Box2D's world) raises."""
    buf = io.BytesIO()
    _EnvPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def loads_envs(data: bytes) -> Any:
    """What ``dumps_envs`` wrote."""
    return pickle.loads(data)


class _EnvPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        try:
            from gymnasium.utils.ezpickle import EzPickle
        except ImportError:  # pragma: no cover - gymnasium is a dependency
            return NotImplemented
        if isinstance(obj, EzPickle) and not isinstance(obj, type):
            return (_bare, (type(obj),), dict(vars(obj)), None, None, _set_attributes)
        return NotImplemented


def _bare(cls: type) -> Any:
    return cls.__new__(cls)


def _set_attributes(obj: Any, state: dict[str, Any]) -> None:
    obj.__dict__.update(state)


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover - not every platform opens folders
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
