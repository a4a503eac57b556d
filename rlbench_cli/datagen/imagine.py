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

rlbench's rollout generator (``rlbench-generator``): a small GPT-2-style transformer, built from a
``transformers`` config and trained from scratch on the real data, that imagines rollouts for new
instructions. ImagineBench's imagined rollouts come from a fine-tuned LLM; these come from this model.

Each step of an episode is two tokens: the state (with the instruction's embedding) and the action. From a
state token the model predicts the action (logits for discrete actions, a mean for continuous ones); from an
action token the next state (as a change, in the real data's standardised units), the reward and whether the
episode ends there. Generation starts from an initial state of the environment for the new instruction and
alternates: sample an action, predict the next state, reward and end, for ``horizon`` steps or until the
model says the episode ended. Everything is seeded: the same data and seed give the same model and rollouts.

The language envs, their instructions per level and the instruction encoder are in ``envs.imagine``;
ImagineBench's own files are read by ``datasets.imaginebench``; ``data_mix`` by ``datasets.mix``. As a family
of ``datagen``'s dispatch: ``claims`` an ``<EnvId>-imagine`` dataset, ``ensure`` builds what it lacks,
``complete`` says whether it has every file its mixes read, ``check`` that it was built with its settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..datasets.names import IMAGINE_BUILD_DEFAULTS as BUILD_DEFAULTS
from ..datasets.names import IMAGINED_SUFFIX, ORACLE_SUFFIX, datasets_root
from ..envs.families import FAMILIES
from .lock import building

__all__ = [
    "claims",
    "ensure",
    "complete",
    "check",
    "GENERATOR_LABEL",
    "Episode",
    "RolloutGenerator",
    "build_imagine",
    "build_oracle",
    "BUILD_DEFAULTS",
    "imagined_path",
    "oracle_path",
    "settings_problem",
]

# how rlbench's own rollout generator is labelled in dataset metadata (ImagineBench's come from an LLM)
GENERATOR_LABEL = "rlbench-generator"
NOVEL_LEVELS = ("rephrase", "easy", "hard")
# envs whose real rollouts rlbench makes: the env families that say so
BUILDERS = tuple(env for family in FAMILIES if family.imagined_datasets for env in family.envs)


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
    from ..envs.imagine.tasks import cheetah_tasks

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
    from ..envs.imagine.tasks import cheetah_tasks

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
    from ..envs.imagine.encoder import describe

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


# -- the family datagen's dispatch asks ------------------------------------------------------------------


def claims(ds: Any) -> bool:
    """Whether ``ds`` (a ``spec.DatasetSpec`` without a path) is this family's: ``<EnvId>-imagine``."""
    return bool(getattr(ds, "imagined", False))


def _wants_oracle(ds: Any) -> bool:
    from ..datasets.mix import mix_sources

    return any("oracle" in mix_sources(m) for m in ds.mixes)


def ensure(ds: Any, *, root: Path | None, seed: int, device: str, progress: Callable[[str], None]) -> Path:
    """Build ``ds``'s real and imagined rollouts unless they exist, and its oracle rollouts when a mix of it
    reads them and they are missing (a dataset built before oracle rollouts existed: the real and imagined
    files stay); return the real rollouts' path."""
    p = (Path(root) if root is not None else datasets_root()) / f"{ds.name}.hdf5"
    with building(p, lambda pid: progress(f"{ds.name}: another process (pid {pid}) is building it; waiting")):
        return _ensure(ds, p, root, seed, device, progress)


def _ensure(
    ds: Any, p: Path, root: Path | None, seed: int, device: str, progress: Callable[[str], None]
) -> Path:
    """``ensure``'s work, holding the dataset's build lock (``datagen.lock``)."""
    if not p.exists():
        build_imagine(ds.name, str(ds.env), root or datasets_root(), ds.kwargs, ds.imagine,
                      seed=seed, device=device, progress=progress)  # fmt: skip
    if _wants_oracle(ds) and not oracle_path(p).exists():
        build_oracle(ds.name, str(ds.env), root or datasets_root(), ds.kwargs, ds.imagine,
                     seed=seed, progress=progress)  # fmt: skip
    return p


def complete(ds: Any, path: Path) -> bool:
    """Whether ``ds``, its real rollouts at ``path``, has them and the oracle rollouts a mix of it reads."""
    if not path.exists():
        return False
    return not (_wants_oracle(ds) and not path.with_name(f"{ds.name}{ORACLE_SUFFIX}").exists())


def check(ds: Any, path: Path) -> tuple[str, str] | None:
    """None if the built ``ds`` at ``path`` is the one its suite describes, else (its field, what is wrong):
    never train on a dataset other than the one the suite describes."""
    problem = settings_problem(path, ds.imagine)
    if not problem:
        return None
    return "imagine", (f"{path} was built with other settings ({problem}); keep both with --datasets "
                       f"OTHER_FOLDER, or delete {ds.name}.*hdf5 there to rebuild it")  # fmt: skip


# -- rlbench-generator ----------------------------------------------------------------------------------


@dataclass
class Episode:
    """One episode, real or imagined: states, actions, rewards and its instruction."""

    states: np.ndarray  # (T + 1, state_dim): the states visited, the last one after the last action
    actions: np.ndarray  # (T,) int for discrete actions, (T, act_dim) float for continuous ones
    rewards: np.ndarray  # (T,)
    terminal: bool  # the episode ended in a terminal state (else it was cut off)
    embedding: np.ndarray  # (emb_dim,) the instruction's embedding
    instruction: str = ""


class RolloutGenerator:
    """See the module docstring. ``n_actions``: the number of discrete actions, or None with ``act_dim``."""

    def __init__(self, state_dim: int, emb_dim: int, n_actions: int | None = None, act_dim: int | None = None,
                 n_layer: int = 2, n_head: int = 2, n_embd: int = 64, context: int = 16, seed: int = 0,
                 device: str = "cpu"):  # fmt: skip
        import torch
        from transformers import GPT2Config, GPT2Model

        torch.manual_seed(seed)
        self.torch, self.device = torch, device
        self.state_dim, self.emb_dim, self.context = state_dim, emb_dim, context
        self.n_actions, self.act_dim = n_actions, act_dim
        self.seed = seed
        self.config = GPT2Config(vocab_size=1, bos_token_id=0, eos_token_id=0, n_positions=2 * context, n_embd=n_embd, n_layer=n_layer,
                                 n_head=n_head, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
        nn = torch.nn
        self.body = GPT2Model(self.config)
        self.state_in = nn.Linear(state_dim + emb_dim, n_embd)
        self.action_in = nn.Embedding(n_actions, n_embd) if n_actions else nn.Linear(act_dim or 1, n_embd)
        self.action_out = nn.Linear(n_embd, n_actions or act_dim or 1)
        self.next_out = nn.Linear(n_embd, state_dim + 2)  # state change, reward, end logit
        self.modules = nn.ModuleList(
            [self.body, self.state_in, self.action_in, self.action_out, self.next_out]
        )
        self.modules.to(device)
        self.mean = np.zeros(state_dim, np.float32)
        self.std = np.ones(state_dim, np.float32)

    def describe(self) -> dict[str, Any]:
        c = self.config
        return {"generator": "rlbench-generator", "generator_model": "GPT-2 (transformers config, from scratch)",
                "generator_layers": c.n_layer, "generator_width": c.n_embd, "generator_context": self.context}  # fmt: skip

    # -- forward ---------------------------------------------------------------------------------------
    def _forward(self, states: Any, emb: Any, actions: Any, mask: Any) -> tuple[Any, Any]:
        """states (B, L, S) standardised, emb (B, E), actions (B, L[, A]), mask (B, L) -> outputs at the
        state tokens (action predictions) and at the action tokens (next state, reward, end)."""
        torch = self.torch
        b, length = states.shape[:2]
        s_tok = self.state_in(torch.cat([states, emb[:, None, :].expand(b, length, -1)], -1))
        a_tok = self.action_in(actions)
        tokens = torch.stack([s_tok, a_tok], 2).reshape(b, 2 * length, -1)
        attn = mask.repeat_interleave(2, 1)
        h = self.body(inputs_embeds=tokens, attention_mask=attn).last_hidden_state.reshape(b, length, 2, -1)
        return self.action_out(h[:, :, 0]), self.next_out(h[:, :, 1])

    # -- training --------------------------------------------------------------------------------------
    def fit(self, episodes: list[Episode], steps: int = 500, batch_size: int = 32, lr: float = 1e-3,
            progress: Any = None) -> list[float]:  # fmt: skip
        """Train on ``episodes`` (real data) for ``steps`` updates; returns the loss every 50 updates."""
        torch = self.torch
        f = torch.nn.functional
        all_states = np.concatenate([e.states for e in episodes])
        self.mean = all_states.mean(0).astype(np.float32)
        self.std = (all_states.std(0) + 1e-3).astype(np.float32)
        rng = np.random.default_rng(self.seed)
        opt = torch.optim.AdamW(self.modules.parameters(), lr=lr, weight_decay=1e-4)
        ctx, losses = self.context, []
        self.modules.train()
        for step in range(steps):
            st, nx, ac, rw, dn, em, mk = [], [], [], [], [], [], []
            for i in rng.integers(len(episodes), size=batch_size):
                e = episodes[i]
                t_len = len(e.actions)
                start = int(rng.integers(max(1, t_len - ctx + 1)))
                end = min(t_len, start + ctx)
                n, pad = end - start, ctx - (end - start)
                s = (e.states[start : end + 1] - self.mean) / self.std
                st.append(np.pad(s[:-1], ((0, pad), (0, 0))))
                nx.append(np.pad(s[1:] - s[:-1], ((0, pad), (0, 0))))
                a = e.actions[start:end]
                ac.append(np.pad(a, ((0, pad),) + ((0, 0),) * (a.ndim - 1)))
                rw.append(np.pad(e.rewards[start:end], (0, pad)))
                d = np.zeros(n)
                d[-1] = float(e.terminal and end == t_len)
                dn.append(np.pad(d, (0, pad)))
                em.append(e.embedding)
                mk.append(np.pad(np.ones(n), (0, pad)))

            def t(x: list, dtype: Any = torch.float32) -> Any:
                return torch.as_tensor(np.stack(x), dtype=dtype, device=self.device)

            mask = t(mk)
            actions = t(ac, torch.long if self.n_actions else torch.float32)
            act_pred, nxt = self._forward(t(st), t(em), actions, mask)
            if self.n_actions:
                a_loss = f.cross_entropy(
                    act_pred.reshape(-1, self.n_actions), actions.reshape(-1), reduction="none"
                )
            else:
                a_loss = ((act_pred - actions) ** 2).mean(-1).reshape(-1)
            s_loss = ((nxt[..., : self.state_dim] - t(nx)) ** 2).mean(-1).reshape(-1)
            r_loss = ((nxt[..., -2] - t(rw)) ** 2).reshape(-1)
            d_loss = f.binary_cross_entropy_with_logits(nxt[..., -1], t(dn), reduction="none").reshape(-1)
            m = mask.reshape(-1)
            loss = ((a_loss + s_loss + r_loss + d_loss) * m).sum() / m.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 50 == 0 or step == steps - 1:
                losses.append(float(loss.detach()))
                if progress is not None:
                    progress(f"generator: update {step + 1}/{steps}, loss {losses[-1]:.4f}")
        self.modules.eval()
        return losses

    # -- generation ------------------------------------------------------------------------------------
    def generate(self, starts: np.ndarray, embeddings: np.ndarray, horizon: int, round_states: bool = False,
                 instructions: list[str] | None = None) -> list[Episode]:  # fmt: skip
        """Imagine one rollout from each initial state (B, state_dim) for its instruction's embedding."""
        torch = self.torch
        rng = np.random.default_rng(self.seed + 1)
        b = len(starts)
        states = [[(np.asarray(s, np.float32) - self.mean) / self.std] for s in starts]
        actions: list[list[Any]] = [[] for _ in range(b)]
        rewards: list[list[float]] = [[] for _ in range(b)]
        terminal = [False] * b
        alive = list(range(b))
        emb = torch.as_tensor(np.asarray(embeddings, np.float32), device=self.device)
        a_shape = () if self.n_actions else (self.act_dim or 1,)
        with torch.no_grad():
            for _ in range(horizon):
                if not alive:
                    break
                length = min(self.context, len(actions[alive[0]]) + 1)
                s = np.stack([np.stack(states[i][-length:]) for i in alive])
                prev = [actions[i][-(length - 1) :] if length > 1 else [] for i in alive]
                a = np.zeros((len(alive), length, *a_shape), np.int64 if self.n_actions else np.float32)
                for j, p in enumerate(prev):
                    if p:
                        a[j, : len(p)] = np.asarray(p)
                mask = torch.ones((len(alive), length), device=self.device)
                st = torch.as_tensor(s, device=self.device)
                act_pred, _ = self._forward(st, emb[alive], torch.as_tensor(a, device=self.device), mask)
                if self.n_actions:
                    probs = torch.softmax(act_pred[:, -1], -1).cpu().numpy().astype(np.float64)
                    chosen = np.array([rng.choice(self.n_actions, p=p / p.sum()) for p in probs])
                else:
                    chosen = act_pred[:, -1].cpu().numpy()
                a[:, -1] = chosen
                _, nxt = self._forward(st, emb[alive], torch.as_tensor(a, device=self.device), mask)
                out = nxt[:, -1].cpu().numpy()
                still = []
                for j, i in enumerate(alive):
                    new = states[i][-1] + out[j, : self.state_dim]
                    if round_states:
                        new = (np.round(new * self.std + self.mean) - self.mean) / self.std
                    states[i].append(new.astype(np.float32))
                    actions[i].append(chosen[j])
                    rewards[i].append(float(out[j, -2]))
                    if out[j, -1] > 0:  # the model says the episode ends here
                        terminal[i] = True
                    else:
                        still.append(i)
                alive = still
        return [
            Episode(
                states=np.stack(states[i]) * self.std + self.mean,
                actions=np.asarray(actions[i]),
                rewards=np.asarray(rewards[i], np.float32),
                terminal=terminal[i],
                embedding=np.asarray(embeddings[i], np.float32),
                instruction=(instructions or [""] * b)[i],
            )
            for i in range(b)
        ]
