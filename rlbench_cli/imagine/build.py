"""Datasets of ImagineBench's protocol: real rollouts of the training instructions and imagined rollouts of
new ones, from rlbench's generator.

``build_imagine(name, env_id, ...)`` writes ``<root>/<name>.hdf5`` (real: the expert BabyAI bot carrying out
``real``-level instructions, minigrid's ``BabyAIBot``) and ``<root>/<name>.imagined.hdf5`` (imagined:
``rlbench-generator`` trained on the real data, rolling out ``rephrase``, ``easy`` and ``hard``
instructions from the environment's initial states for them). Observations are state + instruction
embedding, as the environment gives them; metadata says which encoder embedded the instructions, which
generator imagined the rollouts, and the references (a random policy's and the bot's mean return on the
training instructions); and ``<root>/<name>.oracle.hdf5`` (``build_oracle``: the same expert's REAL rollouts of the
instructions the generator imagined, from the same starts: ImagineBench's upper bound). ``data_mix`` picks from
the files when a run loads them (``datasets.mix``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import GENERATOR_LABEL, IMAGINED_SUFFIX, ORACLE_SUFFIX
from .generator import Episode, RolloutGenerator

__all__ = [
    "build_imagine",
    "build_oracle",
    "BUILD_DEFAULTS",
    "imagined_path",
    "oracle_path",
    "settings_problem",
]

BUILD_DEFAULTS: dict[str, Any] = {
    "real_episodes": 200,  # bot episodes of real-level instructions
    "imagined_episodes": 60,  # generated episodes per new level (rephrase, easy, hard)
    "generator_steps": 300,  # generator updates
    "generator_layers": 2,
    "generator_width": 64,
    "horizon": 40,  # longest imagined episode
}
NOVEL_LEVELS = ("rephrase", "easy", "hard")
BUILDERS = ("rlbench/BabyAI-Lang-v0", "rlbench/HalfCheetah-Lang-v0")  # envs whose real rollouts rlbench makes


def imagined_path(real: Path) -> Path:
    return real.with_name(
        real.name[: -len(".hdf5")] + IMAGINED_SUFFIX
        if real.name.endswith(".hdf5")
        else real.name + IMAGINED_SUFFIX
    )


def settings_problem(real: Path, settings: dict[str, Any] | None) -> str | None:
    """None if the built dataset whose real file is ``real`` was built with ``settings`` (BUILD_DEFAULTS for
    the rest), else what differs, ``key: built -> asked`` (a file without recorded settings passes)."""
    from ..datasets.hdf5 import read_meta

    im = imagined_path(real)
    if not im.exists():
        return None
    built = read_meta(im)[0].get("generator_settings")
    if not isinstance(built, dict):
        return None
    asked = {**BUILD_DEFAULTS, **(settings or {})}
    diff = [f"{k}: {built.get(k, BUILD_DEFAULTS[k])} -> {asked[k]}" for k in BUILD_DEFAULTS
            if int(built.get(k, BUILD_DEFAULTS[k])) != int(asked[k])]  # fmt: skip
    return ", ".join(diff) or None


def _bot_episodes(
    env_id: str,
    kwargs: dict[str, Any],
    n: int,
    seed: int,
    level: str = "real",
    seeds: list[int] | None = None,
) -> tuple[list[Episode], float]:
    """``n`` episodes of the BabyAI bot on ``level``'s instructions (reset with ``seeds``, default the real
    data's), and a random policy's mean return."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    from ..envs import make_env

    env = make_env(env_id, {**kwargs, "level": level})
    inner = env.unwrapped
    state_dim = inner.state_dim
    out = []
    for ep in range(n):
        obs, _ = env.reset(seed=seeds[ep] if seeds is not None else seed * 100_003 + ep)
        bot = BabyAIBot(inner.inner)
        states, actions, rewards = [obs[:state_dim]], [], []
        done = term = False
        while not done:
            a = int(bot.replan())
            obs, r, term, trunc, _ = env.step(a)
            states.append(obs[:state_dim])
            actions.append(a)
            rewards.append(r)
            done = term or trunc
        out.append(Episode(np.stack(states), np.asarray(actions), np.asarray(rewards, np.float32), bool(term),
                           obs[state_dim:].copy(), inner.instruction))  # fmt: skip
    rng = np.random.default_rng(seed)
    rand = []
    for ep in range(20):
        env.reset(seed=seed * 100_003 + 50_000 + ep)
        total, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
            total += r
            done = term or trunc
        rand.append(total)
    env.close()
    return out, float(np.mean(rand))


def _cpg(params: np.ndarray, t: int, dt: float) -> np.ndarray:
    """An open-loop gait: per joint amplitude * sin(2 pi f t + phase) + bias; params (6 * 3 + 1)."""
    amp, phase, bias, freq = params[:6], params[6:12], params[12:18], params[18]
    return np.clip(amp * np.sin(2 * np.pi * freq * t * dt + phase) + bias, -1.0, 1.0)


def _cpg_return(env: Any, task: tuple, params: np.ndarray, seed: int) -> float:
    env.reset(seed=seed, options={"task": task})
    dt, total, done, t = env.unwrapped.inner.dt, 0.0, False, 0
    while not done:
        _, r, term, trunc, _ = env.step(_cpg(params, t, dt).astype(np.float32))
        total, t, done = total + r, t + 1, term or trunc
    return total


def _gait_episode(env: Any, obs: np.ndarray, gaits: dict, rng: np.random.Generator) -> Episode:
    """One episode of the env's current task from ``obs``: each part's gait (``gaits[(part,)]``) in its part
    of the episode, with Gaussian action noise 0.1 from ``rng``."""
    inner = env.unwrapped
    task, n = inner.task, len(inner.task)
    states, actions, rewards, t, done = [obs[: inner.state_dim]], [], [], 0, False
    while not done:
        part = task[min(n - 1, t * n // inner.max_steps)]
        a = np.clip(_cpg(gaits[(part,)], t, inner.inner.dt) + rng.normal(0, 0.1, 6), -1, 1).astype(np.float32)
        obs, r, term, trunc, _ = env.step(a)
        states.append(obs[: inner.state_dim])
        actions.append(a)
        rewards.append(r)
        t, done = t + 1, term or trunc
    return Episode(np.stack(states), np.stack(actions), np.asarray(rewards, np.float32), False,
                   obs[inner.state_dim :].copy(), inner.instruction)  # fmt: skip


def _search_gaits(
    env: Any, tasks: list[tuple], rng: np.random.Generator, seed: int, search: tuple[int, int]
) -> dict:
    """An open-loop gait per one-part task: the best of ``search[0]`` random candidates, then of ``search[1]``
    perturbations of it (returns measured in ``env`` reset with ``seed``)."""
    low = np.r_[np.zeros(6), np.zeros(6), -0.5 * np.ones(6), 0.5]
    high = np.r_[np.ones(6), 2 * np.pi * np.ones(6), 0.5 * np.ones(6), 4.0]
    gaits = {}
    for task in tasks:
        cands = rng.uniform(low, high, size=(search[0], len(low)))
        scores = [_cpg_return(env, task, c, seed) for c in cands]
        best = cands[int(np.argmax(scores))]
        local = np.clip(best + rng.normal(0, 0.1, size=(search[1], len(low))) * (high - low), low, high)
        scores2 = [_cpg_return(env, task, c, seed) for c in local]
        gaits[task] = local[int(np.argmax(scores2))] if max(scores2) > max(scores) else best
    return gaits


def _cheetah_oracle(
    env_id: str,
    kwargs: dict[str, Any],
    seeds: dict[str, list[int]],
    seed: int,
    search: tuple[int, int] = (96, 32),
) -> list[Episode]:
    """Real HalfCheetah episodes of the new levels' instructions, reset with ``seeds[level]`` (the imagined
    rollouts' starts, so the same tasks): the real data's gaits (found again, the same search from the same
    seed) for the tasks of the training speeds, a gait searched the same way for each new speed, and for a
    ``hard`` sequence each part's gait in its part of the episode; Gaussian action noise 0.1."""
    from ..envs import make_env
    from .tasks import cheetah_tasks

    probe = make_env(env_id, {**kwargs, "level": "real"})
    rng = np.random.default_rng(seed)
    gaits = _search_gaits(probe, cheetah_tasks("real"), rng, seed, search)
    gaits.update(
        _search_gaits(probe, [t for t in cheetah_tasks("easy") if t not in gaits], rng, seed, search)
    )
    probe.close()
    out = []
    for level, level_seeds in seeds.items():
        env = make_env(env_id, {**kwargs, "level": level})
        for s in level_seeds:
            out.append(_gait_episode(env, env.reset(seed=s)[0], gaits, rng))
        env.close()
    return out


def _novel_seeds(seed: int, n: int) -> dict[str, list[int]]:
    """The reset seeds of the imagined rollouts' starts per new level (and of the oracle's real rollouts)."""
    return {
        level: [seed * 100_003 + 70_000 + li * 10_000 + ep for ep in range(n)]
        for li, level in enumerate(NOVEL_LEVELS)
    }


def oracle_path(real: Path) -> Path:
    return real.with_name(real.name[: -len(".hdf5")] + ORACLE_SUFFIX)


def build_oracle(
    name: str,
    env_id: str,
    root: Path,
    kwargs: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    seed: int = 0,
    progress: Callable[[str], None] = lambda msg: None,
) -> Path:
    """Write ``<root>/<name>.oracle.hdf5``: REAL rollouts of the instructions the generator imagines (the same
    levels, starts and counts), by the same expert as the real data: the upper bound ImagineBench compares
    imagined rollouts with (``data_mix: real+oracle``). Returns its path."""
    from ..datasets.hdf5 import write_hdf5

    if env_id not in BUILDERS:
        raise ValueError(f"{env_id}: rlbench builds real rollouts for {', '.join(BUILDERS)} only")
    kwargs = {k: v for k, v in (kwargs or {}).items() if k != "level"}
    s = {**BUILD_DEFAULTS, **(settings or {})}
    t0 = time.perf_counter()
    seeds = _novel_seeds(seed, int(s["imagined_episodes"]))
    babyai = "BabyAI" in env_id
    source = "minigrid BabyAIBot (expert)" if babyai else "open-loop gaits found per task by random search"
    progress(
        f"{name}: {sum(map(len, seeds.values()))} real episodes of the new instructions (oracle; {source})"
    )
    if babyai:
        episodes = [
            e
            for level, ss in seeds.items()
            for e in _bot_episodes(env_id, kwargs, len(ss), seed, level, ss)[0]
        ]
    else:
        episodes = _cheetah_oracle(env_id, kwargs, seeds, seed)
    real = root / f"{name}.hdf5"
    meta = {"env_id": env_id, "env_kwargs": kwargs, "discrete": babyai, "name": f"{name} (oracle)", "level": "oracle",
            "source": f"oracle: {source}, real rollouts of the imagined rollouts' instructions and starts",
            "instruction_levels": list(NOVEL_LEVELS), "episodes": len(episodes), "build_seed": seed,
            "build_seconds": time.perf_counter() - t0}  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    out = oracle_path(real)
    write_hdf5(out, _to_data(episodes, meta))
    progress(f"{name}: oracle rollouts in {time.perf_counter() - t0:.0f}s")
    return out


def _cheetah_episodes(
    env_id: str, kwargs: dict[str, Any], n: int, seed: int, search: tuple[int, int] = (96, 32)
) -> tuple[list[Episode], float]:
    """``n`` episodes of real-level HalfCheetah instructions, each by an open-loop gait found for its task by
    random search (96 candidates, then 32 perturbations of the best) and played with Gaussian action noise
    (0.1); and a random policy's mean return."""
    from ..envs import make_env
    from .tasks import cheetah_tasks

    env = make_env(env_id, {**kwargs, "level": "real"})
    rng = np.random.default_rng(seed)
    gaits = _search_gaits(env, cheetah_tasks("real"), rng, seed, search)
    tasks = list(gaits)
    out, rand = [], []
    for ep in range(n):
        task = tasks[ep % len(tasks)]
        obs, _ = env.reset(seed=seed * 100_003 + ep, options={"task": task})
        out.append(_gait_episode(env, obs, gaits, rng))
    for ep in range(10):
        env.reset(seed=seed * 100_003 + 50_000 + ep)
        total, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
            total, done = total + r, term or trunc
        rand.append(total)
    env.close()
    return out, float(np.mean(rand))


def _to_data(episodes: list[Episode], meta: dict[str, Any]) -> Any:
    from ..datasets.data import OfflineData

    obs, nxt, acts, rews, terms, touts = [], [], [], [], [], []
    for e in episodes:
        t = len(e.actions)
        if t == 0:
            continue
        emb = np.broadcast_to(e.embedding, (t + 1, len(e.embedding)))
        full = np.concatenate([e.states, emb], 1).astype(np.float32)
        obs.append(full[:-1])
        nxt.append(full[1:])
        acts.append(e.actions)
        rews.append(e.rewards)
        end = np.zeros(t, bool)
        end[-1] = True
        terms.append(end & e.terminal)
        touts.append(end & (not e.terminal))
    return OfflineData(
        observations=np.concatenate(obs),
        actions=np.concatenate(acts),
        rewards=np.concatenate(rews).astype(np.float32),
        terminals=np.concatenate(terms),
        timeouts=np.concatenate(touts),
        next_observations=np.concatenate(nxt),
        meta=meta,
    )


def build_imagine(
    name: str,
    env_id: str,
    root: Path,
    kwargs: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    seed: int = 0,
    device: str = "cpu",
    progress: Callable[[str], None] = lambda msg: None,
) -> Path:
    """Write the real and imagined datasets ``name`` (see the module docstring); returns the real one's path."""

    if env_id not in BUILDERS:
        raise ValueError(f"{env_id}: rlbench builds real rollouts for {', '.join(BUILDERS)} only")
    kwargs = {k: v for k, v in (kwargs or {}).items() if k != "level"}
    s = {**BUILD_DEFAULTS, **(settings or {})}
    t0 = time.perf_counter()
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only fight over the cores
    try:
        return _build(name, env_id, root, kwargs, s, seed, device, progress, t0)
    finally:
        torch.set_num_threads(threads)


def _build(name: str, env_id: str, root: Path, kwargs: dict[str, Any], s: dict[str, Any], seed: int, device: str,
           progress: Callable[[str], None], t0: float) -> Path:  # fmt: skip
    from ..datasets.hdf5 import write_hdf5
    from ..envs import make_env
    from .encoder import describe

    babyai = "BabyAI" in env_id
    source = "minigrid BabyAIBot (expert)" if babyai else "open-loop gaits found per task by random search"
    progress(f"{name}: {s['real_episodes']} real episodes ({source}, real-level instructions)")
    build_real = _bot_episodes if babyai else _cheetah_episodes
    real, random_return = build_real(env_id, kwargs, int(s["real_episodes"]), seed)
    env = make_env(env_id, {**kwargs, "level": "real"})
    enc = describe(env.unwrapped.encoder)
    state_dim = env.unwrapped.state_dim
    env.close()
    expert = float(np.mean([e.rewards.sum() for e in real]))
    common = {"env_id": env_id, "env_kwargs": kwargs, "discrete": babyai, "ref_random": random_return,
              "ref_expert": expert, **enc, "build_seed": seed}  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    real_path = root / f"{name}.hdf5"
    real_meta = {**common, "name": name, "level": "real", "source": f"real: {source}",
                 "instruction_levels": ["real"], "episodes": len(real)}  # fmt: skip

    act = {"n_actions": 7} if babyai else {"act_dim": int(real[0].actions.shape[1])}
    gen = RolloutGenerator(state_dim, enc["encoder_dim"], **act, n_layer=int(s["generator_layers"]),
                           n_embd=int(s["generator_width"]), seed=seed, device=device)  # fmt: skip
    progress(f"{name}: training {GENERATOR_LABEL} ({s['generator_steps']} updates)")
    losses = gen.fit(real, steps=int(s["generator_steps"]), progress=progress)
    imagined: list[Episode] = []
    novel_seeds = _novel_seeds(seed, int(s["imagined_episodes"]))
    for level in NOVEL_LEVELS:
        env = make_env(env_id, {**kwargs, "level": level})
        starts, embs, texts = [], [], []
        for ep in novel_seeds[level]:
            obs, info = env.reset(seed=ep)
            starts.append(obs[:state_dim])
            embs.append(obs[state_dim:])
            texts.append(info["instruction"])
        env.close()
        progress(f"{name}: imagining {len(starts)} {level} rollouts")
        imagined.extend(gen.generate(np.stack(starts), np.stack(embs), int(s["horizon"]), round_states=babyai,
                                     instructions=texts))  # fmt: skip
    for e in imagined:
        if babyai:  # BabyAI's reward is on [0, 1]
            e.rewards = np.clip(e.rewards, 0.0, 1.0)
    im_meta = {**common, "name": f"{name} (imagined)", "level": "imagined",
               "source": f"imagined: {GENERATOR_LABEL}, trained on {real_path.name}",
               "instruction_levels": list(NOVEL_LEVELS), "episodes": len(imagined), **gen.describe(),
               "generator_final_loss": losses[-1], "generator_settings": s}  # fmt: skip
    write_hdf5(imagined_path(real_path), _to_data(imagined, im_meta))
    build_oracle(name, env_id, root, kwargs, s, seed, progress)
    real_meta["build_seconds"] = time.perf_counter() - t0
    write_hdf5(real_path, _to_data(real, real_meta))  # last: its presence says the pair is complete
    progress(f"{name}: built in {time.perf_counter() - t0:.0f}s")
    return real_path
