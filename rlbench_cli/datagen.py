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

The behaviour policy is trained once per (env, env kwargs, seed) and kept in
``<root>/behaviour/<EnvId>-<algo>-seed<N>[-<kwargs hash>]/``: its metrics (Parquet shards, as a run's), a
checkpoint at every evaluation (``RunContext.on_evaluate``) and ``index.json`` (step -> evaluation return,
the configuration, and the reference returns once measured). Every level reuses it.

Reference returns, stored in every level's metadata: ``ref_random`` is the mean return of uniform random
actions over 100 seeded episodes, ``ref_expert`` the mean deterministic return of the expert checkpoint over
the same 100 seeds. ``timeouts`` mark time-limit truncations and the cut at ``size``; ``terminals`` mark
terminal states; ``next_observations`` are stored too.

Per-environment defaults (``ENV_DEFAULTS``): CartPole-v1 and Acrobot-v1 learn with PPO (rl-baselines3-zoo's
CartPole recipe, as in suites/quickstart.yaml), Pendulum-v1 with small-network SAC (as in
suites/classic-control.yaml), the MuJoCo tasks with SAC at D4RL's sizes (1M steps, 1M transitions: a GPU
box's job, ``device="cuda"``). Other gymnasium ids get PPO (discrete actions) or SAC (continuous) with generic settings.
MountainCar-v0 has no learned levels: its reward is sparse and none of rlbench's learners solves it in a
small budget, so only ``random`` can be built (without an expert reference).

Layering: this module trains, so it sits below ``algos`` in DESIGN.md's order although it lives in
``datasets/``; nothing else in ``datasets/`` imports it, and it imports algos, grid and sink lazily.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .datasets.data import (
    LEVELS,
    OfflineData,
    datasets_root,
    generated_file_stem,
    generated_name,
    parse_generated_name,
)
from .datasets.hdf5 import read_meta, write_hdf5
from .envs import known_env, make_env
from .envs.families import is_text_env
from .errors import UnknownName, UsageError

__all__ = [
    "Behaviour",
    "ENV_DEFAULTS",
    "NOT_LEARNABLE",
    "behaviour_defaults",
    "build_dataset",
    "ensure_datasets",
    "select_expert",
    "select_medium",
    "replay_shares",
    "collect",
    "collect_envs",
]

Progress = Callable[[str], None]

REF_EPISODES = 100
REF_SEED = 2_000_003  # reference episode i is reset with seed REF_SEED + i, whatever the behaviour seed
COLLECT_ENVS = 8  # environments stepped in lock-step while collecting (one batched policy call a step)
MEDIUM_TARGET = 0.4
MEDIUM_RANGE = (1 / 3, 1 / 2)


@dataclass(frozen=True)
class Behaviour:
    """How the behaviour policy of an environment is trained, and the default dataset size."""

    algo: str
    params: dict[str, Any] = field(default_factory=dict)
    steps: int = 100_000  # training env steps
    eval_every: int = 5_000  # evaluation (and checkpoint) interval
    size: int = 100_000  # transitions per dataset
    eval_episodes: int = 10


# rl-baselines3-zoo's tuned CartPole PPO in CleanRL's names (suites/quickstart.yaml): solves CartPole in ~30k
_PPO_ZOO = {
    "num_envs": 8,
    "num_steps": 32,
    "num_minibatches": 1,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "update_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": 1.0e-3,
    "clip_vloss": False,
}
# small networks, rl-baselines3-zoo's Pendulum learning rates and gamma (suites/classic-control.yaml)
_SAC_SMALL = {
    "hidden_units": [64, 64],
    "batch_size": 128,
    "actor_learning_rate": 1.0e-3,
    "critic_learning_rate": 1.0e-3,
    "gamma": 0.98,
}
# d3rlpy's SAC defaults (256x256, lr 3e-4, batch 256) with the usual 10k random warm-up steps
_SAC_MUJOCO = {"update_start_step": 10_000, "random_steps": 10_000}

ENV_DEFAULTS: dict[str, Behaviour] = {
    # eval every 1024 steps: PPO passes 1/3..1/2 of its final return within a few thousand steps
    "CartPole-v1": Behaviour("ppo", _PPO_ZOO, steps=50_000, eval_every=1_024, size=100_000),
    "Acrobot-v1": Behaviour("ppo", _PPO_ZOO, steps=50_000, eval_every=1_024, size=100_000),
    # SAC jumps from about -1000 to -200 between 3k and 4k steps: evaluate often enough to catch a medium
    "Pendulum-v1": Behaviour("sac", _SAC_SMALL, steps=10_000, eval_every=250, size=100_000),
    "Hopper-v5": Behaviour("sac", _SAC_MUJOCO, steps=1_000_000, eval_every=10_000, size=1_000_000),
    "HalfCheetah-v5": Behaviour("sac", _SAC_MUJOCO, steps=1_000_000, eval_every=10_000, size=1_000_000),
    "Walker2d-v5": Behaviour("sac", _SAC_MUJOCO, steps=1_000_000, eval_every=10_000, size=1_000_000),
}
NOT_LEARNABLE: dict[str, str] = {
    "MountainCar-v0": "its reward is sparse: ppo, dqn and double_dqn all stay at -200 within a small budget",
}
_GENERIC = {"ppo": Behaviour("ppo"), "sac": Behaviour("sac")}


def _silent(message: str) -> None:
    pass


# -- the defaults --------------------------------------------------------------------------------------


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


def behaviour_defaults(env_id: str, discrete: bool, steps: int | None = None) -> Behaviour:
    """The behaviour training of ``env_id``: its row of ``ENV_DEFAULTS``, else PPO (discrete actions) or SAC
    with generic settings. ``steps`` overrides the budget (evaluating at least about 20 times)."""
    cfg = ENV_DEFAULTS.get(env_id) or _GENERIC["ppo" if discrete else "sac"]
    if steps is None or steps == cfg.steps:
        return cfg
    return Behaviour(
        cfg.algo, cfg.params, steps, min(cfg.eval_every, max(1, steps // 20)), cfg.size, cfg.eval_episodes
    )


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


# -- rollouts -------------------------------------------------------------------------------------------


def _env_action(a: np.ndarray) -> Any:
    return a.item() if a.ndim == 0 else a


def episode_returns(
    env_id: str, env_kwargs: dict[str, Any], act: Callable[[np.ndarray], np.ndarray], seeds: list[int]
) -> np.ndarray:
    """Undiscounted return of one episode per seed, all stepped in lock-step (one batched ``act`` call)."""
    envs = [make_env(env_id, env_kwargs) for _ in seeds]
    obs = [np.asarray(env.reset(seed=s)[0], np.float32) for env, s in zip(envs, seeds)]
    returns = np.zeros(len(envs))
    alive = list(range(len(envs)))
    while alive:
        actions = np.asarray(act(np.stack([obs[i] for i in alive])))
        still = []
        for j, i in enumerate(alive):
            o, r, term, trunc, _ = envs[i].step(_env_action(actions[j]))
            returns[i] += float(r)
            obs[i] = np.asarray(o, np.float32)
            if not (term or trunc):
                still.append(i)
        alive = still
    for env in envs:
        env.close()
    return returns


@dataclass
class Collected:
    """Transitions collected by ``collect``, D4RL's flat layout, and the returns of the whole episodes."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    timeouts: np.ndarray
    next_observations: np.ndarray
    returns: list[float]  # of the episodes that ended in the env (not the one cut at the end, if any)


def collect_envs(n: int) -> int:
    """How many envs collect ``n`` transitions: up to ``COLLECT_ENVS``, each with at least
    ``_PER_ENV`` transitions to collect, so that small collections are whole episodes, not fragments."""
    return max(1, min(COLLECT_ENVS, n // _PER_ENV))


_PER_ENV = 5_000


def collect(
    env_id: str,
    env_kwargs: dict[str, Any],
    act: Callable[[np.ndarray], np.ndarray],
    n: int,
    seed: int,
    n_envs: int | None = None,
    wrappers: list[dict[str, Any]] | None = None,
) -> Collected:
    """``n`` transitions of ``act`` in ``env_id``, whole episodes one after another (D4RL's layout).

    ``n_envs`` environments (default ``collect_envs(n)``; reset with seeds ``seed + i``, later episodes
    continuing each env's RNG) are stepped in lock-step, one batched ``act`` call a step. An episode is
    kept when it ends, in the order episodes end; an env starts another only while the episodes kept and
    running fall short of ``n``; the last episode kept is cut at ``n`` (a timeout marks the cut). ``wrappers``
    (``[{name, kwargs}]``) wrap each env, as a suite's ``wrappers:`` do.
    """
    n_envs = n_envs or collect_envs(n)
    envs = [make_env(env_id, env_kwargs, wrappers=wrappers) for _ in range(n_envs)]
    obs = [np.asarray(env.reset(seed=seed + i)[0], np.float32) for i, env in enumerate(envs)]
    Step = tuple[np.ndarray, Any, float, np.ndarray]  # obs, action, reward, next obs
    current: list[list[Step]] = [[] for _ in envs]
    episodes: list[tuple[list[Step], bool, bool]] = []  # steps, terminated, ended in the env
    active = list(range(n_envs))
    kept = taken = 0
    while active and kept < n and taken < 2 * n + n_envs:  # the bound stops envs that never end episodes
        actions = np.asarray(act(np.stack([obs[i] for i in active])))
        for j, i in enumerate(list(active)):
            o, r, term, trunc, _ = envs[i].step(_env_action(actions[j]))
            o = np.asarray(o, np.float32)
            current[i].append((obs[i], actions[j], float(r), o))
            if term or trunc:
                episodes.append((current[i], bool(term), True))
                kept += len(current[i])
                current[i] = []
                if kept + sum(len(c) for c in current) >= n:
                    active.remove(i)
                    continue
                o = np.asarray(envs[i].reset()[0], np.float32)
            obs[i] = o
        taken += len(active)
    for env in envs:
        env.close()
    episodes += [(steps, False, False) for steps in current if steps and kept < n]
    rows: list[Step] = []
    terminals: list[bool] = []
    timeouts: list[bool] = []
    returns: list[float] = []
    for steps, term, ended in episodes:
        part = steps[: n - len(rows)]
        if not part:
            break
        whole = ended and len(part) == len(steps)
        rows += part
        terminals += [False] * (len(part) - 1) + [term and whole]
        timeouts += [False] * (len(part) - 1) + [not (term and whole)]
        if whole:
            returns.append(sum(s[2] for s in part))
    return Collected(
        observations=np.stack([s[0] for s in rows]),
        actions=np.stack([s[1] for s in rows]),
        rewards=np.array([s[2] for s in rows], np.float32),
        terminals=np.array(terminals, bool),
        timeouts=np.array(timeouts, bool),
        next_observations=np.stack([s[3] for s in rows]),
        returns=returns,
    )


# -- the behaviour policy -------------------------------------------------------------------------------


def behaviour_folder(root: Path, env_id: str, env_kwargs: dict[str, Any], algo: str, seed: int) -> Path:
    name = f"{env_id}-{algo}-seed{seed}"
    if env_kwargs:
        name += (
            "-" + hashlib.sha256(json.dumps(env_kwargs, sort_keys=True, default=str).encode()).hexdigest()[:8]
        )
    return root / "behaviour" / name


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Small networks train fastest on one thread, and do not fight other jobs for cores (as rlbench's
    workers do)."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def load_checkpoint(algo: str, path: Path, device: str = "cpu") -> Any:
    """A policy saved during behaviour training, restored by its adapter module's ``load_policy``."""
    from .algos import get_algorithm

    return importlib.import_module(get_algorithm(algo).__module__).load_policy(path, device=device)


def _train_behaviour(
    folder: Path,
    env_id: str,
    env_kwargs: dict[str, Any],
    seed: int,
    cfg: Behaviour,
    device: str,
    progress: Progress,
) -> dict[str, Any]:
    """Train the behaviour policy into ``folder`` (built beside it, renamed into place when complete)."""
    from .algos import get_algorithm
    from .algos.base import RunContext
    from .grid import RunSpec
    from .sink import ShardSink

    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "checkpoints").mkdir(parents=True)
    budget = {
        "steps": cfg.steps,
        "eval_every": cfg.eval_every,
        "eval_episodes": cfg.eval_episodes,
        "timeout": None,
    }
    spec = RunSpec(
        suite="datasets",
        algo=cfg.algo,
        algo_name=cfg.algo,
        params=dict(cfg.params),
        env_id=env_id,
        env_kwargs=dict(env_kwargs),
        seed=seed,
        budget=budget,
    )
    checkpoints: list[dict[str, Any]] = []

    def snapshot(step: int, mean_return: float, policy: Any) -> None:
        rel = f"checkpoints/step-{step:09d}.ckpt"
        policy.save(tmp / rel)
        checkpoints.append({"step": step, "return": mean_return, "file": rel})
        progress(
            f"  behaviour {cfg.algo} on {env_id}: step {step}/{cfg.steps}, eval return {mean_return:.1f}"
        )

    progress(
        f"training the behaviour policy: {cfg.algo} on {env_id} for {cfg.steps} steps (seed {seed}), "
        f"a checkpoint every {cfg.eval_every} steps"
    )
    sink = ShardSink(tmp / "metrics")
    ctx = RunContext(spec=spec, sink=sink, device=device, run_dir=tmp, on_evaluate=snapshot)
    t0 = time.perf_counter()
    try:
        with _one_torch_thread():
            get_algorithm(cfg.algo)().train(ctx)
    finally:
        sink.close()
    index = {
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "algo": cfg.algo,
        "params": cfg.params,
        "steps": cfg.steps,
        "eval_every": cfg.eval_every,
        "eval_episodes": cfg.eval_episodes,
        "seed": seed,
        "device": device,
        "rlbench_version": __version__,
        "created_at": _now(),
        "train_seconds": round(time.perf_counter() - t0, 1),
        "checkpoints": checkpoints,
    }
    _write_json(tmp / "index.json", index)
    if folder.exists():  # another build finished the same policy meanwhile: keep that one
        shutil.rmtree(tmp)
        return json.loads((folder / "index.json").read_text())
    os.replace(tmp, folder)
    return index


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
    ref_random = float(episode_returns(env_id, kwargs, _uniform(act_space, rng), seeds).mean())
    best = index["checkpoints"][select_expert(index["checkpoints"])]
    with _one_torch_thread():
        expert = load_checkpoint(index["algo"], folder / best["file"], device)
        ref_expert = float(episode_returns(env_id, kwargs, expert, seeds).mean())
    index["references"] = {
        "random": ref_random,
        "expert": ref_expert,
        "expert_step": best["step"],
        "episodes": REF_EPISODES,
        "seeds": f"{REF_SEED}..{REF_SEED + REF_EPISODES - 1}",
    }
    _write_json(folder / "index.json", index)
    progress(f"  random {ref_random:.1f}, expert {ref_expert:.1f} (checkpoint at step {best['step']})")
    return index["references"]


def _uniform(act_space: Any, rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
    """The uniform random policy over ``act_space``, drawing from ``rng``."""
    import gymnasium

    if isinstance(act_space, gymnasium.spaces.Discrete):
        lo, n = int(act_space.start), int(act_space.n)
        return lambda obs: rng.integers(lo, lo + n, size=len(obs))
    low, high = act_space.low.astype(np.float32), act_space.high.astype(np.float32)
    return lambda obs: rng.uniform(low, high, size=(len(obs), *low.shape)).astype(np.float32)


def _ensure_behaviour(
    root: Path,
    env_id: str,
    env_kwargs: dict[str, Any],
    seed: int,
    cfg: Behaviour,
    explicit_steps: bool,
    force: bool,
    device: str,
    progress: Progress,
) -> tuple[Path, dict[str, Any]]:
    folder = behaviour_folder(root, env_id, env_kwargs, cfg.algo, seed)
    index_file = folder / "index.json"
    if index_file.exists():
        index = json.loads(index_file.read_text())
        if not explicit_steps or index["steps"] == cfg.steps:
            progress(f"reusing the behaviour policy in {folder} ({index['steps']} steps)")
            return folder, index
        if not force:
            raise UsageError(
                f"the behaviour policy in {folder} was trained for {index['steps']} steps, not "
                f"--behaviour-steps {cfg.steps}: add --force to retrain it (then rebuild its other levels too), "
                "or drop --behaviour-steps"
            )
        shutil.rmtree(folder)
    return folder, _train_behaviour(folder, env_id, env_kwargs, seed, cfg, device, progress)


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
        folder, index = _ensure_behaviour(
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
                    _uniform(act_space, np.random.default_rng(cseed)),
                    count,
                    cseed,
                    wrappers=wrappers,
                )  # fmt: skip
            )
            continue
        assert folder is not None and index is not None  # a checkpoint comes from a behaviour run
        with _one_torch_thread():
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
        created_at=_now(),
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


def ensure_datasets(
    specs: Iterable[Any],
    progress: Progress = _silent,
    *,
    root: Path | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> list[Path]:
    """Make sure every dataset of a suite exists, building the generated ones that are missing (their
    behaviour policy is trained once per environment and reused). ``specs`` are ``spec.DatasetSpec``s (name,
    path, env, kwargs). A user's own file that is missing is an error naming it. Returns the paths, in order."""
    from .datasets import dataset_path

    paths = []
    for spec in specs:
        if spec.path:
            p = dataset_path(spec.name, spec.path)
            if not p.exists():
                raise UnknownName(
                    f"dataset {spec.name!r}: no file or folder {p}; check its path: in the suite"
                )
            paths.append(p)
            continue
        if getattr(spec, "imagined", False):
            from .datasets import datasets_root
            from .imagine.build import build_imagine

            p = (Path(root) if root is not None else datasets_root()) / f"{spec.name}.hdf5"
            if not p.exists():
                build_imagine(spec.name, str(spec.env), root or datasets_root(), spec.kwargs, spec.imagine,
                              seed=seed, device=device, progress=progress)  # fmt: skip
            from .datasets.mix import mix_sources
            from .imagine.build import build_oracle, oracle_path

            if any("oracle" in mix_sources(m) for m in spec.mixes) and not oracle_path(p).exists():
                # a dataset built before oracle rollouts existed: add them (the real and imagined files stay)
                build_oracle(spec.name, str(spec.env), root or datasets_root(), spec.kwargs, spec.imagine,
                             seed=seed, progress=progress)  # fmt: skip
            paths.append(p)
            continue
        parsed = parse_generated_name(spec.name)
        if parsed is None:
            raise UsageError(f"dataset {spec.name!r} is neither <EnvId>-<level> nor a file: give it a path:")
        if is_text_env(parsed[0]):  # a text env: scripted policies, JSONL (datasets.text)
            from .datasets.text import ensure_text_dataset

            paths.append(
                ensure_text_dataset(parsed[0], parsed[1], seed=seed, root=root, env_kwargs=spec.kwargs)
            )
            continue
        paths.append(
            build_dataset(
                spec.env or parsed[0],
                parsed[1],
                env_kwargs=spec.kwargs,
                seed=seed,
                root=root,
                device=device,
                progress=progress,
                wrappers=spec.wrapper_dicts,
            )
        )
    return paths
