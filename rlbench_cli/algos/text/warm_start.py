"""Warm start, the third agent-utility channel of a text world model: text ``ppo`` first learns inside a
world model of the task, then goes on in the real env.

``warm_start: {world_model_steps: W, imagined_steps: N, ...}`` on ``ppo`` (on a text env): before its first
real step the run trains a world model on the task's dataset with ``text_world_model``'s code
(``verifier.train_world_model``: ``TextWorldModel.samples``, ``.losses``, ``W`` steps; the model and training
settings are the text algorithms' own, given inside ``warm_start``, e.g. ``n_embd``, ``learning_rate``), on
the dataset's episodes less the held-out last ``holdout_fraction`` (``TextWorldModel.split``). The dataset:
``warm_start.dataset`` (a dataset the suite lists, or a path to a JSONL file of the env's episodes), by
default the env's generated ``<EnvName>-mixed``, which the suite must list in ``datasets:`` so that
``rlbench run`` builds it before the runs (``suite.checks``). Then PPO plays ``N`` turns inside the world model
(``wm_env.WorldModelEnv``, ``num_envs`` of them in lock-step, one batched prediction a turn): episodes start
from the training episodes' first observations (``start: dataset``, no real interaction at all) or from the
real env's reset observation (``start: env``), last at most ``max_turns`` turns, and end at a prediction that
cannot be parsed (counted; that turn's reward is ``error_reward``, by default the lowest reward of the
dataset's turns, so that an error is never a way out of a costly episode); the policy's valid actions are
the real env's list at reset (as ``text_world_model``'s WM metric takes them). The imagined updates are
ppo's own (``TextPPO.update``: same losses, minibatches, ``n_steps`` per update), on the same model, value head
and AdamW, whose state (moments and step count) carries on into the real phase unchanged, as does the
sampling generator: the real phase is ppo's cold-start loop from that policy.

The step budget: ``budget.steps`` counts REAL env turns only, in a warm run as in a cold one, so their
learning curves (``step``: real turns) cover the same range and compare at equal real experience, the
resource a warm start claims to save; the imagined turns are extra (as is the world model's training) and
logged apart. A warm start larger than the run's budget is refused when the suite loads: ``imagined_steps``
may be at most the run's ``budget.steps`` (at most as many PPO updates in imagination as in the real env), so
that a gain cannot come from an unbounded amount of extra optimisation that the cold run never had.
``imagined_steps: 0`` trains and measures the world model but plays nothing in it: the run's other metrics
are then bitwise the cold start's (the world model trains inside ``torch.random.fork_rng``).

Logged at real step 0, before the first evaluation (so ``eval/return`` at step 0 is the warm-started policy):
after each imagined update ``train/imagined_steps`` (imagined turns so far, rounded up to whole rounds of
``num_envs``), ``train/imagined_loss/{policy,value,approx_kl}``, ``train/imagined_return`` (mean of the
imagined episodes that ended in the update), ``train/imagined_errors`` (unparsable predictions so far) and
``train/imagined_error_rate`` (per imagined turn); once, the world model's fidelity:
``train/world_model_loss`` (its outcome tokens' cross-entropy over the last 10% of its steps),
``train/world_model_outcome_mode`` (0: whole next observations, 1 and 2: only each turn's new text: ``warm_start.outcome``,
``text_world_model``'s ``outcome``),
``eval/world_model/em`` (exact next observation on the held-out real turns) and, for the warm-started policy,
``eval/world_model/real``, ``eval/world_model/wm``, ``eval/world_model/w2r`` and ``eval/world_model/cr``
(``text_world_model``'s metrics, its ``max_turns`` and the run's evaluation seeds): report them next to any
warm-start figure.

``warm_start.world_model``: a saved ``text_world_model`` (its run's folder or kept final policy) is loaded instead of training
one (``algos.text.loaded``, ``world_model_of``); the run then logs the loaded flag in place of the world
model's training loss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...suite.checks import warm_start_dataset
from ..base import RunContext
from .common import settings_of
from .loaded import check_loaded
from .offered import offered_to
from .online import EnvPool, collect
from .policy import TextPolicy
from .verifier import MAX_WORLD_MODEL_STEPS, world_model_of
from .wm_env import WorldModelEnv, model_predict, step_many
from .world_model import TextWorldModel, check_outcome, outcome_code

__all__ = ["WARM_START_OWN", "ImaginedPool", "check_warm_start", "WarmStart"]

WARM_START_OWN: dict[str, Any] = {
    # holdout_fraction, train_episodes, em_turns, max_turns, max_outcome_tokens, ... (not policy_weight: the warm
    # start's world model learns the outcomes alone)
    **{k: v for k, v in TextWorldModel.own.items() if k != "policy_weight"},
    "world_model_steps": 300,  # gradient steps of the world model, before the policy's first step
    "imagined_steps": -1,  # PPO turns inside the world model (required; 0: none, the cold start's run)
    "dataset": "",  # what the world model learns from (default: the env's generated <EnvName>-mixed)
    "start": "dataset",  # where imagined episodes start: the dataset's first observations, or the real env's
    "error_reward": None,  # reward of an unparsable prediction's turn (default: the dataset's lowest reward)
    "world_model": "",  # a saved text_world_model to load instead of training one (algos.text.loaded)
}
STARTS = ("dataset", "env")


def check_warm_start(value: Any) -> dict[str, Any]:
    """The warm start's settings (world model, training and ``WARM_START_OWN``, defaults filled in);
    ValueError naming the field for a value it cannot take. The suite-level checks (algorithm, env,
    dataset, budget) are ``suite.checks``'."""
    if not isinstance(value, dict):
        raise ValueError(
            f"warm_start must be a mapping, e.g. {{world_model_steps: 300, imagined_steps: 1000}}; got {value!r}"
        )
    if "imagined_steps" not in value:
        raise ValueError(
            "warm_start.imagined_steps is missing: how many turns ppo plays inside the world model"
        )
    settings = settings_of("warm_start", value, WARM_START_OWN)
    n = int(settings["world_model_steps"])
    if not 1 <= n <= MAX_WORLD_MODEL_STEPS:
        raise ValueError(f"warm_start.world_model_steps must be 1 to {MAX_WORLD_MODEL_STEPS}, got {n}")
    if int(settings["imagined_steps"]) < 0:
        raise ValueError(f"warm_start.imagined_steps must be 0 or more, got {settings['imagined_steps']}")
    if settings["start"] not in STARTS:
        raise ValueError(f"warm_start.start must be one of {', '.join(STARTS)}, got {settings['start']!r}")
    if settings["error_reward"] is not None:
        try:
            settings["error_reward"] = float(settings["error_reward"])
        except (TypeError, ValueError):
            raise ValueError(
                f"warm_start.error_reward must be a number, got {settings['error_reward']!r}"
            ) from None
    if int(settings["max_turns"]) < 1:
        raise ValueError(f"warm_start.max_turns must be at least 1, got {settings['max_turns']}")
    check_outcome(settings["outcome"], "warm_start.outcome")
    check_loaded("warm_start", value, settings)
    return settings


def load_warm_dataset(ctx: RunContext, settings: dict[str, Any], field: str = "warm_start") -> Any:
    """The episodes the world model learns from (``suite.checks.warm_start_dataset``): a generated dataset
    in the datasets folder, or a JSONL file. ``field``: whose ``dataset`` it is (ppo's ``pretrain`` too)."""
    from ...datasets import datasets_root
    from ...datasets.text import load_text_dataset

    name = warm_start_dataset(ctx.spec.env_id, settings["dataset"])
    path = (
        Path(name).expanduser()
        if name.endswith(".jsonl") or "/" in name
        else datasets_root() / f"{name}.jsonl"
    )
    if not path.exists():
        raise FileNotFoundError(f"{field}.dataset {name!r}: no file {path}; list it in the suite's datasets:")
    return load_text_dataset(path, ctx.spec.env_id)


class ImaginedPool(EnvPool):
    """An ``EnvPool`` of ``WorldModelEnv``s: each turn one batched prediction for all of them."""

    def step(self, actions: list[str]) -> list[tuple[Any, float, bool, bool, Any]]:
        return step_many(self.envs, actions)


class WarmStart:
    """One run's warm start: its world model (trained on construction) and the imagined phase (``run``)."""

    def __init__(self, ctx: RunContext, settings: dict[str, Any]):
        self.ctx, self.settings = ctx, settings
        self.closing: list[Any] = []  # real envs the imagined ones reset from (start: env)
        episodes = load_warm_dataset(ctx, settings)
        name = warm_start_dataset(ctx.spec.env_id, settings["dataset"])
        self.train_eps, self.held = TextWorldModel.split(episodes, settings, name)
        with torch.random.fork_rng(devices=[] if str(ctx.device) == "cpu" else None):
            self.model, self.tok, self.loss = world_model_of(
                self.train_eps, settings, ctx.seed, ctx.device, "warm_start", ctx.spec.env_id
            )
        rewards = [float(t["reward"]) for ep in self.train_eps for t in ep]
        given = settings["error_reward"]
        self.error_reward = float(given) if given is not None else (min(rewards) if rewards else 0.0)

    def envs(self, n: int) -> list[WorldModelEnv]:
        """``n`` envs inside the world model (see the module docstring for starts and valid actions)."""
        ctx, s = self.ctx, self.settings
        probe = ctx.make_env(seed=ctx.seed + 104_729)
        probe.reset(seed=ctx.seed + 104_729)
        offer = offered_to([probe])[0]  # its list at reset, and how an observation's text lists actions
        if s["start"] == "env":
            starts: Any = lambda seed: str(probe.reset(seed=seed)[0])  # noqa: E731 - the real env's reset
            self.closing.append(probe)
        else:
            starts = [str(ep[0]["observation"]) for ep in self.train_eps if len(ep)]
            probe.close()
        predict = model_predict(self.model, self.tok, s, ctx.device)
        return [WorldModelEnv(predict, starts, int(s["max_turns"]), offer.actions, float(s["success_reward"]),
                              self.error_reward, seed=ctx.seed * 1000 + i, actions_in=offer.actions_in)
                for i in range(n)]  # fmt: skip

    def run(self, ppo: Any, model: Any, tok: Any, sampler: TextPolicy, settings: dict[str, Any], optim: Any,
            rng: np.random.Generator) -> int:  # fmt: skip
        """PPO inside the world model for ``imagined_steps`` turns (``ppo.update``, the run's model, AdamW,
        sampler and its generator ``rng``), logging at real step 0; returns the imagined turns played."""
        ctx, n_total = self.ctx, int(self.settings["imagined_steps"])
        mode = outcome_code(self.settings["outcome"])
        first = (
            {"train/world_model_loaded": 1.0} if self.loss is None else {"train/world_model_loss": self.loss}
        )
        ctx.sink.log(0, **{**first, "train/world_model_outcome_mode": mode})
        if n_total <= 0:
            return 0
        pool = ImaginedPool(self.envs(int(settings["num_envs"])), ctx.seed)
        played_total, returns = 0, []
        try:
            while played_total < n_total and not ctx.should_stop():
                n = min(int(settings["n_steps"]), n_total - played_total)
                played, _ = collect(pool, sampler, turns=max(n, len(pool.envs)),
                                    on_episode=lambda r, k: returns.append(r))  # fmt: skip
                played_total += len(played)
                losses = ppo.update(model, tok, pool, played, settings, rng, ctx.device, optim)
                errors = sum(e.errors for e in pool.envs)
                values = {"train/imagined_steps": float(played_total), "train/imagined_errors": float(errors),
                          "train/imagined_error_rate": errors / max(1, sum(e.turns for e in pool.envs)),
                          **{f"train/imagined_loss/{k}": v for k, v in losses.items()}}  # fmt: skip
                if returns:
                    values["train/imagined_return"] = float(np.mean(returns))
                    returns.clear()
                ctx.sink.log(0, **values)
        finally:
            pool.close()
            for env in self.closing:
                env.close()
        return played_total

    def fidelity(self, agent: TextPolicy) -> dict[str, float]:
        """The world model's EM on the held-out real turns and ``agent``'s Real, WM, W2R and CR with it, as
        ``eval/world_model/*``."""
        out = TextWorldModel().evaluate(self.ctx, self.model, self.tok, self.held, self.settings, agent=agent)
        return {f"eval/world_model/{k.partition('/')[2]}": v for k, v in out.items()}
