"""D4RL-format HDF5 files that d3rlpy can also load as they are.

Layout: top-level ``observations``, ``actions``, ``rewards``, ``terminals``, ``timeouts`` (and
``next_observations`` when known), D4RL's flat arrays, and a ``metadata`` group whose attributes hold
``OfflineData.meta``. Anything that reads D4RL files reads these.

The same file is also a d3rlpy 2.x replay-buffer file: ``write_hdf5`` adds d3rlpy's layout (``columns``,
``num_episodes``, ``version`` and per episode ``observations_<i>``, ``actions_<i>``, ``rewards_<i>``,
``terminated_<i>``) as HDF5 *virtual datasets* that point into the flat arrays, so the data is stored once::

    with open("CartPole-v1-medium.hdf5", "rb") as f:
        buffer = d3rlpy.dataset.ReplayBuffer.load(f, d3rlpy.dataset.InfiniteBuffer())

Each episode costs about 1 KiB of HDF5 object headers (d3rlpy's own ``dump`` writes as many objects), which
matters only for datasets of very many short episodes (a random policy on Hopper: ~45k episodes per 1M
transitions, ~50 MB). The arrays are stored uncompressed: a virtual dataset reads its slice directly, where a
compressed source would be decompressed chunk by chunk for every episode. d3rlpy infers the number of
discrete actions from the largest action in the file; ``to_d3rlpy`` passes the true one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .data import OfflineData, meta_to_attrs

__all__ = ["write_hdf5", "read_hdf5", "read_meta", "D3RLPY_VERSION"]

_ARRAYS = ("observations", "actions", "rewards", "terminals", "timeouts", "next_observations")
D3RLPY_VERSION = "2.1"  # d3rlpy.dataset.io.DATASET_VERSION of the layout written here


def write_hdf5(path: Path, data: OfflineData) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file renamed into place)."""
    import h5py

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with h5py.File(tmp, "w") as f:
            for k in _ARRAYS:
                v = getattr(data, k)
                if v is not None:
                    f.create_dataset(k, data=np.asarray(v))
            g = f.create_group("metadata")
            for k, v in meta_to_attrs(data.meta).items():
                g.attrs[k] = v
            _write_d3rlpy_layout(f, data)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_d3rlpy_layout(f: Any, data: OfflineData) -> None:
    """d3rlpy's per-episode datasets as virtual views of the flat arrays (see the module docstring).

    d3rlpy wants rewards (and discrete actions) as (T, 1) columns: a view maps the flat (N,) source onto
    the first column. ``terminated_<i>`` is a scalar; all episodes share two of them through hard links.
    """
    import h5py

    ends = data.episode_ends()
    starts = np.concatenate([[0], ends[:-1] + 1])
    f.create_dataset("columns", data=["observations", "actions", "rewards", "terminated"])
    f.create_dataset("num_episodes", data=len(ends))
    f.create_dataset("version", data=D3RLPY_VERSION)
    sources = {
        k: (h5py.VirtualSource(".", k, shape=f[k].shape, dtype=f[k].dtype), f[k].shape, f[k].dtype)
        for k in ("observations", "actions", "rewards")
    }
    flags: dict[bool, str] = {}
    terminals = np.asarray(data.terminals, bool)
    for i, (s, e) in enumerate(zip(starts.tolist(), (ends + 1).tolist())):
        for k, (src, shape, dtype) in sources.items():
            if len(shape) == 1:
                layout = h5py.VirtualLayout(shape=(e - s, 1), dtype=dtype)
                layout[:, 0] = src[s:e]
            else:
                layout = h5py.VirtualLayout(shape=(e - s, *shape[1:]), dtype=dtype)
                layout[...] = src[s:e]
            f.create_virtual_dataset(f"{k}_{i}", layout)
        term = bool(terminals[e - 1])
        if term in flags:
            f[f"terminated_{i}"] = f[flags[term]]
        else:
            f.create_dataset(f"terminated_{i}", data=term)
            flags[term] = f"terminated_{i}"


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


def _check(f: Any, path: Path) -> None:
    missing = [k for k in ("observations", "actions", "rewards", "terminals") if k not in f]
    if missing:
        raise ValueError(f"{path}: not a D4RL-format dataset (no {', '.join(missing)} array)")


def read_meta(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The metadata of a D4RL-format file and its small per-transition arrays (rewards, terminals,
    timeouts), without reading observations or actions: what listing datasets needs."""
    import h5py

    with h5py.File(path, "r") as f:
        _check(f, path)
        meta = {k: _attr(v) for k, v in f["metadata"].attrs.items()} if "metadata" in f else {}
        n = f["observations"].shape[0]
        small = {
            "rewards": np.asarray(f["rewards"][()], np.float32).reshape(n),
            "terminals": np.asarray(f["terminals"][()]).reshape(n).astype(bool),
            "timeouts": np.asarray(f["timeouts"][()]).reshape(n).astype(bool)
            if "timeouts" in f
            else np.zeros(n, bool),
        }
    return meta, small


def read_hdf5(path: Path) -> OfflineData:
    """Read a D4RL-format HDF5 file (rlbench's, or D4RL's own: ``timeouts`` may be missing)."""
    import h5py

    with h5py.File(path, "r") as f:
        _check(f, path)
        arrays = {k: f[k][()] for k in _ARRAYS if k in f}
        meta = {k: _attr(v) for k, v in f["metadata"].attrs.items()} if "metadata" in f else {}
    n = len(arrays["observations"])
    arrays.setdefault("timeouts", np.zeros(n, bool))
    arrays["rewards"] = np.asarray(arrays["rewards"], np.float32).reshape(n)
    arrays["terminals"] = np.asarray(arrays["terminals"]).reshape(n).astype(bool)
    arrays["timeouts"] = np.asarray(arrays["timeouts"]).reshape(n).astype(bool)
    return OfflineData(**arrays, meta=meta)
