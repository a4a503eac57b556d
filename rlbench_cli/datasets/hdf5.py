"""D4RL-format HDF5 files: top-level ``observations``, ``actions``, ``rewards``, ``terminals``, ``timeouts``
and a ``metadata`` group whose attributes hold ``OfflineData.meta``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .data import OfflineData, meta_to_attrs

__all__ = ["write_hdf5", "read_hdf5"]

_ARRAYS = ("observations", "actions", "rewards", "terminals", "timeouts")


def write_hdf5(path: Path, data: OfflineData) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file renamed into place)."""
    import h5py

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with h5py.File(tmp, "w") as f:
        for k in _ARRAYS:
            f.create_dataset(k, data=np.asarray(getattr(data, k)), compression="gzip", compression_opts=4)
        g = f.create_group("metadata")
        for k, v in meta_to_attrs(data.meta).items():
            g.attrs[k] = v
    tmp.replace(path)


def _attr(v: Any) -> Any:
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v


def read_hdf5(path: Path) -> OfflineData:
    """Read a D4RL-format HDF5 file (rlbench's, or D4RL's own: ``timeouts`` may be missing)."""
    import h5py

    with h5py.File(path, "r") as f:
        missing = [k for k in ("observations", "actions", "rewards", "terminals") if k not in f]
        if missing:
            raise ValueError(f"{path}: not a D4RL-format dataset (no {', '.join(missing)} array)")
        arrays = {k: f[k][()] for k in _ARRAYS if k in f}
        meta = {k: _attr(v) for k, v in f["metadata"].attrs.items()} if "metadata" in f else {}
    n = len(arrays["observations"])
    arrays.setdefault("timeouts", np.zeros(n, bool))
    arrays["rewards"] = np.asarray(arrays["rewards"], np.float32).reshape(n)
    arrays["terminals"] = np.asarray(arrays["terminals"]).reshape(n).astype(bool)
    arrays["timeouts"] = np.asarray(arrays["timeouts"]).reshape(n).astype(bool)
    return OfflineData(**arrays, meta=meta)
