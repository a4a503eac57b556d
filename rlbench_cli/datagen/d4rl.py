"""Generate D4RL-style offline datasets locally: train a behaviour policy with rlbench, then collect.

``build_dataset("CartPole-v1", "medium")`` writes ``<datasets root>/CartPole-v1-medium.hdf5`` (D4RL's
layout, loadable by d3rlpy as is, see ``hdf5``). Nothing is downloaded.

Levels, as D4RL defines them (Fu et al., 2020), all collected with the *stochastic* policy (``sample``):

- ``random``: uniform random actions.
- ``expert``: the best checkpoint of the behaviour run (highest evaluation return; the later one on a tie).
- ``medium``: the checkpoint whose return is about a third to a half of the expert's on the random -> expert
  normalised scale: the one nearest 0.4 inside [1/3, 1/2], else the nearest to 0.4 overall (recorded:
  ``policy.medium_in_range``).
- ``medium-replay``: what the agent saw while training up to the medium checkpoint. D4RL takes the replay
  buffer of that SAC run; rlbench's PPO has none, so every learner is treated alike: the checkpoints before
  the medium one are rolled out in turn, each for as many steps as it acted during training (the gap to the
  next checkpoint). This approximates the training stream (within a gap, the real policy kept changing;
  SAC's initial ``random_steps`` become rollouts of the first checkpoint). Its default size is the number of
  training steps up to the medium checkpoint, as in D4RL.
- ``medium-expert``: half medium, half expert, concatenated.
- ``conservative``: NeoRL-2's realistic data: a mediocre-but-safe behaviour policy with narrow coverage, the
  medium checkpoint acting greedily (deterministic actions) with small noise (Gaussian, std
  ``CONSERVATIVE_NOISE`` of the half action range, clipped; discrete: a random action with probability
  ``CONSERVATIVE_NOISE``), instead of sampling its stochastic policy.

Checkpoints are chosen by their evaluation return during training (deterministic actions, ``eval_episodes``
seeded episodes); the data is collected with sampled actions, whose return can be lower (CartPole-v1's
default medium checkpoint: 217 deterministic, 179 in its data). The metadata records both
(``policy.eval_return``, ``policy.data_mean_return``) and the data's normalised return.

The behaviour policy is trained once per (env, env kwargs, seed), cached, and reused by every level
(``datagen.behaviour``, with the per-environment defaults ``ENV_DEFAULTS``).

Reference returns, stored in every level's metadata: ``ref_random`` is the mean return of uniform random
actions over 100 seeded episodes, ``ref_expert`` the mean deterministic return of the expert checkpoint over
the same 100 seeds. ``timeouts`` mark time-limit truncations and the cut at ``size``; ``terminals`` mark
terminal states; ``next_observations`` are stored too.

The rollouts: ``datagen.rollouts``. As a family of ``datagen``'s dispatch: ``claims`` a dataset named
``<EnvId>-<level>`` of a gymnasium env (not a text env), ``ensure`` builds it, ``build_levels`` is
``rlbench datasets build ENV`` for such an env.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..datasets.data import OfflineData
from ..datasets.hdf5 import read_meta, write_hdf5
from ..datasets.names import LEVELS, datasets_root, generated_file_stem, generated_name, parse_generated_name
from ..envs import known_env, make_env
from ..envs.families import is_text_env
from ..errors import UnknownName, UsageError
from .behaviour import (
    NOT_LEARNABLE,
    behaviour_defaults,
    behaviour_folder,
    ensure_behaviour,
    load_checkpoint,
    one_torch_thread,
    utc_now,
    write_json,
)
from .lock import building
from .rollouts import COLLECT_ENVS, Collected, collect, collect_envs, episode_returns, uniform_policy

__all__ = [
    "claims",
    "ensure",
    "builds_env",
    "build_levels",
    "build_dataset",
    "select_expert",
    "select_medium",
    "replay_shares",
    "normalized",
]

Progress = Callable[[str], None]

REF_EPISODES = 100
REF_SEED = 2_000_003  # reference episode i is reset with seed REF_SEED + i, whatever the behaviour seed
MEDIUM_TARGET = 0.4
MEDIUM_RANGE = (1 / 3, 1 / 2)


def _silent(message: str) -> None:
    pass


def _spaces(env_id: str, env_kwargs: dict[str, Any]) -> tuple[Any, Any, bool]:
    """(observation space, action space, whether actions are discrete), if rlbench can build datasets of
    the env: Box observations, Discrete or bounded Box actions (a uniform random policy needs bounds)."""
    import gymnasium

    env = make_env(env_id, env_kwargs)
    obs, act = env.observation_space, env.action_space
    env.close()
    if not isinstance(obs, gymnasium.spaces.Box) or not isinstance(
        act, (gymnasium.spaces.Discrete, gymnasium.spaces.Box)
    ):
        raise UsageError(
            f"{env_id}: rlbench builds datasets for Box observations and Discrete or Box actions, not {obs} "
            f"and {act}; use a D4RL-format file or a Minari dataset of your own"
        )
    if isinstance(act, gymnasium.spaces.Box) and not (
        np.isfinite(act.low).all() and np.isfinite(act.high).all()
    ):
        raise UsageError(f"{env_id}: its action space {act} is unbounded, so it has no uniform random policy")
    return obs, act, isinstance(act, gymnasium.spaces.Discrete)


# -- level arithmetic (pure) ----------------------------------------------------------------------------


def normalized(ret: float, ref_random: float, ref_expert: float) -> float:
    """D4RL's normalised return as a fraction: 0 = random, 1 = expert."""
    return (ret - ref_random) / (ref_expert - ref_random)


def select_expert(checkpoints: list[dict[str, Any]]) -> int:
    """Index of the best checkpoint (highest ``return``; the later one on a tie)."""
    return max(range(len(checkpoints)), key=lambda i: (checkpoints[i]["return"], checkpoints[i]["step"]))


def select_medium(
    checkpoints: list[dict[str, Any]], ref_random: float, ref_expert: float
) -> tuple[int, bool]:
    """(index of the medium checkpoint, whether it lies in D4RL's 1/3..1/2 band): the checkpoint nearest
    0.4 on the normalised scale among those in the band, else the nearest overall (the earlier on a tie)."""
    score = [normalized(c["return"], ref_random, ref_expert) for c in checkpoints]
    inside = [i for i, s in enumerate(score) if MEDIUM_RANGE[0] <= s <= MEDIUM_RANGE[1]]
    pool = inside or list(range(len(checkpoints)))
    best = min(pool, key=lambda i: (abs(score[i] - MEDIUM_TARGET), checkpoints[i]["step"]))
    return best, bool(inside)


def replay_shares(steps: list[int], medium: int, total: int) -> list[int]:
    """Transitions per checkpoint for medium-replay: checkpoint k < ``medium`` acted from its step to the
    next checkpoint's, so it gets that share of ``total`` (largest-remainder rounding; sums to ``total``).
    With the medium checkpoint first, it alone gets everything."""
    if medium == 0:
        return [total]
    gaps = np.array([steps[k + 1] - steps[k] for k in range(medium)], np.float64)
    exact = total * gaps / gaps.sum()
    out = np.floor(exact).astype(np.int64)
    out[np.argsort(-(exact - out), kind="stable")[: total - int(out.sum())]] += 1
    return out.tolist()


def _references(
    folder: Path, index: dict[str, Any], act_space: Any, device: str, progress: Progress
) -> dict[str, Any]:
    """ref_random and ref_expert of a behaviour run, measured once and kept in its index."""
    if "references" in index:
        return index["references"]
    env_id, kwargs = index["env_id"], index["env_kwargs"]
    seeds = [REF_SEED + i for i in range(REF_EPISODES)]
    progress(
        f"measuring the reference returns of {env_id}: random and expert policies, {REF_EPISODES} episodes"
    )
    rng = np.random.default_rng(REF_SEED)
    ref_random = float(episode_returns(env_id, kwargs, uniform_policy(act_space, rng), seeds).mean())
    best = index["checkpoints"][select_expert(index["checkpoints"])]
    with one_torch_thread():
        expert = load_checkpoint(index["algo"], folder / best["file"], device)
        ref_expert = float(episode_returns(env_id, kwargs, expert, seeds).mean())
    index["references"] = {
        "random": ref_random,
        "expert": ref_expert,
        "expert_step": best["step"],
        "episodes": REF_EPISODES,
        "seeds": f"{REF_SEED}..{REF_SEED + REF_EPISODES - 1}",
    }
    write_json(folder / "index.json", index)
    progress(f"  random {ref_random:.1f}, expert {ref_expert:.1f} (checkpoint at step {best['step']})")
    return index["references"]


# -- building -------------------------------------------------------------------------------------------


def _collect_seed(seed: int, level: str, part: int = 0) -> int:
    """Env seeds of one collection: distinct from training (seed + i), evaluation and reference seeds."""
    return 3_000_000 + 1_000_000 * seed + 100_000 * LEVELS.index(level) + COLLECT_ENVS * part


CONSERVATIVE_NOISE = 0.05  # the conservative level's action noise (a fraction of the half action range)


def _conservative(policy: Any, act_space: Any, seed: int) -> Callable[[np.ndarray], np.ndarray]:
    """The policy's greedy actions with small noise, as a reproducible stream (the conservative level)."""
    rng = np.random.default_rng(seed)
    if hasattr(act_space, "n"):

        def act_discrete(obs: np.ndarray) -> np.ndarray:
            greedy = np.asarray(policy(obs)).reshape(len(obs))
            flip = rng.random(len(obs)) < CONSERVATIVE_NOISE
            return np.where(flip, rng.integers(act_space.n, size=len(obs)), greedy)

        return act_discrete
    low, high = np.asarray(act_space.low, np.float32), np.asarray(act_space.high, np.float32)

    def act(obs: np.ndarray) -> np.ndarray:
        greedy = np.asarray(policy(obs), np.float32).reshape(len(obs), *act_space.shape)
        noise = rng.normal(0.0, CONSERVATIVE_NOISE * (high - low) / 2, size=greedy.shape)
        return np.clip(greedy + noise, low, high).astype(np.float32)

    return act


def _sampler(policy: Any, seed: int) -> Callable[[np.ndarray], np.ndarray]:
    """The policy's stochastic actions as a reproducible stream (numpy for PPO, torch's generator for d3rlpy)."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    return lambda obs: policy.sample(obs, rng)


def build_dataset(
    env_id: str,
    level: str,
    *,
    size: int | None = None,
    seed: int = 0,
    root: Path | None = None,
    env_kwargs: dict[str, Any] | None = None,
    force: bool = False,
    behaviour_steps: int | None = None,
    device: str = "cpu",
    progress: Progress = _silent,
    wrappers: list[dict[str, Any]] | None = None,
) -> Path:
    """Build ``<root>/<env_id>-<level>.hdf5`` (see the module docstring) and return its path.

    An existing file is kept unless ``force``; ``size`` defaults to the environment's (``ENV_DEFAULTS``;
    medium-replay: the training steps up to the medium checkpoint); ``behaviour_steps`` overrides the
    behaviour training budget (a cached policy trained for another budget needs ``force``).

    ``wrappers`` (``[{name, kwargs}]``, a suite's ``datasets[].wrappers``): the data is collected in the
    wrapped env (a delayed or disturbed system, NeoRL-2's framing) into ``<env_id>-<level>+<Wrapper>.hdf5``,
    by the behaviour policy trained in the plain env; the reference returns (random, expert) stay the plain
    env's, so a normalised score also shows what the wrappers cost.
    """
    if level not in LEVELS:
        raise UsageError(f"--level {level!r}: choose one of {', '.join(LEVELS)}")
    problem = known_env(env_id)
    if problem:
        raise UnknownName(f"{problem} (rlbench datasets build ENV takes a gymnasium id)")
    if size is not None and size < 1:
        raise UsageError(f"--size must be at least 1 (got {size})")
    if behaviour_steps is not None and behaviour_steps < 1:
        raise UsageError(f"--behaviour-steps must be at least 1 (got {behaviour_steps})")
    env_kwargs = dict(env_kwargs or {})
    root = Path(root) if root is not None else datasets_root()
    wrappers = [dict(w) for w in wrappers or []]
    name = generated_name(env_id, level)
    out = root / f"{generated_file_stem(name, wrappers)}.hdf5"
    with building(out, lambda pid: progress(f"{name}: another process (pid {pid}) is building it; waiting")):
        return _build(env_id, level, name, out, size, seed, root, env_kwargs, force, behaviour_steps, device,
                      progress, wrappers)  # fmt: skip


def _build(env_id: str, level: str, name: str, out: Path, size: int | None, seed: int, root: Path,
           env_kwargs: dict[str, Any], force: bool, behaviour_steps: int | None, device: str,
           progress: Progress, wrappers: list[dict[str, Any]]) -> Path:  # fmt: skip
    """``build_dataset``'s work, holding the dataset's build lock (``datagen.lock``)."""
    if out.exists() and not force:
        meta = read_meta(out)[0]
        if meta.get("env_kwargs", {}) != env_kwargs:
            raise UsageError(
                f"{out} was built with env kwargs {meta.get('env_kwargs')}, not {env_kwargs}: add "
                "--force to rebuild it, or give it another --datasets folder"
            )
        if meta.get("env_wrappers", []) != wrappers:
            raise UsageError(
                f"{out} was collected with env wrappers {meta.get('env_wrappers', [])}, not {wrappers}: delete "
                "it to rebuild it, or give the suite another --datasets folder"
            )
        progress(f"{name}: {out} exists (add --force to rebuild it)")
        return out
    obs_space, act_space, discrete = _spaces(env_id, env_kwargs)
    if env_id in NOT_LEARNABLE and level != "random":
        raise UsageError(
            f"{env_id}: no learned levels ({NOT_LEARNABLE[env_id]}); build --level random, or bring "
            "a dataset of your own (a D4RL-format file or a Minari dataset)"
        )
    cfg = behaviour_defaults(env_id, discrete, behaviour_steps)
    t0 = time.perf_counter()
    meta: dict[str, Any] = {
        "name": name,
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        **({"env_wrappers": wrappers} if wrappers else {}),
        "level": level,
        "discrete": discrete,
        "observation_shape": list(obs_space.shape),
        "action_shape": [] if discrete else list(act_space.shape),
    }
    if discrete:
        meta["n_actions"] = int(act_space.n)
    parts: list[tuple[dict[str, Any] | None, int]]  # (checkpoint, or None: uniform random; transitions)
    if env_id in NOT_LEARNABLE:
        n = size or cfg.size
        refs, folder, index = None, None, None
        parts = [(None, n)]
        meta["policy"] = {"kind": "uniform random"}
        meta["references_note"] = f"no expert reference: {NOT_LEARNABLE[env_id]}"
    else:
        shared = behaviour_folder(root, env_id, env_kwargs, cfg.algo, seed)  # every level's: one trainer
        with building(
            shared, lambda pid: progress(f"another process (pid {pid}) is training {shared}; waiting")
        ):
            folder, index = ensure_behaviour(
                root, env_id, env_kwargs, seed, cfg, behaviour_steps is not None, force, device, progress
            )
            refs = _references(folder, index, act_space, device, progress)
        parts, n, extra = _plan(level, index, refs, size or cfg.size, size is None)
        meta.update(extra)
        meta["behaviour"] = {
            k: index[k]
            for k in ("algo", "params", "steps", "eval_every", "eval_episodes", "seed", "train_seconds")
        }
        meta["behaviour"]["folder"] = (
            str(folder.relative_to(root)) if folder.is_relative_to(root) else str(folder)
        )
        meta["ref_random"], meta["ref_expert"] = refs["random"], refs["expert"]
        meta["ref_episodes"], meta["ref_seeds"] = refs["episodes"], refs["seeds"]
        if refs["expert"] <= refs["random"] and level != "random":
            raise UsageError(
                f"{env_id}: the behaviour policy did not learn (expert return {refs['expert']:.1f}, random "
                f"{refs['random']:.1f}); train it longer with --behaviour-steps N --force (now {index['steps']})"
            )
    progress(f"collecting {name}: {n} transitions")
    chunks: list[Collected] = []
    for k, (ckpt, count) in enumerate(parts):
        cseed = _collect_seed(seed, level, k)
        if ckpt is None:
            chunks.append(
                collect(
                    env_id,
                    env_kwargs,
                    uniform_policy(act_space, np.random.default_rng(cseed)),
                    count,
                    cseed,
                    wrappers=wrappers,
                )  # fmt: skip
            )
            continue
        assert folder is not None and index is not None  # a checkpoint comes from a behaviour run
        with one_torch_thread():
            policy = load_checkpoint(index["algo"], folder / ckpt["file"], device)
            act = (
                _conservative(policy, act_space, cseed)
                if level == "conservative"
                else _sampler(policy, cseed)
            )
            chunks.append(collect(env_id, env_kwargs, act, count, cseed, wrappers=wrappers))
        ckpt["data_mean_return"] = _mean(chunks[-1].returns)
    data = _assemble(chunks, meta)
    returns = [r for c in chunks for r in c.returns]
    mean = _mean(returns)
    meta.update(
        size=len(data),
        episodes=int(len(data.episode_ends())),
        complete_episodes=len(returns),
        mean_return=mean,
        # part k of a level (medium-replay, medium-expert) resets its envs with seeds collection_seed + 8k + i
        collection_seed=_collect_seed(seed, level),
        collection_envs=[collect_envs(count) for _, count in parts],
        actions={
            "random": "uniform random",
            "conservative": f"greedy (deterministic) plus noise {CONSERVATIVE_NOISE:g}",
        }.get(level, "sampled from the policy (stochastic)"),  # fmt: skip
        created_at=utc_now(),
        rlbench_version=__version__,
        build_seconds=round(time.perf_counter() - t0, 1),
    )
    if refs is not None and mean is not None and refs["expert"] != refs["random"]:
        meta["normalized_mean_return"] = 100 * normalized(mean, refs["random"], refs["expert"])
    data.meta = meta
    write_hdf5(out, data)
    norm = f", normalised {meta['normalized_mean_return']:.1f}" if "normalized_mean_return" in meta else ""
    shown = f"{mean:.1f}" if mean is not None else "n/a"
    progress(
        f"{name}: wrote {out} ({len(data)} transitions, {meta['episodes']} episodes, mean return {shown}{norm})"
    )
    return out


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _plan(
    level: str, index: dict[str, Any], refs: dict[str, Any], size: int, default_size: bool
) -> tuple[list[tuple[dict[str, Any] | None, int]], int, dict[str, Any]]:
    """What to collect for ``level``: parts (checkpoint record, or None for uniform random; transitions),
    the total, and the level's metadata. A part's record is the one in the metadata, so the mean return of
    the data it collects (``data_mean_return``) lands there too."""
    cps = index["checkpoints"]
    lo, hi = refs["random"], refs["expert"]

    def record(i: int, **extra: Any) -> dict[str, Any]:
        c = cps[i]
        rec = {"step": c["step"], "eval_return": c["return"], "file": c["file"], **extra}
        if hi != lo:
            rec["normalized"] = 100 * normalized(c["return"], lo, hi)
        return rec

    if level == "random":
        return [(None, size)], size, {"policy": {"kind": "uniform random"}}
    e = select_expert(cps)
    expert = record(e, kind="checkpoint")
    if level == "expert":
        return [(expert, size)], size, {"policy": expert}
    m, in_range = select_medium(cps, lo, hi) if hi != lo else (e, False)
    medium = record(m, kind="checkpoint", medium_in_range=in_range, medium_target=100 * MEDIUM_TARGET)
    if level == "medium":
        return [(medium, size)], size, {"policy": medium}
    if level == "conservative":
        safe = {**medium, "kind": "conservative", "noise": CONSERVATIVE_NOISE}
        return [(safe, size)], size, {"policy": safe}
    if level == "medium-expert":
        parts = [(medium, size // 2), (expert, size - size // 2)]
        return parts, size, {"policy": {"kind": "medium + expert", "medium": medium, "expert": expert}}
    # medium-replay: the checkpoints before the medium one, each for the steps it acted during training
    total = max(1, cps[m]["step"]) if default_size else size
    counts = replay_shares([c["step"] for c in cps], m, total)
    chosen = [record(i) for i in (range(m) if m > 0 else [m])]
    replay = [(r, k) for r, k in zip(chosen, counts) if k > 0]
    policy = {
        "kind": "checkpoint replay",
        "medium": medium,
        "checkpoints": [r for r, _ in replay],
        "replay": "rollouts of the training checkpoints before medium, each for the steps it acted",
    }
    return replay, total, {"policy": policy}


def _assemble(chunks: list[Collected], meta: dict[str, Any]) -> OfflineData:
    discrete = meta["discrete"]
    actions = np.concatenate([c.actions for c in chunks])
    return OfflineData(
        observations=np.concatenate([c.observations for c in chunks]).astype(np.float32),
        actions=actions.astype(np.int64).reshape(-1) if discrete else actions.astype(np.float32),
        rewards=np.concatenate([c.rewards for c in chunks]),
        terminals=np.concatenate([c.terminals for c in chunks]),
        timeouts=np.concatenate([c.timeouts for c in chunks]),
        next_observations=np.concatenate([c.next_observations for c in chunks]).astype(np.float32),
    )


# -- the family datagen's dispatch asks ------------------------------------------------------------------


def claims(ds: Any) -> bool:
    """Whether ``ds`` (a ``spec.DatasetSpec`` without a path) is this family's: ``<EnvId>-<level>``, not a
    text env's."""
    parsed = parse_generated_name(ds.name)
    return parsed is not None and not is_text_env(parsed[0])


def ensure(ds: Any, *, root: Path | None, seed: int, device: str, progress: Progress) -> Path:
    """Build ``ds`` unless it exists (``build_dataset``; collected in its wrapped env); return its path."""
    env_id, level = parse_generated_name(ds.name) or ("", "")
    return build_dataset(
        ds.env or env_id,
        level,
        env_kwargs=ds.kwargs,
        seed=seed,
        root=root,
        device=device,
        progress=progress,
        wrappers=ds.wrapper_dicts,
    )


def builds_env(env_id: str) -> bool:
    """Whether ``rlbench datasets build ENV`` builds this family's levels of ``env_id``: any env but a text env."""
    return not is_text_env(env_id)


def build_levels(
    env_id: str,
    levels: list[str],
    *,
    size: int | None = None,
    seed: int = 0,
    root: Path | None = None,
    env_kwargs: dict[str, Any] | None = None,
    force: bool = False,
    behaviour_steps: int | None = None,
    device: str = "cpu",
    progress: Progress = _silent,
) -> list[Path]:
    """``rlbench datasets build ENV --level ...``: each level of ``env_id`` (``build_dataset``), in order."""
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad:
        raise UsageError(f"--level {bad[0]!r}: choose one of {', '.join(LEVELS)}")
    return [
        build_dataset(
            env_id,
            lv,
            size=size,
            seed=seed,
            root=root,
            env_kwargs=env_kwargs,
            force=force,
            behaviour_steps=behaviour_steps,
            device=device,
            progress=progress,
        )
        for lv in dict.fromkeys(levels)
    ]
