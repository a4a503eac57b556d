"""ImagineBench's own data files, read into rlbench's datasets (``rlbench datasets import``).

ImagineBench ships real data and LLM-imagined rollouts as dictionaries of arrays: ``observations``,
``actions``, ``rewards``, ``masks`` (0 at the last step of an episode that ended in a terminal state, 1
elsewhere) and ``instructions`` (one per transition: its words, or its embedding), optionally ``terminals``
and ``timeouts`` (then those mark the episode ends). Here they come as an HDF5 file with those top-level
arrays, or a NumPy pickle of such a dictionary (``.pkl``, ``.npy``, ``.npz`` with pickled objects).

Loading a pickle can execute any code inside it, so a pickle is read only with ``trust=True`` (the
``--trust`` flag); without it the error says why, and nothing is read. Every problem (a missing key,
arrays of different lengths, NaN or infinite observations, a pickle that is not a dictionary) is a
one-line ``ImportInvalid`` naming the file and the key. Instructions given as words are embedded with the
encoder (``envs.imagine.encoder``); the observation of a transition is then its state followed by that
embedding, as rlbench's language envs give it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ImportInvalid, UsageError
from .data import OfflineData

__all__ = ["REQUIRED", "PICKLE_SUFFIXES", "read_imaginebench"]

REQUIRED = ("observations", "actions", "rewards", "masks", "instructions")
PICKLE_SUFFIXES = (".pkl", ".pickle", ".npy", ".npz")


def _load_raw(path: Path, trust: bool) -> dict[str, Any]:
    if path.suffix in PICKLE_SUFFIXES:
        if not trust:
            raise ImportInvalid(f"{path}: a pickled file, and loading a pickle can run any code hidden in it; "
                                "pass --trust only if you trust where the file came from (nothing was read)")  # fmt: skip
        import pickle

        try:
            if path.suffix in (".npy", ".npz"):
                raw = np.load(path, allow_pickle=True)
                if isinstance(raw, np.ndarray) and raw.dtype == object and raw.shape == ():
                    raw = raw.item()
                elif hasattr(raw, "files"):
                    raw = {k: raw[k] for k in raw.files}
            else:
                with open(path, "rb") as f:
                    raw = pickle.load(f)  # noqa: S301 - the user passed --trust (see the docstring)
        except Exception as e:  # noqa: BLE001 - any unpickling failure is the file's problem
            raise ImportInvalid(f"{path}: cannot unpickle it ({type(e).__name__}: {e})") from None
        if not isinstance(raw, dict):
            raise ImportInvalid(f"{path}: holds a {type(raw).__name__}, not a dictionary of arrays with keys "
                                f"{', '.join(REQUIRED)}")  # fmt: skip
        return raw
    import h5py

    try:
        with h5py.File(path, "r") as f:
            raw = {}
            for k in f.keys():
                if isinstance(f[k], h5py.Dataset):
                    raw[k] = f[k][()]
    except OSError as e:
        raise ImportInvalid(f"{path}: not an HDF5 file ({' '.join(str(e).split())})") from None
    return raw


def read_imaginebench(path: Path, trust: bool = False, encoder: str | None = None,
                      meta: dict[str, Any] | None = None) -> OfflineData:  # fmt: skip
    """One ImagineBench file as ``OfflineData`` (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ImportInvalid(f"{path}: no such file")
    raw = _load_raw(path, trust)
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise ImportInvalid(f"{path}: key {missing[0]!r} is missing (an ImagineBench file has "
                            f"{', '.join(REQUIRED)}); add it or check the file")  # fmt: skip
    arrays = {k: np.asarray(raw[k]) for k in REQUIRED}
    n = len(arrays["observations"])
    for k, v in arrays.items():
        if v.ndim == 0 or len(v) != n:
            got = "a scalar" if v.ndim == 0 else f"{len(v)} rows"
            raise ImportInvalid(f"{path}: key {k!r} has {got} but 'observations' has {n}; every key needs "
                                "one row per transition")  # fmt: skip
    if n == 0:
        raise ImportInvalid(f"{path}: key 'observations' is empty; the file holds no transitions")
    try:
        obs = arrays["observations"].astype(np.float32).reshape(n, -1)
    except (TypeError, ValueError):
        raise ImportInvalid(f"{path}: key 'observations' is not numeric") from None
    bad = np.flatnonzero(~np.isfinite(obs).all(axis=1))
    if len(bad):
        raise ImportInvalid(f"{path}: key 'observations' has NaN or infinite values (first at row {bad[0]}); "
                            "drop or fix those transitions")  # fmt: skip
    instr = arrays["instructions"]
    if instr.dtype.kind in "USO":
        from ..envs.imagine.encoder import describe, get_encoder

        enc = get_encoder(encoder)
        words = [x.decode() if isinstance(x, bytes) else str(x) for x in instr.reshape(n)]
        unique = sorted(set(words))
        table = dict(zip(unique, enc.encode(unique)))
        emb = np.stack([table[w] for w in words])
        info = describe(enc)
    else:
        try:
            emb = instr.astype(np.float32).reshape(n, -1)
        except (TypeError, ValueError):
            raise ImportInvalid(f"{path}: key 'instructions' is neither words nor numbers") from None
        if not np.isfinite(emb).all():
            raise ImportInvalid(f"{path}: key 'instructions' has NaN or infinite values")
        info = {"encoder": "given in the file", "encoder_dim": emb.shape[1]}
    actions = arrays["actions"]
    discrete = actions.dtype.kind in "iu" or (actions.ndim == 1 and np.all(np.mod(actions, 1) == 0))
    actions = actions.astype(np.int64).reshape(n) if discrete else actions.astype(np.float32).reshape(n, -1)
    masks = arrays["masks"].astype(np.float32).reshape(n)
    if "terminals" in raw:
        terminals = np.asarray(raw["terminals"]).reshape(-1).astype(bool)
        timeouts = np.asarray(raw.get("timeouts", np.zeros(n))).reshape(-1).astype(bool)
        for k, v in (("terminals", terminals), ("timeouts", timeouts)):
            if len(v) != n:
                raise ImportInvalid(f"{path}: key {k!r} has {len(v)} rows but 'observations' has {n}")
    else:
        terminals, timeouts = masks == 0, np.zeros(n, bool)
    return OfflineData(
        observations=np.concatenate([obs, emb], 1),
        actions=actions,
        rewards=arrays["rewards"].astype(np.float32).reshape(n),
        terminals=terminals,
        timeouts=timeouts,
        meta={**(meta or {}), **info, "discrete": bool(discrete), "source": f"ImagineBench file {path.name}"},
    )


def import_files(
    file: Path,
    name: str,
    env: str,
    imagined: Path | None = None,
    trust: bool = False,
    encoder: str | None = None,
    root: Path | None = None,
) -> tuple[Path, int, int | None]:
    """``rlbench datasets import``: ImagineBench's real data (and its imagined rollouts) as the dataset
    ``name`` evaluated in ``env``, written to ``<root>/<name>.hdf5`` (and ``<name>.imagined.hdf5``) once
    every file is read and checked. Returns the real file's path and the real and imagined transitions
    (None without ``imagined``).

    Raises:
        UsageError: an unknown env or encoder, a dataset of that name already there, files whose observations
            differ in width, or an env whose observation is not a state plus instruction embedding that wide.
        ImportInvalid: what ``read_imaginebench`` refuses.
    """
    from ..envs import known_env, make_env
    from ..envs.imagine.encoder import check_encoder
    from .hdf5 import write_hdf5
    from .names import datasets_root

    problem = known_env(env) or check_encoder(encoder)
    if problem:
        raise UsageError(f"--{'env' if known_env(env) else 'encoder'}: {problem}")
    root = Path(root) if root is not None else datasets_root()
    out = root / f"{name}.hdf5"
    if out.exists():
        raise UsageError(f"--name {name!r}: {out} exists already; remove it or choose another name")
    meta = {"name": name, "env_id": env, "env_kwargs": {}}
    real = read_imaginebench(file, trust, encoder, {**meta, "level": "real"})
    parts = [(out, real)]
    if imagined is not None:
        im = read_imaginebench(
            imagined, trust, encoder, {**meta, "name": f"{name} (imagined)", "level": "imagined"}
        )
        if im.observations.shape[1] != real.observations.shape[1]:
            raise UsageError(f"{imagined}: observations with instructions are {im.observations.shape[1]} wide but "
                             f"{real.observations.shape[1]} in {file}; both files must describe the same task")  # fmt: skip
        parts.append((root / f"{name}.imagined.hdf5", im))
    e = make_env(env)
    shape = getattr(e.observation_space, "shape", None)
    e.close()
    if shape and len(shape) == 1 and shape[0] != real.observations.shape[1]:
        raise UsageError(f"{file}: a state plus instruction embedding is {real.observations.shape[1]} numbers, but {env} "
                         f"observes {shape[0]}; import it for an env of that size (or pick the encoder it used)")  # fmt: skip
    for path, data in reversed(parts):  # the real file last: its presence says the pair is complete
        write_hdf5(path, data)
    return out, len(real), len(parts[1][1]) if imagined is not None else None
