"""The behaviour policy a D4RL-style dataset is collected with: trained once with rlbench's own algorithms.

The behaviour policy is trained once per (env, env kwargs, seed) and kept in
``<root>/behaviour/<EnvId>-<algo>-seed<N>[-<kwargs hash>]/``: its metrics (Parquet shards, as a run's), a
checkpoint at every evaluation (``RunContext.on_evaluate``) and ``index.json`` (step -> evaluation return,
the configuration, and the reference returns once measured). Every level reuses it.

Per-environment defaults (``ENV_DEFAULTS``): CartPole-v1 and Acrobot-v1 learn with PPO (rl-baselines3-zoo's
CartPole recipe, as in suites/quickstart.yaml), Pendulum-v1 with small-network SAC (as in
suites/classic-control.yaml), the MuJoCo tasks with SAC at D4RL's sizes (1M steps, 1M transitions: a GPU
box's job, ``device="cuda"``). Other gymnasium ids get PPO (discrete actions) or SAC (continuous) with generic settings.
MountainCar-v0 has no learned levels: its reward is sparse and none of rlbench's learners solves it in a
small budget, so only ``random`` can be built (without an expert reference).

Layering: this module trains, so ``datagen`` sits below ``algos`` in DESIGN.md's order; it imports algos, grid
and sink lazily.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import UsageError

__all__ = [
    "Behaviour",
    "ENV_DEFAULTS",
    "NOT_LEARNABLE",
    "behaviour_defaults",
    "behaviour_folder",
    "ensure_behaviour",
    "load_checkpoint",
    "one_torch_thread",
    "train_behaviour",
    "utc_now",
    "write_json",
]

Progress = Callable[[str], None]


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


def behaviour_defaults(env_id: str, discrete: bool, steps: int | None = None) -> Behaviour:
    """The behaviour training of ``env_id``: its row of ``ENV_DEFAULTS``, else PPO (discrete actions) or SAC
    with generic settings. ``steps`` overrides the budget (evaluating at least about 20 times)."""
    cfg = ENV_DEFAULTS.get(env_id) or _GENERIC["ppo" if discrete else "sac"]
    if steps is None or steps == cfg.steps:
        return cfg
    return Behaviour(
        cfg.algo, cfg.params, steps, min(cfg.eval_every, max(1, steps // 20)), cfg.size, cfg.eval_episodes
    )


def behaviour_folder(root: Path, env_id: str, env_kwargs: dict[str, Any], algo: str, seed: int) -> Path:
    name = f"{env_id}-{algo}-seed{seed}"
    if env_kwargs:
        name += (
            "-" + hashlib.sha256(json.dumps(env_kwargs, sort_keys=True, default=str).encode()).hexdigest()[:8]
        )
    return root / "behaviour" / name


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
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
    from ..algos import get_algorithm

    return importlib.import_module(get_algorithm(algo).__module__).load_policy(path, device=device)


def train_behaviour(
    folder: Path,
    env_id: str,
    env_kwargs: dict[str, Any],
    seed: int,
    cfg: Behaviour,
    device: str,
    progress: Progress,
) -> dict[str, Any]:
    """Train the behaviour policy into ``folder`` (built beside it, renamed into place when complete)."""
    from ..algos import get_algorithm
    from ..algos.base import RunContext
    from ..sink import ShardSink
    from ..suite.grid import RunSpec

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
        with one_torch_thread():
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
        "created_at": utc_now(),
        "train_seconds": round(time.perf_counter() - t0, 1),
        "checkpoints": checkpoints,
    }
    write_json(tmp / "index.json", index)
    if folder.exists():  # another build finished the same policy meanwhile: keep that one
        shutil.rmtree(tmp)
        return json.loads((folder / "index.json").read_text())
    os.replace(tmp, folder)
    return index


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def ensure_behaviour(
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
    return folder, train_behaviour(folder, env_id, env_kwargs, seed, cfg, device, progress)
