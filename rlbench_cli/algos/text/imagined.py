"""Synthetic trajectories, the second agent-utility channel of a text world model: episodes imagined by a
world model trained on a run's real data augment (or replace) that data, on the ``data_mix`` axis of
ImagineBench's suites.

A text dataset's entry takes ``data_mix: [real, imagined, real+imagined]`` (one task per mix, as for
``<EnvId>-imagine`` datasets); ``bc``, ``filtered_bc``, ``mc_returns`` and ``ilql`` take two params:

- ``train_episodes: N`` (0: all): the real-data budget, the first ``N`` episodes of the dataset that are not
  held out; the same ``N`` real episodes on every mix;
- ``imagination: {world_model_steps, episodes, ...}``: how the imagined episodes are made. With it the last
  ``holdout_fraction`` of the dataset's episodes are held out of every mix (the world model's EM is measured
  on them), so ``real`` and ``real+imagined`` see the same real episodes.

The imagined episodes are made inside the run, before the agent trains: the world model must see only the
real data the agent sees (its budget), so a dataset-level file of imagined episodes, made once from all the
real data, would leak. On a mix with ``imagined`` the run (1) trains a world model on its ``N`` real episodes
(``verifier.train_world_model``: ``text_world_model``'s samples and losses, with its action head: the
behaviour below), (2) plays ``episodes`` episodes (default: as many as the real ones) inside it
(``rollouts``): each starts from a real episode's first observation (cycling through the ``N``), the behaviour
policy acts, the world model predicts the next observation, the reward and whether the episode ends
(``TextWorldModel.predict``, parsed strictly by ``strict_outcome``), and an episode that goes on for
``max_turns`` turns is cut there (its last turn ``truncated``, as a time limit's end in the datasets); every
turn of an imagined episode carries ``"imagined": true``. (3) The agent trains on the mix: ``real`` (the ``N``
episodes), ``imagined`` (the imagined ones alone) or ``real+imagined`` (both).

The behaviour policy is the real data's own behaviour cloned: the world model's action head (``text_world_model``
trains both heads in one model), trained on the same ``N`` real episodes, sampling its actions (seeded). Not
the env family's scripted policies: they read the env's hidden state (the maze cell from ``info``), which a
world model does not have, they exist only for rlbench's own datasets, not a user's file, and they would put
into the imagined data knowledge the agent's real data lacks. Cloning the data's behaviour keeps the imagined
episodes of the real data's mixed quality, which ``filtered_bc``'s top episodes and ``ilql``'s values rely on,
and sampling makes the episodes from one start differ. Its valid actions are those the predicted observation
lists where the env reads them from its text (TextNav's admissible commands: ``TextEnv.actions_in``), else the
real env's list after a reset (``offered.Offered``, as ``text_world_model``'s ``eval/wm``).

A world model that emits an outcome ``strict_outcome`` cannot read (no ``<rew>``, a reward that is not a
number, no ``<done>``/``<cont>`` before the token limit) ends that episode: its turns so far are kept (the last
one ``truncated``), an episode without any is dropped, and the errors are counted and printed to the run's log.

Logged at the run's last step, beside its final evaluation: ``train/real_episodes`` (the real episodes the
agent trains on: 0 on ``imagined``), ``train/world_model_episodes`` (those the world model trains on: the
budget ``N``), ``train/imagined_episodes`` (kept), ``train/imagined_turns``, ``train/imagined_errors`` (episodes ended by an
unreadable outcome), ``train/imagined_return`` (their mean return), ``train/world_model_loss``,
``train/world_model_outcome_mode`` (0: whole next observations, 1 and 2: only each turn's new text:
``imagination.outcome``, ``text_world_model``'s ``outcome``), and the world
model's fidelity on the held-out real episodes, ``text_world_model``'s metrics (``TextWorldModel.evaluate``)
under ``eval/world_model/``: ``em``, ``real``, ``wm``, ``w2r``, ``cr``. A resumed run makes its imagined
episodes again (same seed, same episodes on the same device).

``imagination.world_model``: a saved ``text_world_model`` (its run's folder or kept final policy) is loaded instead of training
one (``algos.text.loaded``, ``world_model_of``); the run then logs the loaded flag in place of the world
model's training loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...datasets.text import HOLDOUT_FRACTION, held_out
from ...suite.checks import TEXT_MIXES
from .common import settings_of
from .loaded import check_loaded
from .offered import offered_to
from .policy import TextPolicy
from .tokenizer import SPECIALS
from .verifier import world_model_of
from .world_model import TextWorldModel, check_outcome, outcome_code, strict_outcome

__all__ = [
    "IMAGINATION_OWN",
    "TEXT_MIXES",
    "agent_params",
    "check_data_params",
    "check_imagination",
    "real_budget",
    "rollouts",
    "strict_outcome",
    "training_data",
]

IMAGINATION_OWN: dict[str, Any] = {
    "world_model_steps": 300,  # gradient steps of the world model, trained on the run's real episodes first
    "episodes": 0,  # imagined episodes (0: as many as the real episodes kept)
    "holdout_fraction": HOLDOUT_FRACTION,  # the dataset's last episodes, out of every mix: the world model's EM
    "em_turns": 200,  # held-out turns EM is measured on, at most
    "max_turns": 30,  # turns of an imagined episode, at most (text_world_model's cap)
    "max_outcome_tokens": 96,  # tokens of a predicted outcome, at most
    "success_reward": 0.0,  # a world-model episode ending with this reward or more succeeds (eval/world_model/wm)
    "outcome": "auto",  # next observations whole (full) or their new text (suffix, echo); auto: from the data
    "world_model": "",  # a saved text_world_model to load instead of training one (algos.text.loaded)
}
MAX_EPISODES = 1_000_000
DATA_PARAMS = ("imagination", "train_episodes", "verifier")  # params that are not the agent's model settings

Outcome = tuple[str, float, bool]


def agent_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` less the data and verifier params: what the agent's own settings are read from."""
    return {k: v for k, v in params.items() if k not in DATA_PARAMS}


def check_imagination(value: Any) -> dict[str, Any]:
    """The imagination settings (world model, training and ``IMAGINATION_OWN``, defaults filled in); ValueError
    naming the field for a value it cannot take."""
    if not isinstance(value, dict):
        raise ValueError(f"imagination must be a mapping, e.g. {{world_model_steps: 300}}; got {value!r}")
    settings = settings_of("imagination", value, IMAGINATION_OWN)
    n = int(settings["world_model_steps"])
    if not 1 <= n <= MAX_EPISODES:
        raise ValueError(f"imagination.world_model_steps must be 1 to {MAX_EPISODES}, got {n}")
    n = int(settings["episodes"])
    if not 0 <= n <= MAX_EPISODES:
        raise ValueError(
            f"imagination.episodes must be 0 (as many as the real ones) to {MAX_EPISODES}, got {n}"
        )
    frac = float(settings["holdout_fraction"])
    if not 0 < frac < 1:
        raise ValueError(f"imagination.holdout_fraction must be in (0, 1): the world model's EM needs held-out "
                         f"episodes; got {frac}")  # fmt: skip
    for key in ("max_turns", "max_outcome_tokens", "em_turns"):
        if int(settings[key]) < 1:
            raise ValueError(f"imagination.{key} must be at least 1, got {settings[key]}")
    check_outcome(settings["outcome"], "imagination.outcome")
    check_loaded("imagination", value, settings)
    return settings


def check_data_params(params: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    """(``train_episodes``, imagination settings or None) of an offline text algorithm's params."""
    raw = params.get("train_episodes", 0)
    if (
        isinstance(raw, bool)
        or not isinstance(raw, int)
        and not (isinstance(raw, float) and raw.is_integer())
    ):
        raise ValueError(f"train_episodes must be a whole number of real episodes (0: all), got {raw!r}")
    n = int(raw)
    if not 0 <= n <= MAX_EPISODES:
        raise ValueError(f"train_episodes must be 0 (all) to {MAX_EPISODES} real episodes, got {n}")
    imagination = params.get("imagination")
    return n, None if imagination is None else check_imagination(imagination)


def real_budget(episodes: list[Any], n: int, holdout: float, dataset: str) -> tuple[list[Any], list[Any]]:
    """(the first ``n`` episodes not held out (all for 0), the held-out ones): the last ``holdout`` fraction
    (``datasets.text.held_out``) is held out."""
    n_hold = held_out(len(episodes), holdout)
    pool, held = list(episodes[: len(episodes) - n_hold]), list(episodes[len(episodes) - n_hold :])
    if n > len(pool):
        out = f" ({len(episodes)} less {n_hold} held out for the world model's EM)" if n_hold else ""
        raise ValueError(f"train_episodes {n}: dataset {dataset!r} has {len(pool)} episodes to train on{out}; "
                         "use 1 to that many, or 0 for all")  # fmt: skip
    return (pool[:n] if n else pool), held


def shown(tok: Any, ids: list[int]) -> str:
    """Generated tokens as text with their special tokens written out (``<rew>``), for a log line."""
    names = {getattr(tok, s.strip("<>") + "_id"): s for s in SPECIALS}
    text = "".join(names.get(int(t)) or tok.decode([int(t)]) for t in ids)
    return text if len(text) <= 160 else text[:157] + "..."


def rollouts(
    starts: list[str],
    act: Callable[[list[int], list[str]], list[str]],
    step: Callable[[list[int], list[str], list[str]], list[Outcome | None]],
    max_turns: int,
) -> tuple[list[list[dict[str, Any]]], int]:
    """One episode from each start observation, all at once: ``act(indices, observations)`` gives each live
    episode's action, ``step(indices, observations, actions)`` its outcome (next observation, reward, done) or
    None for one the world model could not produce. Returns (the episodes as a text dataset's turns, each
    marked ``"imagined": true``; the number of episodes an unreadable outcome ended). An episode still going
    after ``max_turns`` turns ends there (its last turn ``truncated``); one ended by an error keeps its turns
    (the last ``truncated``: nothing follows it in the data, and it is no terminal state), or is dropped when
    it has none."""
    n = len(starts)
    obs, turns = list(starts), [[] for _ in range(n)]  # type: list[str], list[list[dict[str, Any]]]
    alive, errors = list(range(n)), 0
    for _ in range(max_turns):
        if not alive:
            break
        actions = [str(a) for a in act(alive, [obs[i] for i in alive])]
        outcomes = step(alive, [obs[i] for i in alive], actions)
        still = []
        for i, a, out in zip(alive, actions, outcomes):
            if out is None:
                errors += 1
                if turns[i]:
                    turns[i][-1].update(done=True, truncated=True)
                continue
            nxt, reward, done = out
            turns[i].append({"observation": obs[i], "action": a, "reward": float(reward), "done": bool(done),
                             "imagined": True})  # fmt: skip
            if done:
                continue
            obs[i] = str(nxt)
            still.append(i)
        alive = still
    for i in alive:  # cut at max_turns
        turns[i][-1].update(done=True, truncated=True)
    return [t for t in turns if t], errors


def _imagine(ctx: Any, real: list[Any], held: list[Any], settings: dict[str, Any]) -> tuple[list[Any], dict]:
    """Train the world model on ``real``, play the imagined episodes in it; (episodes, values to log)."""
    device = ctx.device
    model, tok, loss = world_model_of(
        real, settings, ctx.seed, device, "imagination", ctx.spec.env_id, policy=True
    )
    behaviour = TextPolicy(model, tok, settings, device, sample=True, rng=np.random.default_rng(ctx.seed))
    n = int(settings["episodes"]) or len(real)
    starts = [str(real[j % len(real)][0]["observation"]) for j in range(n)]
    env = ctx.make_env()
    env.reset(seed=ctx.seed)
    offered = offered_to([env] * n)  # valid actions: see the module docstring
    behaviour.bind(offered)  # type: ignore[arg-type]
    behaviour.reset(n)
    unread: list[str] = []

    def act(idx: list[int], obs: list[str]) -> list[str]:
        for i, o in zip(idx, obs):
            offered[i].obs = o
        return list(behaviour.act(np.array(obs, dtype=object), np.zeros(len(idx)), np.array(idx)))

    def step(idx: list[int], obs: list[str], actions: list[str]) -> list[Outcome | None]:
        out: list[Outcome | None] = []
        for s in range(0, len(obs), 64):

            def read(tok_: Any, ids: list[int]) -> Outcome | None:
                got = strict_outcome(tok_, ids)
                if got is None and len(unread) < 3:
                    unread.append(shown(tok_, ids))
                return got

            out += TextWorldModel.predict(model, tok, obs[s : s + 64], actions[s : s + 64], settings, device,
                                          parse=read)  # fmt: skip
        return out

    episodes, errors = rollouts(starts, act, step, int(settings["max_turns"]))
    env.close()
    if errors:
        print(f"rlbench: {errors} of {n} imagined episodes ended at an outcome the world model wrote unreadably, "
              f"e.g. {unread[0]!r}", flush=True)  # fmt: skip
    fidelity = TextWorldModel().evaluate(ctx, model, tok, held, settings)
    values = {
        "train/imagined_episodes": float(len(episodes)),
        "train/imagined_turns": float(sum(len(e) for e in episodes)),
        "train/imagined_errors": float(errors),
        "train/imagined_return": float(np.mean([sum(t["reward"] for t in e) for e in episodes]))
        if episodes
        else 0.0,
        "train/world_model_outcome_mode": outcome_code(settings["outcome"]),
        # a loaded world model: trained on none of the run's episodes, for no step
        **({"train/world_model_loaded": 1.0} if loss is None else {"train/world_model_loss": loss}),
        **{"eval/world_model/" + k.partition("/")[2]: v for k, v in fidelity.items()},
    }
    return episodes, values


def training_data(ctx: Any, episodes: Any, params: dict[str, Any]) -> tuple[Any, dict[str, float]]:
    """The episodes the agent trains on under the run's ``data_mix`` (``real`` when it has none) and the values
    to log beside its final evaluation (see the module docstring); ``episodes``: the run's whole dataset."""
    from ...datasets.episodes import TextEpisodes

    n, settings = check_data_params(params)
    mix = ctx.spec.data_mix or "real"
    if mix not in TEXT_MIXES:
        raise ValueError(f"data_mix {mix}: a text dataset's mixes are {', '.join(TEXT_MIXES)}")
    if "imagined" in mix and settings is None:
        raise ValueError(f"data_mix {mix}: imagined episodes of a text task come from a world model the run "
                         "trains; add imagination: {world_model_steps: 300} to the algorithm's params")  # fmt: skip
    holdout = float(settings["holdout_fraction"]) if settings is not None else 0.0
    real, held = real_budget(list(episodes), n, holdout, str(ctx.spec.dataset))
    values: dict[str, float] = {"train/real_episodes": float(len(real) if "real" in mix.split("+") else 0)}
    imagined: list[Any] = []
    if "imagined" in mix:
        imagined, more = _imagine(ctx, real, held, settings)  # type: ignore[arg-type]
        values.update(more)
        if "train/world_model_loss" in more:  # trained here, on the real budget
            values["train/world_model_episodes"] = float(len(real))
        if not imagined and mix == "imagined":
            raise ValueError(f"data_mix {mix}: the world model imagined no readable episode "
                             f"({int(more['train/imagined_errors'])} errors); train it longer "
                             "(imagination.world_model_steps)")  # fmt: skip
    if ctx.spec.data_mix is None and not n and settings is None:
        values = {}  # a run as before the channel: all of the dataset, nothing more logged
    data = (real if "real" in mix.split("+") else []) + imagined
    meta = {**getattr(episodes, "meta", {}), "data_mix": mix, "real_episodes": len(real),
            "imagined_episodes": len(imagined)}  # fmt: skip
    out = TextEpisodes(
        data, env=getattr(episodes, "env", ""), level=getattr(episodes, "level", ""), meta=meta
    )
    return out, values
