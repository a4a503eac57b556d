"""Minari datasets: read one (a folder in Minari's layout, or an id under ``MINARI_DATASETS_PATH``) into
``OfflineData``, and write ``OfflineData`` as one that ``minari.load_dataset`` opens.

Minari stores episodes, each with T + 1 observations (the last one after the final step); the flat layout
keeps the observation *before* each step plus, when known, ``next_observations``. Reading flattens episodes
(``terminations`` -> ``terminals``, ``truncations`` -> ``timeouts``; an episode that ends with neither, cut
short, gets a timeout at its end, as D4RL marks a cut). Writing needs each episode's last observation:
``next_observations`` gives it (rlbench-generated datasets have it); without it the last observation is
repeated, and the dataset's metadata says so (``final_observation: repeated``).

Minari's own ``ref_min_score`` / ``ref_max_score`` are the random and expert references; rlbench's metadata
travels in an ``rlbench`` entry of Minari's metadata, so an exported dataset reads back with its provenance.
Nothing is ever downloaded: ids are looked up locally only.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .data import OfflineData

__all__ = ["MINARI_PREFIX", "minari_root", "minari_path", "is_minari_folder", "read_minari", "write_minari"]

MINARI_PREFIX = "minari:"


def minari_root() -> Path:
    """Where Minari keeps datasets: ``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets`` (as Minari does)."""
    root = os.environ.get("MINARI_DATASETS_PATH")
    return Path(root) if root else Path.home() / ".minari" / "datasets"


def minari_path(dataset_id: str) -> Path:
    """The folder of a local Minari dataset id (``mujoco/hopper/medium-v0``)."""
    return minari_root() / dataset_id


def _data_dir(folder: Path) -> Path:
    """Minari's ``data`` folder (holding ``metadata.json``), given it or the dataset folder above it."""
    return folder / "data" if (folder / "data" / "metadata.json").is_file() else folder


def is_minari_folder(folder: Path) -> bool:
    return (_data_dir(Path(folder)) / "metadata.json").is_file()


def read_minari(folder: Path) -> OfflineData:
    """Read the Minari dataset in ``folder`` (the dataset folder or its ``data`` folder)."""
    import gymnasium
    import minari

    folder = Path(folder)
    if not is_minari_folder(folder):
        raise ValueError(f"{folder}: not a Minari dataset (no data/metadata.json)")
    ds = minari.MinariDataset(str(_data_dir(folder)))
    obs_space, act_space = ds.observation_space, ds.action_space
    if not isinstance(obs_space, gymnasium.spaces.Box):
        raise ValueError(f"{folder}: rlbench reads Box observations, this dataset has {obs_space}")
    discrete = isinstance(act_space, gymnasium.spaces.Discrete)
    if not discrete and not isinstance(act_space, gymnasium.spaces.Box):
        raise ValueError(f"{folder}: rlbench reads Discrete or Box actions, this dataset has {act_space}")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "next", "act", "rew", "term", "trunc")}
    for ep in ds.iterate_episodes():
        obs = np.asarray(ep.observations, np.float32)
        term = np.asarray(ep.terminations, bool).copy()
        trunc = np.asarray(ep.truncations, bool).copy() & ~term
        if len(term) and not (term[-1] or trunc[-1]):
            trunc[-1] = True
        parts["obs"].append(obs[:-1])
        parts["next"].append(obs[1:])
        parts["act"].append(np.asarray(ep.actions))
        parts["rew"].append(np.asarray(ep.rewards, np.float32))
        parts["term"].append(term)
        parts["trunc"].append(trunc)
    if not parts["obs"]:
        raise ValueError(f"{folder}: the Minari dataset has no episodes")
    actions = np.concatenate(parts["act"])
    actions = actions.astype(np.int64).reshape(-1) if discrete else actions.astype(np.float32)
    md = ds.storage.metadata
    meta: dict[str, Any] = json.loads(md["rlbench"]) if isinstance(md.get("rlbench"), str) else {}
    spec_json = md.get("eval_env_spec") or md.get(
        "env_spec"
    )  # gymnasium EnvSpec JSON: the env to evaluate in
    if isinstance(spec_json, str):
        env_spec = json.loads(spec_json)
        meta.setdefault("env_id", env_spec["id"])
        meta.setdefault("env_kwargs", dict(env_spec.get("kwargs") or {}))
    meta.setdefault("discrete", discrete)
    if discrete:
        meta.setdefault("n_actions", int(act_space.n))
    for ours, theirs in (("ref_random", "ref_min_score"), ("ref_expert", "ref_max_score")):
        if md.get(theirs) is not None:
            meta.setdefault(ours, float(md[theirs]))
    meta.update(source="minari", minari_id=ds.spec.dataset_id, minari_path=str(folder))
    return OfflineData(
        observations=np.concatenate(parts["obs"]),
        actions=actions,
        rewards=np.concatenate(parts["rew"]),
        terminals=np.concatenate(parts["term"]),
        timeouts=np.concatenate(parts["trunc"]),
        meta=meta,
        next_observations=np.concatenate(parts["next"]),
    )


def write_minari(data: OfflineData, dataset_id: str, root: Path | None = None) -> Path:
    """Write ``data`` as the Minari dataset ``dataset_id`` under ``root`` (default: ``minari_root()``);
    returns its folder. Minari refuses to overwrite an existing id (``ValueError``)."""
    import gymnasium
    import minari
    from minari.data_collector import EpisodeBuffer

    if not data.env_id:
        raise ValueError("the dataset names no environment (metadata env_id); Minari needs one")
    env = gymnasium.make(data.env_id, **(data.meta.get("env_kwargs") or {}))
    meta = dict(data.meta)
    ends = data.episode_ends()
    starts = np.concatenate([[0], ends[:-1] + 1])
    nxt = data.next_observations
    if nxt is None:
        meta["final_observation"] = "repeated"
    episodes = []
    for i, (s, e) in enumerate(zip(starts.tolist(), (ends + 1).tolist())):
        last = nxt[e - 1] if nxt is not None else data.observations[e - 1]
        term = np.asarray(data.terminals[s:e], bool)
        trunc = np.zeros(e - s, bool)
        trunc[-1] = not term[-1]  # the flat layout ends every episode: one that did not terminate was cut
        episodes.append(
            EpisodeBuffer(
                id=i,
                observations=np.concatenate([data.observations[s:e], last[None]]).astype(np.float32),
                actions=np.asarray(data.actions[s:e]),
                rewards=np.asarray(data.rewards[s:e], np.float64),
                terminations=term,
                truncations=trunc,
                infos={},
            )
        )
    refs = data.references
    saved = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root if root is not None else minari_root())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Minari warns about each piece of optional metadata left out
            ds = minari.create_dataset_from_buffers(
                dataset_id,
                episodes,
                env=env,
                algorithm_name=str(meta.get("behaviour", {}).get("algo", meta.get("source", "unknown"))),
                author="rlbench",
                description=f"{meta.get('name', dataset_id)}, exported by rlbench",
                ref_min_score=refs[0] if refs else None,
                ref_max_score=refs[1] if refs else None,
            )
        ds.storage.update_metadata({"rlbench": json.dumps(meta, default=str)})
        return Path(ds.storage.data_path).parent
    finally:
        if saved is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = saved
